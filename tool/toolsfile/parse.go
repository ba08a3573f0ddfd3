package toolsfile

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/httptool"
)

// Declaration is one HTTP tool of a tools file, checked: [Declaration.Build]
// turns it into a tool. Its Endpoint may be adjusted first (a Client with
// custom TLS, say).
type Declaration struct {
	// File is the name the file was parsed under; Line is the line of the tool's
	// entry in the tools list.
	File string
	Line int
	// Spec is the tool's declaration.
	Spec tool.Spec
	// Endpoint is where its requests go, with ${VAR} references expanded.
	Endpoint httptool.Endpoint

	site site
}

// Build returns the HTTP tool the declaration describes. Its errors are
// [*Error] values placed at the line of the field at fault, wrapping the
// [*tool.SpecError] from [httptool.New].
func (d Declaration) Build() (*tool.Tool, error) {
	t, err := httptool.New(d.Spec, d.Endpoint)
	if err != nil {
		return nil, d.site.locate(err, "")
	}
	return t, nil
}

// site places the errors found in one entry of a file, after parsing too.
type site struct {
	file   string
	line   int            // the entry's line
	list   string         // "tools" or "mcp_servers"
	index  int            // the entry's position in its list
	name   string         // the entry's name, "" when it has none
	lines  map[string]int // field path → line of its key ("path/arg" → line of a listed argument)
	server bool           // an mcp_servers entry
}

// errorf returns an *Error on the entry's field, at the field's line (or the
// closest enclosing field's, or the entry's).
func (s site) errorf(field string, err error, format string, args ...any) *Error {
	e := &Error{File: s.file, Line: s.lineOf(field), List: s.list, Index: s.index, Field: field, Msg: fmt.Sprintf(format, args...), Err: err}
	if s.server {
		e.Server = s.name
	} else {
		e.Tool = s.name
	}
	return e
}

// lineOf finds the line of field, or of the closest field that holds it.
func (s site) lineOf(field string) int {
	for f := field; f != ""; {
		if l, ok := s.lines[f]; ok {
			return l
		}
		i := strings.LastIndexByte(f, '.')
		if i < 0 {
			break
		}
		f = f[:i]
	}
	return s.line
}

// locate turns an error refusing a declaration (from tool.New, httptool.New,
// mcptool) into an *Error at the right line. base is the path of the
// declaration's fields within the entry ("" for a tool, "import.tools.NAME."
// for an import override).
func (s site) locate(err error, base string) *Error {
	var se *tool.SpecError
	if !errors.As(err, &se) {
		return s.errorf(strings.TrimSuffix(base, "."), err, "%s", err.Error())
	}
	field := se.Field
	if field == "key_arguments" || field == "check_arguments" {
		field = "idempotency." + field
	}
	field = base + field
	if se.Argument == "" {
		return s.errorf(field, err, "%s", se.Msg)
	}
	e := s.errorf(field, err, "%q %s", se.Argument, se.Msg)
	if l, ok := s.lines[field+"/"+se.Argument]; ok {
		e.Line = l
	}
	return e
}

// File is a tools file, parsed and checked as far as it can be without I/O:
// [File.Open] connects to its MCP servers and builds every tool.
type File struct {
	// Name is the name the file was parsed under.
	Name string
	// Tools are the HTTP tools of the tools list, in file order.
	Tools []Declaration
	// MCPTools are the tools of the tools list whose body is a tool of an MCP
	// server, in file order.
	MCPTools []MCPDeclaration
	// NATSTools are the tools of the tools list whose body workers serve over
	// NATS, in file order.
	NATSTools []NATSDeclaration
	// Servers are the mcp_servers entries, in file order.
	Servers []Server
}

