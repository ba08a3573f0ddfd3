package redisstore_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

type waitResult struct {
	rec kvstore.Record
	err error
}

// waitInBackground starts Wait and returns a channel for its answer.
func waitInBackground(ctx context.Context, s *redisstore.Store, seen kvstore.Record) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		r, err := s.Wait(ctx, seen)
		ch <- waitResult{r, err}
	}()
	return ch
}

// subscribed waits until Redis counts n subscribers on the record's channel.
func subscribed(t *testing.T, s *redisstore.Store, tenant, name string, n int64) {
	t.Helper()
	c := newClient(t)
	ch := s.Config().Prefix + ":{" + tenant + "}:" + digest(name) + ":chg"
	wait.Eventually(t, waitLimit, "the waiter's subscription", func() bool {
		return c.PubSubNumSub(ctx(t), ch).Val()[ch] == n
	})
}

// receive returns Wait's answer, failing the test if none comes within 10s.
func receive(t *testing.T, ch <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return")
		return waitResult{}
	}
}

// noisyRecheck is a WaitRecheck long enough that a test passing with it shows the
// wake-up came from a notification or the lease deadline, not from the safety net.
const noisyRecheck = time.Hour

func TestWaitWakesOnEveryChange(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, redisstore.Config{WaitRecheck: noisyRecheck})

	t.Run("record", func(t *testing.T) {
		res := mustClaim(t, s, claimReq("acme", "w-record", "w1", time.Minute))
		ch := waitInBackground(ctx(t), s, res.Record)
		subscribed(t, s, "acme", "w-record", 1)
		if err := s.Record(ctx(t), res.Lease, "done"); err != nil {
			t.Fatal(err)
		}
		got := receive(t, ch)
		if got.err != nil || got.rec.State != kvstore.StateCompleted || got.rec.Outcome != "done" {
			t.Fatalf("Wait: %+v, %v", got.rec, got.err)
		}
	})
	t.Run("renew", func(t *testing.T) {
		res := mustClaim(t, s, claimReq("acme", "w-renew", "w1", time.Minute))
		ch := waitInBackground(ctx(t), s, res.Record)
		subscribed(t, s, "acme", "w-renew", 1)
		if _, err := s.Renew(ctx(t), res.Lease, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		got := receive(t, ch)
		if got.err != nil || got.rec.State != kvstore.StateClaimed || got.rec.Revision <= res.Record.Revision || got.rec.LeaseExpired {
			t.Fatalf("Wait: %+v, %v", got.rec, got.err)
		}
	})
	t.Run("mark", func(t *testing.T) {
		res := mustClaim(t, s, claimReq("acme", "w-mark", "w1", time.Minute))
		ch := waitInBackground(ctx(t), s, res.Record)
		subscribed(t, s, "acme", "w-mark", 1)
		if err := s.MarkIndeterminate(ctx(t), res.Lease, "body_failed", true); err != nil {
			t.Fatal(err)
		}
		got := receive(t, ch)
		if got.err != nil || got.rec.State != kvstore.StateIndeterminate {
			t.Fatalf("Wait: %+v, %v", got.rec, got.err)
		}

		// And from indeterminate, an operator's resolution wakes it.
		ch = waitInBackground(ctx(t), s, got.rec)
		subscribed(t, s, "acme", "w-mark", 1)
		if _, err := s.Resolve(ctx(t), "acme", digest("w-mark"), kvstore.Resolution{Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}
		got = receive(t, ch)
		if got.err != nil || got.rec.State != kvstore.StateCompleted {
			t.Fatalf("Wait after Resolve: %+v, %v", got.rec, got.err)
		}
	})
	t.Run("release", func(t *testing.T) {
		res := mustClaim(t, s, claimReq("acme", "w-release", "w1", time.Minute))
		ch := waitInBackground(ctx(t), s, res.Record)
		subscribed(t, s, "acme", "w-release", 1)
		if err := s.Release(ctx(t), res.Lease); err != nil {
			t.Fatal(err)
		}
		got := receive(t, ch)
		if !errors.Is(got.err, kvstore.ErrNotFound) {
			t.Fatalf("Wait after Release: %+v, %v", got.rec, got.err)
		}
	})
	t.Run("forget", func(t *testing.T) {
		res := mustClaim(t, s, claimReq("forgotten", "w-forget", "w1", time.Minute))
		ch := waitInBackground(ctx(t), s, res.Record)
		subscribed(t, s, "forgotten", "w-forget", 1)
		if _, err := s.Forget(ctx(t), "forgotten"); err != nil {
			t.Fatal(err)
		}
		got := receive(t, ch)
		if !errors.Is(got.err, kvstore.ErrNotFound) {
			t.Fatalf("Wait after Forget: %+v, %v", got.rec, got.err)
		}
	})
}

// TestWaitWakesAtLeaseDeadline checks that a waiter learns that the holder's lease
// ran out with no notification at all (nobody writes) and no safety-net re-read.
func TestWaitWakesAtLeaseDeadline(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, redisstore.Config{WaitRecheck: noisyRecheck})
	res := mustClaim(t, s, claimReq("acme", "deadline", "w1", 300*time.Millisecond))
	got := receive(t, waitInBackground(ctx(t), s, res.Record))
	if got.err != nil || !got.rec.LeaseExpired || got.rec.State != kvstore.StateClaimed || got.rec.Revision != res.Record.Revision {
		t.Fatalf("Wait: %+v, %v", got.rec, got.err)
	}
	// The expiry was confirmed by Redis: a take-over now succeeds.
	if _, err := s.TakeOver(ctx(t), got.rec, claimReq("acme", "deadline", "w2", time.Minute)); err != nil {
		t.Fatalf("TakeOver after Wait reported expiry: %v", err)
	}
}

