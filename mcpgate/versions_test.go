package mcpgate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/mcpgate"
)

// discover is a server/discover request of the 2026-07-28 protocol, which
// names its version in _meta (and, over HTTP, in the MCP-Protocol-Version
// header, with its method in Mcp-Method).
const discover = `{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{"_meta":{` +
	`"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` +
	`"io.modelcontextprotocol/clientCapabilities":{}}}}`

// discoverResult is what a test reads of a server/discover answer.
type discoverResult struct {
	Result *struct {
		SupportedVersions []string `json:"supportedVersions"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestProtocolVersionsAlike: server/discover lists the same versions over
// Streamable HTTP and over stdio, the newest (2026-07-28) first: every
// version the SDK speaks.
func TestProtocolVersionsAlike(t *testing.T) {
	f := startFleet(t)
	url := serveHTTP(t, f.gw, mcpgate.HTTPConfig{Tenant: "acme"}).URL
	want := mcp.SupportedProtocolVersions()
	if want[0] != "2026-07-28" {
		t.Fatalf("the SDK's newest version is %s; this test expects 2026-07-28", want[0])
	}
	for _, tt := range []struct {
		name string
		ask  func(t *testing.T) discoverResult
	}{
		{"http", func(t *testing.T) discoverResult { return discoverHTTP(t, url) }},
		{"stdio", func(t *testing.T) discoverResult { return discoverStdio(t, f.gw) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.ask(t)
			if got.Error != nil || got.Result == nil {
				t.Fatalf("server/discover: %+v", got.Error)
			}
			if !slices.Equal(got.Result.SupportedVersions, want) {
				t.Errorf("server/discover lists %v, want %v", got.Result.SupportedVersions, want)
			}
		})
	}
}

// discoverHTTP sends discover to url as a 2026-07-28 client does.
func discoverHTTP(t *testing.T, url string) discoverResult {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, url, strings.NewReader(discover))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "server/discover")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("server/discover over HTTP: %d %s", resp.StatusCode, body)
	}
	// The answer is a JSON body or one server-sent event carrying it.
	msg := body
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msg = nil
		for line := range strings.Lines(string(body)) {
			if data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
				msg = []byte(data)
			}
		}
	}
	var r discoverResult
	if err := json.Unmarshal(msg, &r); err != nil {
		t.Fatalf("server/discover over HTTP answered %q: %v", body, err)
	}
	return r
}

// discoverStdio sends discover to a stdio session of gw.
func discoverStdio(t *testing.T, gw *mcpgate.Gateway) discoverResult {
	t.Helper()
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	ctx, stop := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() { done <- gw.ServeStdio(ctx, "acme", toServer, fromServer) }()
	defer func() {
		_ = fromClient.Close()
		stop()
		_ = toClient.Close()
		<-done
	}()
	go func() { _, _ = io.WriteString(fromClient, discover+"\n") }()
	line, err := bufio.NewReader(toClient).ReadBytes('\n')
	if err != nil {
		t.Fatalf("server/discover over stdio: %v", err)
	}
	var r discoverResult
	if err := json.Unmarshal(line, &r); err != nil {
		t.Fatalf("server/discover over stdio answered %q: %v", line, err)
	}
	return r
}

// TestSessionlessHTTP: the Go SDK's client at its newest version
// (2026-07-28, which has no sessions) is served over HTTP, behind the same
// bearer tokens as the rest. Calls naming one
// run share its keys, and a repeat is deduplicated; a call naming no run has
// a run of its own, since no session ties it to the calls before it.
func TestSessionlessHTTP(t *testing.T) {
	f := startFleet(t)
	url := serveHTTP(t, f.gw, mcpgate.HTTPConfig{Tokens: tokens(t)}).URL
	if status, _ := post(t, url, discover, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}); status != http.StatusUnauthorized {
		t.Fatalf("a 2026-07-28 request without a token: %d, want 401", status)
	}
	cs := connectHTTPAt(t, url, acmeToken, "", nil)
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s over HTTP, want 2026-07-28", v)
	}
	args := map[string]any{"flight": "KL1001", "seats": 1, "request_id": "r"}
	run := mcp.Meta{mcpgate.MetaRunID: "trip-7"}
	for i, want := range []string{"completed", "deduplicated"} {
		r := callTool(t, cs, "book", args, run)
		if r.IsError || metaOf(r, "kind") != want || metaOf(r, "run_id") != "trip-7" {
			t.Fatalf("call %d with a run_id: %v %q, want %s", i+1, r.Meta, text(r), want)
		}
	}
	a, b := callTool(t, cs, "book", args, nil), callTool(t, cs, "book", args, nil)
	if metaOf(a, "kind") != "completed" || metaOf(b, "kind") != "completed" || metaOf(a, "run_id") == metaOf(b, "run_id") {
		t.Fatalf("two calls without a run_id: %v and %v; want two runs, each booked", a.Meta, b.Meta)
	}
	if n := f.airline.Bookings("KL1001"); n != 3 {
		t.Fatalf("%d bookings, want 3", n)
	}
}