// Parse reads a tools file held in data; name is used in error messages. env
// looks up the variables ${VAR} refers to (nil means os.LookupEnv). Every
// declaration is checked as far as it can be without the MCP servers: an HTTP
// tool as [Declaration.Build] would check it; an MCP tool's key and check
// arguments only when it gives its parameters (otherwise [File.Open] checks
// them against the server's schema, and an import's overrides likewise).
//
// Parse reports every problem it finds: the error is nil or an errors.Join of
// [*Error] values in file order, each matching [ErrInvalid]. On error it returns
// no file.
func Parse(data []byte, name string, env func(string) (string, bool)) (*File, error) {
	if env == nil {
		env = os.LookupEnv
	}
	p := &parser{file: name, env: env, conv: converter{budget: maxNodes}}
	f := p.parse(data)
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b error) int {
			var ea, eb *Error
			errors.As(a, &ea)
			errors.As(b, &eb)
			return cmp.Compare(ea.Line, eb.Line)
		})
		return nil, errors.Join(p.errs...)
	}
	return f, nil
}

// parser collects the errors of one file.
type parser struct {
	file string
	env  func(string) (string, bool)
	errs []error
	conv converter // shared, so the node budget covers the whole file
}

// where says which entry a problem belongs to; nil means the file itself.
type where struct {
	name   string
	index  int
	server bool // an mcp_servers entry, else a tools entry
}

func (p *parser) fail(line int, w *where, field, format string, args ...any) {
	e := &Error{File: p.file, Line: line, Index: -1, Field: field, Msg: fmt.Sprintf(format, args...)}
	switch {
	case w == nil:
	case w.server:
		e.Server, e.List, e.Index = w.name, "mcp_servers", w.index
	default:
		e.Tool, e.List, e.Index = w.name, "tools", w.index
	}
	p.errs = append(p.errs, e)
}

// site returns the site of the entry w, at line.
func (p *parser) site(w *where, line int) site {
	s := site{file: p.file, line: line, list: "tools", index: w.index, name: w.name, lines: map[string]int{}, server: w.server}
	if w.server {
		s.list = "mcp_servers"
	}
	return s
}

// yamlLine matches the position in the YAML parser's messages.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// decode parses data into a node tree: nil for a file with no document at all.
// A file holding a second document is refused.
func decode(data []byte) (doc *yaml.Node, extra int, err error) {
	defer func() {
		if r := recover(); r != nil { // the YAML library's own guard, doubled
			doc, err = nil, fmt.Errorf("yaml: parser failed: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var n yaml.Node
	if err := dec.Decode(&n); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, 0, nil
		}
		return nil, 0, err
	}
	var more yaml.Node
	switch err := dec.Decode(&more); {
	case errors.Is(err, io.EOF):
		return &n, 0, nil
	case err != nil:
		return nil, 0, err
	}
	return &n, max(more.Line, 1), nil
}

func (p *parser) parse(data []byte) *File {
	doc, extra, err := decode(data)
	if err != nil {
		line, msg := 0, err.Error()
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
		}
		p.fail(line, nil, "", "not valid YAML: %s", strings.TrimPrefix(msg, "yaml: "))
		return nil
	}
	if extra > 0 {
		p.fail(extra, nil, "", "holds more than one YAML document")
		return nil
	}
	var top *yaml.Node
	if doc != nil && len(doc.Content) > 0 {
		top = resolve(doc.Content[0])
	}
	if top == nil || top.Kind == yaml.ScalarNode && top.ShortTag() == "!!null" {
		p.fail(1, nil, "", "is empty: it must declare a tools list")
		return nil
	}
	if top.Kind != yaml.MappingNode {
		p.fail(top.Line, nil, "", "must be a mapping with a tools list, not %s", describe(top))
		return nil
	}
	file := &File{Name: p.file}
	f := p.fields(top, nil, "", "tools", "mcp_servers")
	servers := map[string]*serverUse{} // by name, for the tools that name them
	if e, ok := f["mcp_servers"]; ok {
		file.Servers = p.servers(e, servers)
	}
	imports := false
	for _, s := range file.Servers {
		imports = imports || s.Import != nil
	}
	list, ok := f["tools"]
	if !ok && !imports {
		p.fail(top.Line, nil, "tools", "is required (or an MCP server whose tools are imported)")
		return nil
	}
	if ok {
		seq := resolve(list.val)
		if seq.Kind != yaml.SequenceNode {
			p.fail(seq.Line, nil, "tools", "must be a list of tools, not %s", describe(seq))
			return nil
		}
		if len(seq.Content) == 0 {
			p.fail(seq.Line, nil, "tools", "is empty: the file declares no tools")
			return nil
		}
		first := map[string]int{} // tool name → line of its first declaration
		for i, n := range seq.Content {
			d, m, ns := p.tool(i, n, first, servers)
			switch {
			case d != nil:
				file.Tools = append(file.Tools, *d)
			case m != nil:
				file.MCPTools = append(file.MCPTools, *m)
			case ns != nil:
				file.NATSTools = append(file.NATSTools, *ns)
			}
		}
	}
	for _, s := range file.Servers {
		if u := servers[s.Config.Name]; u != nil && !u.used && s.Import == nil {
			p.errs = append(p.errs, s.site.errorf("", nil, "declares no tools: import them (import), or name the server in a tool's mcp.server"))
		}
	}
	return file
}

