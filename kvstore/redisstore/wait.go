package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tesserix/toolexec/kvstore"
)

// subscribeTimeout bounds the wait for Redis to confirm a Wait's subscription.
const subscribeTimeout = 5 * time.Second

// Wait blocks until the record differs from seen — another revision, state or
// holder — and returns it; until the record is gone (an error wrapping
// kvstore.ErrNotFound); or, for a claimed record, until its lease has run out by
// Redis's clock (the returned record has LeaseExpired set). It returns ctx.Err()
// when ctx ends first, and an error wrapping kvstore.ErrUnavailable if Redis
// cannot be reached or the store is closed.
//
// Wait subscribes to the record's channel and, once Redis has confirmed the
// subscription, re-reads the record, so a change made between seen and the
// subscription is not missed. A read that finds the record as seen also flags it
// as waited on, so that the next write publishes on the channel (writes to a
// record nobody waits on publish nothing). It re-reads on every message, at the lease deadline
// (measured locally from the remaining time Redis's clock reported) and every
// Config.WaitRecheck. The subscription is closed before Wait returns.
func (s *Store) Wait(ctx context.Context, seen kvstore.Record) (kvstore.Record, error) {
	const op = "wait"
	if err := s.closed(op); err != nil {
		return kvstore.Record{}, err
	}
	if err := invalid(op, kvstore.CheckKey(seen.Tenant, seen.Key)); err != nil {
		return kvstore.Record{}, err
	}
	if err := ctx.Err(); err != nil {
		return kvstore.Record{}, err
	}

	ps := s.client.Subscribe(ctx, s.channel(seen.Tenant, seen.Key))
	defer ps.Close()
	// Receive has no deadline of its own: bound the confirmation so that a
	// connection black-holed just as it subscribes fails instead of hanging.
	rctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
	_, err := ps.ReceiveTimeout(rctx, subscribeTimeout)
	cancel()
	if err != nil {
		return kvstore.Record{}, ctxOr(ctx, unavailable(op, fmt.Errorf("subscribe: %w", err)))
	}
	msgs := ps.Channel()

	recheck := time.NewTicker(s.cfg.WaitRecheck)
	defer recheck.Stop()
	deadline := time.NewTimer(time.Hour)
	deadline.Stop()
	defer deadline.Stop()

	seenRev := strconv.FormatUint(seen.Revision, 10)
	for {
		cur, now, err := s.read(ctx, op, watchScript, seen.Tenant, seen.Key, seenRev)
		if errors.Is(err, kvstore.ErrNotFound) {
			return kvstore.Record{}, err
		}
		if err != nil {
			return kvstore.Record{}, ctxOr(ctx, err)
		}
		if cur.Revision != seen.Revision || cur.State != seen.State || cur.Holder != seen.Holder || cur.LeaseExpired {
			return cur, nil
		}
		if cur.State == kvstore.StateClaimed {
			// Wake when Redis's clock should have passed the deadline; the
			// re-read then confirms it. A millisecond of slack covers TIME's
			// rounding to whole milliseconds.
			deadline.Reset(time.Duration(cur.LeaseUntil.UnixMilli()-now)*time.Millisecond + time.Millisecond)
		}

		select {
		case <-ctx.Done():
			return kvstore.Record{}, ctx.Err()
		case <-s.done:
			return kvstore.Record{}, unavailable(op, ErrClosed)
		case _, ok := <-msgs:
			if !ok {
				return kvstore.Record{}, ctxOr(ctx, unavailable(op, errors.New("subscription closed")))
			}
		case <-deadline.C:
		case <-recheck.C:
		}
	}
}
