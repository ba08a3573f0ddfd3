package mcpgate_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/mcpgate"
)

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// post sends body to url with the given headers and returns the status and
// the session id the server chose.
func post(t *testing.T, url, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// TestHTTPFences tries to climb every fence of the HTTP transport: no token,
// a wrong one, a token's near miss, a foreign Origin, a rebinding Host, a
// body over the bound, a flood of wrong tokens to shut the right one out, and
// another tenant's session.
func TestHTTPFences(t *testing.T) {
	f := startFleet(t)
	url := serveHTTP(t, f.gw, mcpgate.HTTPConfig{Tokens: tokens(t), AllowedOrigins: []string{"https://app.example.com"}, MaxRequestBytes: 8 << 10}).URL
	auth := func(token string) map[string]string { return map[string]string{"Authorization": "Bearer " + token} }
	with := func(h map[string]string, k, v string) map[string]string { h[k] = v; return h }

	if code, sid := post(t, url, initialize, auth(acmeToken)); code != http.StatusOK || sid == "" {
		t.Fatalf("acme's initialize: %d, session %q; want 200 and a session", code, sid)
	}
	if code, _ := post(t, url, initialize, auth(globexToken)); code != http.StatusOK {
		t.Fatalf("globex's initialize (hashed token): %d, want 200", code)
	}
	for _, tc := range []struct {
		name   string
		header map[string]string
		body   string
		want   int
	}{
		{"no token", map[string]string{}, initialize, http.StatusUnauthorized},
		{"unknown token", auth("nobody-token-0123456789abcdef"), initialize, http.StatusUnauthorized},
		{"a token's prefix", auth(acmeToken[:len(acmeToken)-1]), initialize, http.StatusUnauthorized},
		{"the hash instead of the token", auth(mcpgate.HashToken(globexToken)), initialize, http.StatusUnauthorized},
		{"basic instead of bearer", map[string]string{"Authorization": "Basic " + acmeToken}, initialize, http.StatusUnauthorized},
		{"a foreign origin", with(auth(acmeToken), "Origin", "https://evil.example.com"), initialize, http.StatusForbidden},
		{"an allowed origin's look-alike", with(auth(acmeToken), "Origin", "https://app.example.com.evil.net"), initialize, http.StatusForbidden},
		{"a null origin", with(auth(acmeToken), "Origin", "null"), initialize, http.StatusForbidden},
		{"an allowed origin", with(auth(acmeToken), "Origin", "https://app.example.com"), initialize, http.StatusOK},
		{"the gateway's own origin", with(auth(acmeToken), "Origin", url), initialize, http.StatusOK},
		{"the gateway's host on another port", with(auth(acmeToken), "Origin", url+"1"), initialize, http.StatusForbidden},
		{"a rebinding host", with(auth(acmeToken), "Host", "evil.example.com"), initialize, http.StatusForbidden},
		{"a rebinding host with its own origin", with(with(auth(acmeToken), "Host", "evil.example.com"), "Origin", "http://evil.example.com"), initialize, http.StatusForbidden},
		{"a body over the bound", auth(acmeToken), strings.Replace(initialize, `"raw"`, `"`+strings.Repeat("x", 9<<10)+`"`, 1), http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, _ := post(t, url, tc.body, tc.header); code != tc.want {
				t.Fatalf("status %d, want %d", code, tc.want)
			}
		})
	}

	// Wrong tokens are answered 401 however many come: the gateway has no
	// throttle that a flood could close to the right one.
	t.Run("the right token after a flood of wrong ones", func(t *testing.T) {
		for i := range 200 {
			if code, _ := post(t, url, initialize, auth(fmt.Sprintf("guess-%d-0123456789abcdef", i))); code != http.StatusUnauthorized {
				t.Fatalf("wrong token %d: status %d, want 401", i, code)
			}
		}
		if code, _ := post(t, url, initialize, auth(acmeToken)); code != http.StatusOK {
			t.Fatalf("acme's initialize after the flood: %d, want 200", code)
		}
	})

	t.Run("another tenant's session", func(t *testing.T) {
		_, sid := post(t, url, initialize, auth(acmeToken))
		list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
		if code, _ := post(t, url, list, with(auth(globexToken), "Mcp-Session-Id", sid)); code == http.StatusOK {
			t.Fatalf("globex used acme's session %s: status %d", sid, code)
		}
	})
}

// TestTenantsByToken: a call is made for the tenant of the token that
// carried it, whatever the request says.
func TestTenantsByToken(t *testing.T) {
	f := startFleet(t)
	url := serveHTTP(t, f.gw, mcpgate.HTTPConfig{Tokens: tokens(t)}).URL
	nc := natstest.Connect(t, f.srv)
	answers := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe("toolexec.event.>", answers)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	cs := connectHTTP(t, url, globexToken, nil)
	r := callTool(t, cs, "lookup_fare", map[string]any{"flight": "BA117"}, map[string]any{"tenant": "acme"})
	if r.IsError {
		t.Fatalf("lookup_fare: %q", text(r))
	}
	m := <-answers
	if !strings.HasPrefix(m.Subject, "toolexec.event.globex.completed.lookup_fare.") {
		t.Fatalf("the answer went to %s, want globex's", m.Subject)
	}
}