// entry is one key and value of a mapping.
type entry struct{ key, val *yaml.Node }

// fields reads mapping n, refusing keys that are not scalars, keys outside known
// and keys given twice. It returns the known keys' entries.
func (p *parser) fields(n *yaml.Node, w *where, path string, known ...string) map[string]entry {
	out := make(map[string]entry, len(known))
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := resolve(n.Content[i])
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
			p.fail(n.Content[i].Line, w, path, "has a key that is not a name (%s)", describe(k))
			continue
		}
		name := join(path, k.Value)
		if k.ShortTag() == "!!merge" {
			p.fail(k.Line, w, path, "merge keys (<<) are not supported")
			continue
		}
		if !contains(known, k.Value) {
			p.fail(k.Line, w, name, "unknown field (known fields: %s)", strings.Join(known, ", "))
			continue
		}
		if prev, dup := out[k.Value]; dup {
			p.fail(k.Line, w, name, "is given twice (first at line %d)", prev.key.Line)
			continue
		}
		out[k.Value] = entry{k, n.Content[i+1]}
	}
	return out
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// resolve follows aliases to the node they stand for.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < maxDepth; i++ {
		n = n.Alias
	}
	if n == nil || n.Kind == yaml.AliasNode {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	}
	return n
}

// describe names a node's kind for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!str":
			return "a string"
		}
		return "a " + strings.TrimPrefix(n.ShortTag(), "!!") + " scalar"
	}
	return "an unexpected node"
}

