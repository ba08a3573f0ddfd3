package pgstore

import (
	"errors"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
)

func TestSweepDeletesOnlyExpiredRowsInBatches(t *testing.T) {
	tracer := &countingTracer{marker: "FOR UPDATE SKIP LOCKED"}
	pool := testPool(t, tracer)
	short := openStore(t, pool, Config{Retention: 200 * time.Millisecond, SweepBatch: 10})
	long := openStore(t, pool, Config{Schema: short.cfg.Schema, Retention: time.Hour, SweepBatch: 10})

	var last string
	for range 25 {
		last = newDigest(t)
		mustClaim(t, short, req("acme", last, "w1", time.Hour))
	}
	live := map[string]bool{}
	for range 5 {
		d := newDigest(t)
		live[d] = true
		mustClaim(t, long, req("acme", d, "w1", time.Hour))
	}
	wait.Eventually(t, waitLimit, "the short-lived records to expire", func() bool {
		_, err := short.Get(ctx(t), "acme", last)
		return errors.Is(err, kvstore.ErrNotFound)
	})
	if n := rowCount(t, short, ""); n != 30 {
		t.Fatalf("%d rows before sweeping, want 30", n)
	}

	tracer.n.Store(0)
	n, err := short.Sweep(ctx(t))
	if err != nil || n != 25 {
		t.Fatalf("Sweep = %d, %v; want 25", n, err)
	}
	if got := tracer.n.Load(); got != 3 {
		t.Fatalf("sweeping 25 rows in batches of 10 took %d statements, want 3", got)
	}
	if n := rowCount(t, short, ""); n != 5 {
		t.Fatalf("%d rows after sweeping, want the 5 live ones", n)
	}
	for d := range live {
		if _, err := long.Get(ctx(t), "acme", d); err != nil {
			t.Fatalf("live record %s: %v", d, err)
		}
	}
	if n, err := short.Sweep(ctx(t)); err != nil || n != 0 {
		t.Fatalf("second Sweep = %d, %v; want 0", n, err)
	}
}

func TestBackgroundSweeper(t *testing.T) {
	s := newTestStore(t, Config{Retention: 100 * time.Millisecond, SweepInterval: 100 * time.Millisecond})
	for range 3 {
		mustClaim(t, s, req("acme", newDigest(t), "w1", time.Hour))
	}
	wait.Eventually(t, waitLimit, "the background sweeper to delete expired rows", func() bool {
		return rowCount(t, s, "") == 0
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSweepOnClosedPool: Sweep, an operation of this backend only, answers
// ErrUnavailable once its pool is closed (the contract's operations are the
// conformance suite's outage check).
func TestSweepOnClosedPool(t *testing.T) {
	pool := testPool(t, nil)
	s := openStore(t, pool, Config{})
	pool.Close()
	if _, err := s.Sweep(ctx(t)); !errors.Is(err, kvstore.ErrUnavailable) {
		t.Errorf("Sweep on a closed pool: %v, want ErrUnavailable", err)
	}
}
