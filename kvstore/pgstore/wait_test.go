package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
)

// Every test here sets RecheckInterval to an hour unless it tests the safety net,
// so that a Wait that returns proves the wake-up it is about.

func TestWaitWakesOnNotification(t *testing.T) {
	s := newTestStore(t, Config{RecheckInterval: time.Hour})
	for _, tt := range []struct {
		name  string
		write func(t *testing.T, l kvstore.Lease)
		check func(t *testing.T, r waitResult)
	}{
		{"record", func(t *testing.T, l kvstore.Lease) {
			if err := s.Record(ctx(t), l, "done"); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, r waitResult) {
			if r.err != nil || r.rec.State != kvstore.StateCompleted || r.rec.Outcome != "done" {
				t.Fatalf("Wait = %+v", r)
			}
		}},
		{"release", func(t *testing.T, l kvstore.Lease) {
			if err := s.Release(ctx(t), l); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, r waitResult) {
			if !errors.Is(r.err, kvstore.ErrNotFound) {
				t.Fatalf("Wait = %+v, want ErrNotFound", r)
			}
		}},
		{"mark indeterminate", func(t *testing.T, l kvstore.Lease) {
			if err := s.MarkIndeterminate(ctx(t), l, "body_failed", true); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, r waitResult) {
			if r.err != nil || r.rec.State != kvstore.StateIndeterminate || r.rec.Reason != "body_failed" {
				t.Fatalf("Wait = %+v", r)
			}
		}},
		{"renew", func(t *testing.T, l kvstore.Lease) {
			if _, err := s.Renew(ctx(t), l, 2*time.Hour); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, r waitResult) {
			if r.err != nil || r.rec.State != kvstore.StateClaimed || r.rec.Lease != 2*time.Hour {
				t.Fatalf("Wait = %+v", r)
			}
		}},
		{"forget", func(t *testing.T, l kvstore.Lease) {
			if _, err := s.Forget(ctx(t), l.Tenant); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, r waitResult) {
			if !errors.Is(r.err, kvstore.ErrNotFound) {
				t.Fatalf("Wait = %+v, want ErrNotFound", r)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := mustClaim(t, s, req("t-"+randHex(t, 4), newDigest(t), "w1", time.Hour))
			waiting := goWait(t, s, ctx(t), res.Record)
			waitRegistered(t, s, res.Record.Key)
			// Give the waiter time to finish its first read and block: if the write
			// landed before that read, the test would pass without a notification.
			time.Sleep(100 * time.Millisecond)
			tt.write(t, res.Lease)
			tt.check(t, recv(t, waiting))
		})
	}
}

func TestWaitWakesOnResolve(t *testing.T) {
	s := newTestStore(t, Config{RecheckInterval: time.Hour})
	res := mustClaim(t, s, req("acme", newDigest(t), "w1", time.Hour))
	if err := s.MarkIndeterminate(ctx(t), res.Lease, "holder_lost", false); err != nil {
		t.Fatal(err)
	}
	parked, err := s.Get(ctx(t), "acme", res.Record.Key)
	if err != nil {
		t.Fatal(err)
	}
	waiting := goWait(t, s, ctx(t), parked)
	waitRegistered(t, s, parked.Key)
	time.Sleep(100 * time.Millisecond)
	if _, err := s.Resolve(ctx(t), "acme", parked.Key, kvstore.Resolution{Outcome: "by hand"}); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, waiting); r.err != nil || r.rec.State != kvstore.StateCompleted || r.rec.Outcome != "by hand" {
		t.Fatalf("Wait = %+v", r)
	}
}