// tool reads the i-th entry of the tools list: an HTTP tool, an MCP tool or a
// tool served over NATS, nil for all three when it is wrong.
func (p *parser) tool(
	i int, raw *yaml.Node, first map[string]int, servers map[string]*serverUse,
) (*Declaration, *MCPDeclaration, *NATSDeclaration) {
	n := resolve(raw)
	w := &where{index: i}
	before := len(p.errs)
	if n.Kind != yaml.MappingNode {
		p.fail(n.Line, w, "", "must be a mapping, not %s", describe(n))
		return nil, nil, nil
	}
	// Learn the name first, so that every error about this tool can carry it.
	w.name = nameOf(n)
	st := p.site(w, n.Line)
	f := p.fields(n, w, "", "name", "description", "idempotency", "timeout", "retry", "parameters", "http", "mcp", "nats")
	for k, e := range f {
		st.lines[k] = e.key.Line
	}

	// The declaration proper: what tool.New checks.
	mark := len(p.errs)
	var spec tool.Spec
	var nameLine int
	if e, ok := f["name"]; !ok {
		p.fail(n.Line, w, "name", "is required")
	} else if s, ok := p.text(e, w, "name"); ok {
		spec.Name, nameLine = s, e.key.Line
	}
	if e, ok := f["description"]; ok {
		spec.Description, _ = p.text(e, w, "description")
	}
	if e, ok := f["idempotency"]; ok {
		spec.Idempotency = p.policy(e, w, "", st.lines)
	}
	if e, ok := f["timeout"]; ok {
		spec.Timeout, _ = p.duration(e, w, "timeout")
	}
	if e, ok := f["retry"]; ok {
		spec.Retry = p.retry(e, w, "", st.lines)
	}
	if e, ok := f["parameters"]; ok {
		spec.Parameters = p.json(e, w, "parameters")
	}
	specOK := len(p.errs) == mark

	if nameLine > 0 {
		if line, dup := first[spec.Name]; dup {
			p.fail(nameLine, w, "name", "tool %q is declared twice (first at line %d)", spec.Name, line)
		} else {
			first[spec.Name] = nameLine
		}
	}

	httpEntry, isHTTP := f["http"]
	mcpEntry, isMCP := f["mcp"]
	natsEntry, isNATS := f["nats"]
	var bodies []string
	for _, b := range []struct {
		name  string
		given bool
	}{{"http", isHTTP}, {"mcp", isMCP}, {"nats", isNATS}} {
		if b.given {
			bodies = append(bodies, b.name)
		}
	}
	switch {
	case len(bodies) > 1:
		p.fail(f[bodies[1]].key.Line, w, bodies[1], "a tool has one body, http, mcp or nats, not both %s and %s", bodies[0], bodies[1])
		return nil, nil, nil
	case len(bodies) == 0:
		p.fail(n.Line, w, "http",
			"is required: give http (an HTTP endpoint), mcp (a tool of an MCP server) or nats (a body workers serve over NATS)")
		return nil, nil, nil
	case isMCP:
		m := &MCPDeclaration{File: p.file, Line: n.Line, Spec: spec, site: st}
		m.Server, m.Tool = p.mcpTarget(mcpEntry, w, spec.Name, st.lines, servers)
		if specOK {
			if err := m.check(); err != nil {
				p.errs = append(p.errs, err)
			}
		}
		if len(p.errs) > before {
			return nil, nil, nil
		}
		return nil, m, nil
	case isNATS:
		d := &NATSDeclaration{File: p.file, Line: n.Line, Spec: spec, site: st}
		mark = len(p.errs)
		d.Endpoint = p.natsEndpoint(natsEntry, w, st.lines)
		if specOK && len(p.errs) == mark {
			if err := d.check(); err != nil {
				p.errs = append(p.errs, err)
			}
		}
		if len(p.errs) > before {
			return nil, nil, nil
		}
		return nil, nil, d
	}

	// The endpoint: what httptool.New checks.
	d := &Declaration{File: p.file, Line: n.Line, Spec: spec, site: st}
	mark = len(p.errs)
	d.Endpoint = p.endpoint(httpEntry, w, st.lines)
	httpOK := len(p.errs) == mark

	if len(p.errs) == before {
		if _, err := d.Build(); err != nil {
			p.errs = append(p.errs, err)
			return nil, nil, nil
		}
		return d, nil, nil
	}
	// Something is wrong already; check what can still be checked, so that one
	// pass reports as much as it can.
	if specOK {
		if _, err := tool.New(d.Spec, noBody); err != nil {
			p.errs = append(p.errs, st.locate(err, ""))
		}
	}
	if httpOK {
		if _, err := httptool.New(tool.Spec{Name: "endpoint"}, d.Endpoint); err != nil {
			p.errs = append(p.errs, st.locate(err, ""))
		}
	}
	return nil, nil, nil
}

// nameOf returns the scalar under a mapping's name key, "" when there is none.
func nameOf(n *yaml.Node) string {
	for j := 0; j+1 < len(n.Content); j += 2 {
		if k := resolve(n.Content[j]); k.Kind == yaml.ScalarNode && k.Value == "name" {
			if v := resolve(n.Content[j+1]); v.Kind == yaml.ScalarNode && v.ShortTag() != "!!null" {
				return v.Value
			}
			break
		}
	}
	return ""
}

// noBody stands in for a body where only the declaration is being checked.
func noBody(context.Context, tool.Context, json.RawMessage) (string, error) {
	return "", errors.New("toolsfile: not built")
}

// text reads a scalar as text; any scalar but null will do (a header value of 2
// is "2").
func (p *parser) text(e entry, w *where, field string) (string, bool) {
	v := resolve(e.val)
	if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
		p.fail(v.Line, w, field, "must be a string, not %s", describe(v))
		return "", false
	}
	return v.Value, true
}

func (p *parser) duration(e entry, w *where, field string) (time.Duration, bool) {
	s, ok := p.text(e, w, field)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.fail(resolve(e.val).Line, w, field, "%q is not a duration (write e.g. 30s, 1m30s or 200ms)", s)
		return 0, false
	}
	return d, true
}

