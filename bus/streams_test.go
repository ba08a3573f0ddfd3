package bus_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
)

func TestEnsureStreams(t *testing.T) {
	s := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, s))
	ctx := ctxT(t)
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	info := func(name string) jetstream.StreamConfig {
		t.Helper()
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		i, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return i.Config
	}
	calls := info(wire.CallStream)
	if calls.Retention != jetstream.WorkQueuePolicy || len(calls.Subjects) != 1 || calls.Subjects[0] != "toolexec.call.*.*.*" ||
		calls.MaxMsgsPerSubject != 1 || calls.Discard != jetstream.DiscardNew || !calls.DiscardNewPerSubject ||
		calls.Duplicates != 100*time.Millisecond || calls.Storage != jetstream.FileStorage || calls.Replicas != 1 {
		t.Errorf("calls stream %+v", calls)
	}
	evs := info(wire.EventStream)
	if evs.Retention != jetstream.LimitsPolicy || len(evs.Subjects) != 1 || evs.Subjects[0] != "toolexec.event.>" ||
		evs.MaxAge != bus.DefaultEventMaxAge || evs.Duplicates != bus.DefaultDuplicates {
		t.Errorf("events stream %+v", evs)
	}
	if _, err := js.Stream(ctx, wire.LegacyCallStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("the calls stream of wire version 1: %v, want none made", err)
	}

	// Again, with other limits: the streams are updated in place.
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{EventMaxAge: time.Minute, Duplicates: 5 * time.Minute, CallMaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if evs := info(wire.EventStream); evs.MaxAge != time.Minute || evs.Duplicates != time.Minute {
		t.Errorf("updated events stream: max age %v, duplicates %v; want 1m, capped to 1m", evs.MaxAge, evs.Duplicates)
	}
	if calls := info(wire.CallStream); calls.MaxAge != time.Hour || calls.Duplicates != 100*time.Millisecond {
		t.Errorf("updated calls stream: max age %v, duplicates %v; want 1h, 100ms", calls.MaxAge, calls.Duplicates)
	}
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{Replicas: 6}); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Errorf("EnsureStreams(Replicas 6) = %v, want ErrInvalidConfig", err)
	}
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{Replicas: 3}); err == nil {
		t.Error("three replicas on one server accepted")
	}
}

func TestEnsureConsumer(t *testing.T) {
	s := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, s))
	ctx := ctxT(t)
	if _, err := bus.EnsureConsumer(ctx, js, bus.ConsumerConfig{}); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("EnsureConsumer without streams = %v, want ErrStreamNotFound", err)
	}
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	c, err := bus.EnsureConsumer(ctx, js, bus.ConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.CachedInfo().Config
	if cfg.Durable != bus.DefaultDurable || cfg.AckPolicy != jetstream.AckExplicitPolicy || cfg.AckWait != bus.DefaultAckWait ||
		cfg.MaxDeliver != bus.DefaultMaxDeliver || cfg.MaxAckPending != bus.DefaultMaxAckPending || cfg.FilterSubject != "" {
		t.Errorf("consumer %+v", cfg)
	}
	c, err = bus.EnsureConsumer(ctx, js, bus.ConsumerConfig{AckWait: 10 * time.Second, MaxDeliver: 3, MaxAckPending: 2048})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := c.CachedInfo().Config; cfg.AckWait != 10*time.Second || cfg.MaxDeliver != 3 || cfg.MaxAckPending != 2048 {
		t.Errorf("updated consumer %+v", cfg)
	}
}

// TestSetupSurvivesLostReplies: the reply to the first request of every API
// subject is dropped after the request took effect, as when a new cluster's
// routes reset under it. EnsureStreams and EnsureConsumer try again within the
// caller's deadline instead of spending all of it on the first try. (Not
// parallel: it shortens a package-wide bound.)
func TestSetupSurvivesLostReplies(t *testing.T) {
	bus.ShortenSetupAttempts(t, 300*time.Millisecond)
	s := natstest.Start(t)
	lossy := natstest.NewLossyAPI(t, natstest.Connect(t, s))
	ctx := ctxT(t)
	start := time.Now()
	if err := bus.EnsureStreams(ctx, lossy, bus.StreamsConfig{}); err != nil {
		t.Fatalf("EnsureStreams with lost replies: %v", err)
	}
	if _, err := bus.EnsureConsumer(ctx, lossy, bus.ConsumerConfig{}); err != nil {
		t.Fatalf("EnsureConsumer with lost replies: %v", err)
	}
	// The calls stream of wire version 1 is looked for first. Then
	// CreateOrUpdateStream asks for an update and creates the stream when
	// there is none: both first replies are lost, for each stream.
	want := []string{
		"STREAM.INFO." + wire.LegacyCallStream,
		"STREAM.UPDATE." + wire.CallStream, "STREAM.CREATE." + wire.CallStream,
		"STREAM.UPDATE." + wire.EventStream, "STREAM.CREATE." + wire.EventStream,
		"CONSUMER.CREATE." + wire.CallStream + "." + bus.DefaultDurable,
	}
	if got := lossy.Dropped(); !slices.Equal(got, want) {
		t.Errorf("dropped replies %q, want %q", got, want)
	}
	// Each lost reply cost one short try: the whole setup took a few tries'
	// time, far from ctxT's minute.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("setup took %v", d)
	}

	// A deadline that ends during the tries is returned as it is.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	fresh := natstest.NewLossyAPI(t, natstest.Connect(t, natstest.Start(t)))
	if err := bus.EnsureStreams(short, fresh, bus.StreamsConfig{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("EnsureStreams past its deadline = %v, want DeadlineExceeded", err)
	}
}

// TestWorkerSizesTheConsumer: MaxAckPending is at least the worker's
// concurrency.
func TestWorkerSizesTheConsumer(t *testing.T) {
	h := newHarness(t)
	h.startWorker(t, registry(t), bus.WorkerConfig{Concurrency: 1500, AckWait: 9 * time.Second, MaxDeliver: 4}, 0)
	var cfg jetstream.ConsumerConfig
	wait.Eventually(t, 10*time.Second, "the consumer", func() bool {
		c, err := h.js.Consumer(ctxT(t), wire.CallStream, bus.DefaultDurable)
		if err != nil {
			return false
		}
		cfg = c.CachedInfo().Config
		return true
	})
	if cfg.MaxAckPending != 1500 || cfg.AckWait != 9*time.Second || cfg.MaxDeliver != 4 {
		t.Errorf("consumer %+v", cfg)
	}
}
