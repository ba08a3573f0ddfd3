package toolexec

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
)

// TestLookAgainFindsALateAnswer: an answer that reaches the stream after the
// attach's first look, and that its subscription did not hear (published just
// before it took effect), is found by looking again.
func TestLookAgainFindsALateAnswer(t *testing.T) {
	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	c, err := newClient(js)
	if err != nil {
		t.Fatal(err)
	}
	a := events.Answer{Kind: events.KindCompleted, Tenant: "acme", RunID: "r1", CallID: "late-1", Tool: "book",
		Key: strings.Repeat("b", 64), Outcome: "PNR-9", Time: time.Now()}
	filter := wire.AnswerFilter(a.Tenant, a.Tool, a.RunID, a.CallID)
	if _, err := c.stored.First(ctx, filter); err == nil {
		t.Fatal("an answer is stored before any was published")
	}
	out := make(chan lookupResult, 1)
	go lookAgain(ctx, c.lookStored(filter), out)
	time.Sleep(300 * time.Millisecond) // a few looks find nothing
	data, err := wire.AnswerJSON(a, "/test")
	if err != nil {
		t.Fatal(err)
	}
	msg := wire.StructuredMsg(wire.AnswerSubject(a), data)
	msg.Header.Set(jetstream.MsgIDHeader, wire.MsgID(a))
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-out:
		if r.err != nil || r.a.CallID != a.CallID || r.a.Outcome != a.Outcome {
			t.Fatalf("looking again found %+v, %v", r.a, r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("looking again did not find the answer stored after the first look")
	}
}