func (p *parser) integer(e entry, w *where, field string) (int64, bool) {
	v := resolve(e.val)
	var n int64
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
		p.fail(v.Line, w, field, "must be an integer, not %s", describe(v))
		return 0, false
	}
	if v.Decode(&n) != nil {
		p.fail(v.Line, w, field, "%s is out of range", v.Value)
		return 0, false
	}
	return n, true
}

func (p *parser) number(e entry, w *where, field string) (float64, bool) {
	v := resolve(e.val)
	var f float64
	if v.Kind != yaml.ScalarNode || (v.ShortTag() != "!!int" && v.ShortTag() != "!!float") || v.Decode(&f) != nil ||
		math.IsNaN(f) || math.IsInf(f, 0) {
		p.fail(v.Line, w, field, "must be a finite number, not %s", describe(v))
		return 0, false
	}
	return f, true
}

// mapping checks that e holds a mapping and reads its known fields.
func (p *parser) mapping(e entry, w *where, field string, known ...string) (map[string]entry, bool) {
	v := resolve(e.val)
	if v.Kind != yaml.MappingNode {
		p.fail(v.Line, w, field, "must be a mapping, not %s", describe(v))
		return nil, false
	}
	return p.fields(v, w, field, known...), true
}

// list reads a list of names (what they are: "argument", "tool"). The result
// is non-nil, even for [].
func (p *parser) list(e entry, w *where, field, what string, lines map[string]int) ([]string, bool) {
	v := resolve(e.val)
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" {
		p.fail(v.Line, w, field, "is null: write [] for none, or leave the field out")
		return nil, false
	}
	if v.Kind != yaml.SequenceNode {
		p.fail(v.Line, w, field, "must be a list of %s names, not %s", what, describe(v))
		return nil, false
	}
	out := make([]string, 0, len(v.Content))
	ok := true
	for _, c := range v.Content {
		c = resolve(c)
		if c.Kind != yaml.ScalarNode || c.ShortTag() == "!!null" {
			p.fail(c.Line, w, field, "must list %s names, not %s", what, describe(c))
			ok = false
			continue
		}
		out = append(out, c.Value)
		if _, seen := lines[field+"/"+c.Value]; !seen {
			lines[field+"/"+c.Value] = c.Line
		}
	}
	return out, ok
}

// policy reads an idempotency block; base is the path of the block's parent
// ("" for a tool, "import.tools.NAME." for an override).
func (p *parser) policy(e entry, w *where, base string, lines map[string]int) *tool.Policy {
	field := base + "idempotency"
	if v := resolve(e.val); v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" {
		p.fail(v.Line, w, field, "is empty: give a kind, or leave the block out for no policy")
		return nil
	}
	f, ok := p.mapping(e, w, field, "kind", "key_arguments", "check_arguments")
	if !ok {
		return nil
	}
	for k, x := range f {
		lines[field+"."+k] = x.key.Line
	}
	pol := &tool.Policy{}
	if k, ok := f["kind"]; !ok {
		p.fail(e.key.Line, w, field+".kind", "is required (read_only, idempotent or effectful)")
	} else if s, ok := p.text(k, w, field+".kind"); ok {
		kind, err := tool.ParseKind(s)
		if err != nil {
			p.fail(resolve(k.val).Line, w, field+".kind", "%q is not a kind (read_only, idempotent or effectful)", s)
		}
		pol.Kind = kind
	}
	if k, ok := f["key_arguments"]; ok { // absent: nil, every argument counts
		pol.KeyArguments, _ = p.list(k, w, field+".key_arguments", "argument", lines)
	}
	if k, ok := f["check_arguments"]; ok {
		pol.CheckArguments, _ = p.list(k, w, field+".check_arguments", "argument", lines)
	}
	return pol
}

