package kvstoretest

import (
	"fmt"
	"sync"

	"github.com/tesserix/toolexec/kvstore"
)

// checkFencingAfterTakeOver: once a claim is taken over, the old holder's lease
// is refused by every holder-only operation and the new one's works.
func checkFencingAfterTakeOver(e *env) {
	d := e.digest()
	la := e.claim(e.req(d, "holder-a", shortLease))
	e.passLease(shortLease)
	seen := e.get(d)
	reqB := e.req(d, "holder-b", longLease)
	lb, err := e.s.TakeOver(e.ctx, seen, reqB)
	if err != nil {
		e.t.Fatalf("TakeOver after the lease ran out: unexpected error %v (record %s)", err, fmtRecord(seen))
	}
	cur := e.get(d)
	e.refused("taken over by another holder", la, &cur)
	nl, err := e.s.Renew(e.ctx, lb, longLease)
	if !e.noErr("Renew with the take-over's lease", err) {
		return
	}
	if e.noErr("Record with the take-over's lease", e.s.Record(e.ctx, nl, "by holder-b")) {
		if rec := e.get(d); rec.State != kvstore.StateCompleted || rec.Outcome != "by holder-b" {
			e.t.Errorf("Get after the new holder's Record: %s", fmtRecord(rec))
		}
	}
}

// checkFencingAfterRecord: a recorded claim's lease is refused; the outcome stays.
func checkFencingAfterRecord(e *env) {
	d := e.digest()
	l := e.claim(e.req(d, "holder-a", longLease))
	if !e.noErr("Record", e.s.Record(e.ctx, l, "first")) {
		return
	}
	cur := e.get(d)
	e.refused("whose claim was recorded", l, &cur)
}

// checkFencingAfterRelease: a released claim's lease is refused while the key is
// free (and nothing is created), and still refused after the same holder claims
// the key again: fencing is by claim, not by holder name.
func checkFencingAfterRelease(e *env) {
	d := e.digest()
	req := e.req(d, "holder-a", longLease)
	old := e.claim(req)
	if !e.noErr("Release", e.s.Release(e.ctx, old)) {
		return
	}
	e.refused("whose claim was released", old, nil)

	fresh := e.claim(req) // the same holder, the same request
	cur := e.get(d)
	e.refused("from before a release, after the same holder claimed the key again", old, &cur)
	e.noErr("Record with the new claim's lease", e.s.Record(e.ctx, fresh, "second claim"))
}

// checkFencingAfterMark: a claim parked indeterminate refuses its lease.
func checkFencingAfterMark(e *env) {
	d := e.digest()
	l := e.claim(e.req(d, "holder-a", longLease))
	if !e.noErr("MarkIndeterminate", e.s.MarkIndeterminate(e.ctx, l, "body_failed", true)) {
		return
	}
	cur := e.get(d)
	e.refused("whose claim was marked indeterminate", l, &cur)
}

// checkTakeOverBeforeExpiry: a running lease cannot be taken over.
func checkTakeOverBeforeExpiry(e *env) {
	d := e.digest()
	e.claim(e.req(d, "holder-a", longLease))
	seen := e.claimRefused(e.req(d, "holder-b", longLease))
	_, err := e.s.TakeOver(e.ctx, seen, e.req(d, "holder-b", longLease))
	e.wantErr("TakeOver of a claim whose lease is running (record from Claim)", err, kvstore.ErrLeaseHeld)
	got := e.get(d)
	_, err = e.s.TakeOver(e.ctx, got, e.req(d, "holder-b", longLease))
	e.wantErr("TakeOver of a claim whose lease is running (record from Get)", err, kvstore.ErrLeaseHeld)
	e.unchanged("a refused TakeOver", got)
}

// checkTakeOverAfterExpiry: a claim whose lease ran out is taken over, by the
// record a refused Claim returned, and the taker holds it.
func checkTakeOverAfterExpiry(e *env) {
	d := e.digest()
	e.claim(e.req(d, "holder-a", shortLease))
	e.passLease(shortLease)
	seen := e.claimRefused(e.req(d, "holder-b", longLease))
	reqB := e.req(d, "holder-b", longLease)
	lb, err := e.s.TakeOver(e.ctx, seen, reqB)
	if err != nil {
		e.t.Fatalf("TakeOver after the lease ran out: unexpected error %v (record %s)", err, fmtRecord(seen))
	}
	e.checkLease("TakeOver", lb, reqB)
	rec := e.get(d)
	if rec.State != kvstore.StateClaimed || rec.Holder != "holder-b" || rec.LeaseExpired {
		e.t.Errorf("Get after TakeOver by holder-b: %s, want claimed by holder-b, not expired", fmtRecord(rec))
	}
	if rec.Revision == seen.Revision {
		e.t.Errorf("Get after TakeOver: Revision still %d; it must change on every write", rec.Revision)
	}
	if rec.Lease != reqB.Lease {
		e.t.Errorf("Get after TakeOver: Lease = %v, want the taker's %v", rec.Lease, reqB.Lease)
	}
	_, err = e.s.TakeOver(e.ctx, seen, e.req(d, "holder-c", longLease))
	e.wantErr("a second TakeOver with the same record", err, kvstore.ErrLeaseHeld)
	e.unchanged("a refused second TakeOver", rec)
}

