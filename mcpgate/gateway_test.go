package mcpgate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/mcpgate"
)

var hexKey = regexp.MustCompile(`^[0-9a-f]{64}$`)

// TestToolsListed: tools/list over both transports lists the executors'
// tools, with the annotations their kinds call for and their kind in _meta.
func TestToolsListed(t *testing.T) {
	f := startFleet(t)
	for name, cs := range f.transports(t, nil) {
		t.Run(name, func(t *testing.T) {
			res, err := cs.ListTools(ctxT(t), nil)
			if err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			got := map[string]*mcp.Tool{}
			for _, tl := range res.Tools {
				got[tl.Name] = tl
			}
			for _, want := range []struct {
				name, kind           string
				readOnly, idempotent bool
				destructiveFalse     bool
			}{
				{"lookup_fare", "read_only", true, false, false},
				{"update_profile", "idempotent", false, true, true},
				{"book", "effectful", false, false, false},
				{"hold", "effectful", false, false, false},
			} {
				tl := got[want.name]
				if tl == nil {
					t.Errorf("%s is not listed (listed: %v)", want.name, res.Tools)
					continue
				}
				a := tl.Annotations
				if a == nil || a.ReadOnlyHint != want.readOnly || a.IdempotentHint != want.idempotent ||
					(want.destructiveFalse != (a.DestructiveHint != nil && !*a.DestructiveHint)) {
					t.Errorf("%s: annotations %+v, want readOnly=%v idempotent=%v destructive=false:%v", want.name, a, want.readOnly, want.idempotent, want.destructiveFalse)
				}
				if tl.Meta[mcpgate.MetaKind] != want.kind {
					t.Errorf("%s: _meta %v, want kind %s", want.name, tl.Meta, want.kind)
				}
				if schema, ok := tl.InputSchema.(map[string]any); !ok || schema["type"] != "object" {
					t.Errorf("%s: input schema %v, want an object schema", want.name, tl.InputSchema)
				}
			}
			if keys := got["book"].Meta[mcpgate.MetaKeyArguments]; keys == nil {
				t.Errorf("book: _meta %v names no key arguments", got["book"].Meta)
			}
		})
	}
}

// TestAnswers: over both transports, a booking completes, its repeat in the
// same session is deduplicated (one seat taken), a booking whose answer is
// lost is indeterminate and says so in words a model cannot misread, its
// retry is indeterminate again without booking, a bad call is rejected, an
// unknown tool is a JSON-RPC error, and a JSON object outcome is also
// structured content.
func TestAnswers(t *testing.T) {
	f := startFleet(t)
	f.hold.open()
	for name, cs := range f.transports(t, nil) {
		t.Run(name, func(t *testing.T) {
			flight := map[string]string{"http": "BA117", "stdio": "LH400"}[name]
			args := map[string]any{"flight": flight, "seats": 2, "request_id": "r-1"}
			first := callTool(t, cs, "book", args, nil)
			if first.IsError || metaOf(first, "kind") != "completed" || !hexKey.MatchString(metaOf(first, "idempotency_key").(string)) {
				t.Fatalf("first booking: %+v %q", first.Meta, text(first))
			}
			pnr := text(first)
			args["request_id"] = "r-2"
			again := callTool(t, cs, "book", args, nil)
			if again.IsError || metaOf(again, "kind") != "deduplicated" || text(again) != pnr ||
				metaOf(again, "idempotency_key") != metaOf(first, "idempotency_key") {
				t.Fatalf("repeat: %+v %q, want deduplicated with PNR %s", again.Meta, text(again), pnr)
			}
			if n := f.airline.Bookings(flight); n != 1 {
				t.Fatalf("%d bookings of %s, want 1", n, flight)
			}

			lost := map[string]any{"flight": flight + "9", "seats": 1, "request_id": "r-3", "fail_after_effect": true}
			for i := range 2 {
				r := callTool(t, cs, "book", lost, nil)
				txt := text(r)
				if !r.IsError || metaOf(r, "kind") != "indeterminate" || metaOf(r, "body_entered") != true ||
					metaOf(r, "reason") == nil || !strings.Contains(txt, "UNKNOWN") ||
					!strings.Contains(txt, "will not run it again") || !strings.Contains(txt, "operator must settle") {
					t.Fatalf("lost booking, call %d: %+v %q", i+1, r.Meta, txt)
				}
			}
			if n := f.airline.Bookings(flight + "9"); n != 1 {
				t.Fatalf("%d bookings after the lost answer and its retry, want 1", n)
			}

			bad := callTool(t, cs, "book", map[string]any{"flight": "nope"}, nil)
			if !bad.IsError || metaOf(bad, "kind") != "rejected" || metaOf(bad, "code") != "schema_violation" {
				t.Fatalf("bad arguments: %+v %q", bad.Meta, text(bad))
			}

			_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "fly", Arguments: map[string]any{}})
			var we *jsonrpc.Error
			if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("unknown tool: %v, want a JSON-RPC invalid params error", err)
			}

			held := callTool(t, cs, "hold", map[string]any{"tag": name}, nil)
			if sc, ok := held.StructuredContent.(map[string]any); held.IsError || !ok || sc["held"] != true {
				t.Fatalf("hold: structured content %#v, want the outcome's JSON object", held.StructuredContent)
			}
		})
	}
}

