package toolsfile

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"

	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/mcptool"
)

// ServerStatus is where one MCP server of a [Toolset] stands.
type ServerStatus struct {
	// Name is the server's name in the file.
	Name string
	// Status is the upstream's (see mcptool.Status).
	Status mcptool.Status
	// Tools names the tools whose bodies call the server, sorted.
	Tools []string
	// Waiting says that the server was down when the file was opened and
	// its tools have not been built since: the tools it imports are not
	// known yet, and the tools of the file that name it wait for its
	// declarations (those without parameters are listed with a stand-in
	// schema).
	Waiting bool
	// Problems says what went wrong when its tools were built after it was
	// first reached (a tool it does not list, an import refused, a name
	// taken), one line each; those tools are not served.
	Problems []string
}

// upstream is one MCP server of a Toolset, and what its tools need of it.
type upstream struct {
	set    *Toolset
	server Server
	up     *mcptool.Upstream

	// The fields below are protected by set.mu.
	names    []string          // the tools registered for it
	pending  []MCPDeclaration  // tools of the file to build again once it is reached
	imports  bool              // its import waits for it to be reached
	building bool              // a goroutine builds the pending tools now
	refused  map[string]string // tool → why its declaration was refused once the server was reached
	problems []string          // what went wrong building its tools late
}

// unavailableMsg is what a call of a tool of a server that is down is told.
// It does not change while the server stays down, so that the catalog does
// not change with every attempt.
func unavailableMsg(server string) string {
	return fmt.Sprintf("mcp server %q cannot be reached; calls are rejected, without effect, until it is back", server)
}

// onState is the upstream's mcptool.Config.OnState.
func (u *upstream) onState(st mcptool.Status) {
	s := u.set
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reg != nil {
		u.apply(st)
	}
}

// apply brings the registry in step with the server's state: its tools are
// unavailable while it is down, available again once it is connected (and
// those that wait for its declarations are built). s.mu is held.
func (u *upstream) apply(st mcptool.Status) {
	reg := u.set.reg
	switch st.State {
	case mcptool.StateDown:
		for _, n := range u.names {
			if _, refused := u.refused[n]; !refused {
				reg.SetUnavailable(n, unavailableMsg(u.server.Config.Name))
			}
		}
	case mcptool.StateConnected:
		if (len(u.pending) > 0 || u.imports) && !u.building && u.set.life.Err() == nil {
			u.building = true
			u.set.wg.Add(1)
			go u.complete()
		}
		for _, n := range u.names {
			_, refused := u.refused[n]
			if !refused && !u.isPending(n) {
				reg.ClearUnavailable(n)
			}
		}
	}
}

// isPending reports whether the tool called name waits for the server's
// declaration. s.mu is held.
func (u *upstream) isPending(name string) bool {
	return slices.ContainsFunc(u.pending, func(m MCPDeclaration) bool { return m.Spec.Name == name })
}

