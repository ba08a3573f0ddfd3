package tool

import (
	"fmt"
	"sort"
	"sync"
)

// Registry holds the tools an executor serves, by name. Its zero value is empty
// and ready to use; it is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex // protects tools
	tools map[string]*Tool
}

// NewRegistry returns a registry holding tools, or the first registration error.
func NewRegistry(tools ...*Tool) (*Registry, error) {
	r := &Registry{}
	for _, t := range tools {
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds t. It returns an error matching [ErrDuplicateTool] if a tool of the
// same name is registered already.
func (r *Registry) Register(t *Tool) error {
	if t == nil {
		return fmt.Errorf("tool: register: nil tool")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tools[t.Name()]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateTool, t.Name())
	}
	if r.tools == nil {
		r.tools = map[string]*Tool{}
	}
	r.tools[t.Name()] = t
	return nil
}

// Lookup returns the tool called name.
func (r *Registry) Lookup(name string) (*Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Names returns the registered tools' names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.tools))
	for n := range r.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Tools returns the registered tools, sorted by name.
func (r *Registry) Tools() []*Tool {
	names := r.Names()
	r.mu.RLock()
	defer r.mu.RUnlock()
	tools := make([]*Tool, len(names))
	for i, n := range names {
		tools[i] = r.tools[n]
	}
	return tools
}
