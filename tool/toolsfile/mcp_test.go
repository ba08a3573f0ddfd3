package toolsfile_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/internal/testkit/mcptest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/mcptool"
	"github.com/tesserix/toolexec/tool/toolsfile"
)

// TestMain turns the test binary into the test MCP server when a test starts
// it as a stdio upstream.
func TestMain(m *testing.M) { mcptest.Main(m) }

const mcpFile = `mcp_servers:
  - name: memory
    command: [node, "${SERVER_JS}", --verbose]
    env: {MEMORY_FILE_PATH: "${MEMORY_FILE}", MODE: strict}
    dir: /srv/memory
    import:
      prefix: mem_
      trust_annotations: true
      exclude: [read_graph, delete_all]
      tools:
        search_nodes:
          description: Search the graph.
          idempotency: {kind: read_only}
          timeout: 10s
          retry: {max_attempts: 3}
        create_entities:
          idempotency: {kind: effectful, key_arguments: [entities]}
  - name: remote
    url: http://127.0.0.1:9000/mcp?tenant=acme
    headers: {Authorization: "Bearer ${TOKEN}"}
tools:
  - name: remember
    idempotency: {kind: effectful, key_arguments: [entities]}
    mcp: {server: memory, tool: create_entities}
  - name: lookup
    description: Look a thing up.
    timeout: 5s
    parameters: {type: object, properties: {q: {type: string}}}
    idempotency: {kind: read_only}
    mcp: {server: remote}
  - name: fares
    http: {url: "${AIRLINE_URL}/fares"}
`

func TestParseMCP(t *testing.T) {
	env := envOf(map[string]string{"SERVER_JS": "/opt/memory/index.js", "MEMORY_FILE": "/var/memory.json", "TOKEN": "s3cret", "AIRLINE_URL": "http://a.example"})
	f, err := toolsfile.Parse([]byte(mcpFile), "tools.yaml", env)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Servers) != 2 || len(f.MCPTools) != 2 || len(f.Tools) != 1 || f.Name != "tools.yaml" {
		t.Fatalf("file %+v", f)
	}
	mem := f.Servers[0]
	wantCfg := mcptool.Config{
		Name: "memory", Command: []string{"node", "/opt/memory/index.js", "--verbose"},
		Env: map[string]string{"MEMORY_FILE_PATH": "/var/memory.json", "MODE": "strict"}, Dir: "/srv/memory",
	}
	if !reflect.DeepEqual(mem.Config, wantCfg) || mem.Line != 2 || mem.File != "tools.yaml" {
		t.Errorf("memory: %+v at %d; want %+v", mem.Config, mem.Line, wantCfg)
	}
	wantImport := &mcptool.ImportOptions{
		Prefix: "mem_", TrustAnnotations: true, Exclude: []string{"read_graph", "delete_all"},
		Tools: map[string]mcptool.Override{
			"search_nodes":    {Description: "Search the graph.", Idempotency: &tool.Policy{Kind: tool.ReadOnly}, Timeout: 10 * time.Second, Retry: tool.Retry{MaxAttempts: 3}},
			"create_entities": {Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"entities"}}},
		},
	}
	if !reflect.DeepEqual(mem.Import, wantImport) {
		t.Errorf("import %+v; want %+v", mem.Import, wantImport)
	}
	remote := f.Servers[1]
	if remote.Config.URL != "http://127.0.0.1:9000/mcp?tenant=acme" || remote.Config.Headers["Authorization"] != "Bearer s3cret" || remote.Import != nil {
		t.Errorf("remote: %+v", remote)
	}
	remember, lookup := f.MCPTools[0], f.MCPTools[1]
	if remember.Server != "memory" || remember.Tool != "create_entities" || remember.Spec.Parameters != nil || remember.Line != 22 ||
		!reflect.DeepEqual(remember.Spec.Idempotency, &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"entities"}}) {
		t.Errorf("remember: %+v", remember)
	}
	if lookup.Server != "remote" || lookup.Tool != "lookup" || lookup.Spec.Timeout != 5*time.Second || lookup.Spec.Description != "Look a thing up." {
		t.Errorf("lookup (its tool defaults to its own name): %+v", lookup)
	}
}

