package toolsfile

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/mcptool"
)

// Server is one mcp_servers entry of a tools file: an upstream MCP server.
type Server struct {
	// File is the name the file was parsed under; Line is the line of the
	// entry in the mcp_servers list.
	File string
	Line int
	// Config says how to reach the server, with ${VAR} references expanded.
	// [File.Open] sets its Logger and, for a URL, its HTTPClient from
	// [Options].
	Config mcptool.Config
	// Import says which of its tools to bring in; nil when the entry imports
	// none.
	Import *mcptool.ImportOptions

	site site
}

// MCPDeclaration is a tool of the tools list whose body is a tool of an MCP
// server (an entry with mcp instead of http).
type MCPDeclaration struct {
	// File is the name the file was parsed under; Line is the line of the
	// tool's entry in the tools list.
	File string
	Line int
	// Spec is the tool's declaration. Its Parameters are nil when the file
	// gives none: the server's input schema for Tool is used, and so is its
	// description when the file gives none.
	Spec tool.Spec
	// Server is the name of the mcp_servers entry; Tool the name of the tool
	// on that server.
	Server, Tool string

	site site
}

// check checks the declaration as far as it can be without the server: its
// key and check arguments wait for the server's schema when it gives no
// parameters.
func (m MCPDeclaration) check() error {
	spec := m.Spec
	if len(spec.Parameters) == 0 && spec.Idempotency != nil {
		p := *spec.Idempotency
		p.KeyArguments, p.CheckArguments = nil, nil
		spec.Idempotency = &p
	}
	if _, err := tool.New(spec, noBody); err != nil {
		return m.site.locate(err, "")
	}
	return nil
}

// build returns the tool, calling up, whose tools are listed.
func (m MCPDeclaration) build(up *mcptool.Upstream, listed []mcptool.RemoteTool) (*tool.Tool, error) {
	i := slices.IndexFunc(listed, func(r mcptool.RemoteTool) bool { return r.Name == m.Tool })
	if i < 0 {
		return nil, m.site.errorf("mcp.tool", mcptool.ErrUnknownTool, "mcp server %q lists no tool %q", m.Server, m.Tool)
	}
	spec := m.Spec
	if len(spec.Parameters) == 0 {
		spec.Parameters = listed[i].InputSchema
	}
	if spec.Description == "" {
		spec.Description = listed[i].Description
	}
	t, err := up.Tool(spec, m.Tool)
	if err != nil {
		return nil, m.site.locate(err, "")
	}
	return t, nil
}

// serverUse records whether a tool names a server.
type serverUse struct{ used bool }

// servers reads the mcp_servers list, recording each server's name in names.
func (p *parser) servers(e entry, names map[string]*serverUse) []Server {
	seq := resolve(e.val)
	if seq.Kind != yaml.SequenceNode {
		p.fail(seq.Line, nil, "mcp_servers", "must be a list of MCP servers, not %s", describe(seq))
		return nil
	}
	if len(seq.Content) == 0 {
		p.fail(seq.Line, nil, "mcp_servers", "is empty: declare servers, or leave it out")
		return nil
	}
	var out []Server
	first := map[string]int{} // server name → line of its first declaration
	for i, n := range seq.Content {
		if s, ok := p.server(i, n, first, names); ok {
			out = append(out, s)
		}
	}
	return out
}

