package dispatch_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/httptool"
)

// TestTraceReachesHTTPDownstream: the trace continues from the call's
// traceparent through the dispatcher to the request an HTTP tool sends — the
// downstream sees the caller's trace, with the body span as its parent.
func TestTraceReachesHTTPDownstream(t *testing.T) {
	var (
		mu   sync.Mutex // protects seen
		seen []string
	)
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("traceparent"))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"pnr":"K7Q2ZD"}`))
	}))
	defer downstream.Close()
	book, err := httptool.New(tool.Spec{
		Name: "book", Parameters: json.RawMessage(bookSchema),
		Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}},
	}, httptool.Endpoint{URL: downstream.URL})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, book)
	sr := tracetest.NewSpanRecorder()
	d := e.observed(t, e.store, nil, sr)
	c := call("book", "c1", `{"flight":"BA117"}`)
	c.TraceParent = callerTP
	if a := mustDispatch(t, d, c); a.Outcome != `{"pnr":"K7Q2ZD"}` {
		t.Fatalf("answer %+v", a)
	}
	body := spansByName(sr)[dispatch.SpanBody]
	if len(body) != 1 {
		t.Fatalf("spans %v", names(sr))
	}
	want := "00-" + callerTrace + "-" + body[0].SpanContext().SpanID().String() + "-01"
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != want {
		t.Fatalf("downstream saw traceparent %q, want %q (the caller's trace, the body span as parent)", seen, want)
	}
}
