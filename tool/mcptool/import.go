package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/tool"
)

// RemoteTool is a tool as an upstream lists it.
type RemoteTool struct {
	// Name is the tool's name on the upstream.
	Name string
	// Description is the upstream's description of it.
	Description string
	// InputSchema is its JSON Schema, as JSON; {"type":"object"} when the
	// upstream gave none.
	InputSchema json.RawMessage
	// Annotations are the upstream's hints, nil when it gave none. The MCP
	// specification calls them untrusted.
	Annotations *mcp.ToolAnnotations
}

// ListTools lists the upstream's tools, following pagination, in the order
// the upstream gives them. A name listed twice is an error.
func (u *Upstream) ListTools(ctx context.Context) ([]RemoteTool, error) {
	s, err := u.session(ctx)
	if err != nil {
		return nil, err
	}
	var out []RemoteTool
	seen := map[string]bool{}
	for t, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcp server %q: tools/list: %w", u.cfg.Name, u.redact(err))
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("mcp server %q: tools/list: tool %q is listed twice", u.cfg.Name, t.Name)
		}
		seen[t.Name] = true
		schema := json.RawMessage(`{"type":"object"}`)
		if t.InputSchema != nil {
			if schema, err = json.Marshal(t.InputSchema); err != nil {
				return nil, fmt.Errorf("mcp server %q: tools/list: the input schema of %q: %w", u.cfg.Name, t.Name, err)
			}
		}
		out = append(out, RemoteTool{Name: t.Name, Description: t.Description, InputSchema: schema, Annotations: t.Annotations})
	}
	return out, nil
}

// AnnotationPolicy returns the idempotency policy an imported tool gets from
// its annotations. Without trust, or without annotations, it is Effectful:
// the MCP specification calls annotations untrusted hints, so the default
// fails closed. With trust:
//
//   - readOnlyHint true: ReadOnly;
//   - idempotentHint true and destructiveHint explicitly false: Idempotent;
//   - anything else: Effectful (destructiveHint defaults to true).
//
// Idempotent and Effectful policies count every argument in the key
// (KeyArguments nil).
func AnnotationPolicy(a *mcp.ToolAnnotations, trust bool) *tool.Policy {
	switch {
	case !trust || a == nil:
	case a.ReadOnlyHint:
		return &tool.Policy{Kind: tool.ReadOnly}
	case a.IdempotentHint && a.DestructiveHint != nil && !*a.DestructiveHint:
		return &tool.Policy{Kind: tool.Idempotent}
	}
	return &tool.Policy{Kind: tool.Effectful}
}

// Override changes what an import declares for one tool.
type Override struct {
	// Description replaces the upstream's description when not empty.
	Description string
	// Idempotency replaces the policy [AnnotationPolicy] gives, when not nil.
	// Its key and check arguments must be parameters of the upstream's input
	// schema.
	Idempotency *tool.Policy
	// Timeout and Retry are the tool's (see [tool.Spec]).
	Timeout time.Duration
	Retry   tool.Retry
}

// ImportOptions say which tools of an upstream [Upstream.Import] brings in,
// and how they are declared.
type ImportOptions struct {
	// Prefix is put before each upstream name to make the tool's name.
	Prefix string
	// TrustAnnotations lets the upstream's annotations choose each tool's
	// policy (see [AnnotationPolicy]); without it every tool is Effectful.
	TrustAnnotations bool
	// Exclude names the upstream tools to leave out.
	Exclude []string
	// Tools holds overrides by upstream name.
	Tools map[string]Override
}

// Import lists the upstream's tools and returns one tool for each, except
// those excluded: named Prefix + the upstream name, described as the
// upstream describes it, its parameters the upstream's input schema, its
// policy from [AnnotationPolicy] unless an override gives one.
//
// Its error joins an [*ImportError] for each tool it could not bring in: a
// name in Exclude or Tools the upstream does not list, or listed in both
// ([ErrUnknownTool], or a plain reason); a name that is not a toolexec tool
// name with its prefix ([ErrBadName]: exclude the tool); a declaration
// [tool.New] refuses (an override's key argument that is not a parameter, a
// schema that does not compile). Listing errors are returned as they are. On
// error no tools are returned.
func (u *Upstream) Import(ctx context.Context, opts ImportOptions) ([]*tool.Tool, error) {
	list, err := u.ListTools(ctx)
	if err != nil {
		return nil, err
	}
	var errs []error
	fail := func(name string, err error) {
		errs = append(errs, &ImportError{Upstream: u.cfg.Name, Tool: name, Err: err})
	}
	listed := make(map[string]bool, len(list))
	for _, r := range list {
		listed[r.Name] = true
	}
	excluded := map[string]bool{}
	for _, name := range opts.Exclude {
		switch {
		case !listed[name]:
			fail(name, fmt.Errorf("%w (exclude names it)", ErrUnknownTool))
		case excluded[name]:
			fail(name, errors.New("is excluded twice"))
		}
		excluded[name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(opts.Tools)) {
		switch {
		case !listed[name]:
			fail(name, fmt.Errorf("%w (an override names it)", ErrUnknownTool))
		case excluded[name]:
			fail(name, errors.New("is both excluded and overridden"))
		}
	}
	var tools []*tool.Tool
	for _, r := range list {
		if excluded[r.Name] {
			continue
		}
		name := opts.Prefix + r.Name
		if !events.ValidToken(name) {
			fail(r.Name, fmt.Errorf("%w: %q does not match [A-Za-z0-9_-]{1,128}; exclude it", ErrBadName, name))
			continue
		}
		spec := tool.Spec{
			Name: name, Description: r.Description, Parameters: r.InputSchema,
			Idempotency: AnnotationPolicy(r.Annotations, opts.TrustAnnotations),
		}
		if o, ok := opts.Tools[r.Name]; ok {
			if o.Description != "" {
				spec.Description = o.Description
			}
			if o.Idempotency != nil {
				spec.Idempotency = o.Idempotency
			}
			spec.Timeout, spec.Retry = o.Timeout, o.Retry
		}
		t, err := u.Tool(spec, r.Name)
		if err != nil {
			fail(r.Name, err)
			continue
		}
		tools = append(tools, t)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return tools, nil
}
