package natsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/kvstore"
)

// Wait blocks until the record differs from seen and returns it. It watches the
// key (kv.Watch: the current value, then every change) and returns:
//   - the record, when a revision newer than seen's appears;
//   - kvstore.ErrNotFound, when the key is deleted or purged, or is already gone;
//   - for a claimed record seen with LeaseExpired unset, the record with
//     LeaseExpired set once its lease has run out by the server's clock.
//
// Deadlines are computed from server timestamps: the server's time of the
// record's last write plus its lease (or the retention), against the server's
// time now, learned by a probe write. A local timer runs for the remaining
// duration; when it fires Wait re-reads the key and probes the server's time
// again before it reports an expired lease. The re-read also catches what
// produces no watch event: a tenant's records forgotten by a filtered purge, a
// record removed by the bucket's MaxAge. So Wait never blocks past the lease (or,
// for completed and indeterminate records, the retention) for want of a
// notification.
//
// It returns ctx.Err() when ctx ends first, and an error wrapping
// kvstore.ErrUnavailable when the store is closed or the server cannot be
// reached.
func (s *Store) Wait(ctx context.Context, seen kvstore.Record) (kvstore.Record, error) {
	const op = "wait"
	if err := kvstore.CheckKey(seen.Tenant, seen.Key); err != nil {
		return kvstore.Record{}, fmt.Errorf("natsstore: %s: %w", op, err)
	}
	if err := s.usable(op); err != nil {
		return kvstore.Record{}, err
	}
	if err := ctx.Err(); err != nil {
		return kvstore.Record{}, err
	}
	w, err := s.kv.Watch(ctx, keyOf(seen.Tenant, seen.Key))
	if err != nil {
		return kvstore.Record{}, ctxOr(ctx, unavailable(op, err))
	}
	defer w.Stop()

	var (
		timer   *time.Timer
		timerC  <-chan time.Time
		present = false // the watch delivered a value for the key
		armed   = false
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	arm := func(d time.Duration) {
		if timer != nil {
			timer.Stop()
		}
		// Never longer than safetyRecheck: a watch that stalls (an ordered
		// consumer reset under load, a notification lost) must not keep a waiter
		// past a change the leader already has.
		timer = time.NewTimer(min(d, safetyRecheck))
		timerC = timer.C
		armed = true
	}
	// armFrom schedules the next look at the key from rec's deadlines, measured
	// against the server's time now.
	armFrom := func(rec kvstore.Record) error {
		now, err := s.serverNow(ctx)
		if err != nil {
			return ctxOr(ctx, unavailable(op, err))
		}
		arm(s.untilDeadline(rec, seen, now))
		return nil
	}

	// confirm asks the leader for the key: done with its record (or
	// kvstore.ErrNotFound) if the key moved on from seen; otherwise it schedules
	// the next look.
	confirm := func() (kvstore.Record, bool, error) {
		rec, done, err := s.recheck(ctx, seen)
		if err != nil {
			return kvstore.Record{}, true, ctxOr(ctx, err)
		}
		if done {
			return rec, true, nil
		}
		if rec.Revision == 0 {
			arm(recheckAfter) // the answer was behind seen: look again soon
			return kvstore.Record{}, false, nil
		}
		return kvstore.Record{}, false, armFrom(rec)
	}

	arm(safetyRecheck) // until the watch has said what it sees
	armed = false
	initial := true // the watch is delivering the key's current value
	for {
		select {
		case <-ctx.Done():
			return kvstore.Record{}, ctx.Err()
		case <-s.done:
			return kvstore.Record{}, unavailable(op, errClosed)
		case e, ok := <-w.Updates():
			if !ok {
				return kvstore.Record{}, ctxOr(ctx, unavailable(op, errWatchClosed))
			}
			if e == nil {
				// All current values delivered.
				initial = false
				if !present {
					// The watch sees no value. Its view may lag the leader's
					// (a claim just made): ask the leader before saying gone.
					if rec, done, err := confirm(); done || err != nil {
						return rec, err
					}
					continue
				}
				if !armed {
					// The watch showed only an older revision than seen (a view
					// behind the caller's read): go by seen's own deadlines.
					if err := armFrom(seen); err != nil {
						return kvstore.Record{}, err
					}
				}
				continue
			}
			present = true
			if e.Revision() < seen.Revision {
				continue // older than what the caller already saw
			}
			if e.Operation() != jetstream.KeyValuePut {
				// Deleted or purged since seen. If the key was claimed again
				// since, the leader has the newer record: that is the answer.
				if rec, done, err := confirm(); done || err != nil {
					return rec, err
				}
				continue
			}
			v, err := decodeValue(e.Value())
			if err != nil {
				return kvstore.Record{}, fmt.Errorf("natsstore: %s: key %s: %w", op, e.Key(), err)
			}
			rec := s.recordOf(seen.Tenant, seen.Key, v, e)
			if e.Revision() > seen.Revision {
				if initial {
					// The current value comes from the server that hosts the
					// watch, which may lag the leader (a replicated bucket): a
					// record renewed, then completed, before Wait was called
					// may show as renewed. The leader's is at least as new.
					lrec, done, err := s.recheck(ctx, seen)
					switch {
					case done && err == nil:
						return lrec, nil
					case errors.Is(err, kvstore.ErrNotFound):
						return kvstore.Record{}, err // gone since
					}
				}
				return rec, nil
			}
			// The revision the caller saw, as the server has it: its timestamp
			// is the server's, so its deadlines are the ones to go by.
			if err := armFrom(rec); err != nil {
				return kvstore.Record{}, err
			}
		case <-timerC:
			rec, done, err := s.recheck(ctx, seen)
			if err != nil {
				return kvstore.Record{}, ctxOr(ctx, err)
			}
			if done {
				return rec, nil
			}
			if rec.Revision == 0 {
				arm(recheckAfter) // the answer was behind seen: look again soon
				continue
			}
			now, err := s.serverNow(ctx)
			if err != nil {
				return kvstore.Record{}, ctxOr(ctx, unavailable(op, err))
			}
			if expired(rec, seen, now) {
				rec.LeaseExpired = true
				return rec, nil
			}
			arm(max(s.untilDeadline(rec, seen, now), recheckAfter))
		}
	}
}

// recheck reads the key from the leader. It returns done with the record (or
// kvstore.ErrNotFound) when the key moved on from seen; the record still at
// seen's revision when it did not; a zero record when the answer is behind seen
// (a leader just elected, or a seen the caller made up).
func (s *Store) recheck(ctx context.Context, seen kvstore.Record) (kvstore.Record, bool, error) {
	rec, _, err := s.read(ctx, seen.Tenant, seen.Key)
	switch {
	case errors.Is(err, kvstore.ErrNotFound):
		return kvstore.Record{}, true, fmt.Errorf("natsstore: wait: %w", kvstore.ErrNotFound)
	case err != nil:
		return kvstore.Record{}, true, fmt.Errorf("natsstore: wait: %w", err)
	case rec.Revision > seen.Revision:
		return rec, true, nil
	case rec.Revision < seen.Revision:
		return kvstore.Record{}, false, nil
	}
	return rec, false, nil
}

// expired reports whether rec's lease has run out at the server's time now, and
// the caller had not already seen it run out.
func expired(rec, seen kvstore.Record, now time.Time) bool {
	return rec.State == kvstore.StateClaimed && !seen.LeaseExpired && !now.Before(rec.LeaseUntil)
}

// untilDeadline returns how long after the server's time now the record next
// needs a look: its lease end (for a claimed record whose expiry the caller has
// not yet seen) or its retention end, whichever is first; zero if already past.
func (s *Store) untilDeadline(rec, seen kvstore.Record, now time.Time) time.Duration {
	deadline := rec.ExpiresAt
	if rec.State == kvstore.StateClaimed && !seen.LeaseExpired && rec.LeaseUntil.Before(deadline) {
		deadline = rec.LeaseUntil
	}
	if deadline.IsZero() {
		// A record without times (built by the caller): look now and learn them.
		return 0
	}
	return max(deadline.Sub(now), 0)
}
