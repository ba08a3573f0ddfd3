package toolexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/tool"
)

// airline is the downstream the test tools act on: it counts the bookings each
// tenant made per flight.
type airline struct {
	mu     sync.Mutex // protects booked
	booked map[string]int
	// hold, when not nil, keeps "slow" bookings waiting until it is closed.
	hold chan struct{}
}

func (a *airline) book(tenant, flight string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.booked[tenant+"/"+flight]++
	return a.booked[tenant+"/"+flight]
}

func (a *airline) count(tenant, flight string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.booked[tenant+"/"+flight]
}

type bookArgs struct {
	Flight    string `json:"flight"`
	RequestID string `json:"request_id,omitempty"`
}

// fixture is one embedded NATS server with an executor serving the airline's
// tools, and a connection for clients.
type fixture struct {
	nc  *nats.Conn
	air *airline
	ex  *toolexec.Executor
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newFixture(t *testing.T) *fixture { t.Helper(); return newFixtureAfter(t, nil) }

// newFixtureAfter is newFixture with prepare run on the server before the
// executor starts, when not nil.
func newFixtureAfter(t *testing.T, prepare func(js jetstream.JetStream)) *fixture {
	t.Helper()
	air := &airline{booked: map[string]int{}, hold: make(chan struct{})}
	book, err := tool.Typed(tool.Spec{
		Name:        "book",
		Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}},
	}, func(ctx context.Context, tc tool.Context, a bookArgs) (string, error) {
		n := air.book(tc.Tenant, a.Flight)
		switch a.Flight {
		case "LOST":
			return "", errors.New("the answer was lost after the seat was taken")
		case "SLOW":
			select {
			case <-air.hold:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return fmt.Sprintf("PNR-%s-%d", a.Flight, n), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	full, err := tool.Typed(tool.Spec{
		Name:        "full",
		Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}},
	}, func(context.Context, tool.Context, bookArgs) (string, error) {
		return "", tool.NoEffect(errors.New("the flight is full"))
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t)
	if prepare != nil {
		prepare(natstest.JetStream(t, natstest.Connect(t, srv)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	ex, err := toolexec.NewExecutor(ctx, natstest.Connect(t, srv), toolexec.ExecutorConfig{
		Tools: []*tool.Tool{book, full}, Logger: quiet(), DrainTimeout: 5 * time.Second,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Executor.Run: %v", err)
		}
		ex.Close()
	})
	return &fixture{nc: natstest.Connect(t, srv), air: air, ex: ex}
}

func (f *fixture) client(t *testing.T, opts ...toolexec.ClientOption) *toolexec.Client {
	t.Helper()
	c, err := toolexec.NewClient(f.nc, append([]toolexec.ClientOption{toolexec.WithLogger(quiet())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var callIDPattern = regexp.MustCompile(`^call_[0-9a-f]{32}$`)

func TestCallAnswers(t *testing.T) {
	f := newFixture(t)
	c := f.client(t, toolexec.WithDefaultRunID("run_1"))
	ctx := ctxFor(t, 30*time.Second)

	first, err := c.Call(ctx, "acme", "book", bookArgs{Flight: "BA117", RequestID: "a"})
	if err != nil {
		t.Fatalf("first booking: %v", err)
	}
	if first.Kind != events.KindCompleted || first.Outcome != "PNR-BA117-1" || len(first.Key) != 64 {
		t.Fatalf("first booking: %+v", first)
	}
	if first.Tenant != "acme" || first.Tool != "book" || first.RunID != "run_1" || !callIDPattern.MatchString(first.CallID) {
		t.Errorf("first booking names %+v", first)
	}

	// A retry with a fresh request id is the same effect: answered from the record.
	retry, err := c.Call(ctx, "acme", "book", map[string]any{"flight": "BA117", "request_id": "b"})
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if retry.Kind != events.KindDeduplicated || retry.Outcome != first.Outcome || retry.Key != first.Key {
		t.Errorf("retry: %+v, want deduplicated with %q and key %s", retry, first.Outcome, first.Key)
	}
	if retry.CallID == first.CallID {
		t.Errorf("two calls got one call id %s", retry.CallID)
	}

	// Another run is another effect.
	other, err := c.Call(ctx, "acme", "book", []byte(`{"flight":"BA117"}`), toolexec.WithRunID("run_2"))
	if err != nil || other.Kind != events.KindCompleted || other.Outcome != "PNR-BA117-2" || other.RunID != "run_2" {
		t.Errorf("booking in run_2: %+v, %v", other, err)
	}
	if n := f.air.count("acme", "BA117"); n != 2 {
		t.Errorf("BA117 booked %d times, want 2 (one per run)", n)
	}

	// The answer was lost after the effect: indeterminate, and its retry is not run.
	for i := range 2 {
		res, err := c.Call(ctx, "acme", "book", bookArgs{Flight: "LOST", RequestID: fmt.Sprint(i)})
		var unknown *events.IndeterminateOutcomeError
		if !errors.As(err, &unknown) {
			t.Fatalf("lost booking %d: %+v, %v; want an IndeterminateOutcomeError", i, res, err)
		}
		if unknown.Reason != events.ReasonBodyFailed || !unknown.BodyEntered || len(unknown.Key) != 64 || unknown.Tool != "book" {
			t.Errorf("lost booking %d: %+v", i, unknown)
		}
		if res == nil || res.Kind != events.KindIndeterminate || res.Key != unknown.Key {
			t.Errorf("lost booking %d: result %+v, want it to describe the indeterminate answer", i, res)
		}
	}
	if n := f.air.count("acme", "LOST"); n != 1 {
		t.Errorf("LOST booked %d times, want 1: an indeterminate key was run again", n)
	}

	// Failed without effect.
	_, err = c.Call(ctx, "acme", "full", bookArgs{Flight: "BA117"})
	var failed *events.FailedError
	if !errors.As(err, &failed) || failed.Code != events.CodeNoEffect {
		t.Errorf("full flight: %v, want a FailedError with code no_effect", err)
	}
}

func TestCallRejected(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	ctx := ctxFor(t, 30*time.Second)
	for _, tc := range []struct {
		name         string
		tenant, tool string
		args         any
		opts         []toolexec.CallOption
		want         events.Code
	}{
		{name: "unknown tool (answered by the executor)", tenant: "acme", tool: "cancel", args: bookArgs{Flight: "BA117"}, want: events.CodeUnknownTool},
		{name: "schema violation (answered by the executor)", tenant: "acme", tool: "book", args: map[string]any{"flight": 7}, want: events.CodeSchemaViolation},
		{name: "tenant not a token (refused before sending)", tenant: "acme corp", tool: "book", args: bookArgs{Flight: "BA117"}, want: events.CodeBadToken},
		{name: "run id not a token", tenant: "acme", tool: "book", args: bookArgs{Flight: "BA117"}, opts: []toolexec.CallOption{toolexec.WithRunID("run.1")}, want: events.CodeBadToken},
		{name: "arguments not an object", tenant: "acme", tool: "book", args: []int{1}, want: events.CodeArgumentsNotObject},
		{name: "arguments that do not marshal", tenant: "acme", tool: "book", args: map[string]any{"flight": make(chan int)}, want: events.CodeInvalidJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.Call(ctx, tc.tenant, tc.tool, tc.args, tc.opts...)
			var rejected *events.RejectedError
			if !errors.As(err, &rejected) || rejected.Code != tc.want {
				t.Fatalf("got %+v, %v; want a RejectedError with code %s", res, err, tc.want)
			}
		})
	}
	if n := f.air.count("acme", "BA117"); n != 0 {
		t.Errorf("rejected calls booked %d seats", n)
	}
}

// TestCallIDTaken: a tenant, tool and call id name one call. Called again
// with the id of a call answered before, by any client of the tenant, the
// first answer comes back and nothing runs twice. While a call waits to be
// answered, another client of its tenant naming it is refused at once with a
// CallIDTakenError, every time it tries, while the client that published it
// waits for its answer; another tenant's call with the same id is its own and
// runs at once.
func TestCallIDTaken(t *testing.T) {
	f := newFixture(t)
	ctx := ctxFor(t, 30*time.Second)
	acme := f.client(t)
	first, err := acme.Call(ctx, "acme", "book", bookArgs{Flight: "BA117"}, toolexec.WithCallID("shared-1"))
	if err != nil || first.Kind != events.KindCompleted {
		t.Fatalf("acme's call: %+v, %v", first, err)
	}
	for _, c := range []*toolexec.Client{acme, f.client(t)} {
		again, err := c.Call(ctx, "acme", "book", bookArgs{Flight: "AF001"}, toolexec.WithCallID("shared-1"))
		if err != nil || again.Kind != events.KindCompleted || again.Outcome != first.Outcome || again.CallID != "shared-1" {
			t.Errorf("calling again with an answered call's id: %+v, %v; want the first answer %q", again, err, first.Outcome)
		}
	}
	if res, err := acme.Call(ctx, "globex", "book", bookArgs{Flight: "AF001"}, toolexec.WithCallID("shared-1")); err != nil ||
		res.Kind != events.KindCompleted || res.Outcome != "PNR-AF001-1" {
		t.Errorf("globex's call with acme's call id: %+v, %v; want its own booking", res, err)
	}

	// A call that waits in its body holds its id.
	owner := f.client(t)
	held := make(chan error, 2)
	for range 2 {
		go func() {
			res, err := owner.Call(ctx, "acme", "book", bookArgs{Flight: "SLOW"}, toolexec.WithCallID("held-1"))
			if err == nil && res.Outcome != "PNR-SLOW-1" {
				err = fmt.Errorf("outcome %q", res.Outcome)
			}
			held <- err
		}()
	}
	wait.Eventually(t, 10*time.Second, "the held call to start", func() bool { return f.air.count("acme", "SLOW") != 0 })
	other := f.client(t)
	for try := range 2 {
		start := time.Now()
		res, err := other.Call(ctx, "acme", "book", bookArgs{Flight: "AF002"}, toolexec.WithCallID("held-1"))
		var taken *events.CallIDTakenError
		if !errors.As(err, &taken) || !errors.Is(err, events.ErrCallIDTaken) || taken.CallID != "held-1" || taken.Tenant != "acme" {
			t.Fatalf("try %d: got %+v, %v; want a CallIDTakenError naming acme's held-1", try+1, res, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("try %d: the refusal took %v: it waited for an answer", try+1, d)
		}
	}
	if res, err := other.Call(ctx, "globex", "book", bookArgs{Flight: "AF002"}, toolexec.WithCallID("held-1")); err != nil ||
		res.Kind != events.KindCompleted {
		t.Errorf("globex's call with the id of acme's waiting call: %+v, %v; want it run at once", res, err)
	}
	close(f.air.hold)
	for range 2 {
		if err := <-held; err != nil {
			t.Errorf("the owner's call: %v", err)
		}
	}
	for _, b := range []struct {
		tenant, flight string
		want           int
	}{{"acme", "BA117", 1}, {"acme", "AF001", 0}, {"globex", "AF001", 1}, {"acme", "SLOW", 1}, {"acme", "AF002", 0}, {"globex", "AF002", 1}} {
		if n := f.air.count(b.tenant, b.flight); n != b.want {
			t.Errorf("%s's %s booked %d times, want %d", b.tenant, b.flight, n, b.want)
		}
	}
}

func TestNoAnswerThenAttach(t *testing.T) {
	f := newFixture(t)
	c := f.client(t, toolexec.WithDefaultRunID("run_slow"))
	short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := c.Call(short, "acme", "book", bookArgs{Flight: "SLOW"})
	var none *events.NoAnswerError
	if !errors.As(err, &none) || !errors.Is(err, events.ErrNoAnswer) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v; want a NoAnswerError wrapping the deadline", err)
	}
	if none.Tenant != "acme" || none.Tool != "book" || none.RunID != "run_slow" || !callIDPattern.MatchString(none.CallID) {
		t.Errorf("NoAnswerError names %+v", none)
	}
	close(f.air.hold)
	res, err := c.Attach(ctxFor(t, 30*time.Second), none.Tenant, none.Tool, none.RunID, none.CallID)
	if err != nil || res.Kind != events.KindCompleted || res.Outcome != "PNR-SLOW-1" || res.CallID != none.CallID {
		t.Errorf("Attach: %+v, %v", res, err)
	}

	// Attach refuses ids that cannot be on the wire.
	if _, err := c.Attach(ctxFor(t, 5*time.Second), "acme", "book", "run slow", none.CallID); err == nil {
		t.Error("Attach with a run id that is not a token: no error")
	}
}

func TestWatch(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	ctx := ctxFor(t, 30*time.Second)
	answers, err := c.Watch(ctx, "toolexec.event.acme.>")
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(ctx, "acme", "book", bookArgs{Flight: "BA117"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-answers:
		if a.CallID != res.CallID || a.Kind != events.KindCompleted || a.Outcome != res.Outcome {
			t.Errorf("watched %+v, want the answer to %s", a, res.CallID)
		}
	case <-ctx.Done():
		t.Fatal("no answer watched")
	}
	if _, err := c.Watch(ctx, "toolexec.call.>"); err == nil {
		t.Error("Watch on call subjects: no error")
	}
}

// TestPublishThenAttach: Publish stores a call without waiting and its
// receipt names it; Attach with those names waits for the answer. While the
// call waits to be answered, its id is the publisher's: the same client
// publishing it again is told it is stored, another client is refused with a
// CallIDTakenError, and a client made WithWaitForPending waits for its
// answer. Find looks once.
func TestPublishThenAttach(t *testing.T) {
	f := newFixture(t)
	ctx := ctxFor(t, 30*time.Second)
	c := f.client(t, toolexec.WithDefaultRunID("run_pub"))

	r, err := c.Publish(ctx, "acme", "book", bookArgs{Flight: "SLOW"}, toolexec.WithCallID("pub-1"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Tenant != "acme" || r.Tool != "book" || r.RunID != "run_pub" || r.CallID != "pub-1" || r.Stream != wire.CallStream ||
		r.Sequence == 0 || r.Duplicate {
		t.Errorf("receipt %+v", r)
	}
	if a, err := c.Find(ctx, "acme", "pub-1"); a != nil || err != nil {
		t.Errorf("Find before the answer: %+v, %v; want nothing, no error", a, err)
	}
	wait.Eventually(t, 10*time.Second, "the call to start", func() bool { return f.air.count("acme", "SLOW") != 0 })
	if again, err := c.Publish(ctx, "acme", "book", bookArgs{Flight: "SLOW"}, toolexec.WithCallID("pub-1")); err != nil || !again.Duplicate {
		t.Errorf("the publisher publishing its waiting call again: %+v, %v; want it stored, Duplicate", again, err)
	}
	if _, err := f.client(t).Publish(ctx, "acme", "book", bookArgs{Flight: "AF9"}, toolexec.WithCallID("pub-1")); !errors.Is(err, events.ErrCallIDTaken) {
		t.Errorf("another client publishing the waiting call's id: %v, want ErrCallIDTaken", err)
	}
	gateway := f.client(t, toolexec.WithWaitForPending())
	waited := make(chan error, 1)
	go func() {
		a, err := gateway.Call(ctx, "acme", "book", bookArgs{Flight: "AF9"}, toolexec.WithCallID("pub-1"))
		if err == nil && a.Outcome != "PNR-SLOW-1" {
			err = fmt.Errorf("answered %+v", a)
		}
		waited <- err
	}()
	time.Sleep(700 * time.Millisecond) // past the grace for an answer stored just now
	close(f.air.hold)
	a, err := c.Attach(ctx, r.Tenant, r.Tool, r.RunID, r.CallID)
	if err != nil || a.Kind != events.KindCompleted || a.Outcome != "PNR-SLOW-1" || a.CallID != "pub-1" {
		t.Fatalf("Attach: %+v, %v", a, err)
	}
	if err := <-waited; err != nil {
		t.Errorf("a client made WithWaitForPending, naming the waiting call's id: %v; want that call's answer", err)
	}
	wait.Eventually(t, 10*time.Second, "the answer to be stored", func() bool {
		found, err := c.Find(ctx, "acme", "pub-1")
		return err == nil && found != nil && found.Outcome == a.Outcome
	})
	if _, err := c.Find(ctx, "acme", "pub.1"); !errors.Is(err, events.ErrInvalidToken) {
		t.Errorf("Find with a call id that is not a token: %v, want ErrInvalidToken", err)
	}
	if slow, af9 := f.air.count("acme", "SLOW"), f.air.count("acme", "AF9"); slow != 1 || af9 != 0 {
		t.Errorf("SLOW booked %d times, AF9 %d; want 1, 0: one call, under one id", slow, af9)
	}
}

// TestFreshCallID: a call given an id drawn beforehand is published with it,
// as a first call: its interactions could be heard before it is published.
func TestFreshCallID(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	id := toolexec.NewCallID()
	a, err := c.Call(ctxFor(t, 30*time.Second), "acme", "book", bookArgs{Flight: "BA1"}, toolexec.WithFreshCallID(id))
	if err != nil || a.CallID != id || a.Kind != events.KindCompleted {
		t.Errorf("Call with a fresh id: %+v, %v", a, err)
	}
}

// TestTools: the client lists the tools the executor serves; with no executor,
// the error matches ErrNoCatalogService.
func TestTools(t *testing.T) {
	f := newFixture(t)
	decls, err := f.client(t).Tools(ctxFor(t, 30*time.Second), "acme")
	if err != nil || len(decls) != 2 || decls[0].Name != "book" || decls[1].Name != "full" || decls[0].Kind != tool.Effectful {
		t.Errorf("Tools: %+v, %v; want book and full, effectful", decls, err)
	}
	c, err := toolexec.NewClient(natstest.Connect(t, natstest.Start(t)), toolexec.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Tools(ctxFor(t, 10*time.Second), "acme"); !errors.Is(err, toolexec.ErrNoCatalogService) {
		t.Errorf("Tools with no executor: %v, want ErrNoCatalogService", err)
	}
}

func TestNewClientRefuses(t *testing.T) {
	f := newFixture(t)
	if _, err := toolexec.NewClient(nil); !errors.Is(err, toolexec.ErrInvalidOption) {
		t.Errorf("nil connection: %v", err)
	}
	for name, opt := range map[string]toolexec.ClientOption{
		"run id not a token": toolexec.WithDefaultRunID("run 1"),
		"empty source":       toolexec.WithSource(""),
		"nil logger":         toolexec.WithLogger(nil),
		"unknown history":    toolexec.WithHistoryPath(toolexec.HistoryViaService + 1),
	} {
		if _, err := toolexec.NewClient(f.nc, opt); !errors.Is(err, toolexec.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
	c := f.client(t)
	if !regexp.MustCompile(`^run_[0-9a-f]{32}$`).MatchString(c.RunID()) {
		t.Errorf("default run id %q", c.RunID())
	}
	if f.client(t).RunID() == c.RunID() {
		t.Error("two clients drew one run id")
	}
}

// TestNoStreamSaysWhy: a call on a server where no stream takes the tenant's
// calls (no executor ever ran there) fails at once, matching
// jetstream.ErrNoStreamResponse, and says what to check; and a call on a
// server whose executors speak wire version 1 fails at once with
// ErrOldCallStream.
func TestNoStreamSaysWhy(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	c, err := toolexec.NewClient(nc, toolexec.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(ctxFor(t, 10*time.Second), "acme", "book", bookArgs{Flight: "BA117"})
	if !errors.Is(err, jetstream.ErrNoStreamResponse) || !strings.Contains(err.Error(), "no executor has run against this NATS server") {
		t.Errorf("a call with no stream: %v; want ErrNoStreamResponse and what to check", err)
	}
	js := natstest.JetStream(t, nc)
	if _, err := js.CreateStream(ctxFor(t, 10*time.Second), jetstream.StreamConfig{Name: "TOOLEXEC_CALLS", Subjects: []string{"toolexec.call.>"},
		Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctxFor(t, 10*time.Second), "acme", "book", bookArgs{Flight: "BA117"}); !errors.Is(err, toolexec.ErrOldCallStream) {
		t.Errorf("a call to executors of wire version 1: %v; want ErrOldCallStream", err)
	}
}

// TestExecutorTakesTheOldCalls: an executor started where wire version 1 ran
// answers the calls that wait in TOOLEXEC_CALLS and those published there by
// callers of version 1 meanwhile, beside the new stream's; once the old
// stream is deleted it serves on, and stops cleanly.
func TestExecutorTakesTheOldCalls(t *testing.T) {
	publishV1 := func(js jetstream.JetStream, id, flight string) {
		t.Helper()
		data := fmt.Sprintf(`{"specversion":"1.0","type":"io.tesserix.toolexec.call","id":%q,"source":"/v1","runid":"run_v1",`+
			`"datacontenttype":"application/json","data":{"arguments":{"flight":%q}}}`, id, flight)
		msg := &nats.Msg{Subject: "toolexec.call.acme.book", Data: []byte(data),
			Header: nats.Header{"Content-Type": {"application/cloudevents+json"}, "Nats-Msg-Id": {id}}}
		if _, err := js.PublishMsg(ctxFor(t, 10*time.Second), msg); err != nil {
			t.Fatal(err)
		}
	}
	var js jetstream.JetStream
	f := newFixtureAfter(t, func(j jetstream.JetStream) {
		js = j
		if _, err := js.CreateStream(ctxFor(t, 10*time.Second), jetstream.StreamConfig{Name: "TOOLEXEC_CALLS",
			Subjects: []string{"toolexec.call.>"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
			t.Fatal(err)
		}
		publishV1(js, "old-1", "OLD1")
	})
	publishV1(js, "old-2", "OLD2")
	c := f.client(t)
	ctx := ctxFor(t, 30*time.Second)
	for _, id := range []string{"old-1", "old-2"} {
		if res, err := c.Attach(ctx, "acme", "book", "run_v1", id); err != nil || res.Kind != events.KindCompleted {
			t.Errorf("the call %s of wire version 1: %+v, %v", id, res, err)
		}
	}
	if err := js.DeleteStream(ctx, "TOOLEXEC_CALLS"); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Call(ctx, "acme", "book", bookArgs{Flight: "NEW1"}); err != nil || res.Kind != events.KindCompleted {
		t.Errorf("a call of version 2 after the old stream's deletion: %+v, %v", res, err)
	}
	for _, flight := range []string{"OLD1", "OLD2", "NEW1"} {
		if n := f.air.count("acme", flight); n != 1 {
			t.Errorf("%s booked %d times, want 1", flight, n)
		}
	}
}

func TestNewExecutorRefuses(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	ctx := ctxFor(t, 30*time.Second)
	noop, err := tool.New(tool.Spec{Name: "noop"}, func(context.Context, tool.Context, json.RawMessage) (string, error) { return "", nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := toolexec.NewExecutor(ctx, nil, toolexec.ExecutorConfig{Tools: []*tool.Tool{noop}}); !errors.Is(err, toolexec.ErrInvalidOption) {
		t.Errorf("nil connection: %v", err)
	}
	if _, err := toolexec.NewExecutor(ctx, nc, toolexec.ExecutorConfig{}); !errors.Is(err, toolexec.ErrInvalidOption) {
		t.Errorf("no tools: %v", err)
	}
	if _, err := toolexec.NewExecutor(ctx, nc, toolexec.ExecutorConfig{Tools: []*tool.Tool{noop, noop}}); !errors.Is(err, tool.ErrDuplicateTool) {
		t.Errorf("a tool twice: %v", err)
	}
}

func TestNewCallID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := toolexec.NewCallID()
		if !callIDPattern.MatchString(id) || !events.ValidToken(id) {
			t.Fatalf("NewCallID() = %q", id)
		}
		if seen[id] {
			t.Fatalf("NewCallID() repeated %q", id)
		}
		seen[id] = true
	}
}

// TestAdminSettlesAnIndeterminateKey: an operator lists the key nobody knows
// the outcome of, completes it with the outcome found downstream, and the
// next duplicate is answered with it; a released key runs again.
func TestAdminSettlesAnIndeterminateKey(t *testing.T) {
	f := newFixture(t)
	ctx := ctxFor(t, 30*time.Second)
	c := f.client(t, toolexec.WithDefaultRunID("run_1"))
	ops, err := toolexec.NewAdminClient(f.nc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(ctx, "acme", "book", bookArgs{Flight: "LOST"})
	var unknown *events.IndeterminateOutcomeError
	if !errors.As(err, &unknown) {
		t.Fatalf("lost booking: %v", err)
	}
	page, err := ops.List(ctx, admin.ListRequest{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 1 || page.Records[0].Key != unknown.Key || page.Records[0].Tool != "book" {
		t.Fatalf("listed %+v, want the one indeterminate key %s", page.Records, unknown.Key)
	}
	rec, err := ops.Resolve(ctx, admin.ResolveRequest{Tenant: "acme", Key: unknown.Key, Action: events.ActionComplete, Outcome: "PNR-FOUND", Operator: "alice"})
	if err != nil || rec.Outcome != "PNR-FOUND" {
		t.Fatalf("Resolve: %+v, %v", rec, err)
	}
	res, err := c.Call(ctx, "acme", "book", bookArgs{Flight: "LOST"})
	if err != nil || res.Kind != events.KindDeduplicated || res.Outcome != "PNR-FOUND" {
		t.Errorf("after the resolution: %+v, %v; want deduplicated with PNR-FOUND", res, err)
	}

	// Released: the next call runs the tool (and, this flight losing every
	// answer, is indeterminate again).
	_, err = c.Call(ctx, "acme", "book", bookArgs{Flight: "LOST"}, toolexec.WithRunID("run_2"))
	if !errors.As(err, &unknown) {
		t.Fatalf("lost booking in run_2: %v", err)
	}
	if _, err := ops.Resolve(ctx, admin.ResolveRequest{Tenant: "acme", Key: unknown.Key, Action: events.ActionRelease}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(ctx, "acme", "book", bookArgs{Flight: "LOST"}, toolexec.WithRunID("run_2"))
	if !errors.As(err, &unknown) || !unknown.BodyEntered {
		t.Errorf("after the release: %v", err)
	}
	if n := f.air.count("acme", "LOST"); n != 3 {
		t.Errorf("LOST booked %d times, want 3 (run_1 once, run_2 before and after its release)", n)
	}
	info, err := ops.Inspect(ctx, "acme", unknown.Key)
	if err != nil || info.State != "indeterminate" {
		t.Errorf("Inspect: %+v, %v", info, err)
	}

	// Forgetting the tenant erases its records: the key is free again. (The
	// JetStream store purges by subject and cannot count what it erased: -1.)
	if n, err := ops.Forget(ctx, "acme"); err != nil || (n != -1 && n < 2) {
		t.Errorf("Forget: %d records, %v; want -1 or at least the two keys booked", n, err)
	}
	if info, err := ops.Inspect(ctx, "acme", unknown.Key); !errors.Is(err, kvstore.ErrNotFound) {
		t.Errorf("Inspect after Forget: %+v, %v; want kvstore.ErrNotFound", info, err)
	}
}
