package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/tcpproxy"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/tool"
)

// TestCallWaitsOutLeaderlessStream: after a client has stored a call of a
// tenant, no stream answering that tenant's subject is a leader's election,
// which Call waits out; here the calls stream is gone for a second (deleted,
// then made again) and a call made meanwhile is answered once it is back. A
// client that never stored a call of the tenant fails at once instead: then
// no responders means that no stream takes the tenant's calls.
func TestCallWaitsOutLeaderlessStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startWorker(t, quickBooking(t), bus.WorkerConfig{}, 0)
	if a, err := h.client.Call(ctxT(t), call("book", "r1", "before", `{"flight":"BA1"}`)); err != nil || a.Kind != events.KindCompleted {
		t.Fatalf("first call: %v %v", a.Kind, err)
	}
	if err := h.js.DeleteStream(ctxT(t), wire.CallStream); err != nil {
		t.Fatal(err)
	}

	fresh, err := bus.NewClient(h.js, bus.ClientConfig{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := fresh.Call(ctxT(t), call("book", "r1", "fresh", `{"flight":"BA2"}`)); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Errorf("a new client's call with no stream = %v, want ErrNoStreamResponse", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a new client's call with no stream failed after %v, not at once", d)
	}

	type result struct {
		a   events.Answer
		err error
	}
	done := make(chan result, 1)
	go func() {
		a, err := h.client.Call(ctxT(t), call("book", "r1", "during", `{"flight":"BA3"}`))
		done <- result{a, err}
	}()
	time.Sleep(time.Second)
	select {
	case r := <-done:
		t.Fatalf("the call ended while the stream was gone: %v %v", r.a.Kind, r.err)
	default:
	}
	if err := bus.EnsureStreams(ctxT(t), h.js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.a.Kind != events.KindCompleted {
		t.Fatalf("the call made while the stream was gone: %v %v", r.a.Kind, r.err)
	}

	// The wait ends with the caller's context, which the error names with the
	// last refusal.
	if err := h.js.DeleteStream(ctxT(t), wire.CallStream); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 700*time.Millisecond)
	defer cancel()
	_, err = h.client.Call(ctx, call("book", "r1", "late", `{"flight":"BA4"}`))
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Errorf("a call past its deadline with no stream = %v, want the deadline and the last refusal", err)
	}
}

// TestCallPublishesAgainAfterLostPubAck: the client's connection drops every
// byte while a call is published, then is reset; the publication's PubAck
// never comes, and Call publishes again (the same call id: a duplicate if the
// first copy was stored) instead of waiting out its whole deadline.
func TestCallPublishesAgainAfterLostPubAck(t *testing.T) {
	bus.ShortenCallPublishAttempts(t, time.Second)
	h := newHarness(t)
	h.startWorker(t, quickBooking(t), bus.WorkerConfig{}, 0)
	c, proxy := h.proxiedClient(t)
	if _, err := c.Call(ctxT(t), call("book", "r1", "first", `{"flight":"BA1"}`)); err != nil {
		t.Fatal(err)
	}

	proxy.Blackhole()
	ctx, cancel := context.WithTimeout(ctxT(t), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		a, err := c.Call(ctx, call("book", "r1", "lost", `{"flight":"BA2"}`))
		if err == nil && a.Kind != events.KindCompleted {
			err = errors.New("answer " + string(a.Kind))
		}
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	proxy.Restore() // resets the black-holed connection; the client reconnects
	if err := <-done; err != nil {
		t.Fatalf("call whose PubAck was lost: %v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("call whose PubAck was lost took %v", d)
	}
}

// TestCallFindsAnswerPublishedWhileDisconnected: the client's connection
// drops while its call runs, and the answer is published before it is back:
// no subscription heard it, and Call finds it in the stream once reconnected
// instead of waiting out its deadline.
func TestCallFindsAnswerPublishedWhileDisconnected(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	h.startWorker(t, registry(t, bookTool(t, "book", tool.Idempotent, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		entered <- struct{}{}
		<-release
		return "booked", nil
	})), bus.WorkerConfig{}, 0)
	c, proxy := h.proxiedClient(t)
	ctx, cancel := context.WithTimeout(ctxT(t), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		a, err := c.Call(ctx, call("book", "r1", "away", `{"flight":"BA1"}`))
		if err == nil && (a.Kind != events.KindCompleted || a.Outcome != "booked") {
			err = fmt.Errorf("answer %s %q", a.Kind, a.Outcome)
		}
		done <- err
	}()
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the call never reached the tool")
	}
	proxy.Cut() // the client's connection drops, and stays down
	close(release)
	wait.Eventually(t, 10*time.Second, "the answer stored", func() bool {
		return len(eventSubjects(t, h.js, wire.AnswerFilter("acme", "book", "*", "away"))) > 0
	})
	proxy.Restore()
	if err := <-done; err != nil {
		t.Fatalf("a call answered while its client was away: %v", err)
	}
}