// server reads the i-th entry of the mcp_servers list.
func (p *parser) server(i int, raw *yaml.Node, first map[string]int, names map[string]*serverUse) (Server, bool) {
	n := resolve(raw)
	w := &where{index: i, server: true}
	before := len(p.errs)
	if n.Kind != yaml.MappingNode {
		p.fail(n.Line, w, "", "must be a mapping, not %s", describe(n))
		return Server{}, false
	}
	w.name = nameOf(n)
	st := p.site(w, n.Line)
	f := p.fields(n, w, "", "name", "command", "url", "env", "dir", "headers", "import", "restart_delay")
	for k, e := range f {
		st.lines[k] = e.key.Line
	}
	s := Server{File: p.file, Line: n.Line, site: st}
	cfg := &s.Config
	if e, ok := f["name"]; !ok {
		p.fail(n.Line, w, "name", "is required")
	} else if name, ok := p.text(e, w, "name"); ok {
		cfg.Name = name
		switch line, dup := first[name]; {
		case !events.ValidToken(name):
			p.fail(e.key.Line, w, "name", "must match [A-Za-z0-9_-]{1,128}")
		case dup:
			p.fail(e.key.Line, w, "name", "mcp server %q is declared twice (first at line %d)", name, line)
		default:
			first[name] = e.key.Line
			// Known from here on, even if the entry is wrong elsewhere: its
			// tools are not also told that it does not exist.
			names[name] = &serverUse{}
		}
	}
	if e, ok := f["command"]; ok {
		cfg.Command = p.command(e, w)
	}
	if e, ok := f["url"]; ok {
		if u, ok := p.text(e, w, "url"); ok {
			cfg.URL, _ = p.expand(u, resolve(e.val).Line, w, "url")
		}
	}
	if e, ok := f["env"]; ok {
		cfg.Env = p.stringMap(e, w, "env", "variable")
	}
	if e, ok := f["dir"]; ok {
		if d, ok := p.text(e, w, "dir"); ok {
			cfg.Dir, _ = p.expand(d, resolve(e.val).Line, w, "dir")
		}
	}
	if e, ok := f["headers"]; ok {
		cfg.Headers = p.stringMap(e, w, "headers", "header")
	}
	if e, ok := f["import"]; ok {
		s.Import = p.importOptions(e, w, st.lines)
	}
	if e, ok := f["restart_delay"]; ok {
		cfg.MinRestartDelay, cfg.MaxRestartDelay = p.restartDelay(e, w)
	}
	if len(p.errs) > before {
		return Server{}, false
	}
	if err := cfg.Validate(); err != nil {
		var ce *mcptool.ConfigError
		if errors.As(err, &ce) {
			p.errs = append(p.errs, st.errorf(ce.Field, err, "%s", ce.Msg))
		} else {
			p.errs = append(p.errs, st.errorf("", err, "%v", err))
		}
		return Server{}, false
	}
	return s, true
}

// restartDelay reads a server's restart_delay: {min, max}, each a positive
// duration, min at most max (with the other's default when one is left out).
func (p *parser) restartDelay(e entry, w *where) (lo, hi time.Duration) {
	f, ok := p.mapping(e, w, "restart_delay", "min", "max")
	if !ok {
		return 0, 0
	}
	for _, b := range []struct {
		name string
		dst  *time.Duration
	}{{"min", &lo}, {"max", &hi}} {
		x, ok := f[b.name]
		if !ok {
			continue
		}
		if d, ok := p.duration(x, w, "restart_delay."+b.name); ok {
			if d <= 0 {
				p.fail(resolve(x.val).Line, w, "restart_delay."+b.name, "must be positive")
			}
			*b.dst = d
		}
	}
	if lo > 0 && hi > 0 && lo > hi || hi > 0 && lo == 0 && hi < mcptool.DefaultMinRestartDelay || lo > 0 && hi == 0 &&
		lo > mcptool.DefaultMaxRestartDelay {
		p.fail(resolve(e.val).Line, w, "restart_delay", "min exceeds max (defaults: min %s, max %s)", mcptool.DefaultMinRestartDelay,
			mcptool.DefaultMaxRestartDelay)
	}
	return lo, hi
}

// command reads a command: a non-empty list of strings, each with ${VAR}
// references expanded.
func (p *parser) command(e entry, w *where) []string {
	v := resolve(e.val)
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		p.fail(v.Line, w, "command", "must be a list: the program, then its arguments (e.g. [node, server.js])")
		return nil
	}
	out := make([]string, 0, len(v.Content))
	for _, c := range v.Content {
		a, ok := p.text(entry{e.key, c}, w, "command")
		if !ok {
			continue
		}
		if a, ok = p.expand(a, resolve(c).Line, w, "command"); ok {
			out = append(out, a)
		}
	}
	return out
}

