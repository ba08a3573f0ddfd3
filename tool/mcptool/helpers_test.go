package mcptool_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/internal/testkit/mcptest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/mcptool"
)

// TestMain turns the test binary into the test MCP server when a test starts
// it as a stdio upstream.
func TestMain(m *testing.M) { mcptest.Main(m) }

// The ways a test reaches the test server: over stdio (the test binary
// started again) or Streamable HTTP (in process), each speaking the newest
// protocol or only 2025-11-25, as most servers deployed today do.
var kinds = []string{"stdio", "stdio-legacy", "http", "http-legacy"}

func isStdio(kind string) bool  { return kind == "stdio" || kind == "stdio-legacy" }
func isLegacy(kind string) bool { return kind == "stdio-legacy" || kind == "http-legacy" }

// fixture is an upstream connected to a test server.
type fixture struct {
	u       *mcptool.Upstream
	effects string // the server's effects file
	// srv and faults are the HTTP server and its fault switch; nil for stdio.
	srv    *httptest.Server
	faults *faultHandler
}

// open starts a test server of kind with o (its effects file is set here) and
// connects an upstream to it with cfg (its name, command or URL are set
// here). The upstream is closed when the test ends.
func open(t *testing.T, kind string, o mcptest.Options, cfg mcptool.Config) *fixture {
	t.Helper()
	f := &fixture{effects: filepath.Join(t.TempDir(), "effects")}
	o.EffectsFile = f.effects
	o.Legacy = isLegacy(kind)
	cfg.Name = "test"
	if cfg.Logger == nil {
		cfg.Logger = testenv.Logger()
	}
	release := func() {}
	if isStdio(kind) {
		cfg.Command, cfg.Env = mcptest.Command(o)
	} else {
		f.srv, f.faults, release = serveHTTP(t, o)
		cfg.URL = f.srv.URL + "/mcp"
	}
	u, err := mcptool.Open(testenv.Context(t, time.Minute), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { u.Close() })
	t.Cleanup(release) // first: closing a session waits for its handlers
	f.u = u
	return f
}

// serveHTTP serves the test server with o over Streamable HTTP, behind a
// fault switch, until the test ends. release ends the runs of "hang" (see
// mcptest.Options.Release); the server is closed after it.
func serveHTTP(t *testing.T, o mcptest.Options) (srv *httptest.Server, h *faultHandler, release func()) {
	t.Helper()
	ch := make(chan struct{})
	o.Release = ch
	h = &faultHandler{start: func() http.Handler {
		s := mcptest.NewServer(o)
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	}}
	h.restart()
	srv = httptest.NewServer(h)
	t.Cleanup(srv.Close)
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release)
	return srv, h, release
}

// faultHandler answers every tools/call POST with status, when it is not
// zero, without passing it on.
type faultHandler struct {
	start  func() http.Handler
	next   atomic.Pointer[http.Handler]
	status atomic.Int32
}

// restart replaces the server with a new one, which knows none of the old
// one's sessions (a server restarted behind the same URL).
func (h *faultHandler) restart() {
	next := h.start()
	h.next.Store(&next)
}

func (h *faultHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if code := int(h.status.Load()); code != 0 && r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			http.Error(w, "injected fault", code)
			return
		}
	}
	(*h.next.Load()).ServeHTTP(w, r)
}

// call calls the upstream's tool remote once, as a tool of kind k (nil: no
// policy), with tc and args.
func (f *fixture) call(t *testing.T, k tool.Kind, remote string, tc tool.Context, args string) (string, error) {
	t.Helper()
	return callTool(t, f.u, k, remote, tc, args)
}

func callTool(t *testing.T, u *mcptool.Upstream, k tool.Kind, remote string, tc tool.Context, args string) (string, error) {
	t.Helper()
	spec := tool.Spec{Name: "t"}
	if k != "" {
		spec.Idempotency = &tool.Policy{Kind: k}
	}
	tl, err := u.Tool(spec, remote)
	if err != nil {
		t.Fatal(err)
	}
	return tl.Call(testenv.Context(t, time.Minute), tc, json.RawMessage(args))
}

// callCtx is what the tests' calls carry.
var callCtx = tool.Context{IdempotencyKey: "4f0c5b0e", Tenant: "acme", RunID: "run_1", CallID: "call_1", Tool: "t", Attempt: 1}

// bufferLogger logs everything, as text, to b.
func bufferLogger(b *testenv.LogBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