func TestWaitReturnsAtOnceWhenAlreadyDifferent(t *testing.T) {
	s := newTestStore(t, Config{RecheckInterval: time.Hour})
	res := mustClaim(t, s, req("acme", newDigest(t), "w1", time.Hour))
	if err := s.Record(ctx(t), res.Lease, "done"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Wait(ctx(t), res.Record) // seen is the claim; the record moved on
	if err != nil || got.State != kvstore.StateCompleted {
		t.Fatalf("Wait = %+v, %v", got, err)
	}
	gone := res.Record
	gone.Key = newDigest(t)
	if _, err := s.Wait(ctx(t), gone); !errors.Is(err, kvstore.ErrNotFound) {
		t.Fatalf("Wait on a missing record: %v, want ErrNotFound", err)
	}
}

func TestWaitWakesAtLeaseDeadlineWithoutNotification(t *testing.T) {
	// Nobody writes: no notification is ever sent. Only the deadline the database
	// reported can wake the waiter before its 30 s context ends.
	s := newTestStore(t, Config{RecheckInterval: time.Hour})
	res := mustClaim(t, s, req("acme", newDigest(t), "w1", 300*time.Millisecond))
	c, cancel := context.WithTimeout(ctx(t), 30*time.Second)
	defer cancel()
	got, err := s.Wait(c, res.Record)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if got.State != kvstore.StateClaimed || !got.LeaseExpired || got.Revision != res.Record.Revision {
		t.Fatalf("Wait = %+v; want the same claim with LeaseExpired", got)
	}
}

func TestWaitWakesAtExpiryWithoutNotification(t *testing.T) {
	s := newTestStore(t, Config{RecheckInterval: time.Hour, Retention: 300 * time.Millisecond})
	res := mustClaim(t, s, req("acme", newDigest(t), "w1", time.Hour))
	if err := s.Record(ctx(t), res.Lease, "done"); err != nil {
		t.Fatal(err)
	}
	done, err := s.Get(ctx(t), "acme", res.Record.Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wait(ctx(t), done); !errors.Is(err, kvstore.ErrNotFound) {
		t.Fatalf("Wait on an expiring record: %v, want ErrNotFound", err)
	}
}

func TestWaitSafetyNetCatchesLostNotification(t *testing.T) {
	s := newTestStore(t, Config{RecheckInterval: 200 * time.Millisecond})
	res := mustClaim(t, s, req("acme", newDigest(t), "w1", time.Hour))
	waiting := goWait(t, s, ctx(t), res.Record)
	waitRegistered(t, s, res.Record.Key)
	time.Sleep(100 * time.Millisecond)
	// Complete the record behind the store's back: no pg_notify.
	if n := rawExec(t, s, `UPDATE {t} SET state = 'completed', outcome = 'raw', revision = nextval('{seq}')
		WHERE digest = $1`, res.Record.Key); n != 1 {
		t.Fatalf("raw update touched %d rows", n)
	}
	r := recv(t, waiting)
	if r.err != nil || r.rec.State != kvstore.StateCompleted || r.rec.Outcome != "raw" {
		t.Fatalf("Wait = %+v", r)
	}
}

func TestWaitSurvivesListenerReconnect(t *testing.T) {
	s := newTestStore(t, Config{RecheckInterval: time.Hour})
	res := mustClaim(t, s, req("acme", newDigest(t), "w1", time.Hour))
	waiting := goWait(t, s, ctx(t), res.Record)
	waitRegistered(t, s, res.Record.Key)
	time.Sleep(100 * time.Millisecond)
	oldPID := s.lis.listeningPID()

	// A change whose notification is lost, then the listener's connection dies.
	rawExec(t, s, `UPDATE {t} SET state = 'completed', outcome = 'raw', revision = nextval('{seq}')
		WHERE digest = $1`, res.Record.Key)
	var killed bool
	if err := s.pool.QueryRow(ctx(t), `SELECT pg_terminate_backend($1)`, int32(oldPID)).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate listener backend %d: %v, %v", oldPID, killed, err)
	}
	// Reconnecting wakes every waiter to re-read.
	r := recv(t, waiting)
	if r.err != nil || r.rec.State != kvstore.StateCompleted || r.rec.Outcome != "raw" {
		t.Fatalf("Wait = %+v", r)
	}
	wait.Eventually(t, waitLimit, "listener to reconnect", func() bool {
		pid := s.lis.listeningPID()
		return pid != 0 && pid != oldPID
	})

	// Notifications flow again on the new connection.
	res2 := mustClaim(t, s, req("acme", newDigest(t), "w1", time.Hour))
	waiting = goWait(t, s, ctx(t), res2.Record)
	waitRegistered(t, s, res2.Record.Key)
	time.Sleep(100 * time.Millisecond)
	if err := s.Record(ctx(t), res2.Lease, "after"); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, waiting); r.err != nil || r.rec.Outcome != "after" {
		t.Fatalf("Wait after reconnect = %+v", r)
	}
}

func TestWaitReturnsContextError(t *testing.T) {
	s := newTestStore(t, Config{RecheckInterval: time.Hour})
	res := mustClaim(t, s, req("acme", newDigest(t), "w1", time.Hour))
	c, cancel := context.WithCancel(ctx(t))
	waiting := goWait(t, s, c, res.Record)
	waitRegistered(t, s, res.Record.Key)
	cancel()
	if r := recv(t, waiting); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Wait = %+v, want context.Canceled", r)
	}
	s.lis.mu.Lock()
	left := len(s.lis.waiters)
	s.lis.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d waiter sets left registered", left)
	}
}

func TestWaitersOnStoresSharingASchema(t *testing.T) {
	// Two stores (two processes, say) over one schema: a write by one wakes a waiter
	// of the other through the shared channel.
	pool := testPool(t, nil)
	a := openStore(t, pool, Config{RecheckInterval: time.Hour})
	b := openStore(t, pool, Config{Schema: a.cfg.Schema, RecheckInterval: time.Hour})
	res := mustClaim(t, a, req("acme", newDigest(t), "w1", time.Hour))
	waiting := goWait(t, b, ctx(t), res.Record)
	waitRegistered(t, b, res.Record.Key)
	time.Sleep(100 * time.Millisecond)
	if err := a.Record(ctx(t), res.Lease, "from a"); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, waiting); r.err != nil || r.rec.Outcome != "from a" {
		t.Fatalf("Wait = %+v", r)
	}
}
