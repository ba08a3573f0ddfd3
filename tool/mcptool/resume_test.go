package mcptool_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/internal/testkit/mcptest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/mcptool"
)

// requestLog counts the requests an HTTP test server received: the POSTs
// that carried a tools/call, and the GETs that resumed a stream.
type requestLog struct {
	mu      sync.Mutex // protects the fields below
	calls   int        // POSTs carrying a tools/call
	resumes []string   // the Last-Event-ID of each GET that had one
}

func (l *requestLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				l.mu.Lock()
				l.calls++
				l.mu.Unlock()
			}
		case http.MethodGet:
			if id := r.Header.Get("Last-Event-ID"); id != "" {
				l.mu.Lock()
				l.resumes = append(l.resumes, id)
				l.mu.Unlock()
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (l *requestLog) counts() (calls int, resumes []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls, append([]string(nil), l.resumes...)
}

// The upstreams of openResumable.
const (
	notResumable = iota // no event store: no event ids
	resumable           // an event store
	refusing            // an event store, but every GET is refused 400
)

// openResumable connects an upstream to the test server over Streamable HTTP
// at 2025-11-25 (the newest protocol with resumable streams), of kind
// notResumable, resumable or refusing.
func openResumable(t *testing.T, kind int) (*fixture, *requestLog) {
	t.Helper()
	f := &fixture{effects: t.TempDir() + "/effects"}
	srv := mcptest.NewServer(mcptest.Options{EffectsFile: f.effects, Legacy: true})
	opts := &mcp.StreamableHTTPOptions{}
	if kind != notResumable {
		opts.EventStore = mcp.NewMemoryEventStore(nil)
	}
	log := &requestLog{}
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
	if kind == refusing {
		next := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				http.Error(w, "no resumption here", http.StatusBadRequest)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	ts := httptest.NewServer(log.wrap(h))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	u, err := mcptool.Open(testenv.Context(t, time.Minute), mcptool.Config{Name: "test", URL: ts.URL + "/mcp", Logger: testenv.Logger()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { u.Close() })
	f.u = u
	return f, log
}

// TestStreamResumed: an upstream that closes the stream of a tools/call before
// its result, having given event ids, is asked for the rest of the stream
// with Last-Event-ID: the call completes, with one effect and one tools/call
// request.
func TestStreamResumed(t *testing.T) {
	t.Parallel()
	f, log := openResumable(t, resumable)
	for _, k := range []tool.Kind{tool.Effectful, tool.Idempotent} {
		out, err := f.call(t, k, "reconnect", callCtx, `{"entity":"e1"}`)
		if err != nil || out != "resumed" {
			t.Fatalf("%s: call = %q, %v; want the result sent after the stream was resumed", k, out, err)
		}
	}
	calls, resumes := log.counts()
	if n := len(mcptest.Effects(t, f.effects)); n != 2 || calls != 2 {
		t.Errorf("%d effects and %d tools/call requests for two calls, want two of each", n, calls)
	}
	if len(resumes) < 2 {
		t.Errorf("resumed with Last-Event-ID %q; want each call's stream resumed", resumes)
	}
}

// TestStreamNotResumable: an upstream that closes the stream of a tools/call
// before its result without event ids cannot be asked for the rest: the
// outcome is unknown (a plain error), and the call is not sent again.
func TestStreamNotResumable(t *testing.T) {
	t.Parallel()
	f, log := openResumable(t, notResumable)
	out, err := f.call(t, tool.Effectful, "reconnect", callCtx, `{"entity":"e1"}`)
	if err == nil || errors.Is(err, tool.ErrNoEffect) {
		t.Fatalf("call = %q, %v; want an unknown outcome", out, err)
	}
	calls, resumes := log.counts()
	if n := len(mcptest.Effects(t, f.effects)); n != 1 || calls != 1 || len(resumes) != 0 {
		t.Errorf("%d effects, %d tools/call requests, resumed with %q; want one effect, one request, no resumption", n, calls, resumes)
	}
	// The session is still usable.
	if out, err := f.call(t, tool.ReadOnly, "single", callCtx, `{}`); err != nil || out != "just this" {
		t.Errorf("next call = %q, %v", out, err)
	}
}

// TestResumptionRefused: an upstream that gave event ids but refuses the GET
// that resumes the stream leaves the outcome unknown; the call is not sent
// again, and the session, which the refusal broke, is replaced for the next
// call.
func TestResumptionRefused(t *testing.T) {
	t.Parallel()
	f, log := openResumable(t, refusing)
	out, err := f.call(t, tool.Effectful, "reconnect", callCtx, `{"entity":"e1"}`)
	if err == nil || errors.Is(err, tool.ErrNoEffect) {
		t.Fatalf("call = %q, %v; want an unknown outcome", out, err)
	}
	calls, resumes := log.counts()
	if n := len(mcptest.Effects(t, f.effects)); n != 1 || calls != 1 || len(resumes) == 0 {
		t.Errorf("%d effects, %d tools/call requests, resumptions %q; want one effect, one request, a resumption tried", n, calls, resumes)
	}
	wait.Eventually(t, 10*time.Second, "the next call to succeed on a new session", func() bool {
		out, err := f.call(t, tool.ReadOnly, "single", callCtx, `{}`)
		return err == nil && out == "just this"
	})
}