// TestRunIDKeepsTheRun: the run is the session's by default, so a new
// session books anew; a run_id in _meta keeps one run, and its keys, across
// sessions and gateways.
func TestRunIDKeepsTheRun(t *testing.T) {
	f := startFleet(t)
	url := serveHTTP(t, f.gw, mcpgate.HTTPConfig{Tenant: "acme"}).URL
	url2 := serveHTTP(t, f.gateway(t, mcpgate.Config{}), mcpgate.HTTPConfig{Tenant: "acme"}).URL
	args := map[string]any{"flight": "AF12", "seats": 1, "request_id": "r"}
	run := mcp.Meta{mcpgate.MetaRunID: "trip-42"}

	a := callTool(t, connectHTTP(t, url, "", nil), "book", args, run)
	b := callTool(t, connectHTTP(t, url2, "", nil), "book", args, run)
	if metaOf(a, "kind") != "completed" || metaOf(b, "kind") != "deduplicated" || metaOf(b, "run_id") != "trip-42" {
		t.Fatalf("same run_id, two gateways: %v then %v; want completed then deduplicated", a.Meta, b.Meta)
	}
	c := callTool(t, connectHTTP(t, url, "", nil), "book", args, nil)
	if metaOf(c, "kind") != "completed" || metaOf(c, "run_id") == "trip-42" {
		t.Fatalf("a new session without run_id: %v; want a booking of its own run", c.Meta)
	}
	if n := f.airline.Bookings("AF12"); n != 2 {
		t.Fatalf("%d bookings, want 2 (one per run)", n)
	}
	bad := callTool(t, connectHTTP(t, url, "", nil), "book", args, mcp.Meta{mcpgate.MetaRunID: "trip.42"})
	if !bad.IsError || metaOf(bad, "kind") != "rejected" {
		t.Fatalf("a run_id that is not a token: %v %q; want rejected", bad.Meta, text(bad))
	}
}