// proxiedClient returns a client whose connection reaches the server through
// a proxy the test controls, and the proxy. It reconnects every 50 ms.
func (h *harness) proxiedClient(t *testing.T) (*bus.Client, *tcpproxy.Proxy) {
	t.Helper()
	proxy := tcpproxy.Start(t, h.srv.Addr().String())
	nc, err := nats.Connect("nats://"+proxy.Addr(), nats.Name(t.Name()), nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, err := bus.NewClient(natstest.JetStream(t, nc), bus.ClientConfig{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return c, proxy
}

// lostPubAck is a JetStream whose first publication is stored but whose
// PubAck never reaches the caller: that try waits out its context, as one
// whose PubAck was lost does. stored is closed once the first copy is in.
type lostPubAck struct {
	jetstream.JetStream
	once   sync.Once
	stored chan struct{}
}

func newLostPubAck(js jetstream.JetStream) *lostPubAck {
	return &lostPubAck{JetStream: js, stored: make(chan struct{})}
}

func (l *lostPubAck) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	first := false
	l.once.Do(func() { first = true })
	if !first {
		return l.JetStream.PublishMsg(ctx, m, opts...)
	}
	if _, err := l.JetStream.PublishMsg(ctx, m, opts...); err != nil {
		return nil, err
	}
	close(l.stored)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestLostPubAckWhileTheCallWaits: the first copy of a call is stored but its
// PubAck is lost, and no executor has taken it when the client sends it again:
// the stream refuses the second copy (its subject holds the first), the
// client reads that as stored, and the call is run once and answered.
func TestLostPubAckWhileTheCallWaits(t *testing.T) {
	bus.ShortenCallPublishAttempts(t, 300*time.Millisecond)
	h := newHarness(t)
	lossy := newLostPubAck(h.js)
	c, err := bus.NewClient(lossy, bus.ClientConfig{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		a, err := c.Call(ctxT(t), call("book", "r1", "lost-1", `{"flight":"BA1"}`))
		if err == nil && a.Kind != events.KindCompleted {
			err = fmt.Errorf("answer %s", a.Kind)
		}
		done <- err
	}()
	<-lossy.stored
	time.Sleep(time.Second) // past the first try and into the second, refused
	if n := streamMsgs(t, h.js, wire.CallStream); n != 1 {
		t.Fatalf("the calls stream holds %d messages, want 1", n)
	}
	var entered atomic.Int64
	wk := h.startWorker(t, registry(t, bookTool(t, "book", "", func(context.Context, tool.Context, json.RawMessage) (string, error) {
		entered.Add(1)
		return "booked", nil
	})), bus.WorkerConfig{}, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	consumerSettled(t, h.js)
	if n, got := entered.Load(), wk.w.Stats().Received.Load(); n != 1 || got != 1 {
		t.Errorf("body entered %d times, worker received %d calls; want 1, 1", n, got)
	}
}

// TestLostPubAckAfterTheAnswer: the first copy of a call is stored but its
// PubAck is lost, and an executor answers it before the client sends it
// again: the second copy, marked as a repeat, is stored (the first has left
// the stream), and the executor acknowledges it without running a body that
// has no idempotency policy again or answering it twice.
func TestLostPubAckAfterTheAnswer(t *testing.T) {
	bus.ShortenCallPublishAttempts(t, 500*time.Millisecond)
	h := newHarness(t)
	var entered atomic.Int64
	wk := h.startWorker(t, registry(t, bookTool(t, "book", "", func(context.Context, tool.Context, json.RawMessage) (string, error) {
		entered.Add(1)
		return "booked", nil
	})), bus.WorkerConfig{}, 0)
	lossy := newLostPubAck(h.js)
	c, err := bus.NewClient(lossy, bus.ClientConfig{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Call(ctxT(t), call("book", "r1", "lost-2", `{"flight":"BA1"}`))
	if err != nil || a.Kind != events.KindCompleted {
		t.Fatalf("answer %v, %v", a.Kind, err)
	}
	wait.Eventually(t, 10*time.Second, "the copy sent again to be taken", func() bool { return wk.w.Stats().Received.Load() == 2 })
	consumerSettled(t, h.js)
	if n := entered.Load(); n != 1 {
		t.Errorf("body entered %d times, want 1", n)
	}
	if n := wk.w.Stats().AlreadyAnswered.Load(); n != 1 {
		t.Errorf("%d copies acknowledged as answered before, want 1", n)
	}
	if got := eventSubjects(t, h.js, wire.AnswerFilter("acme", "book", "*", "lost-2")); len(got) != 1 {
		t.Errorf("answers stored: %v, want one", got)
	}
}
