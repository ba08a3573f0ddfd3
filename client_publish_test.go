package toolexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/tcpproxy"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/tool"
)

// streams is an embedded server with both streams, on which a test starts
// the workers it needs, each on a connection of its own.
type streams struct {
	srv *server.Server
	js  jetstream.JetStream
}

func newStreams(t *testing.T) *streams {
	t.Helper()
	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	if err := bus.EnsureStreams(ctxFor(t, time.Minute), js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	return &streams{srv: srv, js: js}
}

// startWorker runs a bus worker serving the tool book with body, with no
// idempotency policy when kind is "", until the test ends.
func (s *streams) startWorker(t *testing.T, kind tool.Kind, body tool.Func) *bus.Worker {
	t.Helper()
	spec := tool.Spec{Name: "book", Parameters: json.RawMessage(`{"type":"object","properties":{"flight":{"type":"string"}}}`)}
	if kind != "" {
		spec.Idempotency = &tool.Policy{Kind: kind, KeyArguments: []string{"flight"}}
	}
	book, err := tool.New(spec, body)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tool.NewRegistry(book)
	if err != nil {
		t.Fatal(err)
	}
	js := natstest.JetStream(t, natstest.Connect(t, s.srv))
	st, err := natsstore.New(ctxFor(t, time.Minute), js, natsstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatch.New(dispatch.Config{Tools: reg, Store: st, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := bus.NewWorker(js, d, bus.WorkerConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := w.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		<-done
	})
	return w
}

// booked is a body that books at once.
func booked(context.Context, tool.Context, json.RawMessage) (string, error) { return "booked", nil }

// client returns a client on a connection of its own.
func (s *streams) client(t *testing.T) *toolexec.Client {
	t.Helper()
	c, err := toolexec.NewClient(natstest.Connect(t, s.srv), toolexec.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// proxiedClient returns a client whose connection reaches the server through
// a proxy the test controls, and the proxy. It reconnects every 50 ms.
func (s *streams) proxiedClient(t *testing.T) (*toolexec.Client, *tcpproxy.Proxy) {
	t.Helper()
	proxy := tcpproxy.Start(t, s.srv.Addr().String())
	nc, err := nats.Connect("nats://"+proxy.Addr(), nats.Name(t.Name()), nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, err := toolexec.NewClient(nc, toolexec.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	return c, proxy
}

// calledOK calls book with flight under callID and returns an error unless the
// call completed.
func calledOK(ctx context.Context, c *toolexec.Client, callID, flight string) error {
	a, err := c.Call(ctx, "acme", "book", bookArgs{Flight: flight}, toolexec.WithFreshCallID(callID))
	if err == nil && a.Kind != events.KindCompleted {
		err = fmt.Errorf("answer %s", a.Kind)
	}
	return err
}

// TestCallWaitsOutLeaderlessStream: after a client has stored a call of a
// tenant, no stream answering that tenant's subject is a leader's election,
// which Call waits out; here the calls stream is gone for a second (deleted,
// then made again) and a call made meanwhile is answered once it is back. A
// client that never stored a call of the tenant fails at once instead: then
// no responders means that no stream takes the tenant's calls.
func TestCallWaitsOutLeaderlessStream(t *testing.T) {
	t.Parallel()
	s := newStreams(t)
	s.startWorker(t, tool.Idempotent, booked)
	c := s.client(t)
	if err := calledOK(ctxFor(t, time.Minute), c, "before", "BA1"); err != nil {
		t.Fatalf("first call: %v", err)
	}
	if err := s.js.DeleteStream(ctxFor(t, time.Minute), wire.CallStream); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if err := calledOK(ctxFor(t, time.Minute), s.client(t), "fresh", "BA2"); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Errorf("a new client's call with no stream = %v, want ErrNoStreamResponse", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a new client's call with no stream failed after %v, not at once", d)
	}

	done := make(chan error, 1)
	go func() { done <- calledOK(ctxFor(t, time.Minute), c, "during", "BA3") }()
	time.Sleep(time.Second)
	select {
	case err := <-done:
		t.Fatalf("the call ended while the stream was gone: %v", err)
	default:
	}
	if err := bus.EnsureStreams(ctxFor(t, time.Minute), s.js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the call made while the stream was gone: %v", err)
	}

	// The wait ends with the caller's context, which the error names with the
	// last refusal.
	if err := s.js.DeleteStream(ctxFor(t, time.Minute), wire.CallStream); err != nil {
		t.Fatal(err)
	}
	err := calledOK(ctxFor(t, 700*time.Millisecond), c, "late", "BA4")
	if !errors.Is(err, events.ErrNoAnswer) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Errorf("a call past its deadline with no stream = %v, want no answer, the deadline and the last refusal", err)
	}
}

// TestCallPublishesAgainAfterLostPubAck: the client's connection drops every
// byte while a call is published, then is reset; the publication's PubAck
// never comes, and Call publishes again (the same call id: a duplicate if the
// first copy was stored) instead of waiting out its whole deadline.
func TestCallPublishesAgainAfterLostPubAck(t *testing.T) {
	toolexec.ShortenCallPublishAttempts(t, time.Second)
	s := newStreams(t)
	s.startWorker(t, tool.Idempotent, booked)
	c, proxy := s.proxiedClient(t)
	if err := calledOK(ctxFor(t, time.Minute), c, "first", "BA1"); err != nil {
		t.Fatal(err)
	}

	proxy.Blackhole()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- calledOK(ctxFor(t, 30*time.Second), c, "lost", "BA2") }()
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
	s := newStreams(t)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	s.startWorker(t, tool.Idempotent, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		entered <- struct{}{}
		<-release
		return "booked", nil
	})
	c, proxy := s.proxiedClient(t)
	done := make(chan error, 1)
	go func() { done <- calledOK(ctxFor(t, 30*time.Second), c, "away", "BA1") }()
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the call never reached the tool")
	}
	proxy.Cut() // the client's connection drops, and stays down
	close(release)
	wait.Eventually(t, 10*time.Second, "the answer stored", func() bool {
		return len(natstest.StreamSubjects(t, s.js, wire.EventStream, wire.AnswerFilter("acme", "book", "*", "away"))) > 0
	})
	proxy.Restore()
	if err := <-done; err != nil {
		t.Fatalf("a call answered while its client was away: %v", err)
	}
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

// lossyClient returns a client whose first publication's PubAck is lost.
func (s *streams) lossyClient(t *testing.T) (*toolexec.Client, *lostPubAck) {
	t.Helper()
	lossy := newLostPubAck(natstest.JetStream(t, natstest.Connect(t, s.srv)))
	c, err := toolexec.NewClientOn(lossy, toolexec.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	return c, lossy
}

// settled waits until the shared consumer has nothing pending and nothing
// waiting for an ack.
func (s *streams) settled(t *testing.T) {
	t.Helper()
	wait.Eventually(t, 15*time.Second, "the consumer to settle", func() bool {
		c, err := s.js.Consumer(ctxFor(t, 5*time.Second), wire.CallStream, bus.DefaultDurable)
		if err != nil {
			return false
		}
		info, err := c.Info(ctxFor(t, 5*time.Second))
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
}

// TestLostPubAckWhileTheCallWaits: the first copy of a call is stored but its
// PubAck is lost, and no executor has taken it when the client sends it again:
// the stream refuses the second copy (its subject holds the first), the
// client reads that as stored, and the call is run once and answered.
func TestLostPubAckWhileTheCallWaits(t *testing.T) {
	toolexec.ShortenCallPublishAttempts(t, 300*time.Millisecond)
	s := newStreams(t)
	c, lossy := s.lossyClient(t)
	done := make(chan error, 1)
	go func() { done <- calledOK(ctxFor(t, time.Minute), c, "lost-1", "BA1") }()
	<-lossy.stored
	time.Sleep(time.Second) // past the first try and into the second, refused
	st, err := s.js.Stream(ctxFor(t, 5*time.Second), wire.CallStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctxFor(t, 5*time.Second)); err != nil || info.State.Msgs != 1 {
		t.Fatalf("the calls stream holds %+v (%v), want 1 message", info.State, err)
	}
	var entered atomic.Int64
	w := s.startWorker(t, "", func(context.Context, tool.Context, json.RawMessage) (string, error) {
		entered.Add(1)
		return "booked", nil
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.settled(t)
	if n, got := entered.Load(), w.Stats().Received.Load(); n != 1 || got != 1 {
		t.Errorf("body entered %d times, worker received %d calls; want 1, 1", n, got)
	}
}

// TestLostPubAckAfterTheAnswer: the first copy of a call is stored but its
// PubAck is lost, and an executor answers it before the client sends it
// again: the second copy, marked as a repeat, is stored (the first has left
// the stream), and the executor acknowledges it without running a body that
// has no idempotency policy again or answering it twice.
func TestLostPubAckAfterTheAnswer(t *testing.T) {
	toolexec.ShortenCallPublishAttempts(t, 500*time.Millisecond)
	s := newStreams(t)
	var entered atomic.Int64
	w := s.startWorker(t, "", func(context.Context, tool.Context, json.RawMessage) (string, error) {
		entered.Add(1)
		return "booked", nil
	})
	c, _ := s.lossyClient(t)
	if err := calledOK(ctxFor(t, time.Minute), c, "lost-2", "BA1"); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, "the copy sent again to be taken", func() bool { return w.Stats().Received.Load() == 2 })
	s.settled(t)
	if n := entered.Load(); n != 1 {
		t.Errorf("body entered %d times, want 1", n)
	}
	if n := w.Stats().AlreadyAnswered.Load(); n != 1 {
		t.Errorf("%d copies acknowledged as answered before, want 1", n)
	}
	if got := natstest.StreamSubjects(t, s.js, wire.EventStream, wire.AnswerFilter("acme", "book", "*", "lost-2")); len(got) != 1 {
		t.Errorf("answers stored: %v, want one", got)
	}
}
