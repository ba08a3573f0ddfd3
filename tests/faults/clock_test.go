package faults_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/dbproc"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/kvstore/pgstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
	"github.com/tesserix/toolexec/tests/faults"
)

// TestClocksDisagree gives three workers sharing one store clocks that
// disagree by far more than a lease: "ahead" reads an hour ahead, "behind" an
// hour behind, and "slow" runs its timers ten times slow, so that it renews its
// lease only every 3.3 lease lengths. Every body takes 1.5 leases, so none can
// finish without renewing. Leases are judged by the backend's clock (NATS
// server timestamps, PostgreSQL now(), Redis PX), never by comparing workers'
// clocks, so:
//
//   - no key held by ahead or behind is ever taken over, though each thinks the
//     other's deadlines lie an hour in the past or the future;
//   - keys held by slow are taken over — only once the backend says its lease
//     ran out: bookings become holder_lost (never re-run), seat changes run
//     again — and never sooner than half a lease after slow's request reached
//     the downstream.
func TestClocksDisagree(t *testing.T) {
	parallel(t)
	const clockLease = time.Second
	backends := []struct {
		name  string
		store func(t *testing.T, srv *server.Server) func() kvstore.Store
	}{
		{"jetstream", func(t *testing.T, srv *server.Server) func() kvstore.Store {
			return func() kvstore.Store {
				js := natstest.JetStream(t, natstest.Connect(t, srv))
				st, err := natsstore.New(context.Background(), js, natsstore.Config{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				return st
			}
		}},
		{"postgres", func(t *testing.T, _ *server.Server) func() kvstore.Store {
			url := testenv.PostgresURL(t)
			schema := dbproc.FreshSchema(t, url)
			return func() kvstore.Store {
				st, _ := dbproc.PostgresStore(t, url, pgstore.Config{Schema: schema})
				return st
			}
		}},
		{"redis", func(t *testing.T, _ *server.Server) func() kvstore.Store {
			url := testenv.RedisURL(t)
			prefix := dbproc.FreshPrefix(t, url)
			return func() kvstore.Store {
				st, _ := dbproc.RedisStore(t, url, redisstore.Config{Prefix: prefix})
				return st
			}
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			parallel(t)
			srv := natstest.Start(t, natstest.SyncAlways())
			newStore := b.store(t, srv)
			s := newScenario(t, "clocks-disagree-"+b.name, srv.ClientURL(), 1)
			ctx := ctxFor(t, pick(2*time.Minute, 10*time.Minute))
			s.witness.SetDelay(clockLease * 3 / 2)

			clocks := map[string]faults.SkewedClock{
				"ahead":  {Offset: time.Hour},
				"behind": {Offset: -time.Hour},
				"slow":   {Rate: 10},
			}
			f := s.rec.Inject(faults.Fault{Name: "slow's timers run 10x slow", Holders: []string{"slow"}})
			workers := map[string]*inProcess{}
			stores := map[string]*timedStore{}
			worker := func(name string) {
				js := natstest.JetStream(t, natstest.Connect(t, srv))
				stores[name] = &timedStore{Store: newStore(), log: map[string][]attempt{}}
				workers[name] = s.startInProcess(name, js, stores[name], clocks[name], clockLease)
			}

			// slow alone takes the first call of eight keys, and the witness holds
			// its requests: it sits on eight claims whose leases it renews too late.
			s.witness.Hold("slow")
			worker("slow")
			const held = 8
			if err := <-s.publish(ctx, plan("t", held, 1)); err != nil {
				t.Fatal(err)
			}
			heldEffects, err := s.witness.WaitHeld(ctx, "slow", held)
			if err != nil {
				t.Fatal(err)
			}
			s.witness.StopHolding("slow") // only those eight stay held
			// ahead and behind come, with the duplicates of those keys and more
			// keys, which all three share.
			worker("ahead")
			worker("behind")
			keys, perKey := pick(32, 160), 4
			dups := planFrom("t", held, 1, perKey)
			rest := plan("u", keys, perKey)
			if err := <-s.publish(ctx, append(dups, rest...)); err != nil {
				t.Fatal(err)
			}
			s.step("%d calls published", held+len(dups)+len(rest))
			// Every duplicate of slow's keys is answered while slow still holds
			// them — by a takeover, once the backend says slow's lease ran out.
			for _, c := range dups {
				if _, err := s.client.Attach(ctx, c.Tenant, c.Tool, c.RunID, c.CallID); err != nil {
					t.Fatalf("duplicate %s of a key slow holds: %v", c.CallID, err)
				}
			}
			s.step("the %d duplicates of slow's keys are answered; releasing slow's requests", len(dups))
			s.witness.Release("slow")
			if err := s.settle(ctx); err != nil {
				t.Fatal(err)
			}
			s.rec.Repair(f)

			// Who took over what. A key of ahead's or behind's may be taken over
			// only if its holder itself renewed too late — a machine too busy to
			// run the renewal in time, whatever the clocks say. Such keys are
			// recorded as faults of their own, for the checker; any other
			// takeover of theirs is a failure.
			answers, err := faults.ReadAnswers(ctx, s.js)
			if err != nil {
				t.Fatal(err)
			}
			lost := map[string]bool{}
			for _, a := range answers {
				if a.Kind == events.KindIndeterminate && a.Reason == events.ReasonHolderLost {
					lost[a.Key] = true
				}
			}
			byKey := effectsByKey(s.witness.Effects())
			late := 0
			for key, es := range byKey {
				first := es[0].Executor
				if first == "slow" || (len(es) == 1 && !lost[key]) {
					continue
				}
				if from, to, ok := stores[first].late(key, clockLease); ok {
					late++
					s.rec.Inject(faults.Fault{Name: first + " renewed " + key[:12] + " too late", Keys: []string{key}, Start: from, End: to})
					continue
				}
				t.Errorf("key %s held by %s (clock %+v), which renewed in time, was taken over: %d runs, holder_lost %v",
					key[:12], first, clocks[first].Offset, len(es), lost[key])
			}
			rep := s.finish(ctx)

			for _, e := range heldEffects {
				es := byKey[e.Key]
				switch {
				case e.Tool == toolBook && (len(es) != 1 || !lost[e.Key]):
					t.Errorf("slow's booking %s: %d runs, holder_lost %v; want one run and holder_lost", e.Key[:12], len(es), lost[e.Key])
				case e.Tool == toolSeat && len(es) < 2:
					t.Errorf("slow's seat change %s: runs %v; want slow's, then a takeover's", e.Key[:12], es)
				}
			}
			takeovers := 0
			for _, es := range byKey {
				if len(es) > 1 {
					takeovers++
				}
			}
			// Every takeover ended at least a lease after the start of the last
			// claim or renewal it displaced: the backend applied that one no
			// sooner than it started, extended the lease from then by its own
			// clock, and granted the takeover only once the lease had run out.
			checked := 0
			for key := range byKey {
				var all []attempt
				for name, st := range stores {
					for _, a := range st.attempts(key) {
						a.op = name + " " + a.op
						all = append(all, a)
					}
				}
				for _, tk := range all {
					if !tk.ok || !strings.HasSuffix(tk.op, " takeover") {
						continue
					}
					checked++
					var prev attempt
					for _, a := range all {
						if a.ok && a.start.Before(tk.start) && !strings.HasSuffix(a.op, " record") &&
							!strings.HasSuffix(a.op, " mark") && a.start.After(prev.start) {
							prev = a
						}
					}
					if !prev.start.IsZero() && tk.end.Sub(prev.start) < clockLease {
						t.Errorf("key %s: %s ended %v after %s began: sooner than a lease", key[:12], tk.op,
							tk.end.Sub(prev.start).Round(time.Millisecond), prev.op)
					}
				}
			}
			if checked == 0 {
				t.Error("no takeover recorded: the scenario proved nothing about when they happen")
			}
			s.step("takeovers timed: %d, each ending a lease or more after the claim or renewal it displaced began", checked)
			takeovers += len(lost)
			for _, name := range []string{"ahead", "behind", "slow"} {
				w := workers[name]
				s.step("%s: %d calls received, %d bodies entered", name, w.w.Stats().Received.Load(), w.d.Stats().BodiesEntered.Load())
			}
			s.step("keys taken over: %d (bookings holder_lost %d, seat changes run again %d); of ahead's or behind's: %d, each renewed too late by its holder",
				takeovers, len(lost), rep.Repeats, late)
		})
	}
}

// attempt is one call a worker made to its store for a key.
type attempt struct {
	op         string // claim, renew, record, mark, release
	start, end time.Time
	ok         bool // a claim granted, a renewal or write accepted
}

// timedStore records when each of a worker's claims, renewals and final writes
// began and ended, to tell a holder that renewed in time from one that did
// not.
type timedStore struct {
	kvstore.Store

	mu  sync.Mutex // protects log
	log map[string][]attempt
}

func (s *timedStore) note(digest, op string, start time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log[digest] = append(s.log[digest], attempt{op: op, start: start, end: time.Now(), ok: ok})
}

func (s *timedStore) Claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	start := time.Now()
	res, err := s.Store.Claim(ctx, req)
	if err == nil && res.Claimed {
		s.note(req.Key, "claim", start, true)
	}
	return res, err
}

func (s *timedStore) TakeOver(ctx context.Context, seen kvstore.Record, req kvstore.ClaimRequest) (kvstore.Lease, error) {
	start := time.Now()
	l, err := s.Store.TakeOver(ctx, seen, req)
	if err == nil {
		s.note(req.Key, "takeover", start, true)
	}
	return l, err
}

func (s *timedStore) Renew(ctx context.Context, lease kvstore.Lease, d time.Duration) (kvstore.Lease, error) {
	start := time.Now()
	l, err := s.Store.Renew(ctx, lease, d)
	s.note(lease.Key, "renew", start, err == nil)
	return l, err
}

func (s *timedStore) Record(ctx context.Context, lease kvstore.Lease, outcome string) error {
	start := time.Now()
	err := s.Store.Record(ctx, lease, outcome)
	s.note(lease.Key, "record", start, err == nil)
	return err
}

func (s *timedStore) MarkIndeterminate(ctx context.Context, lease kvstore.Lease, reason string, entered bool) error {
	start := time.Now()
	err := s.Store.MarkIndeterminate(ctx, lease, reason, entered)
	s.note(lease.Key, "mark", start, err == nil)
	return err
}

// attempts returns the attempts logged for digest.
func (s *timedStore) attempts(digest string) []attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log[digest])
}

// late reports whether this worker, holding digest, let its lease lapse: some
// attempt after a granted claim or accepted renewal ended a lease or more after
// that one began (so the backend may have seen no renewal for a lease). It
// returns the span from the claim to that attempt. If every attempt ended
// within a lease of the last accepted one, the lease never ran out by the
// backend's clock, and nobody could take the claim over.
func (s *timedStore) late(digest string, lease time.Duration) (time.Time, time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var from, lastOK time.Time
	for _, a := range s.log[digest] {
		if a.op == "claim" || a.op == "takeover" {
			from, lastOK = a.start, a.start
			continue
		}
		if lastOK.IsZero() {
			continue
		}
		if a.end.Sub(lastOK) >= lease {
			return from, a.end, true
		}
		if a.ok && a.op == "renew" {
			lastOK = a.start
		}
	}
	return time.Time{}, time.Time{}, false
}