// retry reads a retry block; base is as for policy.
func (p *parser) retry(e entry, w *where, base string, lines map[string]int) tool.Retry {
	var r tool.Retry
	field := base + "retry"
	f, ok := p.mapping(e, w, field, "max_attempts", "initial_backoff", "max_backoff", "multiplier")
	if !ok {
		return r
	}
	for k, x := range f {
		lines[field+"."+k] = x.key.Line
	}
	if x, ok := f["max_attempts"]; ok {
		if n, ok := p.integer(x, w, field+".max_attempts"); ok {
			if n < 1 || n > math.MaxInt32 {
				p.fail(resolve(x.val).Line, w, field+".max_attempts", "must be at least 1 (it counts the first attempt)")
			}
			r.MaxAttempts = int(min(max(n, 0), math.MaxInt32))
		}
	}
	for _, b := range []struct {
		name string
		dst  *time.Duration
	}{{"initial_backoff", &r.InitialBackoff}, {"max_backoff", &r.MaxBackoff}} {
		if x, ok := f[b.name]; ok {
			if d, ok := p.duration(x, w, field+"."+b.name); ok {
				if d <= 0 {
					p.fail(resolve(x.val).Line, w, field+"."+b.name, "must be positive")
				}
				*b.dst = d
			}
		}
	}
	if x, ok := f["multiplier"]; ok {
		if m, ok := p.number(x, w, field+".multiplier"); ok {
			if m < 1 {
				p.fail(resolve(x.val).Line, w, field+".multiplier", "must be at least 1")
			}
			r.Multiplier = m
		}
	}
	return r
}

// json converts the YAML under e to JSON text.
func (p *parser) json(e entry, w *where, field string) json.RawMessage {
	p.conv.buf.Reset()
	if err := p.conv.toJSON(e.val, 0); err != nil {
		var ce *convError
		if errors.As(err, &ce) {
			p.fail(ce.line, w, field, "%s", ce.msg)
		}
		return nil
	}
	return bytes.Clone(p.conv.buf.Bytes())
}

func (p *parser) endpoint(e entry, w *where, lines map[string]int) httptool.Endpoint {
	var ep httptool.Endpoint
	f, ok := p.mapping(e, w, "http", "url", "method", "headers", "max_response_bytes")
	if !ok {
		return ep
	}
	lines["http"] = e.key.Line
	for k, x := range f {
		lines["http."+k] = x.key.Line
	}
	if x, ok := f["url"]; !ok {
		p.fail(e.key.Line, w, "http.url", "is required")
	} else if s, ok := p.text(x, w, "http.url"); ok {
		ep.URL, _ = p.expand(s, resolve(x.val).Line, w, "http.url")
	}
	if x, ok := f["method"]; ok {
		ep.Method, _ = p.text(x, w, "http.method")
	}
	if x, ok := f["headers"]; ok {
		ep.Headers = p.stringMap(x, w, "http.headers", "header")
	}
	if x, ok := f["max_response_bytes"]; ok {
		if n, ok := p.integer(x, w, "http.max_response_bytes"); ok {
			if n < 1 {
				p.fail(resolve(x.val).Line, w, "http.max_response_bytes", "must be positive")
			}
			ep.MaxResponseBytes = n
		}
	}
	return ep
}

// stringMap reads a mapping of names (what they are: "header", "variable") to
// strings, each with ${VAR} references expanded; nil when it is not a mapping.
func (p *parser) stringMap(x entry, w *where, field, what string) map[string]string {
	v := resolve(x.val)
	if v.Kind != yaml.MappingNode {
		p.fail(v.Line, w, field, "must be a mapping of %s names to values, not %s", what, describe(v))
		return nil
	}
	out := make(map[string]string, len(v.Content)/2)
	for i := 0; i+1 < len(v.Content); i += 2 {
		k := resolve(v.Content[i])
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
			p.fail(v.Content[i].Line, w, field, "has a key that is not a %s name (%s)", what, describe(k))
			continue
		}
		kf := field + "." + k.Value
		if _, dup := out[k.Value]; dup {
			p.fail(k.Line, w, kf, "is given twice")
			continue
		}
		if s, ok := p.text(entry{k, v.Content[i+1]}, w, kf); ok {
			out[k.Value], _ = p.expand(s, resolve(v.Content[i+1]).Line, w, kf)
		}
	}
	return out
}

// expand expands ${VAR} references, reporting each unset variable.
func (p *parser) expand(s string, line int, w *where, field string) (string, bool) {
	out, unset, err := expand(s, p.env)
	if err != nil {
		p.fail(line, w, field, "%v", err)
		return "", false
	}
	for _, name := range unset {
		p.fail(line, w, field, "${%s} is not set in the environment", name)
	}
	return out, len(unset) == 0
}
