package mcptool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/mcptool"
)

// asideServer is a Go SDK server on protocol 2025-11-25 whose tool aside
// sends its progress, a log message and an elicitation on the session's
// standalone stream (the SDK's server sends there what a session sends
// under a context that is not a request handler's), and answers with the
// elicitation's action, or with isError and the error it got. Its tool hold
// waits until release is closed, having said so on held.
type asideServer struct {
	srv     *httptest.Server
	held    chan struct{}
	release chan struct{}
	// get answers the GETs when it is set, instead of the server (next).
	get func(w http.ResponseWriter, r *http.Request, next http.Handler)
	// gets counts the GETs, inits the initialize requests.
	gets, inits atomic.Int32
	once        sync.Once
}

func newAsideServer(t *testing.T, get func(w http.ResponseWriter, r *http.Request, next http.Handler)) *asideServer {
	t.Helper()
	a := &asideServer{held: make(chan struct{}, 4), release: make(chan struct{}), get: get}
	s := mcp.NewServer(&mcp.Implementation{Name: "aside", Version: "1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: []string{"2025-11-25"},
		Capabilities:              &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Logging: &mcp.LoggingCapabilities{}},
	})
	schema := json.RawMessage(`{"type":"object"}`)
	s.AddTool(&mcp.Tool{Name: "aside", InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		aside := context.Background() // related to no request: the standalone stream
		_ = req.Session.NotifyProgress(aside, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1})
		_ = req.Session.Log(aside, &mcp.LoggingMessageParams{Level: "info", Data: "aside"})
		res, err := req.Session.Elicit(aside, &mcp.ElicitParams{Message: "go on?", RequestedSchema: jsonschemaObject})
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "refused: " + err.Error()}}}, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "hold", InputSchema: schema}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a.held <- struct{}{}
		select {
		case <-a.release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "held"}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			a.gets.Add(1)
			if a.get != nil {
				a.get(w, r, h)
				return
			}
		case http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"method":"initialize"`)) {
				a.inits.Add(1)
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(a.srv.Close)
	t.Cleanup(a.releaseHold)
	return a
}

// releaseHold ends the calls of hold.
func (a *asideServer) releaseHold() { a.once.Do(func() { close(a.release) }) }

// jsonschemaObject is the requested schema of aside's elicitation.
var jsonschemaObject = json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}}}`)

