package natsstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/kvstoretest"
)

// TestConformanceGroupCommit runs the store suite with group commit on.
func TestConformanceGroupCommit(t *testing.T) {
	kvstoretest.Run(t, func(t *testing.T, opts kvstoretest.Options) kvstoretest.Harness {
		s, _ := newTestStore(t, []*server.Server{single}, Config{Retention: opts.Retention, GroupCommit: true})
		return kvstoretest.Harness{Store: s}
	})
}

// TestGroupCommitAllowsAtomic: New sets the bucket's stream to take atomic
// batches, and leaves it so for a store without group commit only if it was.
func TestGroupCommitAllowsAtomic(t *testing.T) {
	s, js := newTestStore(t, []*server.Server{single}, Config{GroupCommit: true})
	if !streamInfo(t, js, s.Bucket()).Config.AllowAtomicPublish {
		t.Fatal("group commit store's stream does not allow atomic batches")
	}
	plain, js2 := newTestStore(t, []*server.Server{single}, Config{})
	if streamInfo(t, js2, plain.Bucket()).Config.AllowAtomicPublish {
		t.Error("a store without group commit allowed atomic batches")
	}
	if st := plain.GroupStats(); st != (GroupStats{}) {
		t.Errorf("GroupStats of a store without group commit: %+v", st)
	}
}

