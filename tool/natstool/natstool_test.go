package natstool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/tcpproxy"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/natstool"
	"github.com/tesserix/toolexec/worker"
)

const schema = `{"type":"object","properties":{"flight":{"type":"string"},"seats":{"type":"integer"},"request_id":{"type":"string"}},"required":["flight"]}`

var bookSpec = tool.Spec{
	Name:        "book",
	Parameters:  json.RawMessage(schema),
	Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}},
	Timeout:     5 * time.Second,
}

var callCtx = tool.Context{
	IdempotencyKey: strings.Repeat("ab", 32),
	Tenant:         "acme",
	RunID:          "run_1",
	CallID:         "call-7",
	Tool:           "book",
	Attempt:        2,
	TraceParent:    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// bodyFunc is what a worker's body does in a test.
type bodyFunc func(ctx context.Context, tc tool.Context, args json.RawMessage) (string, error)

// serveBook runs a Go worker serving book on s with fn as its body, and
// returns how many times the body was entered.
func serveBook(t *testing.T, s *server.Server, fn bodyFunc) *atomic.Int64 {
	t.Helper()
	var entered atomic.Int64
	body, err := tool.New(bookSpec, func(ctx context.Context, tc tool.Context, args json.RawMessage) (string, error) {
		entered.Add(1)
		return fn(ctx, tc, args)
	})
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.Serve(natstest.Connect(t, s), worker.Config{Logger: quiet}, body)
	if err != nil {
		t.Fatalf("worker.Serve: %v", err)
	}
	t.Cleanup(func() { stop(w) })
	return &entered
}

// stop stops w, cancelling the bodies a test left running.
func stop(w *worker.Worker) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = w.Stop(ctx)
}

// newTool builds book against ep, failing the test on error.
func newTool(t *testing.T, ep natstool.Endpoint) *tool.Tool {
	t.Helper()
	tl, err := natstool.New(bookSpec, ep)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tl
}

// call runs tl once under d, so that a hang fails the test instead of stalling
// it.
func call(t *testing.T, tl *tool.Tool, d time.Duration) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return tl.Call(ctx, callCtx, json.RawMessage(`{"flight":"BA117"}`))
}

// TestOutcomes holds the body's classification of what comes back from a Go
// worker, or does not, to the package documentation: each reply form, the
// timeout and the missing worker, with whether the body was entered.
func TestOutcomes(t *testing.T) {
	huge := strings.Repeat("x", natstool.DefaultMaxReplyBytes+1)
	tests := []struct {
		name     string
		body     bodyFunc // nil: no worker at all
		deadline time.Duration
		want     string // the outcome, when there is no error
		// The error's classification; wantErr nil means success.
		wantErr  []error
		noEffect bool
		code     string // the BodyError's code, if one is expected
		entered  int64
	}{
		{name: "reply", body: reply(`{"pnr":"K7Q2ZD"}`, nil), want: `{"pnr":"K7Q2ZD"}`, entered: 1},
		{name: "empty reply", body: reply("", nil), want: "", entered: 1},
		{name: "reply of the largest size", body: reply(huge[1:], nil), want: huge[1:], entered: 1},
		{name: "error no_effect", body: reply("", tool.NoEffect(errors.New("the fare is gone"))),
			noEffect: true, code: natstool.CodeNoEffect, entered: 1},
		{name: "other error", body: reply("", errors.New("the airline answered 502")),
			code: worker.CodeToolError, entered: 1},
		{name: "panic", body: func(context.Context, tool.Context, json.RawMessage) (string, error) { panic("oops") },
			code: worker.CodeToolError, entered: 1},
		{name: "oversize reply", body: reply(huge, nil), wantErr: []error{natstool.ErrReplyTooLarge}, entered: 1},
		{name: "timeout", body: func(ctx context.Context, _ tool.Context, _ json.RawMessage) (string, error) {
			<-ctx.Done()
			return "late", nil
		}, deadline: 300 * time.Millisecond, wantErr: []error{context.DeadlineExceeded}, entered: 1},
		{name: "no worker", wantErr: []error{natstool.ErrNoWorker, nats.ErrNoResponders}, noEffect: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := natstest.Start(t)
			var entered *atomic.Int64
			if tt.body != nil {
				entered = serveBook(t, s, tt.body)
			}
			deadline := tt.deadline
			if deadline == 0 {
				deadline = 10 * time.Second
			}
			out, err := call(t, newTool(t, natstool.Endpoint{Conn: natstest.Connect(t, s)}), deadline)
			failed := tt.wantErr != nil || tt.code != ""
			switch {
			case !failed && err != nil:
				t.Fatalf("err = %v, want the outcome %.40q", err, tt.want)
			case !failed && out != tt.want:
				t.Fatalf("outcome = %.40q (%d bytes), want %.40q", out, len(out), tt.want)
			case failed && err == nil:
				t.Fatalf("no error (outcome %.40q)", out)
			}
			for _, w := range tt.wantErr {
				if !errors.Is(err, w) {
					t.Errorf("err = %v; want it to match %v", err, w)
				}
			}
			if err != nil && tool.IsNoEffect(err) != tt.noEffect {
				t.Errorf("err = %v: no effect %v, want %v", err, tool.IsNoEffect(err), tt.noEffect)
			}
			var be *natstool.BodyError
			if errors.As(err, &be) != (tt.code != "") || (be != nil && be.Code != tt.code) {
				t.Errorf("err = %v; want a BodyError of code %q: %v", err, tt.code, be)
			}
			if errors.Is(err, natstool.ErrNotSent) {
				t.Errorf("err = %v says not sent", err)
			}
			if entered != nil && entered.Load() != tt.entered {
				t.Errorf("the body was entered %d times, want %d", entered.Load(), tt.entered)
			}
		})
	}
}

