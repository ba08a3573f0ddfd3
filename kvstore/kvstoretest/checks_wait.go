package kvstoretest

import (
	"context"
	"errors"
	"time"

	"github.com/tesserix/toolexec/kvstore"
)

// waitSetup claims a fresh key for holder-a with lease and returns its lease and
// the record a refused claimer sees: what the dispatcher waits on.
func (e *env) waitSetup(lease time.Duration) (string, kvstore.Lease, kvstore.Record) {
	e.t.Helper()
	d := e.digest()
	l := e.claim(e.req(d, "holder-a", lease))
	seen := e.claimRefused(e.req(d, "holder-b", lease))
	return d, l, seen
}

// checkWaitRecord: a blocked Wait returns the completed record.
func checkWaitRecord(e *env) {
	_, l, seen := e.waitSetup(longLease)
	ch := e.startWait(e.ctx, seen)
	if !e.stillBlocked(ch, "Record") {
		return
	}
	e.noErr("Record", e.s.Record(e.ctx, l, "done by holder-a"))
	r := e.awaitWait(ch, "Record")
	if !e.noErr("Wait woken by Record", r.err) {
		return
	}
	if e.wantState("Wait woken by Record", r.rec, kvstore.StateCompleted) && r.rec.Outcome != "done by holder-a" {
		e.t.Errorf("Wait woken by Record: Outcome = %q, want %q", r.rec.Outcome, "done by holder-a")
	}
}

// checkWaitRelease: a blocked Wait reports a released record as ErrNotFound.
func checkWaitRelease(e *env) {
	_, l, seen := e.waitSetup(longLease)
	ch := e.startWait(e.ctx, seen)
	if !e.stillBlocked(ch, "Release") {
		return
	}
	e.noErr("Release", e.s.Release(e.ctx, l))
	r := e.awaitWait(ch, "Release")
	e.wantErr("Wait woken by Release", r.err, kvstore.ErrNotFound)
}

// checkWaitMark: a blocked Wait returns the indeterminate record.
func checkWaitMark(e *env) {
	_, l, seen := e.waitSetup(longLease)
	ch := e.startWait(e.ctx, seen)
	if !e.stillBlocked(ch, "MarkIndeterminate") {
		return
	}
	e.noErr("MarkIndeterminate", e.s.MarkIndeterminate(e.ctx, l, "body_failed", true))
	r := e.awaitWait(ch, "MarkIndeterminate")
	if !e.noErr("Wait woken by MarkIndeterminate", r.err) {
		return
	}
	if e.wantState("Wait woken by MarkIndeterminate", r.rec, kvstore.StateIndeterminate) &&
		(r.rec.Reason != "body_failed" || !r.rec.BodyEntered) {
		e.t.Errorf("Wait woken by MarkIndeterminate: Reason = %q, BodyEntered = %t; want %q, true", r.rec.Reason, r.rec.BodyEntered,
			"body_failed")
	}
}

// checkWaitLeaseExpiry: a Wait on a claim whose holder goes silent returns once the
// lease runs out, with LeaseExpired set, and that record can be taken over.
func checkWaitLeaseExpiry(e *env) {
	d, _, seen := e.waitSetup(shortLease)
	ch := e.startWait(e.ctx, seen)
	if !e.realClock() {
		// The fake clock stands still, so the Wait must too; a real clock may
		// already be near the deadline on a slow machine.
		if !e.stillBlocked(ch, "the lease ran out") {
			return
		}
		e.passLease(shortLease)
	}
	r := e.awaitWait(ch, "the lease ran out")
	if !e.noErr("Wait on a claim whose lease ran out", r.err) {
		return
	}
	if r.rec.State != kvstore.StateClaimed || !r.rec.LeaseExpired || r.rec.Holder != "holder-a" {
		e.t.Fatalf("Wait on a claim whose lease ran out returned %s, want claimed by holder-a with LeaseExpired", fmtRecord(r.rec))
	}
	_, err := e.s.TakeOver(e.ctx, r.rec, e.req(d, "holder-b", longLease))
	e.noErr("TakeOver with the record Wait returned for a run-out lease", err)
}

// checkWaitContext: a blocked Wait returns its context's error.
func checkWaitContext(e *env) {
	_, _, seen := e.waitSetup(longLease)

	ctx, cancel := context.WithCancel(e.ctx)
	ch := e.startWait(ctx, seen)
	if !e.stillBlocked(ch, "its context was cancelled") {
		return
	}
	cancel()
	r := e.awaitWait(ch, "its context was cancelled")
	if !errors.Is(r.err, context.Canceled) {
		e.t.Errorf("Wait after its context was cancelled: record %s, error %v; want context.Canceled", fmtRecord(r.rec), r.err)
	}

	ctx, cancel = context.WithTimeout(e.ctx, 2*park)
	defer cancel()
	r = e.awaitWait(e.startWait(ctx, seen), "its context's deadline")
	if !errors.Is(r.err, context.DeadlineExceeded) {
		e.t.Errorf("Wait past its context's deadline: record %s, error %v; want context.DeadlineExceeded", fmtRecord(r.rec), r.err)
	}
}

// checkWaitAlreadyChanged: a Wait on a record that changed before the call returns
// at once (long before the lease would run out): renewed, recorded, released, and
// released then claimed again by the same holder.
func checkWaitAlreadyChanged(e *env) {
	now := func(what string, seen kvstore.Record) waitResult {
		e.t.Helper()
		return e.awaitWait(e.startWait(e.ctx, seen), what+" before Wait was called")
	}

	_, l, seen := e.waitSetup(longLease)
	l, err := e.s.Renew(e.ctx, l, longLease) // from here on only the renewed lease counts
	if err != nil {
		e.t.Fatalf("Renew: unexpected error %v", err)
	}
	r := now("a Renew", seen)
	if e.noErr("Wait on a record renewed since", r.err) &&
		(r.rec.State != kvstore.StateClaimed || r.rec.Revision == seen.Revision || r.rec.LeaseExpired) {
		e.t.Errorf("Wait on a record renewed since: %s, want claimed, a new revision, not expired (seen %s)", fmtRecord(r.rec), fmtRecord(seen))
	}

	e.noErr("Record", e.s.Record(e.ctx, l, "done"))
	r = now("a Record", seen)
	if e.noErr("Wait on a record completed since", r.err) {
		e.wantState("Wait on a record completed since", r.rec, kvstore.StateCompleted)
	}

	d2, l2, seen2 := e.waitSetup(longLease)
	e.noErr("Release", e.s.Release(e.ctx, l2))
	r = now("a Release", seen2)
	e.wantErr("Wait on a record released since", r.err, kvstore.ErrNotFound)

	e.claim(e.req(d2, "holder-a", longLease))
	r = now("a Release and a new Claim by the same holder", seen2)
	if e.noErr("Wait on a record released and claimed again since", r.err) && r.rec.Revision == seen2.Revision {
		e.t.Errorf("Wait on a record released and claimed again since: revision %d repeats the old claim's", r.rec.Revision)
	}
}