// TestGroupCommitBatchesConcurrentClaims: claims of distinct keys made at once
// share batches; every claim is won at the revision its record has, and the
// holders' records go in batches too.
func TestGroupCommitBatchesConcurrentClaims(t *testing.T) {
	s, _ := newTestStore(t, []*server.Server{single}, Config{GroupCommit: true, MaxBatch: 8})
	tenant := newTenant()
	const n = 64
	leases := make([]kvstore.Lease, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := s.Claim(testCtx(t), claimReq(tenant, digestOf("k"+strconv.Itoa(i)), "h"+strconv.Itoa(i), time.Minute))
			switch {
			case err != nil:
				errs[i] = err
			case !res.Claimed:
				errs[i] = errors.New("claim of a free key refused")
			default:
				leases[i] = res.Lease
				errs[i] = s.Record(testCtx(t), res.Lease, `{"n":`+strconv.Itoa(i)+`}`)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	for i := range n {
		rec, err := s.Get(testCtx(t), tenant, digestOf("k"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != kvstore.StateCompleted || rec.Outcome != `{"n":`+strconv.Itoa(i)+`}` {
			t.Errorf("key %d: %s %q", i, rec.State, rec.Outcome)
		}
		if r, l := keyRev(t, s, tenant, digestOf("k"+strconv.Itoa(i))), leaseRev(t, leases[i]); r <= l {
			t.Errorf("key %d: record at revision %d, claimed at %d", i, r, l)
		}
	}
	st := s.GroupStats()
	if st.Batches == 0 {
		t.Error("no batch committed")
	}
	if w, b := st.Writes, st.Batches; w > b*8 {
		t.Errorf("%d writes in %d batches: more than MaxBatch 8 a batch", w, b)
	}
	t.Logf("%d writes in %d batches, %d rejected", st.Writes, st.Batches, st.Rejected)
}

// TestGroupCommitOneWinner: many claims of one key at once leave one holder,
// and every loser sees the winner's record.
func TestGroupCommitOneWinner(t *testing.T) {
	s, _ := newTestStore(t, []*server.Server{single}, Config{GroupCommit: true})
	tenant := newTenant()
	// Other keys' claims run alongside, so that batches form.
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() { _, _ = s.Claim(testCtx(t), claimReq(tenant, digestOf("other"+strconv.Itoa(i)), "o", time.Minute)) })
	}
	const n = 32
	results := make([]kvstore.ClaimResult, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = s.Claim(testCtx(t), claimReq(tenant, digestOf("same"), "h"+strconv.Itoa(i), time.Minute))
		})
	}
	wg.Wait()
	winner := -1
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		if res.Claimed {
			if winner >= 0 {
				t.Fatalf("claims %d and %d both won", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no claim won")
	}
	for i, res := range results {
		if i != winner && res.Record.Holder != "h"+strconv.Itoa(winner) {
			t.Errorf("loser %d sees holder %q, want h%d", i, res.Record.Holder, winner)
		}
	}
}

// keyRev returns the key's revision as the leader has it.
func keyRev(t *testing.T, s *Store, tenant, digest string) uint64 {
	t.Helper()
	e, err := s.get(testCtx(t), keyOf(tenant, digest))
	if err != nil {
		t.Fatalf("reading %s: %v", keyOf(tenant, digest), err)
	}
	return e.revision
}

// leaseRev returns the revision a lease's token carries.
func leaseRev(t *testing.T, l kvstore.Lease) uint64 {
	t.Helper()
	tok, err := parseToken(l.Token)
	if err != nil {
		t.Fatal(err)
	}
	return tok.Rev
}

// heldCommitter returns s's committer with leading set, so that no write sent
// to it is committed until the test commits it.
func heldCommitter(t *testing.T, s *Store) *committer {
	t.Helper()
	c := s.group
	c.mu.Lock()
	c.leading = true
	c.mu.Unlock()
	return c
}

// waitQueued waits until c's queue holds n writes.
func waitQueued(t *testing.T, c *committer, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		c.mu.Lock()
		l := len(c.queue)
		c.mu.Unlock()
		if l == n {
			return
		}
	}
	t.Fatalf("the queue never held %d writes", n)
}

// TestGroupCommitRejectedBatch: a batch with one write whose key moved on is
// refused whole; its writes are then published one by one, so the others land
// and the stale one alone fails.
func TestGroupCommitRejectedBatch(t *testing.T) {
	s, _ := newTestStore(t, []*server.Server{single}, Config{GroupCommit: true})
	tenant := newTenant()
	stale := mustClaim(t, s, claimReq(tenant, digestOf("stale"), "a", time.Minute))
	if err := s.Release(testCtx(t), stale); err != nil {
		t.Fatal(err)
	}
	c := heldCommitter(t, s)
	var wg sync.WaitGroup
	var claimErr, recordErr error
	var claimed kvstore.ClaimResult
	wg.Go(func() {
		claimed, claimErr = s.Claim(testCtx(t), claimReq(tenant, digestOf("fresh"), "b", time.Minute))
	})
	waitQueued(t, c, 1)
	wg.Go(func() { recordErr = s.Record(testCtx(t), stale, `{}`) })
	waitQueued(t, c, 2)
	c.lead(nil)
	wg.Wait()
	if claimErr != nil || !claimed.Claimed {
		t.Fatalf("claim batched with a stale write: %+v, %v", claimed, claimErr)
	}
	if !errors.Is(recordErr, kvstore.ErrNotHolder) {
		t.Errorf("stale Record = %v, want ErrNotHolder", recordErr)
	}
	if st := s.GroupStats(); st.Rejected != 1 || st.Batches != 0 {
		t.Errorf("batches %d, rejected %d; want 0 and 1", st.Batches, st.Rejected)
	}
	rec, err := s.Get(testCtx(t), tenant, digestOf("fresh"))
	if err != nil || rec.Holder != "b" || keyRev(t, s, tenant, digestOf("fresh")) != leaseRev(t, claimed.Lease) {
		t.Errorf("fresh key: %+v, %v; want b's claim at revision %d", rec, err, leaseRev(t, claimed.Lease))
	}
}

// TestGroupCommitSameKeyNotBatchedTwice: two writes to one key queued together
// do not share a batch; the second is judged after the first.
func TestGroupCommitSameKeyNotBatchedTwice(t *testing.T) {
	s, _ := newTestStore(t, []*server.Server{single}, Config{GroupCommit: true})
	tenant := newTenant()
	lease := mustClaim(t, s, claimReq(tenant, digestOf("k"), "a", time.Minute))
	c := heldCommitter(t, s)
	var wg sync.WaitGroup
	var renewed kvstore.Lease
	var renewErr, recordErr error
	wg.Go(func() { renewed, renewErr = s.Renew(testCtx(t), lease, time.Minute) })
	waitQueued(t, c, 1)
	wg.Go(func() { recordErr = s.Record(testCtx(t), lease, `{"ok":true}`) })
	waitQueued(t, c, 2)
	c.lead(nil)
	wg.Wait()
	if renewErr != nil {
		t.Fatalf("Renew: %v", renewErr)
	}
	if recordErr != nil {
		t.Fatalf("Record after a renewal of the same claim: %v", recordErr)
	}
	rec, err := s.Get(testCtx(t), tenant, digestOf("k"))
	if err != nil || rec.State != kvstore.StateCompleted || keyRev(t, s, tenant, digestOf("k")) <= leaseRev(t, renewed) {
		t.Errorf("record %+v, %v; want completed after revision %d", rec, err, leaseRev(t, renewed))
	}
	if st := s.GroupStats(); st.Rejected != 0 {
		t.Errorf("%d batches rejected", st.Rejected)
	}
}

// TestGroupCommitQueuedWriteCancelled: a write still queued when its context
// ends leaves the queue and is never stored.
func TestGroupCommitQueuedWriteCancelled(t *testing.T) {
	s, _ := newTestStore(t, []*server.Server{single}, Config{GroupCommit: true})
	tenant := newTenant()
	c := heldCommitter(t, s)
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, err := s.Claim(ctx, claimReq(tenant, digestOf("k"), "a", time.Minute))
		done <- err
	}()
	waitQueued(t, c, 1)
	cancel()
	if err := <-done; !errors.Is(err, kvstore.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Claim = %v, want ErrUnavailable and context.Canceled", err)
	}
	waitQueued(t, c, 0)
	c.lead(nil)
	if _, err := s.Get(testCtx(t), tenant, digestOf("k")); !errors.Is(err, kvstore.ErrNotFound) {
		t.Errorf("Get after the cancelled claim = %v, want ErrNotFound", err)
	}
}

