package kvstoretest

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tesserix/toolexec/kvstore"
)

// checkClaimFresh: a claim on a free key is granted, and the record holds what
// the request said.
func checkClaimFresh(e *env) {
	d := e.digest()
	req := e.req(d, "holder-a", longLease)
	e.claim(req)
	rec := e.get(d)
	e.wantClaimedBy("Get after Claim", rec, req)
	if rec.LeaseExpired {
		e.t.Errorf("Get after Claim with a lease of %v: LeaseExpired = true", longLease)
	}
}

// checkClaimExisting: a second claim is refused with the existing record, and
// writes nothing.
func checkClaimExisting(e *env) {
	d := e.digest()
	reqA := e.req(d, "holder-a", longLease)
	e.claim(reqA)
	before := e.get(d)
	rec := e.claimRefused(e.req(d, "holder-b", longLease))
	e.wantClaimedBy("Claim on a claimed key: existing record", rec, reqA)
	if rec.Revision != before.Revision {
		e.t.Errorf("Claim on a claimed key: existing record has revision %d, Get had %d", rec.Revision, before.Revision)
	}
	e.unchanged("a refused Claim", before)
	// The same holder asking again is refused too: a claim is granted once.
	e.claimRefused(reqA)
}

// checkConcurrentClaims: of 64 simultaneous claims exactly one is granted and the
// others see its record.
func checkConcurrentClaims(e *env) {
	const n = 64
	d := e.digest()
	type answer struct {
		holder string
		res    kvstore.ClaimResult
		err    error
	}
	answers := make([]answer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			holder := fmt.Sprintf("holder-%02d", i)
			<-start
			res, err := e.s.Claim(e.ctx, e.req(d, holder, longLease))
			answers[i] = answer{holder, res, err}
		}()
	}
	close(start)
	wg.Wait()

	var winners []string
	for _, a := range answers {
		if a.err != nil {
			e.t.Errorf("concurrent Claim by %s: unexpected error %v", a.holder, a.err)
			continue
		}
		if a.res.Claimed {
			winners = append(winners, a.holder)
		}
	}
	if len(winners) != 1 {
		named := winners
		if len(named) > 5 {
			named = append(named[:5:5], "…")
		}
		e.t.Fatalf("%d concurrent claims of one key: %d granted (%s), want exactly 1", n, len(winners), strings.Join(named, ", "))
	}
	for _, a := range answers {
		if a.err != nil || a.res.Claimed {
			continue
		}
		if a.res.Record.State != kvstore.StateClaimed || a.res.Record.Holder != winners[0] {
			e.t.Errorf("concurrent Claim by %s refused with record %s, want claimed by %s", a.holder, fmtRecord(a.res.Record), winners[0])
		}
	}
	if rec := e.get(d); rec.Holder != winners[0] {
		e.t.Errorf("Get after concurrent claims: Holder = %q, want the winner %q", rec.Holder, winners[0])
	}
}

// checkClaimNeverTakesOver: a claim whose lease ran out is still refused to a new
// claimer; only TakeOver replaces it.
func checkClaimNeverTakesOver(e *env) {
	d := e.digest()
	reqA := e.req(d, "holder-a", shortLease)
	e.claim(reqA)
	e.passLease(shortLease)
	rec := e.claimRefused(e.req(d, "holder-b", shortLease))
	e.wantClaimedBy("Claim on a claim whose lease ran out: existing record", rec, reqA)
	if !rec.LeaseExpired {
		e.t.Logf("note: Claim does not report LeaseExpired for a run-out lease (allowed: Wait must)")
	}
}

// checkTenantIsolation: the same digest in two tenants is two independent keys.
func checkTenantIsolation(e *env) {
	d := e.digest()
	other := randomTenant()
	reqA := e.req(d, "holder-a", longLease)
	reqB := e.reqIn(other, d, "holder-b", longLease)
	la := e.claim(reqA)
	lb := e.claim(reqB)
	e.noErr("Record in the first tenant", e.s.Record(e.ctx, la, "first-tenant"))
	e.wantClaimedBy("Get in the second tenant after a Record in the first", e.getIn(other, d), reqB)
	e.noErr("Release in the second tenant", e.s.Release(e.ctx, lb))
	if rec := e.get(d); e.wantState("Get in the first tenant after a Release in the second", rec, kvstore.StateCompleted) &&
		rec.Outcome != "first-tenant" {
		e.t.Errorf("Get in the first tenant: Outcome = %q, want %q", rec.Outcome, "first-tenant")
	}
	e.wantGone("in the second tenant after its Release", other, d)
}

// checkRecord: Record completes the claim; later claims see the outcome.
func checkRecord(e *env) {
	d := e.digest()
	l := e.claim(e.req(d, "holder-a", longLease))
	before := e.get(d)
	if !e.noErr("Record", e.s.Record(e.ctx, l, "seat 14C booked")) {
		return
	}
	rec := e.get(d)
	if e.wantState("Get after Record", rec, kvstore.StateCompleted) {
		if rec.Outcome != "seat 14C booked" {
			e.t.Errorf("Get after Record: Outcome = %q, want %q", rec.Outcome, "seat 14C booked")
		}
		if rec.Revision == before.Revision {
			e.t.Errorf("Get after Record: Revision still %d; it must change on every write", rec.Revision)
		}
	}
	again := e.claimRefused(e.req(d, "holder-b", longLease))
	if e.wantState("Claim after Record", again, kvstore.StateCompleted) && again.Outcome != "seat 14C booked" {
		e.t.Errorf("Claim after Record: Outcome = %q, want %q", again.Outcome, "seat 14C booked")
	}
}

