package tool

import (
	"fmt"
	"sort"
	"sync"
)

// Registry holds the tools an executor serves, by name. Tools may be added,
// replaced and removed while it is in use (an executor learns the tools of
// workers at run time), and a name may be withheld while its declarations
// conflict ([Registry.SetConflict]), or kept listed but not run while the
// server its body calls is down ([Registry.SetUnavailable]). Its zero value is empty and ready to use;
// it is safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex // protects the fields below
	tools     map[string]*Tool
	conflicts map[string]string // name → what conflicts
	down      map[string]string // name → why it is unavailable
	version   uint64
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
	r.put(t)
	return nil
}

// Put registers t, replacing the tool of the same name if there is one, and
// returns the tool it replaced (nil when there was none). A call that already
// holds the replaced tool finishes with it.
func (r *Registry) Put(t *Tool) (replaced *Tool, err error) {
	if t == nil {
		return nil, fmt.Errorf("tool: put: nil tool")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	replaced = r.tools[t.Name()]
	r.put(t)
	return replaced, nil
}

// put stores t. r.mu is held for writing.
func (r *Registry) put(t *Tool) {
	if r.tools == nil {
		r.tools = map[string]*Tool{}
	}
	r.tools[t.Name()] = t
	r.version++
}

// Remove unregisters the tool called name and reports whether there was one.
// A conflict set on the name stays.
func (r *Registry) Remove(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tools[name]; !ok {
		return false
	}
	delete(r.tools, name)
	r.version++
	return true
}

// SetConflict withholds the name: until [Registry.ClearConflict], the tool
// called name (registered or not) is not served — Lookup does not find it,
// Names and Tools leave it out — and Get returns a [*ConflictError] carrying
// msg, which says what conflicts. Setting it again replaces msg.
func (r *Registry) SetConflict(name, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.conflicts[name]; ok && old == msg {
		return
	}
	if r.conflicts == nil {
		r.conflicts = map[string]string{}
	}
	r.conflicts[name] = msg
	r.version++
}

// ClearConflict ends the conflict on name, serving its tool again if one is
// registered, and reports whether there was a conflict.
func (r *Registry) ClearConflict(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.conflicts[name]; !ok {
		return false
	}
	delete(r.conflicts, name)
	r.version++
	return true
}

// SetUnavailable marks the name unavailable: until
// [Registry.ClearUnavailable], the tool called name stays listed (Names,
// Tools) but Get returns an [*UnavailableError] carrying msg, which says why,
// and Lookup does not find it. A conflict on the name takes precedence.
// Setting it again replaces msg; the version changes only when msg does.
func (r *Registry) SetUnavailable(name, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.down[name]; ok && old == msg {
		return
	}
	if r.down == nil {
		r.down = map[string]string{}
	}
	r.down[name] = msg
	r.version++
}

// ClearUnavailable makes the tool called name available again, and reports
// whether it was unavailable.
func (r *Registry) ClearUnavailable(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.down[name]; !ok {
		return false
	}
	delete(r.down, name)
	r.version++
	return true
}

// Unavailable returns why the tool called name is unavailable, and whether it
// is (see [Registry.SetUnavailable]).
func (r *Registry) Unavailable(name string) (msg string, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	msg, ok = r.down[name]
	return msg, ok
}

// Conflicts returns the names in conflict and what conflicts, sorted by name.
func (r *Registry) Conflicts() []*ConflictError {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*ConflictError, 0, len(r.conflicts))
	for name, msg := range r.conflicts {
		out = append(out, &ConflictError{Tool: name, Msg: msg})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool < out[j].Tool })
	return out
}

// Version changes whenever what the registry serves may have changed: a tool
// registered, replaced or removed, a conflict or an unavailability set,
// changed or cleared. A
// reader that caches what it derives from the tools compares it with the
// version it cached at.
func (r *Registry) Version() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.version
}

// Get returns the tool called name for a call. It returns a [*ConflictError]
// (matching [ErrToolConflict]) while the name is in conflict, an error
// matching [ErrUnknownTool] when no tool of that name is registered, and an
// [*UnavailableError] (matching [ErrUnavailable]) while it is unavailable.
func (r *Registry) Get(name string) (*Tool, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if msg, ok := r.conflicts[name]; ok {
		return nil, &ConflictError{Tool: name, Msg: msg}
	}
	t, ok := r.tools[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTool, name)
	}
	if msg, ok := r.down[name]; ok {
		return nil, &UnavailableError{Tool: name, Msg: msg}
	}
	return t, nil
}

// Lookup returns the tool called name, unless none is registered, the name is
// in conflict, or it is unavailable.
func (r *Registry) Lookup(name string) (*Tool, bool) {
	t, err := r.Get(name)
	return t, err == nil
}

// Names returns the names of the tools served, sorted: those registered and
// not in conflict (unavailable ones included).
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.names()
}

// names lists the served names, sorted. r.mu is held.
func (r *Registry) names() []string {
	names := make([]string, 0, len(r.tools))
	for n := range r.tools {
		if _, conflict := r.conflicts[n]; !conflict {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Tools returns the tools served, sorted by name: those registered and not in
// conflict (unavailable ones included).
func (r *Registry) Tools() []*Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := r.names()
	tools := make([]*Tool, len(names))
	for i, n := range names {
		tools[i] = r.tools[n]
	}
	return tools
}
