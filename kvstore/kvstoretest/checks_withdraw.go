package kvstoretest

import (
	"errors"

	"github.com/tesserix/toolexec/kvstore"
)

// withdrawer returns the store's Withdrawer, or ends the subtest (logged) for
// a store that does not offer it: the capability is optional.
func (e *env) withdrawer() (kvstore.Withdrawer, bool) {
	w, ok := e.s.(kvstore.Withdrawer)
	if !ok {
		e.t.Logf("the store does not implement kvstore.Withdrawer: nothing to check")
	}
	return w, ok
}

// checkWithdrawOwnClaim: a claim read back is withdrawn by its holder while its
// lease still runs; the key is free at once, a waiter learns it is gone, the
// claim's lease is refused, and another holder claims the key.
func checkWithdrawOwnClaim(e *env) {
	w, ok := e.withdrawer()
	if !ok {
		return
	}
	d := e.digest()
	lease := e.claim(e.req(d, "holder-a", longLease))
	seen := e.get(d)
	waiter := e.startWait(e.ctx, seen)
	if !e.stillBlocked(waiter, "the claim was withdrawn") {
		return
	}
	if !e.noErr("Withdraw of a claim read back by its holder", w.Withdraw(e.ctx, seen, "holder-a")) {
		return
	}
	if r := e.awaitWait(waiter, "the claim was withdrawn"); !errors.Is(r.err, kvstore.ErrNotFound) {
		e.t.Errorf("Wait after Withdraw: record %s, error %v; want ErrNotFound", fmtRecord(r.rec), r.err)
	}
	e.refused("whose claim was withdrawn", lease, nil)
	e.claim(e.req(d, "holder-b", longLease))
	e.wantErr("Withdraw of a claim already withdrawn (the key claimed again since)",
		w.Withdraw(e.ctx, seen, "holder-a"), kvstore.ErrNotHolder)
}

// checkWithdrawChanged: Withdraw compares the revision it is given; a claim
// renewed, recorded, marked or taken over since it was read stays as it is.
func checkWithdrawChanged(e *env) {
	w, ok := e.withdrawer()
	if !ok {
		return
	}
	for _, c := range []struct {
		what   string
		change func(d string, l kvstore.Lease) error
	}{
		{"renewed", func(_ string, l kvstore.Lease) error { _, err := e.s.Renew(e.ctx, l, longLease); return err }},
		{"recorded", func(_ string, l kvstore.Lease) error { return e.s.Record(e.ctx, l, "done") }},
		{"marked indeterminate", func(_ string, l kvstore.Lease) error {
			return e.s.MarkIndeterminate(e.ctx, l, "body_failed", true)
		}},
		{"taken over", func(d string, _ kvstore.Lease) error {
			e.passLease(shortLease)
			_, err := e.s.TakeOver(e.ctx, e.get(d), e.req(d, "holder-b", longLease))
			return err
		}},
	} {
		d := e.digest()
		l := e.claim(e.req(d, "holder-a", shortLease))
		seen := e.get(d)
		if !e.noErr("changing the claim ("+c.what+")", c.change(d, l)) {
			continue
		}
		after := e.get(d)
		e.wantErr("Withdraw of a claim "+c.what+" since it was read", w.Withdraw(e.ctx, seen, "holder-a"), kvstore.ErrNotHolder)
		e.unchanged("Withdraw of a claim "+c.what+" since it was read", after)
	}

	// A released key is gone: Withdraw says so and creates nothing.
	d := e.digest()
	l := e.claim(e.req(d, "holder-a", longLease))
	seen := e.get(d)
	if e.noErr("Release", e.s.Release(e.ctx, l)) {
		e.wantErr("Withdraw of a released claim", w.Withdraw(e.ctx, seen, "holder-a"), kvstore.ErrNotFound)
		e.wantGone("after Withdraw of a released claim", e.tenant, d)
	}
}

// checkWithdrawRefused: Withdraw refuses, touching nothing, a claim of another
// holder, a record that is not a claim, and a malformed key or empty holder.
func checkWithdrawRefused(e *env) {
	w, ok := e.withdrawer()
	if !ok {
		return
	}
	d := e.digest()
	e.claim(e.req(d, "holder-a", longLease))
	seen := e.get(d)
	e.wantErr("Withdraw by another holder", w.Withdraw(e.ctx, seen, "holder-b"), kvstore.ErrInvalid)
	e.wantErr("Withdraw with an empty holder", w.Withdraw(e.ctx, seen, ""), kvstore.ErrInvalid)
	forged := seen
	forged.Holder = "holder-b"
	e.wantErr("Withdraw of a claim said to be holder-b's but held by holder-a",
		w.Withdraw(e.ctx, forged, "holder-b"), kvstore.ErrNotHolder)
	bad := seen
	bad.Key = "not-a-digest"
	e.wantErr("Withdraw of a malformed digest", w.Withdraw(e.ctx, bad, "holder-a"), kvstore.ErrInvalid)
	e.unchanged("refused Withdraws", seen)

	done := e.digest()
	l := e.claim(e.req(done, "holder-a", longLease))
	if e.noErr("Record", e.s.Record(e.ctx, l, "kept")) {
		rec := e.get(done)
		e.wantErr("Withdraw of a completed record", w.Withdraw(e.ctx, rec, "holder-a"), kvstore.ErrInvalid)
		claimed := rec
		claimed.State = kvstore.StateClaimed // as if read before the Record
		e.wantErr("Withdraw of a record completed since", w.Withdraw(e.ctx, claimed, "holder-a"), kvstore.ErrNotHolder)
		e.unchanged("Withdraw of a completed record", rec)
	}
}
