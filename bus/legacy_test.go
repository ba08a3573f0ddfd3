package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/clienttest"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/kvstore/natsstore"
)

// legacyCallStream is the calls stream as executors of wire version 1 made
// it: every call subject, one window of message ids across tenants.
var legacyCallStream = jetstream.StreamConfig{
	Name: wire.LegacyCallStream, Subjects: []string{"toolexec.call.>"},
	Retention: jetstream.WorkQueuePolicy, Duplicates: 2 * time.Minute,
}

// publishV1 publishes c as a caller of wire version 1 did: on
// toolexec.call.<tenant>.<tool>, with the call id as Nats-Msg-Id.
func publishV1(t *testing.T, js jetstream.JetStream, c events.Call) *jetstream.PubAck {
	t.Helper()
	data, err := wire.CallJSON(events.Call{Tenant: c.Tenant, Tool: c.Tool, RunID: c.RunID, CallID: c.CallID, Source: "/v1", Arguments: c.Arguments})
	if err != nil {
		t.Fatal(err)
	}
	msg := wire.StructuredMsg(wire.CallPrefix+c.Tenant+"."+c.Tool, data)
	msg.Header.Set(jetstream.MsgIDHeader, c.CallID)
	ack, err := js.PublishMsg(ctxT(t), msg)
	if err != nil {
		t.Fatal(err)
	}
	return ack
}

// TestOlderExecutorsRefuseNewCalls: where the executors are of wire version 1
// (their calls stream takes every call subject, no TOOLEXEC_CALLS_V2), a
// client of version 2 is refused at once, with ErrOldCallStream, and nothing
// is stored for executors that could not read it.
func TestOlderExecutorsRefuseNewCalls(t *testing.T) {
	s := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, s))
	if _, err := js.CreateStream(ctxT(t), legacyCallStream); err != nil {
		t.Fatal(err)
	}
	c := clienttest.New(t, js.Conn())
	start := time.Now()
	_, err := c.Call(ctxT(t), call("book", "r1", "c1", `{"flight":"BA1"}`))
	if !errors.Is(err, toolexec.ErrOldCallStream) {
		t.Fatalf("Call against executors of wire version 1: %v, want ErrOldCallStream", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refused after %v, not at once", d)
	}
	if n := streamMsgs(t, js, wire.LegacyCallStream); n != 0 {
		t.Errorf("the old calls stream holds %d messages, want 0", n)
	}
}

// TestLegacyCallStream: executors of wire version 2 started where version 1
// ran narrow the old calls stream to the old subjects, keep its calls, and
// take them with a worker of their own, beside the new stream's; a caller of
// version 1 is still answered; deleting the old stream ends its worker.
func TestLegacyCallStream(t *testing.T) {
	s := natstest.Start(t)
	nc := natstest.Connect(t, s)
	js := natstest.JetStream(t, nc)
	ctx := ctxT(t)
	if _, err := js.CreateStream(ctx, legacyCallStream); err != nil {
		t.Fatal(err)
	}
	if found, err := bus.HasLegacyCallStream(ctx, js); err != nil || !found {
		t.Fatalf("HasLegacyCallStream = %v, %v; want true", found, err)
	}
	waiting := call("book", "r1", "old-1", `{"flight":"BA1"}`)
	publishV1(t, js, waiting)

	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	old, err := js.Stream(ctx, wire.LegacyCallStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := old.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Config.Subjects; len(got) != 1 || got[0] != wire.LegacyCallSubjects || info.State.Msgs != 1 {
		t.Fatalf("old calls stream: subjects %v, %d calls; want [%s], 1", got, info.State.Msgs, wire.LegacyCallSubjects)
	}

	st, err := natsstore.New(ctx, js, natsstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatch.New(dispatch.Config{Tools: quickBooking(t), Store: st, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	runWorker := func(cfg bus.WorkerConfig) (*bus.Worker, chan error) {
		t.Helper()
		cfg.Logger = testLogger()
		w, err := bus.NewWorker(js, d, cfg)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- w.Run(context.Background()) }()
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = w.Shutdown(sctx)
		})
		return w, done
	}
	runWorker(bus.WorkerConfig{})
	legacy, legacyDone := runWorker(bus.WorkerConfig{Stream: wire.LegacyCallStream, StopWhenStreamGone: true})

	c := clienttest.New(t, js.Conn())
	for _, cl := range []events.Call{waiting} {
		if a, err := c.Attach(ctx, cl.Tenant, cl.Tool, cl.RunID, cl.CallID); err != nil || a.Kind != events.KindCompleted {
			t.Errorf("the call waiting in the old stream: %v, %v", a.Kind, err)
		}
	}
	late := call("book", "r1", "old-2", `{"flight":"BA2"}`)
	ack := publishV1(t, js, late)
	if ack.Stream != wire.LegacyCallStream {
		t.Errorf("a call of version 1 landed in %s", ack.Stream)
	}
	if a, err := c.Attach(ctx, late.Tenant, late.Tool, late.RunID, late.CallID); err != nil || a.Kind != events.KindCompleted {
		t.Errorf("a call of version 1 published after the upgrade: %v, %v", a.Kind, err)
	}
	if a, err := c.Call(ctx, call("book", "r1", "new-1", `{"flight":"BA3"}`)); err != nil || a.Kind != events.KindCompleted {
		t.Errorf("a call of version 2: %v, %v", a.Kind, err)
	}
	if n := legacy.Stats().Received.Load(); n != 2 {
		t.Errorf("the old stream's worker took %d calls, want 2", n)
	}

	if err := js.DeleteStream(ctx, wire.LegacyCallStream); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-legacyDone:
		if err != nil {
			t.Errorf("the old stream's worker ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the old stream's worker did not stop once its stream was deleted")
	}
	if found, err := bus.HasLegacyCallStream(ctx, js); err != nil || found {
		t.Errorf("HasLegacyCallStream after the deletion = %v, %v; want false", found, err)
	}
	// Without the stream, such a worker ends at once.
	_, done := runWorker(bus.WorkerConfig{Stream: wire.LegacyCallStream, StopWhenStreamGone: true})
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("a worker of a stream that does not exist ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a worker of a stream that does not exist did not end")
	}
}