// complete builds the tools that waited for the server to be reached: the
// file's tools with the server's schema, and its imports. Once built, they
// replace the stand-ins in the registry, or are added to it.
func (u *upstream) complete() {
	s := u.set
	defer s.wg.Done()
	ctx, cancel := context.WithTimeout(s.life, mcptool.DefaultStartTimeout)
	defer cancel()
	s.mu.Lock()
	pending, imports := slices.Clone(u.pending), u.imports
	s.mu.Unlock()
	name := u.server.Config.Name
	listed, err := u.up.ListTools(ctx)
	if err != nil {
		// Lost again: the next connection tries again.
		s.log.Warn("listing the tools of an mcp server that came back failed; trying again when it is next reached",
			"mcp_server", name, "error", err)
		s.mu.Lock()
		u.building = false
		s.mu.Unlock()
		return
	}
	type result struct {
		t   *tool.Tool
		m   *MCPDeclaration
		err error
	}
	var results []result
	for i := range pending {
		t, err := pending[i].build(u.up, listed)
		results = append(results, result{t: t, m: &pending[i], err: err})
	}
	var importErr error
	var imported []*tool.Tool
	if imports {
		imported, importErr = u.up.Import(ctx, *u.server.Import)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	u.building = false
	for _, r := range results {
		n := r.m.Spec.Name
		if r.err != nil {
			u.refused[n] = r.err.Error()
			u.problems = append(u.problems, r.err.Error())
			s.reg.SetUnavailable(n, "its declaration is refused: "+r.err.Error())
			s.log.Error("an mcp tool cannot be built now that its server is reached; it stays unavailable",
				"mcp_server", name, "tool", n, "error", r.err)
		} else if _, err := s.reg.Put(r.t); err != nil {
			s.log.Error("an mcp tool cannot be registered", "mcp_server", name, "tool", n, "error", err)
		}
	}
	u.pending = nil
	if imports {
		u.imports = false
		if importErr != nil {
			for _, e := range unjoin(importErr) {
				msg := u.server.importError(e).Error()
				u.problems = append(u.problems, msg)
				s.log.Error("an mcp server's import is refused now that it is reached; its tools are not served",
					"mcp_server", name, "error", msg)
			}
		}
		for _, t := range imported {
			if err := s.reg.Register(t); err != nil {
				msg := u.server.site.errorf("import", err, "tool %q is declared twice: %v", t.Name(), err).Error()
				u.problems = append(u.problems, msg)
				s.log.Error("an imported mcp tool is not served", "mcp_server", name, "tool", t.Name(), "error", msg)
				continue
			}
			u.names = append(u.names, t.Name())
		}
		slices.Sort(u.names)
		if len(imported) > 0 {
			s.log.Info("mcp server reached: its imported tools are served", "mcp_server", name, "tools", len(imported))
		}
	}
	u.apply(u.up.Status())
}

// Attach keeps reg — the registry the tools of [Toolset.Tools] are served
// from — in step with the MCP servers from now on, until Close: while a
// server is down, the tools whose bodies call it stay listed but are marked
// unavailable (tool.Registry.SetUnavailable), and so rejected
// upstream_unavailable without running; once it is connected they are
// available again. A server that was down when the file was opened has, once
// first reached, its tools built as they would have been at start: those of
// the file that take its schema are replaced in reg, and its imported tools
// are added (a name reg already holds is not, and is logged). What cannot be
// built is logged at error level, listed by [Toolset.Servers], and not
// served. Attach is called once, before reg serves calls.
func (s *Toolset) Attach(reg *tool.Registry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reg = reg
	for _, u := range s.upstreams {
		u.apply(u.up.Status())
	}
}

// Servers returns the state of each MCP server, in file order.
func (s *Toolset) Servers() []ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ServerStatus, 0, len(s.upstreams))
	for _, u := range s.upstreams {
		out = append(out, ServerStatus{
			Name: u.server.Config.Name, Status: u.up.Status(), Tools: slices.Clone(u.names),
			Waiting: len(u.pending) > 0 || u.imports, Problems: slices.Clone(u.problems),
		})
	}
	return out
}

// standIn returns the tool a declaration without parameters gets while its
// server has not been reached: its parameters an object schema that names its
// key and check arguments and accepts any member. Its calls are rejected
// (the tool is unavailable) until it is built with the server's schema.
func (m MCPDeclaration) standIn(up *mcptool.Upstream) (*tool.Tool, error) {
	spec := m.Spec
	if len(spec.Parameters) == 0 {
		props := map[string]any{}
		if p := spec.Idempotency; p != nil {
			for _, a := range append(slices.Clone(p.KeyArguments), p.CheckArguments...) {
				props[a] = map[string]any{}
			}
		}
		b, err := json.Marshal(map[string]any{"type": "object", "properties": props})
		if err != nil {
			return nil, err
		}
		spec.Parameters = b
	}
	t, err := up.Tool(spec, m.Tool)
	if err != nil {
		return nil, m.site.locate(err, "")
	}
	return t, nil
}

// logger returns opts.Logger, or one that discards.
func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