func TestParseImportOnly(t *testing.T) {
	f, err := toolsfile.Parse([]byte("mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    import: {}\n"), "tools.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Servers) != 1 || f.Servers[0].Import == nil || len(f.Tools)+len(f.MCPTools) != 0 {
		t.Errorf("file %+v", f)
	}
}

func TestParseMCPErrors(t *testing.T) {
	const srv = "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    import: {}\n"
	const tool1 = "tools:\n  - name: t\n"
	tests := []struct {
		name string
		src  string
		want wantError
		is   error
	}{
		{"servers not a list", "mcp_servers: {s: 1}\ntools: []\n", wantError{1, "", "mcp_servers", []string{"list"}}, nil},
		{"servers empty", "mcp_servers: []\n" + tool1 + "    http: {url: \"http://x.example\"}\n", wantError{1, "", "mcp_servers", []string{"empty"}}, nil},
		{"server not a mapping", "mcp_servers:\n  - s\n", wantError{2, "", "", []string{"mcp_servers[0]", "mapping"}}, nil},
		{"unknown server field", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    import: {}\n    args: [x]\n", wantError{5, "", "args", []string{`mcp server "s"`, "unknown field"}}, nil},
		{"server without name", "mcp_servers:\n  - url: http://x.example/mcp\n    import: {}\n", wantError{2, "", "name", []string{"mcp_servers[0]", "required"}}, nil},
		{"server name not a token", "mcp_servers:\n  - name: my server\n    url: http://x.example/mcp\n    import: {}\n", wantError{2, "", "name", []string{"[A-Za-z0-9_-]"}}, nil},
		{"server twice", srv + "  - name: s\n    url: http://y.example/mcp\n    import: {}\n", wantError{5, "", "name", []string{"declared twice", "line 2"}}, nil},
		{"command and url", "mcp_servers:\n  - name: s\n    command: [x]\n    url: http://x.example/mcp\n    import: {}\n", wantError{3, "", "command", []string{"not both"}}, mcptool.ErrInvalidConfig},
		{"neither command nor url", "mcp_servers:\n  - name: s\n    import: {}\n", wantError{2, "", "command", []string{"url"}}, mcptool.ErrInvalidConfig},
		{"command a string", "mcp_servers:\n  - name: s\n    command: node server.js\n    import: {}\n", wantError{3, "", "command", []string{"list", "[node, server.js]"}}, nil},
		{"command empty", "mcp_servers:\n  - name: s\n    command: []\n    import: {}\n", wantError{3, "", "command", []string{"list"}}, nil},
		{"command variable unset", "mcp_servers:\n  - name: s\n    command: [node, \"${NOPE}/x.js\"]\n    import: {}\n", wantError{3, "", "command", []string{"${NOPE}", "not set"}}, nil},
		{"env a list", "mcp_servers:\n  - name: s\n    command: [x]\n    env: [A]\n    import: {}\n", wantError{4, "", "env", []string{"variable names"}}, nil},
		{"env variable unset", "mcp_servers:\n  - name: s\n    command: [x]\n    env:\n      KEY: ${NO_KEY}\n    import: {}\n", wantError{5, "", "env.KEY", []string{"${NO_KEY}"}}, nil},
		{"env name with =", "mcp_servers:\n  - name: s\n    command: [x]\n    env: {\"A=B\": c}\n    import: {}\n", wantError{4, "", "env", []string{"A=B"}}, mcptool.ErrInvalidConfig},
		{"headers with a command", "mcp_servers:\n  - name: s\n    command: [x]\n    headers: {A: b}\n    import: {}\n", wantError{4, "", "headers", []string{"url"}}, mcptool.ErrInvalidConfig},
		{"reserved header", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    headers: {Mcp-Session-Id: x}\n    import: {}\n", wantError{4, "", "headers", []string{"Mcp-Session-Id"}}, mcptool.ErrInvalidConfig},
		{"url not http", "mcp_servers:\n  - name: s\n    url: ws://x.example/mcp\n    import: {}\n", wantError{3, "", "url", []string{"http"}}, mcptool.ErrInvalidConfig},
		{"dir with a url", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    dir: /tmp\n    import: {}\n", wantError{4, "", "dir", []string{"command"}}, mcptool.ErrInvalidConfig},
		{"restart_delay not a mapping", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    restart_delay: 1s\n    import: {}\n", wantError{4, "", "restart_delay", []string{"mapping"}}, nil},
		{"restart_delay unknown field", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    restart_delay: {minimum: 1s}\n    import: {}\n", wantError{4, "", "restart_delay.minimum", []string{"unknown field"}}, nil},
		{"restart_delay not a duration", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    restart_delay: {min: soon}\n    import: {}\n", wantError{4, "", "restart_delay.min", []string{`"soon"`, "duration"}}, nil},
		{"restart_delay zero", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    restart_delay: {max: 0s}\n    import: {}\n", wantError{4, "", "restart_delay.max", []string{"positive"}}, nil},
		{"restart_delay min above max", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    restart_delay: {min: 10s, max: 1s}\n    import: {}\n", wantError{4, "", "restart_delay", []string{"min exceeds max"}}, nil},
		{"restart_delay max below the default min", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    restart_delay: {max: 500ms}\n    import: {}\n", wantError{4, "", "restart_delay", []string{"min exceeds max", "min 1s"}}, nil},
		{"import null", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    import:\n", wantError{4, "", "import", []string{"import: {}"}}, nil},
		{"unknown import field", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    import: {prefx: a_}\n", wantError{4, "", "import.prefx", []string{"unknown field", "prefix"}}, nil},
		{"bad prefix", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    import: {prefix: a.}\n", wantError{4, "", "import.prefix", []string{"A-Z"}}, nil},
		{"trust not a boolean", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    import: {trust_annotations: yes please}\n", wantError{4, "", "import.trust_annotations", []string{"true or false"}}, nil},
		{"exclude a string", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    import: {exclude: a}\n", wantError{4, "", "import.exclude", []string{"tool names"}}, nil},
		{"excluded twice", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    import:\n      exclude:\n        - a\n        - a\n", wantError{6, "", "import.exclude", []string{`"a"`, "twice"}}, nil},
		{"excluded and overridden", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    import:\n      exclude: [a]\n      tools:\n        a: {timeout: 3s}\n", wantError{7, "", "import.tools.a", []string{"also excluded"}}, nil},
		{"unknown override field", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    import:\n      tools:\n        a: {timout: 3s}\n", wantError{6, "", "import.tools.a.timout", []string{"unknown field"}}, nil},
		{"override kind", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    import:\n      tools:\n        a:\n          idempotency: {kind: sometimes}\n", wantError{7, "", "import.tools.a.idempotency.kind", []string{"sometimes"}}, nil},
		{"override negative timeout", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    import:\n      tools:\n        a: {timeout: -3s}\n", wantError{6, "", "import.tools.a.timeout", []string{"negative"}}, nil},
		{"override retry", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    import:\n      tools:\n        a: {retry: {max_attempts: 0}}\n", wantError{6, "", "import.tools.a.retry.max_attempts", []string{"at least 1"}}, nil},
		{"server with no tools", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n" + tool1 + "    http: {url: \"http://x.example\"}\n", wantError{2, "", "", []string{`mcp server "s"`, "declares no tools"}}, nil},
		{"tools missing without an import", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n", wantError{1, "", "tools", []string{"required"}}, nil},
		{"http and mcp", srv + tool1 + "    http: {url: \"http://x.example\"}\n    mcp: {server: s}\n", wantError{8, "t", "mcp", []string{"not both"}}, nil},
		{"mcp names no server", srv + tool1 + "    mcp: {server: other}\n", wantError{7, "t", "mcp.server", []string{`"other"`, "declared: s"}}, nil},
		{"mcp names a server in a file without any", tool1 + "    mcp: {server: other}\n", wantError{3, "t", "mcp.server", []string{"declares none"}}, nil},
		{"mcp without server", srv + tool1 + "    mcp: {tool: x}\n", wantError{7, "t", "mcp.server", []string{"required"}}, nil},
		{"mcp empty tool", srv + tool1 + "    mcp: {server: s, tool: \"\"}\n", wantError{7, "t", "mcp.tool", []string{"empty"}}, nil},
		{"unknown mcp field", srv + tool1 + "    mcp: {server: s, name: x}\n", wantError{7, "t", "mcp.name", []string{"unknown field"}}, nil},
		{"mcp a string", srv + tool1 + "    mcp: s\n", wantError{7, "t", "mcp", []string{"mapping"}}, nil},
		{"mcp key argument not a parameter", srv + tool1 + "    parameters: {type: object, properties: {a: {type: string}}}\n    idempotency:\n      kind: effectful\n      key_arguments:\n        - b\n    mcp: {server: s}\n",
			wantError{11, "t", "idempotency.key_arguments", []string{`"b"`, "not a parameter"}}, tool.ErrUnknownArgument},
		{"mcp tool with a bad name", srv + "tools:\n  - name: t.u\n    mcp: {server: s}\n", wantError{6, "t.u", "name", []string{"[A-Za-z0-9_-]"}}, tool.ErrInvalidSpec},
		{"mcp tool declared twice", srv + tool1 + "    mcp: {server: s}\n" + "  - name: t\n    mcp: {server: s}\n", wantError{8, "t", "name", []string{"declared twice", "line 6"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := toolsfile.Parse([]byte(tt.src), "tools.yaml", testEnv)
			if err == nil {
				t.Fatalf("no error; file %+v", f)
			}
			if f != nil {
				t.Errorf("a file returned with the error")
			}
			if !errors.Is(err, toolsfile.ErrInvalid) {
				t.Errorf("err does not match ErrInvalid: %v", err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err does not match %v: %v", tt.is, err)
			}
			checkError(t, err, tt.want)
		})
	}
}

// TestParseRestartDelay: a server's restart_delay sets its backoff; left
// out, the defaults apply.
func TestParseRestartDelay(t *testing.T) {
	src := "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n    restart_delay: {min: 200ms, max: 5s}\n    import: {}\n" +
		"  - name: d\n    url: http://y.example/mcp\n    import: {}\n"
	f, err := toolsfile.Parse([]byte(src), "tools.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c := f.Servers[0].Config; c.MinRestartDelay != 200*time.Millisecond || c.MaxRestartDelay != 5*time.Second {
		t.Errorf("restart delay %s..%s, want 200ms..5s", c.MinRestartDelay, c.MaxRestartDelay)
	}
	if c := f.Servers[1].Config; c.MinRestartDelay != 0 || c.MaxRestartDelay != 0 {
		t.Errorf("restart delay %s..%s without restart_delay, want zero (the defaults)", c.MinRestartDelay, c.MaxRestartDelay)
	}
}

// TestParseMCPKeyArgumentsWait: an MCP tool without parameters may name key
// arguments; they are checked against the server's schema when it is opened.
func TestParseMCPKeyArgumentsWait(t *testing.T) {
	src := "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\ntools:\n  - name: t\n    idempotency: {kind: effectful, key_arguments: [entity], check_arguments: [note]}\n    mcp: {server: s}\n"
	f, err := toolsfile.Parse([]byte(src), "tools.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	if p := f.MCPTools[0].Spec.Idempotency; !reflect.DeepEqual(p.KeyArguments, []string{"entity"}) || !reflect.DeepEqual(p.CheckArguments, []string{"note"}) {
		t.Errorf("policy %+v", p)
	}
}

// stdioServer returns the YAML of an mcp_servers entry named name that runs
// the test server over stdio with o.
func stdioServer(name string, o mcptest.Options, extra string) string {
	argv, env := mcptest.Command(o)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "  - name: %s\n    command: [%q]\n    env:\n", name, argv[0])
	for _, k := range keys {
		fmt.Fprintf(&b, "      %s: %q\n", k, env[k])
	}
	b.WriteString(extra)
	return b.String()
}

func writeFile(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadMCP: a file with a stdio MCP server, one tool naming a server tool
// (its parameters and description from the server), and an import.
func TestLoadMCP(t *testing.T) {
	effects := filepath.Join(t.TempDir(), "effects")
	src := "mcp_servers:\n" + stdioServer("up", mcptest.Options{EffectsFile: effects}, `    import:
      prefix: up_
      exclude: [hang, needs_input]
      tools:
        ro: {idempotency: {kind: read_only}, timeout: 3s}
tools:
  - name: remember
    idempotency: {kind: effectful, key_arguments: [entity]}
    mcp: {server: up, tool: effect}
`)
	ctx := testenv.Context(t, time.Minute)
	ts, err := toolsfile.Load(ctx, writeFile(t, src), toolsfile.Options{Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	byName := map[string]*tool.Tool{}
	var names []string
	for _, tl := range ts.Tools() {
		byName[tl.Name()] = tl
		names = append(names, tl.Name())
	}
	if len(names) != 1+len(mcptest.Tools())-2 || names[0] != "remember" || byName["up_hang"] != nil || byName["up_effect"] == nil {
		t.Errorf("tools %v", names)
	}
	remember := byName["remember"]
	if d := remember.Spec().Description; d != "Writes a line." {
		t.Errorf("remember's description %q; want the server's", d)
	}
	if p := remember.Parameters(); !reflect.DeepEqual(p, []string{"entity", "note"}) {
		t.Errorf("remember's parameters %v; want the server's", p)
	}
	if k := byName["up_ro"].Policy().Kind; k != tool.ReadOnly || byName["up_ro"].Timeout() != 3*time.Second {
		t.Errorf("up_ro: %s, %s", k, byName["up_ro"].Timeout())
	}
	if k := byName["up_idem"].Policy().Kind; k != tool.Effectful {
		t.Errorf("up_idem is %s without trusted annotations; want effectful", k)
	}
	out, err := remember.Call(ctx, tool.Context{IdempotencyKey: "k1", Tenant: "acme", RunID: "r", CallID: "c"}, json.RawMessage(`{"entity":"alice"}`))
	if err != nil || out != "done" {
		t.Fatalf("remember: %q, %v", out, err)
	}
	if e := mcptest.Effects(t, effects); len(e) != 1 || e[0].Tool != "effect" || e[0].Arguments != `{"entity":"alice"}` {
		t.Errorf("effects %+v", e)
	}
}

// TestLoadServerDown: a server that cannot be reached at start does not stop
// the file from opening. Its tools are listed but unavailable in the
// registry they are attached to (the file's, with a stand-in schema when it
// gives none); once the server is reached they are built with its schema
// (one it does not list is refused, and stays unavailable), its imports are
// added, and they are available; while it is down again they are
// unavailable again.
func TestLoadServerDown(t *testing.T) {
	failFile := filepath.Join(t.TempDir(), "fail")
	if err := os.WriteFile(failFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	effects := filepath.Join(t.TempDir(), "effects")
	src := "mcp_servers:\n" + stdioServer("later", mcptest.Options{FailFile: failFile, EffectsFile: effects}, `    import:
      prefix: later_
      exclude: [hang, needs_input]
`) + `  - name: never
    url: http://127.0.0.1:1/mcp
tools:
  - name: remember
    idempotency: {kind: effectful, key_arguments: [entity]}
    mcp: {server: later, tool: effect}
  - name: noted
    description: Writes a note.
    parameters: {type: object, properties: {entity: {type: string}}}
    mcp: {server: later, tool: effect}
  - name: ghost
    parameters: {type: object}
    mcp: {server: later, tool: no_such_tool}
  - name: far
    mcp: {server: never, tool: text}
`
	ctx := testenv.Context(t, time.Minute)
	logs := &testenv.LogBuffer{}
	ts, err := toolsfile.Load(ctx, writeFile(t, src), toolsfile.Options{Logger: bufferLogger(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	var names []string
	for _, tl := range ts.Tools() {
		names = append(names, tl.Name())
	}
	if got := strings.Join(names, ","); got != "remember,noted,ghost,far" {
		t.Fatalf("tools at start %s; want the file's only (the imports wait)", got)
	}
	if !strings.Contains(logs.String(), "cannot be reached at start") {
		t.Errorf("the server down at start is not logged:\n%s", logs)
	}
	reg, err := tool.NewRegistry(ts.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	ts.Attach(reg)
	for _, n := range names {
		if _, err := reg.Get(n); !errors.Is(err, tool.ErrUnavailable) {
			t.Errorf("Get(%s) while its server is down: %v; want unavailable", n, err)
		}
	}
	if p, _ := reg.Lookup("remember"); p != nil {
		t.Error("Lookup finds an unavailable tool")
	}
	sv := ts.Servers()
	if len(sv) != 2 || sv[0].Name != "later" || sv[0].Status.State != mcptool.StateDown || !sv[0].Waiting ||
		strings.Join(sv[0].Tools, ",") != "ghost,noted,remember" || sv[1].Name != "never" || sv[1].Status.State != mcptool.StateDown {
		t.Fatalf("Servers() = %+v", sv)
	}

	if err := os.Remove(failFile); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 30*time.Second, "the imported tools to be served", func() bool {
		_, err := reg.Get("later_effect")
		return err == nil
	})
	remember, err := reg.Get("remember")
	if err != nil {
		t.Fatalf("remember once its server is reached: %v", err)
	}
	if p := remember.Parameters(); !reflect.DeepEqual(p, []string{"entity", "note"}) || remember.Spec().Description != "Writes a line." {
		t.Errorf("remember once its server is reached: parameters %v, description %q; want the server's", p, remember.Spec().Description)
	}
	if noted, err := reg.Get("noted"); err != nil || noted.Spec().Description != "Writes a note." {
		t.Errorf("noted once its server is reached: %v, %v", noted, err)
	}
	if _, err := reg.Get("far"); !errors.Is(err, tool.ErrUnavailable) {
		t.Errorf("far, its server still down: %v", err)
	}
	out, err := remember.Call(ctx, tool.Context{IdempotencyKey: "k1", Tenant: "acme", RunID: "r", CallID: "c"}, json.RawMessage(`{"entity":"alice"}`))
	if err != nil || out != "done" {
		t.Fatalf("remember: %q, %v", out, err)
	}
	// A tool the server does not list is refused once it is reached, as it
	// would have been at start, and stays unavailable.
	if _, err := reg.Get("ghost"); !errors.Is(err, tool.ErrUnavailable) || !strings.Contains(err.Error(), "no_such_tool") {
		t.Errorf("ghost once its server is reached: %v; want unavailable, naming the missing tool", err)
	}
	sv = ts.Servers()
	if sv[0].Status.State != mcptool.StateConnected || sv[0].Waiting || len(sv[0].Problems) != 1 ||
		!strings.Contains(sv[0].Problems[0], "no_such_tool") || len(sv[0].Tools) != 3+len(mcptest.Tools())-2 {
		t.Errorf("Servers()[0] once reached = %+v", sv[0])
	}

	// Down again: the server's tools are unavailable again.
	e := mcptest.Effects(t, effects)
	if err := os.WriteFile(failFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(e[0].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 30*time.Second, "the tools to be unavailable again", func() bool {
		_, err := reg.Get("later_text")
		return errors.Is(err, tool.ErrUnavailable)
	})
}

// TestLoadMCPOverHTTP: a server reached by URL gets the file's headers, with
// ${VAR} expanded, and the key as Idempotency-Key.
func TestLoadMCPOverHTTP(t *testing.T) {
	s := mcptest.NewServer(mcptest.Options{})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	src := "mcp_servers:\n  - name: remote\n    url: ${MCP_URL}/mcp\n    headers: {Authorization: \"Bearer ${TOKEN}\"}\ntools:\n  - name: echo\n    idempotency: {kind: effectful}\n    mcp: {server: remote, tool: meta}\n"
	ctx := testenv.Context(t, time.Minute)
	ts, err := toolsfile.Load(ctx, writeFile(t, src), toolsfile.Options{Env: envOf(map[string]string{"MCP_URL": srv.URL, "TOKEN": "t0k"})})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	out, err := ts.Tools()[0].Call(ctx, tool.Context{IdempotencyKey: "k1"}, json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var e mcptest.Echo
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatal(err)
	}
	if got := http.Header(e.Headers).Get("Authorization"); got != "Bearer t0k" || e.IdempotencyKey != "k1" {
		t.Errorf("Authorization %q, Idempotency-Key %q; want the file's header and the key", got, e.IdempotencyKey)
	}
}

// TestLoadMCPErrors: what only the servers can tell is reported at the line
// that caused it, every problem at once; servers already started are closed.
func TestLoadMCPErrors(t *testing.T) {
	src := "mcp_servers:\n" +
		"  - name: broken\n    command: [/nonexistent/mcp-server]\n    import: {}\n" + // lines 2-4
		stdioServer("up", mcptest.Options{}, `    import:
      exclude:
        - hang
        - nope
      tools:
        effect:
          idempotency:
            kind: effectful
            key_arguments:
              - date
`) + `tools:
  - name: remember
    idempotency:
      kind: effectful
      key_arguments:
        - entity
        - when
    mcp: {server: up, tool: effect}
  - name: missing
    mcp:
      server: up
      tool: no_such_tool
`
	// Find the lines of what must be reported.
	lines := strings.Split(src, "\n")
	lineOf := func(s string, nth int) int {
		for i, l := range lines {
			if strings.TrimSpace(l) == s {
				if nth--; nth == 0 {
					return i + 1
				}
			}
		}
		t.Fatalf("no line %q", s)
		return 0
	}
	logs := &testenv.LogBuffer{}
	_, err := toolsfile.Load(testenv.Context(t, time.Minute), writeFile(t, src), toolsfile.Options{Logger: bufferLogger(logs)})
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []struct {
		want wantError
		is   error
	}{
		{wantError{2, "", "", []string{`mcp server "broken"`, "nonexistent"}}, mcptool.ErrUnavailable},
		{wantError{lineOf("- nope", 1), "", "import.exclude", []string{`"nope"`}}, mcptool.ErrUnknownTool},
		{wantError{lineOf("- date", 1), "", "import.tools.effect.idempotency.key_arguments", []string{`"date"`, "not a parameter"}}, tool.ErrUnknownArgument},
		{wantError{lineOf("- when", 1), "remember", "idempotency.key_arguments", []string{`"when"`, "not a parameter"}}, tool.ErrUnknownArgument},
		{wantError{lineOf("tool: no_such_tool", 1), "missing", "mcp.tool", []string{`"no_such_tool"`}}, mcptool.ErrUnknownTool},
	} {
		checkError(t, err, w.want)
		if !errors.Is(err, w.is) {
			t.Errorf("err does not match %v", w.is)
		}
	}
	if n := len(unjoin(err)); n != 5 {
		t.Errorf("%d errors; want 5:\n%v", n, err)
	}
	// The server that started was stopped again.
	wait.Eventually(t, 30*time.Second, "the started server to be stopped", func() bool {
		return strings.Contains(logs.String(), "mcp server process exited")
	})
}

// TestLoadDuplicateAcrossImport: an imported tool named like a tool of the
// tools list is an error at the import.
func TestLoadDuplicateAcrossImport(t *testing.T) {
	src := "mcp_servers:\n" + stdioServer("up", mcptest.Options{}, "    import: {}\n") +
		"tools:\n  - name: text\n    http: {url: \"http://x.example/text\"}\n"
	_, err := toolsfile.Load(testenv.Context(t, time.Minute), writeFile(t, src), toolsfile.Options{Logger: testenv.Logger()})
	checkError(t, err, wantError{strings.Count(src[:strings.Index(src, "import:")], "\n") + 1, "", "import", []string{`"text"`, "also declared"}})
	if !errors.Is(err, tool.ErrDuplicateTool) {
		t.Errorf("err does not match tool.ErrDuplicateTool: %v", err)
	}
}

// bufferLogger logs everything, as text, to b.
func bufferLogger(b *testenv.LogBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