// TestCancelStopsWaitingNotTheCall: a cancelled request stops waiting, the
// call runs on, and a request naming its call_id gets its answer without
// running it again; progress notifications reach the client meanwhile.
func TestCancelStopsWaitingNotTheCall(t *testing.T) {
	f := startFleet(t)
	var mu sync.Mutex
	var progress []*mcp.ProgressNotificationParams
	opts := &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, r.Params)
	}}
	url := serveHTTP(t, f.gw, mcpgate.HTTPConfig{Tenant: "acme"}).URL
	cs := connectHTTP(t, url, "", opts)
	ids := mcp.Meta{mcpgate.MetaCallID: "call-cancel-1", mcpgate.MetaRunID: "run-cancel"}

	ctx, cancel := context.WithCancel(ctxT(t))
	params := &mcp.CallToolParams{Name: "hold", Arguments: map[string]any{"tag": "c"}, Meta: ids}
	params.SetProgressToken("tok-1")
	done := make(chan error, 1)
	go func() { _, err := cs.CallTool(ctx, params); done <- err }()
	wait.EventuallyNoError(t, time.Minute, "two progress notifications and the call entered", func() error {
		mu.Lock()
		n := len(progress)
		mu.Unlock()
		if n >= 2 && f.hold.entered.Load() == 1 {
			return nil
		}
		return fmt.Errorf("%d progress notifications, %d calls entered", n, f.hold.entered.Load())
	})
	mu.Lock()
	if p := progress[0]; p.ProgressToken != "tok-1" || !strings.Contains(p.Message, "call-cancel-1") {
		t.Errorf("progress notification %+v, want token tok-1 naming the call", p)
	}
	mu.Unlock()
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled request returned no error")
	}
	f.hold.open() // the call goes on and completes

	r := callTool(t, connectHTTP(t, url, "", nil), "hold", map[string]any{"tag": "c"}, ids)
	if r.IsError || metaOf(r, "kind") != "completed" || metaOf(r, "call_id") != "call-cancel-1" {
		t.Fatalf("retry by call_id: %v %q, want the call's completed answer", r.Meta, text(r))
	}
	if n := f.hold.entered.Load(); n != 1 {
		t.Fatalf("hold entered %d times, want 1", n)
	}
	other := callTool(t, connectHTTP(t, url, "", nil), "book", map[string]any{"flight": "BA1", "seats": 1, "request_id": "x"}, ids)
	if !other.IsError || !strings.Contains(text(other), "names a call of tool hold") {
		t.Fatalf("a call_id of another tool: %v %q", other.Meta, text(other))
	}
}

// TestMaxWait: a call whose answer does not come within MaxWait is an error
// result that names the call; the call goes on, and a retry naming its
// call_id and run_id gets its answer without running it again.
func TestMaxWait(t *testing.T) {
	f := startFleet(t)
	gw := f.gateway(t, mcpgate.Config{MaxWait: 300 * time.Millisecond})
	cs := connectStdio(t, gw, "acme", nil)
	r := callTool(t, cs, "hold", map[string]any{"tag": "slow"}, nil)
	callID, runID := metaOf(r, "call_id"), metaOf(r, "run_id")
	if !r.IsError || metaOf(r, "kind") != nil || callID == nil || runID == nil || !strings.Contains(text(r), "may still run") {
		t.Fatalf("a call past MaxWait: %v %q; want an error result naming the call", r.Meta, text(r))
	}
	f.hold.open()
	again := callTool(t, cs, "hold", map[string]any{"tag": "slow"}, mcp.Meta{mcpgate.MetaCallID: callID, mcpgate.MetaRunID: runID})
	if again.IsError || metaOf(again, "kind") != "completed" || metaOf(again, "call_id") != callID {
		t.Fatalf("the retry by call_id: %v %q; want the call's completed answer", again.Meta, text(again))
	}
	if n := f.hold.entered.Load(); n != 1 {
		t.Fatalf("hold entered %d times, want 1", n)
	}
}

