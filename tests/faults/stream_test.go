package faults_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/tests/faults"
)

// TestWaitSettled drives WaitSettled through its three ends: a call still
// pending keeps it waiting, an empty queue settles it, and a call the
// consumer will never be handed (here: outside its filter, as a message
// nats-server failed to remove after an ack is) settles it with the call
// counted as kept.
func TestWaitSettled(t *testing.T) {
	parallel(t)
	js := natstest.JetStream(t, natstest.Connect(t, natstest.Start(t)))
	ctx := ctxFor(t, time.Minute)
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: wire.CallStream, Subjects: []string{"q.>"}, Retention: jetstream.WorkQueuePolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: bus.DefaultDurable, FilterSubject: "q.work", AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "q.work", []byte("call")); err != nil {
		t.Fatal(err)
	}

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = faults.WaitSettled(short, js)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "1 pending") {
		t.Fatalf("with a call pending: err = %v, want one naming it", err)
	}

	m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := faults.WaitSettled(ctx, js)
	if err != nil || got.Kept != 0 {
		t.Fatalf("after the ack: %+v, %v; want settled with nothing kept", got, err)
	}

	if _, err := js.Publish(ctx, "q.elsewhere", []byte("never delivered")); err != nil {
		t.Fatal(err)
	}
	got, err = faults.WaitSettled(ctx, js)
	if err != nil || got.Kept != 1 {
		t.Fatalf("with a call the consumer never sees: %+v, %v; want settled with 1 kept", got, err)
	}
}