func (a *asideServer) open(t *testing.T) (*mcptool.Upstream, *tool.Tool, *tool.Tool) {
	t.Helper()
	ctx := testenv.Context(t, time.Minute)
	u, err := mcptool.Open(ctx, mcptool.Config{Name: "aside", URL: a.srv.URL, Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	aside, err := u.Tool(tool.Spec{Name: "aside"}, "aside")
	if err != nil {
		t.Fatal(err)
	}
	hold, err := u.Tool(tool.Spec{Name: "hold"}, "hold")
	if err != nil {
		t.Fatal(err)
	}
	return u, aside, hold
}

// holdInFlight starts a call of hold for caller c, and returns once the
// server runs it; wait returns its outcome once a.release is closed.
func (a *asideServer) holdInFlight(t *testing.T, hold *tool.Tool, c tool.Caller) (wait func() (string, error)) {
	t.Helper()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := hold.Call(tool.WithCaller(testenv.Context(t, time.Minute), c), tool.Context{CallID: "call_hold"}, json.RawMessage(`{}`))
		done <- result{out, err}
	}()
	select {
	case <-a.held:
	case <-time.After(30 * time.Second):
		t.Fatal("hold never ran")
	}
	return func() (string, error) { r := <-done; return r.out, r.err }
}

// TestStandaloneStreamRequests: over Streamable HTTP, what an upstream sends
// on the session's standalone stream (the GET) rather than on a call's own
// stream is heard. Its elicitation is relayed to the caller of the call in
// flight when it is the only one, with the progress and log message that
// came alongside; refused at once, asking no one, with two calls in flight
// (it might be either's), while the progress, whose token names its call,
// still reaches that call's caller; refused at once, too, for a caller that
// declared nothing. No call stalls. A GET refused for a while (409, as the
// TypeScript SDK's server answers while it holds the session's last stream)
// is tried again until the stream is open.
func TestStandaloneStreamRequests(t *testing.T) {
	t.Run("one call in flight", func(t *testing.T) {
		t.Parallel()
		a := newAsideServer(t, nil)
		_, aside, _ := a.open(t)
		c := &stubCaller{answer: json.RawMessage(`{"action":"accept","content":{"ok":true}}`)}
		ctx := tool.WithCaller(testenv.Context(t, time.Minute), c)
		start := time.Now()
		out, err := aside.Call(ctx, tool.Context{CallID: "call_1"}, json.RawMessage(`{}`))
		if err != nil || out != "accept" {
			t.Fatalf("aside: %q, %v; want accept", out, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("the call took %s", d)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.asked) != 1 || !strings.HasPrefix(c.asked[0], "elicitation/create ") {
			t.Errorf("the caller was asked %q; want the one elicitation", c.asked)
		}
		if strings.Join(c.told, " ") != "notifications/progress notifications/message" {
			t.Errorf("the caller was told %q; want the progress and the log message", c.told)
		}
	})
	t.Run("two calls in flight", func(t *testing.T) {
		t.Parallel()
		a := newAsideServer(t, nil)
		_, aside, hold := a.open(t)
		other := &stubCaller{answer: json.RawMessage(`{"action":"accept","content":{"ok":true}}`)}
		wait := a.holdInFlight(t, hold, other)
		c := &stubCaller{answer: json.RawMessage(`{"action":"accept","content":{"ok":true}}`)}
		start := time.Now()
		out, err := aside.Call(tool.WithCaller(testenv.Context(t, time.Minute), c), tool.Context{CallID: "call_1"}, json.RawMessage(`{}`))
		var te *mcptool.ToolError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), "cannot tell which call") {
			t.Errorf("aside beside another call: %q, %v; want the upstream's failure on the refusal", out, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the refusal took %s", d)
		}
		a.releaseHold()
		if out, err := wait(); err != nil || out != "held" {
			t.Errorf("hold: %q, %v", out, err)
		}
		// The progress names its call by its token: it is the only thing
		// that reaches a caller.
		for _, s := range []*stubCaller{c, other} {
			s.mu.Lock()
			if want := map[*stubCaller]string{c: "notifications/progress"}[s]; len(s.asked) != 0 || strings.Join(s.told, " ") != want {
				t.Errorf("a caller was asked %q and told %q; want nothing but %q", s.asked, s.told, want)
			}
			s.mu.Unlock()
		}
	})
	t.Run("after the GET was refused for a while", func(t *testing.T) {
		t.Parallel()
		// The TypeScript SDK's server answers 409 while it holds a
		// standalone stream of the session that it has not seen end.
		var refused atomic.Int32
		a := newAsideServer(t, func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if refused.Add(1) <= 2 {
				http.Error(w, "Conflict: Only one SSE stream is allowed per session", http.StatusConflict)
				return
			}
			next.ServeHTTP(w, r)
		})
		_, aside, _ := a.open(t)
		wait.Eventually(t, 30*time.Second, "the third GET", func() bool { return a.gets.Load() >= 3 })
		// Until the server registered the stream, it refuses to send on it.
		c := &stubCaller{answer: json.RawMessage(`{"action":"accept","content":{"ok":true}}`)}
		wait.Eventually(t, 30*time.Second, "the elicitation relayed", func() bool {
			out, err := aside.Call(tool.WithCaller(testenv.Context(t, time.Minute), c), tool.Context{CallID: "call_1"}, json.RawMessage(`{}`))
			return err == nil && out == "accept"
		})
	})
	// A call that ended without its answer may still run upstream, and ask
	// off its stream later: while it may, such a request never reaches a
	// caller of another tenant, and still reaches one of the same tenant.
	for _, tt := range []struct {
		orphan string // the tenant of the call that ended unanswered
		relay  bool
	}{{"globex", false}, {"acme", true}} {
		t.Run("after a call of "+tt.orphan+" ended unanswered", func(t *testing.T) {
			t.Parallel()
			a := newAsideServer(t, nil)
			_, aside, hold := a.open(t)
			gctx, cancel := context.WithCancel(testenv.Context(t, time.Minute))
			ended := make(chan error, 1)
			go func() {
				_, err := hold.Call(tool.WithCaller(gctx, &stubCaller{}), tool.Context{Tenant: tt.orphan, CallID: "call_orphan"}, json.RawMessage(`{}`))
				ended <- err
			}()
			select {
			case <-a.held:
			case <-time.After(30 * time.Second):
				t.Fatal("hold never ran")
			}
			cancel()
			if err := <-ended; err == nil {
				t.Fatal("the cancelled call of hold got an answer")
			}
			c := &stubCaller{answer: json.RawMessage(`{"action":"accept","content":{"ok":true}}`)}
			start := time.Now()
			out, err := aside.Call(tool.WithCaller(testenv.Context(t, time.Minute), c), tool.Context{Tenant: "acme", CallID: "call_1"}, json.RawMessage(`{}`))
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("the call took %s", d)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if tt.relay {
				if err != nil || out != "accept" || len(c.asked) != 1 {
					t.Errorf("aside of acme: %q, %v, asked %q; want the elicitation relayed", out, err, c.asked)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "cannot tell which call") || len(c.asked) != 0 {
				t.Errorf("aside of acme: %q, %v, asked %q; want it refused without asking acme", out, err, c.asked)
			}
		})
	}
	t.Run("a caller that declared nothing", func(t *testing.T) {
		t.Parallel()
		a := newAsideServer(t, nil)
		_, aside, _ := a.open(t)
		start := time.Now()
		out, err := aside.Call(testenv.Context(t, time.Minute), tool.Context{CallID: "call_1"}, json.RawMessage(`{}`))
		var te *mcptool.ToolError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), "cannot answer elicitation/create") {
			t.Errorf("aside with no one to ask: %q, %v; want the upstream's failure on the refusal", out, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the refusal took %s", d)
		}
	})
}

