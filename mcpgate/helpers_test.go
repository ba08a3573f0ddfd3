package mcpgate_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/internal/app/demo"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/mcpgate"
	"github.com/tesserix/toolexec/tool"
)

// Tokens of the tests' tokens file.
const (
	acmeToken   = "acme-token-0123456789abcdef"
	globexToken = "globex-token-0123456789abcdef"
)

// fleet is one embedded NATS server with one executor serving the demo
// airline and the hold tool, and a gateway on a connection of its own.
type fleet struct {
	srv     *server.Server
	airline *demo.Airline
	hold    *holdTool
	gw      *mcpgate.Gateway
}

// holdTool is an effectful tool (no key arguments: one effect per run) whose
// calls wait until released, and answer a JSON object.
type holdTool struct {
	entered atomic.Int32
	mu      sync.Mutex
	release chan struct{}
}

func (h *holdTool) open() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.release)
}

// reset makes the calls that start from now on wait again.
func (h *holdTool) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.release = make(chan struct{})
}

func (h *holdTool) tool(t *testing.T) *tool.Tool {
	tl, err := tool.New(tool.Spec{
		Name: "hold", Description: "Wait until the test lets go.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"tag":{"type":"string"}}}`),
		Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"tag"}},
	}, func(ctx context.Context, tc tool.Context, _ json.RawMessage) (string, error) {
		h.entered.Add(1)
		h.mu.Lock()
		ch := h.release
		h.mu.Unlock()
		select {
		case <-ch:
			return `{"held":true,"call":"` + tc.CallID + `"}`, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func ctxT(t testing.TB) context.Context { return testenv.Context(t, 2*time.Minute) }

func startFleet(t *testing.T) *fleet {
	t.Helper()
	f := &fleet{srv: natstest.Start(t), airline: demo.New(), hold: &holdTool{release: make(chan struct{})}}
	ctx := ctxT(t)
	tools := append(f.airline.Tools(), f.hold.tool(t))
	ex, err := toolexec.NewExecutor(ctx, natstest.Connect(t, f.srv), toolexec.ExecutorConfig{Tools: tools, Logger: testenv.Logger()})
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ex.Run(runCtx) }()
	t.Cleanup(func() {
		f.hold.mu.Lock()
		select {
		case <-f.hold.release:
		default:
			close(f.hold.release)
		}
		f.hold.mu.Unlock()
		stop()
		if err := <-done; err != nil {
			t.Errorf("executor: %v", err)
		}
		ex.Close()
	})
	f.gw = f.gateway(t, mcpgate.Config{})
	return f
}

// gateway returns another gateway on a connection of its own.
func (f *fleet) gateway(t *testing.T, cfg mcpgate.Config) *mcpgate.Gateway {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testenv.Logger()
	}
	if cfg.ProgressEvery == 0 {
		cfg.ProgressEvery = 50 * time.Millisecond
	}
	gw, err := mcpgate.New(natstest.Connect(t, f.srv), cfg)
	if err != nil {
		t.Fatalf("mcpgate.New: %v", err)
	}
	return gw
}

// tokens returns the tests' tokens file: acme's token in plain text,
// globex's hashed.
func tokens(t testing.TB) *mcpgate.Tokens {
	t.Helper()
	tk, err := mcpgate.ParseTokens(strings.NewReader("acme "+acmeToken+"\nglobex "+mcpgate.HashToken(globexToken)+"\n"), "tokens")
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// serveHTTP serves gw's handler with cfg on a test server.
func serveHTTP(t testing.TB, gw *mcpgate.Gateway, cfg mcpgate.HTTPConfig) *httptest.Server {
	t.Helper()
	h, err := gw.Handler(cfg)
	if err != nil {
		t.Fatalf("Handler: %v", err)
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// legacyVersion is the newest protocol version with sessions: the tests of
// what a session does speak it.
const legacyVersion = "2025-11-25"

// connectHTTP opens a Go SDK client session to url with token ("" for none),
// at protocol version legacyVersion.
func connectHTTP(t testing.TB, url, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectHTTPAt(t, url, token, legacyVersion, opts)
}

// connectHTTPAt is connectHTTP at protocol version (the SDK's newest for "").
func connectHTTPAt(t testing.TB, url, token, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport}
	if token != "" {
		hc.Transport = bearer{token, http.DefaultTransport}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "toolexec-test", Version: "1"}, opts)
	cs, err := c.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// connectStdio runs gw.ServeStdio for tenant over pipes and opens a Go SDK
// client session on the other ends.
func connectStdio(t testing.TB, gw *mcpgate.Gateway, tenant string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.ServeStdio(ctx, tenant, toServer, fromServer) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "toolexec-test", Version: "1"}, opts)
	cs, err := c.Connect(ctxT(t), &mcp.IOTransport{Reader: toClient, Writer: fromClient}, nil)
	if err != nil {
		t.Fatalf("connecting over stdio: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		stop()
		if err := <-done; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	return cs
}

// transports opens one session per transport to f's gateway, as acme.
func (f *fleet) transports(t *testing.T, opts *mcp.ClientOptions) map[string]*mcp.ClientSession {
	t.Helper()
	url := serveHTTP(t, f.gw, mcpgate.HTTPConfig{Tokens: tokens(t)}).URL
	return map[string]*mcp.ClientSession{
		"http":  connectHTTP(t, url, acmeToken, opts),
		"stdio": connectStdio(t, f.gw, "acme", opts),
	}
}

// callTool calls name with args and meta; it fails the test on a protocol
// error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	r, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	return r
}

func text(r *mcp.CallToolResult) string {
	if len(r.Content) == 0 {
		return ""
	}
	if tc, ok := r.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

func metaOf(r *mcp.CallToolResult, name string) any { return r.Meta[mcpgate.MetaPrefix+name] }