// reply returns a body that answers out or err at once.
func reply(out string, err error) bodyFunc {
	return func(context.Context, tool.Context, json.RawMessage) (string, error) { return out, err }
}

// TestBodyErrorCarriesTheDescription: an error reply's description reaches the
// error, bounded, so that operators read what the worker said.
func TestBodyErrorCarriesTheDescription(t *testing.T) {
	s := natstest.Start(t)
	// 19 bytes, then two-byte runes: 256 bytes end in the middle of one.
	serveBook(t, s, reply("", errors.New("the airline said:: "+strings.Repeat("é", 1000))))
	_, err := call(t, newTool(t, natstool.Endpoint{Conn: natstest.Connect(t, s)}), 10*time.Second)
	var be *natstool.BodyError
	if !errors.As(err, &be) || !strings.HasPrefix(be.Description, "the airline said:: éé") {
		t.Fatalf("err = %v, want a BodyError with the worker's description", err)
	}
	if want := "the airline said:: " + strings.Repeat("é", 118); be.Description != want {
		t.Errorf("description kept %d bytes, %q; want the 255 bytes before the rune cut in two", len(be.Description), be.Description)
	}
}

// TestMaxReplyBytes: the bound is the endpoint's when it gives one.
func TestMaxReplyBytes(t *testing.T) {
	s := natstest.Start(t)
	serveBook(t, s, func(_ context.Context, _ tool.Context, args json.RawMessage) (string, error) {
		return "0123456789", nil
	})
	nc := natstest.Connect(t, s)
	if out, err := call(t, newTool(t, natstool.Endpoint{Conn: nc, MaxReplyBytes: 10}), 10*time.Second); err != nil || out != "0123456789" {
		t.Errorf("a reply of the bound: %q, %v", out, err)
	}
	if _, err := call(t, newTool(t, natstool.Endpoint{Conn: nc, MaxReplyBytes: 9}), 10*time.Second); !errors.Is(err, natstool.ErrReplyTooLarge) || tool.IsNoEffect(err) {
		t.Errorf("a reply over the bound: %v, want ErrReplyTooLarge with its effect unknown", err)
	}
}