// checkTakeOverRace: of many simultaneous take-overs of one run-out claim exactly
// one succeeds; the rest get ErrLeaseHeld.
func checkTakeOverRace(e *env) {
	const n = 16
	d := e.digest()
	e.claim(e.req(d, "holder-a", shortLease))
	e.passLease(shortLease)
	seen := e.get(d)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = e.s.TakeOver(e.ctx, seen, e.req(d, fmt.Sprintf("taker-%02d", i), longLease))
		}()
	}
	close(start)
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errorsIsAny(err, kvstore.ErrLeaseHeld):
			e.t.Errorf("concurrent TakeOver by taker-%02d: error %v, want nil or ErrLeaseHeld", i, err)
		}
	}
	if won != 1 {
		e.t.Errorf("%d concurrent take-overs of one run-out claim: %d succeeded, want exactly 1", n, won)
	}
}

// checkTakeOverStaleSeen: a take-over compares revisions: a record read before a
// Renew is stale even after the renewed lease ran out.
func checkTakeOverStaleSeen(e *env) {
	d := e.digest()
	l := e.claim(e.req(d, "holder-a", shortLease))
	stale := e.get(d)
	if _, err := e.s.Renew(e.ctx, l, shortLease); err != nil {
		e.t.Fatalf("Renew: unexpected error %v", err)
	}
	e.passLease(shortLease) // both the original and the renewed lease have run out
	_, err := e.s.TakeOver(e.ctx, stale, e.req(d, "holder-b", longLease))
	e.wantErr("TakeOver with a record read before a Renew", err, kvstore.ErrLeaseHeld)
	cur := e.get(d)
	if cur.Holder != "holder-a" {
		e.t.Fatalf("Get after a refused TakeOver: %s, want still held by holder-a", fmtRecord(cur))
	}
	// The current record can be taken: the refusal was for staleness, not the lease.
	_, err = e.s.TakeOver(e.ctx, cur, e.req(d, "holder-b", longLease))
	e.noErr("TakeOver with the current record after the renewed lease ran out", err)
}

// checkTakeOverChanged: a record that moved on since it was seen — recorded, or
// released and claimed again by the same holder — cannot be taken over with the
// old copy, even after every lease ran out.
func checkTakeOverChanged(e *env) {
	d := e.digest()
	l := e.claim(e.req(d, "holder-a", shortLease))
	seen := e.get(d)
	if !e.noErr("Record", e.s.Record(e.ctx, l, "done")) {
		return
	}

	d2 := e.digest()
	req2 := e.req(d2, "holder-a", shortLease)
	l2 := e.claim(req2)
	seen2 := e.get(d2)
	if !e.noErr("Release", e.s.Release(e.ctx, l2)) {
		return
	}
	e.claim(req2) // the same holder claims the key again: a new claim, a new revision

	e.passLease(shortLease)
	cur := e.get(d)
	_, err := e.s.TakeOver(e.ctx, seen, e.req(d, "holder-b", longLease))
	e.wantErr("TakeOver of a claim that was since recorded", err, kvstore.ErrLeaseHeld)
	e.unchanged("a refused TakeOver of a completed record", cur)

	cur2 := e.get(d2)
	if cur2.Revision == seen2.Revision {
		e.t.Errorf("a key released and claimed again has the revision %d of its first claim; revisions must never repeat for a key",
			cur2.Revision)
	}
	_, err = e.s.TakeOver(e.ctx, seen2, e.req(d2, "holder-b", longLease))
	e.wantErr("TakeOver with a record of an earlier claim of the key (released, then claimed again)", err, kvstore.ErrLeaseHeld)
	e.unchanged("a refused TakeOver with an earlier claim's record", cur2)
}

// checkTakeOverGone: a take-over of a record that is gone finds nothing.
func checkTakeOverGone(e *env) {
	d := e.digest()
	l := e.claim(e.req(d, "holder-a", longLease))
	seen := e.get(d)
	if !e.noErr("Release", e.s.Release(e.ctx, l)) {
		return
	}
	_, err := e.s.TakeOver(e.ctx, seen, e.req(d, "holder-b", longLease))
	e.wantErr("TakeOver of a released record", err, kvstore.ErrNotFound)
	e.wantGone("after a TakeOver of a released record", e.tenant, d)

	never := e.digest()
	ghost := kvstore.Record{Tenant: e.tenant, Key: never, State: kvstore.StateClaimed, Holder: "holder-a", Revision: seen.Revision}
	_, err = e.s.TakeOver(e.ctx, ghost, e.req(never, "holder-b", longLease))
	e.wantErr("TakeOver of a key never claimed", err, kvstore.ErrNotFound)
	e.wantGone("after a TakeOver of a key never claimed", e.tenant, never)
}