// TestCallIDRetryFromAnotherSession: a client that set only a call_id, lost its
// session while the call ran, and retries that call_id from a new session
// (whose run is another) gets the first call's answer: the call runs once and
// the retry does not wait for an answer under its own run that never comes.
func TestCallIDRetryFromAnotherSession(t *testing.T) {
	f := startFleet(t)
	gw := f.gateway(t, mcpgate.Config{MaxWait: 20 * time.Second})
	url := serveHTTP(t, gw, mcpgate.HTTPConfig{Tenant: "acme"}).URL
	ids := mcp.Meta{mcpgate.MetaCallID: "call-other-session"}
	args := map[string]any{"tag": "s"}

	ctx, cancel := context.WithCancel(ctxT(t))
	first := make(chan error, 1)
	go func() {
		_, err := connectHTTP(t, url, "", nil).CallTool(ctx, &mcp.CallToolParams{Name: "hold", Arguments: args, Meta: ids})
		first <- err
	}()
	wait.Eventually(t, time.Minute, "the first call to start", func() bool { return f.hold.entered.Load() != 0 })
	cancel() // the client goes away; the call runs on
	if err := <-first; err == nil {
		t.Fatal("the cancelled request returned no error")
	}

	retried := make(chan *mcp.CallToolResult, 1)
	go func() { retried <- callTool(t, connectHTTP(t, url, "", nil), "hold", args, ids) }()
	time.Sleep(200 * time.Millisecond) // the retry is published while the call still runs
	f.hold.open()
	r := <-retried
	if r.IsError || metaOf(r, "kind") != "completed" || metaOf(r, "call_id") != "call-other-session" {
		t.Fatalf("retry by call_id from another session: %v %q, want the call's completed answer", r.Meta, text(r))
	}
	if n := f.hold.entered.Load(); n != 1 {
		t.Fatalf("hold entered %d times, want 1", n)
	}
}

// TestStdioClientGone: a client that closes its end while the gateway writes
// to it ends the session; ServeStdio does not call that an error.
func TestStdioClientGone(t *testing.T) {
	f := startFleet(t)
	in, toServer := io.Pipe()
	fromServer, out := io.Pipe()
	fromServer.Close() // the client reads nothing more: every write fails
	done := make(chan error, 1)
	go func() { done <- f.gw.ServeStdio(ctxT(t), "acme", in, out) }()
	if _, err := io.WriteString(toServer, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeStdio with its client gone = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		toServer.Close()
		t.Fatalf("ServeStdio did not end within 30 s of a failed write; after closing its input: %v", <-done)
	}
}

// TestCallIDsAreTheTenantsOwn: over both transports, a call id that one
// tenant's call holds while it runs is no obstacle to another tenant: globex's
// call with the same call_id is its own, answered at once with its own
// outcome, while acme's still runs; acme's then completes.
func TestCallIDsAreTheTenantsOwn(t *testing.T) {
	f := startFleet(t)
	url := serveHTTP(t, f.gw, mcpgate.HTTPConfig{Tokens: tokens(t)}).URL
	for _, tr := range []struct {
		name          string
		acme, globex  *mcp.ClientSession
		callID, holds string
	}{
		{"http", connectHTTP(t, url, acmeToken, nil), connectHTTP(t, url, globexToken, nil), "shared-http", "h"},
		{"stdio", connectStdio(t, f.gw, "acme", nil), connectStdio(t, f.gw, "globex", nil), "shared-stdio", "s"},
	} {
		t.Run(tr.name, func(t *testing.T) {
			ids := mcp.Meta{mcpgate.MetaCallID: tr.callID}
			before := f.hold.entered.Load()
			held := make(chan *mcp.CallToolResult, 1)
			go func() { held <- callTool(t, tr.acme, "hold", map[string]any{"tag": tr.holds}, ids) }()
			wait.Eventually(t, time.Minute, "acme's call to start", func() bool { return f.hold.entered.Load() != before })
			start := time.Now()
			r := callTool(t, tr.globex, "lookup_fare", map[string]any{"flight": "BA117"}, ids)
			if r.IsError || metaOf(r, "kind") != "completed" || metaOf(r, "call_id") != tr.callID || !strings.Contains(text(r), "612.40") {
				t.Fatalf("globex's call with acme's call id: %v %q; want its own completed answer", r.Meta, text(r))
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("globex's call took %v while acme's held the id", d)
			}
			select {
			case r := <-held:
				t.Fatalf("acme's held call ended early: %v %q", r.Meta, text(r))
			default:
			}
			f.hold.open()
			if r := <-held; r.IsError || metaOf(r, "kind") != "completed" {
				t.Fatalf("acme's call: %v %q", r.Meta, text(r))
			}
			f.hold.reset()
		})
	}
}
