package mcpgate_test

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tesserix/toolexec/mcpgate"
)

// countResumes counts the GETs that carry a Last-Event-ID.
func countResumes(n *atomic.Int32, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			n.Add(1)
		}
		next.ServeHTTP(w, r)
	})
}

// TestStreamsResume: a gateway with PollAfter closes the stream of a call
// that waits longer; the Go SDK's client resumes it with Last-Event-ID and
// gets the answer, which ran once.
func TestStreamsResume(t *testing.T) {
	f := startFleet(t)
	gw := f.gateway(t, mcpgate.Config{PollAfter: 100 * time.Millisecond, PollRetry: 50 * time.Millisecond})
	h, err := gw.Handler(mcpgate.HTTPConfig{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	var resumes atomic.Int32
	srv := httptest.NewServer(countResumes(&resumes, h))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	cs := connectHTTP(t, srv.URL, "", nil)

	go func() {
		time.Sleep(400 * time.Millisecond)
		f.hold.open()
	}()
	r := callTool(t, cs, "hold", map[string]any{"tag": "resumed"}, nil)
	if r.IsError || metaOf(r, "kind") != "completed" || !strings.Contains(text(r), `"held":true`) {
		t.Fatalf("call = %+v; want the answer on the resumed stream", r)
	}
	if resumes.Load() == 0 {
		t.Error("the stream was not resumed: the gateway did not close it, or the client did not come back")
	}
	if n := f.hold.entered.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
}

// TestStreamIsPrimed reads the stream of a tools/call as the conformance
// suite's server-sse-polling does — in a session initialized at 2025-11-25,
// with a request that says 2025-03-26 — and finds a priming event (an id,
// empty data) first, then, when the gateway closes it, a retry field.
func TestStreamIsPrimed(t *testing.T) {
	f := startFleet(t)
	gw := f.gateway(t, mcpgate.Config{PollAfter: 100 * time.Millisecond, PollRetry: 500 * time.Millisecond})
	url := serveHTTP(t, gw, mcpgate.HTTPConfig{Tenant: "acme"}).URL
	t.Cleanup(f.hold.open)

	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	code, sid := post(t, url, init, nil)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", code, sid)
	}
	hdr := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	if code, _ := post(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr); code != http.StatusAccepted {
		t.Fatalf("initialized: %d", code)
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hold","arguments":{"tag":"primed"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream, application/json")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-03-26")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() { // until the gateway closes the stream
		lines = append(lines, sc.Text())
	}
	stream := strings.Join(lines, "\n")
	first, _, _ := strings.Cut(stream, "\n\n")
	if !strings.Contains(first, "\nid: ") && !strings.HasPrefix(first, "id: ") || strings.Contains(first, "data: {") {
		t.Errorf("the stream does not open with a priming event (an id, no data):\n%s", stream)
	}
	if !strings.Contains(stream, "retry: 500") {
		t.Errorf("the closed stream carries no retry field:\n%s", stream)
	}
}