// importOptions reads an import block.
func (p *parser) importOptions(e entry, w *where, lines map[string]int) *mcptool.ImportOptions {
	if v := resolve(e.val); v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" {
		p.fail(v.Line, w, "import", "is empty: write import: {} to import every tool, or leave it out")
		return nil
	}
	f, ok := p.mapping(e, w, "import", "prefix", "trust_annotations", "exclude", "tools")
	if !ok {
		return nil
	}
	for k, x := range f {
		lines["import."+k] = x.key.Line
	}
	opts := &mcptool.ImportOptions{}
	if x, ok := f["prefix"]; ok {
		if s, ok := p.text(x, w, "import.prefix"); ok {
			if s != "" && !events.ValidToken(s) {
				p.fail(resolve(x.val).Line, w, "import.prefix", "must be made of A-Z, a-z, 0-9, _ and -")
			}
			opts.Prefix = s
		}
	}
	if x, ok := f["trust_annotations"]; ok {
		v := resolve(x.val)
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" || v.Decode(&opts.TrustAnnotations) != nil {
			p.fail(v.Line, w, "import.trust_annotations", "must be true or false, not %s", describe(v))
		}
	}
	if x, ok := f["exclude"]; ok {
		opts.Exclude, _ = p.list(x, w, "import.exclude", "tool", lines)
		seen := map[string]bool{}
		for _, name := range opts.Exclude {
			if seen[name] {
				p.fail(lines["import.exclude/"+name], w, "import.exclude", "%q is listed twice", name)
			}
			seen[name] = true
		}
	}
	if x, ok := f["tools"]; ok {
		opts.Tools = p.overrides(x, w, lines, opts.Exclude)
	}
	return opts
}

// overrides reads the tools of an import block: upstream tool name →
// override.
func (p *parser) overrides(x entry, w *where, lines map[string]int, excluded []string) map[string]mcptool.Override {
	v := resolve(x.val)
	if v.Kind != yaml.MappingNode {
		p.fail(v.Line, w, "import.tools", "must be a mapping of tool names to what to declare for them, not %s", describe(v))
		return nil
	}
	out := make(map[string]mcptool.Override, len(v.Content)/2)
	for i := 0; i+1 < len(v.Content); i += 2 {
		k := resolve(v.Content[i])
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
			p.fail(v.Content[i].Line, w, "import.tools", "has a key that is not a tool name (%s)", describe(k))
			continue
		}
		field := "import.tools." + k.Value
		if _, dup := out[k.Value]; dup {
			p.fail(k.Line, w, field, "is given twice (first at line %d)", lines[field])
			continue
		}
		lines[field] = k.Line
		if slices.Contains(excluded, k.Value) {
			p.fail(k.Line, w, field, "is also excluded: a tool is imported with overrides, or excluded")
		}
		f, ok := p.mapping(entry{k, v.Content[i+1]}, w, field, "description", "idempotency", "timeout", "retry")
		if !ok {
			continue
		}
		for name, e := range f {
			lines[field+"."+name] = e.key.Line
		}
		var o mcptool.Override
		if e, ok := f["description"]; ok {
			o.Description, _ = p.text(e, w, field+".description")
		}
		if e, ok := f["idempotency"]; ok {
			o.Idempotency = p.policy(e, w, field+".", lines)
		}
		if e, ok := f["timeout"]; ok {
			if o.Timeout, ok = p.duration(e, w, field+".timeout"); ok && o.Timeout < 0 {
				p.fail(resolve(e.val).Line, w, field+".timeout", "is negative")
			}
		}
		if e, ok := f["retry"]; ok {
			o.Retry = p.retry(e, w, field+".", lines)
		}
		out[k.Value] = o
	}
	return out
}

// mcpTarget reads a tool's mcp block: the server (which must be declared) and
// the tool's name on it (by default, the tool's own name).
func (p *parser) mcpTarget(e entry, w *where, name string, lines map[string]int, servers map[string]*serverUse) (server, remote string) {
	f, ok := p.mapping(e, w, "mcp", "server", "tool")
	if !ok {
		return "", ""
	}
	for k, x := range f {
		lines["mcp."+k] = x.key.Line
	}
	remote = name
	if x, ok := f["server"]; !ok {
		p.fail(e.key.Line, w, "mcp.server", "is required: the name of an mcp_servers entry")
	} else if s, ok := p.text(x, w, "mcp.server"); ok {
		server = s
		if use := servers[s]; use != nil {
			use.used = true
		} else {
			declared := "the file declares none"
			if len(servers) > 0 {
				declared = "declared: " + strings.Join(slices.Sorted(maps.Keys(servers)), ", ")
			}
			p.fail(resolve(x.val).Line, w, "mcp.server", "%q is not an mcp_servers entry (%s)", s, declared)
		}
	}
	if x, ok := f["tool"]; ok {
		if s, ok := p.text(x, w, "mcp.tool"); ok {
			if s == "" {
				p.fail(resolve(x.val).Line, w, "mcp.tool", "is empty: name the server's tool, or leave it out to use the tool's own name")
			}
			remote = s
		}
	}
	return server, remote
}