// TestStandaloneStreamFailures: a standalone stream the server does not
// offer (405), whose GET fails (500, a connection reset) or that ends at
// once, again and again, never ends the session nor touches the call in
// flight meanwhile: it gets its answer, on the one session.
func TestStandaloneStreamFailures(t *testing.T) {
	for name, get := range map[string]func(w http.ResponseWriter, r *http.Request, next http.Handler){
		"405": func(w http.ResponseWriter, _ *http.Request, _ http.Handler) {
			http.Error(w, "no stream here", http.StatusMethodNotAllowed)
		},
		"500": func(w http.ResponseWriter, _ *http.Request, _ http.Handler) {
			http.Error(w, "broken", http.StatusInternalServerError)
		},
		"reset": func(w http.ResponseWriter, _ *http.Request, _ http.Handler) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		},
		"ends at once": func(w http.ResponseWriter, _ *http.Request, _ http.Handler) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := newAsideServer(t, get)
			u, _, hold := a.open(t)
			wait := a.holdInFlight(t, hold, &stubCaller{})
			time.Sleep(2 * time.Second) // GETs at 0, 0.5 s and 1.5 s, but for 405
			a.releaseHold()
			if out, err := wait(); err != nil || out != "held" {
				t.Errorf("hold: %q, %v; want its answer", out, err)
			}
			if st := u.Status(); st.State != mcptool.StateConnected {
				t.Errorf("status %+v; want connected", st)
			}
			if n := a.inits.Load(); n != 1 {
				t.Errorf("%d sessions; want the one", n)
			}
			if n := a.gets.Load(); name == "405" && n != 1 || name != "405" && n < 3 {
				t.Errorf("%d GETs; want one for 405, at least 3 else", n)
			}
		})
	}
}