// TestRequestCarriesArgumentsAndHeaders: what a worker receives, read off the
// wire: the arguments byte for byte, the headers of the package
// documentation, on the tool's subject, with a reply subject.
func TestRequestCarriesArgumentsAndHeaders(t *testing.T) {
	s := natstest.Start(t)
	got := make(chan *nats.Msg, 1)
	raw := natstest.Connect(t, s)
	if _, err := raw.QueueSubscribe(wire.BodySubject("book"), wire.BodyQueue, func(m *nats.Msg) {
		got <- m
		_ = m.Respond([]byte("ok"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	tl := newTool(t, natstool.Endpoint{Conn: natstest.Connect(t, s)})
	// Arguments go out byte for byte: spacing, member order and number spelling kept.
	args := `{ "seats": 2.0, "flight":"BA117",  "request_id":"a" }`
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tl.Call(ctx, callCtx, json.RawMessage(args)); err != nil {
		t.Fatal(err)
	}
	m := <-got
	if m.Subject != "toolexec.body.book" || m.Reply == "" {
		t.Errorf("subject %q reply %q", m.Subject, m.Reply)
	}
	if string(m.Data) != args {
		t.Errorf("payload %q; want the arguments as sent, %q", m.Data, args)
	}
	want := map[string]string{
		"Idempotency-Key":  callCtx.IdempotencyKey,
		"Toolexec-Tenant":  "acme",
		"Toolexec-Run-Id":  "run_1",
		"Toolexec-Call-Id": "call-7",
		"Toolexec-Tool":    "book",
		"Toolexec-Attempt": "2",
		"traceparent":      callCtx.TraceParent,
	}
	for k, v := range want {
		if vs := m.Header.Values(k); len(vs) != 1 || vs[0] != v {
			t.Errorf("header %s = %q; want exactly [%q]", k, vs, v)
		}
	}
	if len(m.Header) != len(want) {
		t.Errorf("headers %v; want exactly %d", m.Header, len(want))
	}

	// Without a key or a trace, neither header is sent.
	tc := callCtx
	tc.IdempotencyKey, tc.TraceParent = "", ""
	if _, err := tl.Call(ctx, tc, json.RawMessage(`{"flight":"BA117"}`)); err != nil {
		t.Fatal(err)
	}
	m = <-got
	for _, k := range []string{"Idempotency-Key", "traceparent"} {
		if _, ok := m.Header[k]; ok {
			t.Errorf("header %s sent (%q) although the call had none", k, m.Header.Values(k))
		}
	}
}

// TestConnectionLostAfterSend: the executor's connection drops while the
// worker holds the request. The body gives up at once, without waiting for the
// timeout, and says the effect is unknown: the worker's reply, sent while the
// connection is down, is lost.
func TestConnectionLostAfterSend(t *testing.T) {
	s := natstest.Start(t)
	held, release := make(chan struct{}), make(chan struct{})
	entered := serveBook(t, s, func(ctx context.Context, _ tool.Context, _ json.RawMessage) (string, error) {
		close(held)
		<-release
		return "PNR", nil
	})
	defer close(release)
	proxy := tcpproxy.Start(t, strings.TrimPrefix(s.ClientURL(), "nats://"))
	nc, err := nats.Connect("nats://"+proxy.Addr(), nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	tl := newTool(t, natstool.Endpoint{Conn: nc})
	errs := make(chan error, 1)
	go func() {
		_, err := call(t, tl, 30*time.Second)
		errs <- err
	}()
	<-held
	// The PING behind the request has long come back: the body now waits for
	// the reply alone.
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	proxy.Cut()
	err = <-errs
	if err == nil || tool.IsNoEffect(err) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v; want a failure with its effect unknown, before the deadline", err)
	}
	if !strings.Contains(err.Error(), "while the request was out") {
		t.Errorf("err = %v; want it to say the connection was lost while the request was out", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the body noticed the lost connection after %v", d)
	}
	if entered.Load() != 1 {
		t.Errorf("the body was entered %d times, want once", entered.Load())
	}
}

// TestNotSentIsNoEffect: a request that cannot go out — the connection closed,
// or down and reconnecting — is refused without effect, and no worker sees it.
func TestNotSentIsNoEffect(t *testing.T) {
	s := natstest.Start(t)
	entered := serveBook(t, s, reply("PNR", nil))

	closed := natstest.Connect(t, s)
	closed.Close()
	_, err := call(t, newTool(t, natstool.Endpoint{Conn: closed}), 10*time.Second)
	if !errors.Is(err, natstool.ErrNotSent) || !tool.IsNoEffect(err) {
		t.Errorf("on a closed connection: %v, want ErrNotSent without effect", err)
	}

	proxy := tcpproxy.Start(t, strings.TrimPrefix(s.ClientURL(), "nats://"))
	down, err := nats.Connect("nats://"+proxy.Addr(), nats.ReconnectWait(time.Hour), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(down.Close)
	proxy.Cut()
	for down.Status() == nats.CONNECTED {
		time.Sleep(5 * time.Millisecond)
	}
	_, err = call(t, newTool(t, natstool.Endpoint{Conn: down}), 10*time.Second)
	if !errors.Is(err, natstool.ErrNotSent) || !tool.IsNoEffect(err) {
		t.Errorf("on a connection that is down: %v, want ErrNotSent without effect", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = newTool(t, natstool.Endpoint{Conn: natstest.Connect(t, s)}).Call(ctx, callCtx, json.RawMessage(`{"flight":"BA117"}`))
	if !errors.Is(err, natstool.ErrNotSent) || !tool.IsNoEffect(err) || !errors.Is(err, context.Canceled) {
		t.Errorf("with the context ended: %v, want ErrNotSent without effect", err)
	}
	if entered.Load() != 0 {
		t.Errorf("a worker ran %d requests that were never sent", entered.Load())
	}
}

// TestLateNoRespondersIsNotNoEffect: a no-responders status that comes after
// the round trip behind the request is not the server's (the server sends one
// only while it handles the publication): a responder that took the request
// and answers so is a failure whose effect is unknown.
func TestLateNoRespondersIsNotNoEffect(t *testing.T) {
	s := natstest.Start(t)
	raw := natstest.Connect(t, s)
	if _, err := raw.QueueSubscribe(wire.BodySubject("book"), wire.BodyQueue, func(m *nats.Msg) {
		time.Sleep(100 * time.Millisecond)
		_ = m.RespondMsg(&nats.Msg{Header: nats.Header{"Status": []string{"503"}}})
	}); err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	_, err := call(t, newTool(t, natstool.Endpoint{Conn: natstest.Connect(t, s)}), 10*time.Second)
	if err == nil || tool.IsNoEffect(err) || errors.Is(err, natstool.ErrNoWorker) {
		t.Errorf("err = %v; want a failure whose effect is unknown", err)
	}
}

// TestSubject: an endpoint's subject is where the request goes, and a worker
// serving the tool there answers it.
func TestSubject(t *testing.T) {
	s := natstest.Start(t)
	body, err := tool.New(bookSpec, func(context.Context, tool.Context, json.RawMessage) (string, error) { return "from v2", nil })
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.Serve(natstest.Connect(t, s), worker.Config{Logger: quiet, Subjects: map[string]string{"book": "toolexec.body.book-v2"}}, body)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(w) })
	nc := natstest.Connect(t, s)
	if out, err := call(t, newTool(t, natstool.Endpoint{Conn: nc, Subject: "toolexec.body.book-v2"}), 10*time.Second); err != nil || out != "from v2" {
		t.Errorf("on the worker's subject: %q, %v", out, err)
	}
	if _, err := call(t, newTool(t, natstool.Endpoint{Conn: nc}), 10*time.Second); !errors.Is(err, natstool.ErrNoWorker) {
		t.Errorf("on the default subject, which nobody serves: %v, want ErrNoWorker", err)
	}
}

// TestNewChecksTheEndpoint: a bad endpoint is refused when the tool is built,
// naming the field; a tool without a timeout gets the default.
func TestNewChecksTheEndpoint(t *testing.T) {
	nc := &nats.Conn{}
	tests := []struct {
		name  string
		ep    natstool.Endpoint
		field string
	}{
		{"no connection", natstool.Endpoint{}, "nats.conn"},
		{"wildcard subject", natstool.Endpoint{Conn: nc, Subject: "toolexec.body.*"}, "nats.subject"},
		{"full wildcard", natstool.Endpoint{Conn: nc, Subject: "toolexec.>"}, "nats.subject"},
		{"empty token", natstool.Endpoint{Conn: nc, Subject: "toolexec..book"}, "nats.subject"},
		{"space", natstool.Endpoint{Conn: nc, Subject: "toolexec.bo ok"}, "nats.subject"},
		{"negative bound", natstool.Endpoint{Conn: nc, MaxReplyBytes: -1}, "nats.max_reply_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := natstool.New(bookSpec, tt.ep)
			var se *tool.SpecError
			if !errors.As(err, &se) || se.Field != tt.field || !errors.Is(err, tool.ErrInvalidSpec) {
				t.Fatalf("New = %v, want a SpecError on %s", err, tt.field)
			}
			if tt.field != "nats.conn" {
				if err := natstool.CheckEndpoint("book", tt.ep); !errors.As(err, &se) || se.Field != tt.field {
					t.Errorf("CheckEndpoint = %v, want a SpecError on %s", err, tt.field)
				}
			}
		})
	}
	if err := natstool.CheckEndpoint("book", natstool.Endpoint{Subject: "x.book"}); err != nil {
		t.Errorf("CheckEndpoint without a connection: %v", err)
	}
	spec := bookSpec
	spec.Timeout = 0
	tl, err := natstool.New(spec, natstool.Endpoint{Conn: nc})
	if err != nil || tl.Timeout() != natstool.DefaultTimeout {
		t.Errorf("a tool without a timeout: %v, timeout %v; want %v", err, tl.Timeout(), natstool.DefaultTimeout)
	}
}

// TestExtraReplies: a request that two groups of workers take (the queue group
// and a worker outside it) is answered by the first reply, and
// Endpoint.OnExtraReply hears of the second within ExtraReplyWindow; one group
// alone, however many members, is never reported.
func TestExtraReplies(t *testing.T) {
	for _, tt := range []struct {
		name   string
		queues []string // one subscriber per entry, in that queue group ("" none)
		extra  bool
	}{
		{"one worker", []string{wire.BodyQueue}, false},
		{"two workers of the queue group", []string{wire.BodyQueue, wire.BodyQueue}, false},
		{"a worker outside the queue group too", []string{wire.BodyQueue, ""}, true},
		{"two queue groups", []string{wire.BodyQueue, "other"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := natstest.Start(t)
			raw := natstest.Connect(t, s)
			var entered atomic.Int32
			for i, q := range tt.queues {
				reply := func(m *nats.Msg) {
					entered.Add(1)
					_ = m.Respond(fmt.Appendf(nil, "from %d", i))
				}
				var err error
				if q == "" {
					_, err = raw.Subscribe(wire.BodySubject("book"), reply)
				} else {
					_, err = raw.QueueSubscribe(wire.BodySubject("book"), q, reply)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := raw.Flush(); err != nil {
				t.Fatal(err)
			}
			heard := make(chan string, 1)
			tl := newTool(t, natstool.Endpoint{Conn: natstest.Connect(t, s), OnExtraReply: func(subject string) { heard <- subject }})
			if out, err := call(t, tl, 10*time.Second); err != nil || !strings.HasPrefix(out, "from ") {
				t.Fatalf("call = %q, %v", out, err)
			}
			select {
			case subject := <-heard:
				if !tt.extra {
					t.Fatalf("OnExtraReply(%q) with one group of workers (%d bodies entered)", subject, entered.Load())
				}
				if subject != "toolexec.body.book" {
					t.Errorf("OnExtraReply(%q), want toolexec.body.book", subject)
				}
			case <-time.After(natstool.ExtraReplyWindow + 2*time.Second):
				if tt.extra {
					t.Fatalf("no OnExtraReply, with %d bodies entered", entered.Load())
				}
			}
			want := int32(1)
			if tt.extra {
				want = 2
			}
			if got := entered.Load(); got != want {
				t.Errorf("%d bodies entered, want %d", got, want)
			}
		})
	}
}
