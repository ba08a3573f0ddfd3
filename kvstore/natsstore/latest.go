package natsstore

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// eachLatest calls visit with the latest entry of every live key matching
// filter, through one watch (an ordered consumer, which any replica may
// serve), and returns when the last one has been delivered, or visit's first
// error. The watch ending early, ctx ending or the store closing is an error
// wrapping kvstore.ErrUnavailable.
func (s *Store) eachLatest(ctx context.Context, op, filter string, visit func(jetstream.KeyValueEntry) error) error {
	w, err := s.kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return unavailable(op, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return unavailable(op, ctx.Err())
		case <-s.done:
			return unavailable(op, errClosed)
		case e, ok := <-w.Updates():
			if !ok {
				return unavailable(op, errWatchClosed)
			}
			if e == nil { // every key's latest value has been delivered
				return nil
			}
			if err := visit(e); err != nil {
				return err
			}
		}
	}
}