// TestWaitSeesChangesBeforeSubscribing checks that Wait compares against a fresh
// read after subscribing: a change made before Wait was called is not missed.
func TestWaitSeesChangesBeforeSubscribing(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, redisstore.Config{WaitRecheck: noisyRecheck})
	res := mustClaim(t, s, claimReq("acme", "early", "w1", time.Minute))
	if err := s.Record(ctx(t), res.Lease, "done"); err != nil {
		t.Fatal(err)
	}
	got := receive(t, waitInBackground(ctx(t), s, res.Record))
	if got.err != nil || got.rec.State != kvstore.StateCompleted {
		t.Fatalf("Wait: %+v, %v", got.rec, got.err)
	}
	_, err := s.Wait(ctx(t), kvstore.Record{Tenant: "acme", Key: digest("absent"), State: kvstore.StateClaimed})
	wantErr(t, "Wait on a missing record", err, kvstore.ErrNotFound)
}

// TestWaitSafetyNet checks the periodic re-read: a change that was never
// published (made behind the store's back) still ends the Wait.
func TestWaitSafetyNet(t *testing.T) {
	t.Parallel()
	s, c := newStore(t, redisstore.Config{WaitRecheck: 50 * time.Millisecond})
	res := mustClaim(t, s, claimReq("acme", "silent", "w1", time.Hour))
	ch := waitInBackground(ctx(t), s, res.Record)
	subscribed(t, s, "acme", "silent", 1)
	key := s.Config().Prefix + ":{acme}:" + digest("silent")
	r := readStored(t, c, key)
	r.flags = r.flags[:1] + "-d" + r.flags[3:] // completed, with no waiter flag: the write publishes nothing
	r.rest += "quiet"
	writeStored(t, c, key, r)
	got := receive(t, ch)
	if got.err != nil || got.rec.State != kvstore.StateCompleted || got.rec.Outcome != "quiet" {
		t.Fatalf("Wait: %+v, %v", got.rec, got.err)
	}
}

// TestWaitEndsWithContextAndLeavesNothingBehind checks that Wait returns ctx.Err()
// and that neither goroutines nor Redis subscriptions outlive it.
func TestWaitEndsWithContextAndLeavesNothingBehind(t *testing.T) {
	// Not parallel: it counts the process's goroutines.
	s, c := newStore(t, redisstore.Config{})
	res := mustClaim(t, s, claimReq("acme", "leak", "w1", time.Hour))
	chName := s.Config().Prefix + ":{acme}:" + digest("leak") + ":chg"

	// Warm up the client's pools so their goroutines are in the baseline.
	wc, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, _ = s.Wait(wc, res.Record)
	cancel()
	runtime.GC()
	base := runtime.NumGoroutine()

	const n = 20
	parent, cancelAll := context.WithCancel(context.Background())
	chans := make([]<-chan waitResult, n)
	for i := range chans {
		chans[i] = waitInBackground(parent, s, res.Record)
	}
	subscribed(t, s, "acme", "leak", n)
	cancelAll()
	for _, ch := range chans {
		got := receive(t, ch)
		if !errors.Is(got.err, context.Canceled) {
			t.Fatalf("Wait after cancel: %v, want context.Canceled", got.err)
		}
	}

	// A deadline that passes is reported as such.
	dc, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := s.Wait(dc, res.Record)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past its deadline: %v", err)
	}

	wait.Eventually(t, waitLimit, "subscriptions to close", func() bool {
		return c.PubSubNumSub(ctx(t), chName).Val()[chName] == 0
	})
	wait.Eventually(t, waitLimit, "goroutines to exit", func() bool {
		return runtime.NumGoroutine() <= base
	})

	// Closing the store wakes a blocked Wait.
	ch := waitInBackground(context.Background(), s, res.Record)
	subscribed(t, s, "acme", "leak", 1)
	_ = s.Close()
	got := receive(t, ch)
	wantErr(t, "Wait after Close", got.err, kvstore.ErrUnavailable, redisstore.ErrClosed)
}
