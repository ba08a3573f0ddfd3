package faults

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/events"
)

// ReadAnswers reads every event stored in TOOLEXEC_EVENTS, oldest first, with
// the server's timestamp of each. Events that are not well-formed answers are
// returned as errors: a history must not silently drop what it cannot read.
func ReadAnswers(ctx context.Context, js jetstream.JetStream) ([]StoredAnswer, error) {
	stream, err := js.Stream(ctx, events.EventStream)
	if err != nil {
		return nil, fmt.Errorf("faults: %s: %w", events.EventStream, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("faults: %s info: %w", events.EventStream, err)
	}
	last := info.State.LastSeq
	out := make([]StoredAnswer, 0, info.State.Msgs)
	if info.State.Msgs == 0 {
		return out, nil
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("faults: reading %s: %w", events.EventStream, err)
	}
	var bad []error
	for {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("faults: reading %s: %w", events.EventStream, ctx.Err())
			}
			continue
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return nil, fmt.Errorf("faults: reading %s: %w", events.EventStream, err)
			}
			a, err := bus.DecodeAnswer(m.Headers(), m.Data())
			if err != nil {
				bad = append(bad, fmt.Errorf("%s (seq %d): %w", m.Subject(), md.Sequence.Stream, err))
			} else {
				out = append(out, StoredAnswer{Answer: a, Subject: m.Subject(), Stored: md.Timestamp})
			}
			if md.Sequence.Stream >= last {
				return out, errors.Join(bad...)
			}
		}
		if err := batch.Error(); err != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("faults: reading %s: %w", events.EventStream, ctx.Err())
		}
	}
}

// WaitSettled waits until the executors have nothing left to do: the calls
// stream is empty (a work queue keeps a call until it is acknowledged or
// terminated) and the shared consumer has nothing pending or unacknowledged.
// It returns ctx's error, with what was left, if that does not happen in time.
func WaitSettled(ctx context.Context, js jetstream.JetStream) error {
	var state string
	for {
		left, err := leftover(ctx, js)
		if err == nil && left == "" {
			return nil
		}
		if err != nil {
			state = err.Error()
		} else {
			state = left
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("faults: executors not settled (%s): %w", state, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func leftover(ctx context.Context, js jetstream.JetStream) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := js.Stream(rctx, events.CallStream)
	if err != nil {
		return "", err
	}
	info, err := s.Info(rctx)
	if err != nil {
		return "", err
	}
	c, err := s.Consumer(rctx, bus.DefaultDurable)
	if err != nil {
		return "", err
	}
	ci, err := c.Info(rctx)
	if err != nil {
		return "", err
	}
	if info.State.Msgs == 0 && ci.NumPending == 0 && ci.NumAckPending == 0 {
		return "", nil
	}
	return fmt.Sprintf("%d calls in the stream, %d pending, %d unacknowledged",
		info.State.Msgs, ci.NumPending, ci.NumAckPending), nil
}