// TestHandlerRefusesConfigs: no anonymous mode in which a client names its
// tenant; no tenant and tokens at once; origins must be origins.
func TestHandlerRefusesConfigs(t *testing.T) {
	f := startFleet(t)
	for _, cfg := range []mcpgate.HTTPConfig{
		{},
		{Tenant: "acme", Tokens: tokens(t)},
		{Tenant: "acme.globex"},
		{Tenant: "acme", AllowedOrigins: []string{"*"}},
		{Tenant: "acme", AllowedOrigins: []string{"app.example.com"}},
	} {
		if _, err := f.gw.Handler(cfg); !errors.Is(err, mcpgate.ErrInvalidConfig) {
			t.Errorf("Handler(%+v): %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// TestParseTokens: the tokens file's rules.
func TestParseTokens(t *testing.T) {
	long := strings.Repeat("k", mcpgate.MinTokenLength)
	for _, tc := range []struct {
		name, file string
		ok         bool
	}{
		{"plain and hashed, comments, blanks", "# tenants\n\nacme " + long + "\nglobex " + mcpgate.HashToken("x") + "\n", true},
		{"empty", "# nothing\n", false},
		{"short token", "acme short-token\n", false},
		{"bad tenant", "ac.me " + long + "\n", false},
		{"three fields", "acme " + long + " extra\n", false},
		{"bad hash", "acme sha256:abcd\n", false},
		{"one token twice", "acme " + long + "\nglobex " + long + "\n", false},
		{"a token and its hash", "acme " + long + "\nglobex " + mcpgate.HashToken(long) + "\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk, err := mcpgate.ParseTokens(bytes.NewBufferString(tc.file), "tokens")
			if tc.ok != (err == nil) {
				t.Fatalf("ParseTokens: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, mcpgate.ErrBadTokens) {
				t.Fatalf("error %v does not match ErrBadTokens", err)
			}
			if tc.ok {
				if tenant, ok := tk.Tenant(long); !ok || tenant != "acme" {
					t.Errorf("Tenant(acme's token) = %q, %v", tenant, ok)
				}
				if tenant, ok := tk.Tenant("x"); !ok || tenant != "globex" {
					t.Errorf("Tenant(globex's token) = %q, %v", tenant, ok)
				}
				if _, ok := tk.Tenant(long + "k"); ok {
					t.Error("a longer token was accepted")
				}
			}
		})
	}
}

// TestSessionCap: a tenant holding MaxSessions open sessions cannot open one
// more (429 with Retry-After), while its open sessions go on working, another
// tenant opens its own, and closing one makes room.
func TestSessionCap(t *testing.T) {
	f := startFleet(t)
	url := serveHTTP(t, f.gw, mcpgate.HTTPConfig{Tokens: tokens(t), MaxSessions: 2}).URL
	open := []*mcp.ClientSession{connectHTTP(t, url, acmeToken, nil), connectHTTP(t, url, acmeToken, nil)}

	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(initialize))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+acmeToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "2 open MCP sessions") {
		t.Fatalf("a third acme session: %d Retry-After=%q %q; want 429 naming the bound", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if r := callTool(t, open[1], "lookup_fare", map[string]any{"flight": "BA117"}, nil); r.IsError {
		t.Fatalf("an open session at the bound: %q", text(r))
	}
	if r := callTool(t, connectHTTP(t, url, globexToken, nil), "lookup_fare", map[string]any{"flight": "BA117"}, nil); r.IsError {
		t.Fatalf("globex while acme is at its bound: %q", text(r))
	}

	if err := open[0].Close(); err != nil {
		t.Fatal(err)
	}
	wait.EventuallyNoError(t, 10*time.Second, "a new session after one closed", func() error {
		if status, _ := post(t, url, initialize, map[string]string{"Authorization": "Bearer " + acmeToken}); status != http.StatusOK {
			return fmt.Errorf("refused: %d", status)
		}
		return nil
	})
}

// TestSessionCapBurst: initialize requests sent all at once cannot open more
// sessions than the bound between them.
func TestSessionCapBurst(t *testing.T) {
	f := startFleet(t)
	url := serveHTTP(t, f.gw, mcpgate.HTTPConfig{Tenant: "acme", MaxSessions: 3}).URL
	statuses := make(chan int, 12)
	var wg sync.WaitGroup
	for range cap(statuses) {
		wg.Go(func() {
			status, _ := post(t, url, initialize, nil)
			statuses <- status
		})
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if count[http.StatusOK] != 3 || count[http.StatusTooManyRequests] != 9 {
		t.Fatalf("12 initialize requests at once against a bound of 3: %v; want 3 OK and 9 refused", count)
	}
}