// checkOutcomeRoundTrip: an outcome of some size with quotes, escapes, newlines and
// non-ASCII text comes back byte for byte.
func checkOutcomeRoundTrip(e *env) {
	d := e.digest()
	l := e.claim(e.req(d, "holder-a", longLease))
	var b strings.Builder
	b.WriteString(`{"status":"ok","note":"Grüße, 東京 — \"quoted\" \\ back\\slash",` + "\n\t")
	for b.Len() < 16<<10 {
		b.WriteString(`"line":"ünïcödé ✓ 'single' <tag> & % $1 ${x} \u00e9",` + "\r\n")
	}
	b.WriteString(`"end":true}`)
	out := b.String()
	if !e.noErr(fmt.Sprintf("Record of a %d-byte outcome", len(out)), e.s.Record(e.ctx, l, out)) {
		return
	}
	if rec := e.get(d); rec.Outcome != out {
		e.t.Errorf("Get after Record: the %d-byte outcome came back as %d bytes, not byte for byte", len(out), len(rec.Outcome))
	}
}

// checkRelease: Release frees the key.
func checkRelease(e *env) {
	d := e.digest()
	l := e.claim(e.req(d, "holder-a", longLease))
	if !e.noErr("Release", e.s.Release(e.ctx, l)) {
		return
	}
	e.wantGone("after Release", e.tenant, d)
	reqB := e.req(d, "holder-b", longLease)
	e.claim(reqB)
	e.wantClaimedBy("Get after a Claim of a released key", e.get(d), reqB)
}

// checkMarkIndeterminate: MarkIndeterminate parks the record with its reason; a
// later claim sees it.
func checkMarkIndeterminate(e *env) {
	for _, c := range []struct {
		reason      string
		bodyEntered bool
	}{
		{"body_failed", true},
		{"holder_lost", false},
	} {
		d := e.digest()
		l := e.claim(e.req(d, "holder-a", longLease))
		what := fmt.Sprintf("MarkIndeterminate(%q, %t)", c.reason, c.bodyEntered)
		if !e.noErr(what, e.s.MarkIndeterminate(e.ctx, l, c.reason, c.bodyEntered)) {
			continue
		}
		rec := e.get(d)
		if e.wantState("Get after "+what, rec, kvstore.StateIndeterminate) {
			if rec.Reason != c.reason || rec.BodyEntered != c.bodyEntered {
				e.t.Errorf("Get after %s: Reason = %q, BodyEntered = %t", what, rec.Reason, rec.BodyEntered)
			}
		}
		again := e.claimRefused(e.req(d, "holder-b", longLease))
		if e.wantState("Claim after "+what, again, kvstore.StateIndeterminate) && again.Reason != c.reason {
			e.t.Errorf("Claim after %s: Reason = %q", what, again.Reason)
		}
	}
}

// checkRenew: Renew moves the deadline, changes the revision, and keeps the claim
// alive past its original deadline.
func checkRenew(e *env) {
	d := e.digest()
	l := e.claim(e.req(d, "holder-a", shortLease))
	before := e.get(d)
	nl, err := e.s.Renew(e.ctx, l, longLease)
	if err != nil {
		e.t.Fatalf("Renew(%v): unexpected error %v", longLease, err)
	}
	if nl.Tenant != l.Tenant || nl.Key != l.Key || nl.Holder != l.Holder || nl.Token == "" {
		e.t.Errorf("Renew returned lease %+v for lease %+v", nl, l)
	}
	rec := e.get(d)
	if rec.Revision == before.Revision {
		e.t.Errorf("Get after Renew: Revision still %d; it must change on every write", rec.Revision)
	}
	if !rec.LeaseUntil.After(before.LeaseUntil) {
		e.t.Errorf("Get after Renew(%v): LeaseUntil %v, not after the claim's %v", longLease, rec.LeaseUntil, before.LeaseUntil)
	}

	e.passLease(shortLease) // past the original deadline, well within the renewed one
	rec = e.get(d)
	if rec.State != kvstore.StateClaimed || rec.LeaseExpired {
		e.t.Errorf("Get after the original deadline of a renewed claim: %s, want claimed and not expired", fmtRecord(rec))
	}
	_, err = e.s.TakeOver(e.ctx, rec, e.req(d, "holder-b", shortLease))
	e.wantErr("TakeOver of a renewed claim after its original deadline", err, kvstore.ErrLeaseHeld)
	if err := e.s.Record(e.ctx, nl, "renewed and done"); e.noErr("Record with the renewed lease", err) {
		e.wantState("Get after Record with the renewed lease", e.get(d), kvstore.StateCompleted)
	}
}

// errorsIsAny reports whether err matches one of targets.
func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
