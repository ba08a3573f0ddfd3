package faults

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
)

// ReadAnswers reads every event stored in TOOLEXEC_EVENTS, oldest first, with
// the server's timestamp of each. Events that are not well-formed answers are
// returned as errors: a history must not silently drop what it cannot read.
func ReadAnswers(ctx context.Context, js jetstream.JetStream) ([]StoredAnswer, error) {
	stream, err := js.Stream(ctx, wire.EventStream)
	if err != nil {
		return nil, fmt.Errorf("faults: %s: %w", wire.EventStream, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("faults: %s info: %w", wire.EventStream, err)
	}
	last := info.State.LastSeq
	out := make([]StoredAnswer, 0, info.State.Msgs)
	if info.State.Msgs == 0 {
		return out, nil
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("faults: reading %s: %w", wire.EventStream, err)
	}
	var bad []error
	for {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("faults: reading %s: %w", wire.EventStream, ctx.Err())
			}
			continue
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return nil, fmt.Errorf("faults: reading %s: %w", wire.EventStream, err)
			}
			a, err := wire.DecodeAnswer(m.Headers(), m.Data())
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
			return nil, fmt.Errorf("faults: reading %s: %w", wire.EventStream, ctx.Err())
		}
	}
}

// Settled is what WaitSettled found once the executors had nothing left to
// do.
type Settled struct {
	// Kept counts calls that the work-queue stream still holds while the
	// shared consumer has nothing pending or unacknowledged: nothing will
	// deliver them again, so the executors are done with them. nats-server
	// can keep such a call when it stops between recording an ack and
	// removing the message; a server that never stopped should keep none.
	Kept uint64
}

// keptGrace is how long WaitSettled lets the stream catch up with the
// consumer (a work queue removes an acked message a moment after the ack is
// recorded) before it counts what is left as kept.
const keptGrace = 5 * time.Second

// WaitSettled waits until the executors have nothing left to do: the shared
// consumer has nothing pending or unacknowledged and the calls stream is
// empty (a work queue keeps a call until it is acknowledged or terminated),
// or holds only calls the consumer has acknowledged (see Settled.Kept). It
// returns ctx's error, with what was left, if that does not happen in time.
func WaitSettled(ctx context.Context, js jetstream.JetStream) (Settled, error) {
	var (
		state     string
		doneSince time.Time // when the consumer was first seen with nothing left while the stream still held calls
	)
	for {
		left, err := leftover(ctx, js)
		switch {
		case err != nil && ctx.Err() != nil:
			// ctx ended during the look: the last state seen says more.
		case err != nil:
			state, doneSince = err.Error(), time.Time{}
		case left.pending > 0 || left.unacked > 0:
			state, doneSince = left.String(), time.Time{}
		case left.msgs == 0:
			return Settled{}, nil
		default:
			state = left.String()
			if doneSince.IsZero() {
				doneSince = time.Now()
			} else if time.Since(doneSince) >= keptGrace {
				return Settled{Kept: left.msgs}, nil
			}
		}
		select {
		case <-ctx.Done():
			return Settled{}, fmt.Errorf("faults: executors not settled (%s): %w", state, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// queueState is what the calls stream and its shared consumer hold.
type queueState struct {
	msgs, pending, unacked uint64
	first, last            uint64 // the stream's first and last sequence
	ackFloor, delivered    uint64 // the consumer's, in stream sequence
}

func (q queueState) String() string {
	return fmt.Sprintf("%d calls in the stream (sequences %d to %d), %d pending, %d unacknowledged; consumer ack floor %d, delivered %d",
		q.msgs, q.first, q.last, q.pending, q.unacked, q.ackFloor, q.delivered)
}

func leftover(ctx context.Context, js jetstream.JetStream) (queueState, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := js.Stream(rctx, wire.CallStream)
	if err != nil {
		return queueState{}, err
	}
	info, err := s.Info(rctx)
	if err != nil {
		return queueState{}, err
	}
	c, err := s.Consumer(rctx, bus.DefaultDurable)
	if err != nil {
		return queueState{}, err
	}
	ci, err := c.Info(rctx)
	if err != nil {
		return queueState{}, err
	}
	return queueState{
		msgs: info.State.Msgs, pending: ci.NumPending, unacked: uint64(ci.NumAckPending),
		first: info.State.FirstSeq, last: info.State.LastSeq,
		ackFloor: ci.AckFloor.Stream, delivered: ci.Delivered.Stream,
	}, nil
}