// TestGroupCommitAtomicDisabled: when the stream stops taking atomic batches
// (another process recreated the bucket without group commit), writes still
// land, one by one, and the store stops trying batches for a while.
func TestGroupCommitAtomicDisabled(t *testing.T) {
	s, js := newTestStore(t, []*server.Server{single}, Config{GroupCommit: true})
	cfg := streamInfo(t, js, s.Bucket()).Config
	cfg.AllowAtomicPublish = false
	if _, err := js.UpdateStream(testCtx(t), cfg); err != nil {
		t.Fatal(err)
	}
	tenant := newTenant()
	c := heldCommitter(t, s)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { mustClaim(t, s, claimReq(tenant, digestOf(strconv.Itoa(i)), "h", time.Minute)) })
	}
	waitQueued(t, c, 4)
	c.lead(nil)
	wg.Wait()
	if st := s.GroupStats(); st.Rejected != 1 {
		t.Errorf("%d batches rejected, want 1", st.Rejected)
	}
	if c.offUntil.Load() <= time.Now().UnixNano() {
		t.Error("batches not paused after the stream refused them")
	}
	mustClaim(t, s, claimReq(tenant, digestOf("after"), "h", time.Minute))
}

// TestGroupCommitLostBatchAnswer: a batch whose answer is lost (the commit
// timed out) is not published again blindly; each write finds out whether it
// landed, as a lone write whose answer was lost does.
func TestGroupCommitLostBatchAnswer(t *testing.T) {
	s, _ := newTestStore(t, []*server.Server{single}, Config{GroupCommit: true})
	tenant := newTenant()
	c := heldCommitter(t, s)
	var wg sync.WaitGroup
	results := make([]kvstore.ClaimResult, 3)
	errs := make([]error, 3)
	for i := range 3 {
		wg.Go(func() {
			results[i], errs[i] = s.Claim(testCtx(t), claimReq(tenant, digestOf(strconv.Itoa(i)), "h"+strconv.Itoa(i), time.Minute))
		})
	}
	waitQueued(t, c, 3)
	// The server receives the batch, but its answer comes after the commit
	// has given up on it.
	c.mu.Lock()
	b, later := c.take()
	c.mu.Unlock()
	if len(b.writes) != 3 || len(later) != 0 {
		t.Fatalf("batch of %d, %d later; want 3 and 0", len(b.writes), len(later))
	}
	timeout := c.timeout
	c.timeout = time.Nanosecond
	c.commit(b)
	c.timeout = timeout
	for _, w := range b.writes {
		if !errors.Is(w.err, nats.ErrTimeout) {
			t.Fatalf("write of a batch whose answer was lost: %v, want nats.ErrTimeout", w.err)
		}
	}
	// The claims look for their writes, and may write again: lead whatever
	// they queue until they are done.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for finished := false; !finished; {
		c.lead(nil)
		select {
		case <-done:
			finished = true
		case <-time.After(5 * time.Millisecond):
		}
	}
	for i := range 3 {
		if errs[i] != nil {
			t.Fatalf("claim %d after a lost batch answer: %v", i, errs[i])
		}
		if !results[i].Claimed {
			t.Errorf("claim %d: its own write, landed in the batch, not recognised: %+v", i, results[i].Record)
		}
		if r, l := keyRev(t, s, tenant, digestOf(strconv.Itoa(i))), leaseRev(t, results[i].Lease); r != l {
			t.Errorf("key %d at revision %d; want the claim's, %d", i, r, l)
		}
	}
}
