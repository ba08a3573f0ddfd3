package kvstoretest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tesserix/toolexec/kvstore"
)

// Durations the checks use. Leases are short so that real-clock backends need
// sleep only about a second; margins are what the suite waits past a deadline.
const (
	shortLease     = time.Second
	longLease      = time.Minute // outlives every check: it never runs out by itself
	shortRetention = 2 * time.Second
	fakeMargin     = 10 * time.Millisecond
	realMargin     = 300 * time.Millisecond
	// park is how long the suite lets a Wait settle before changing the record,
	// and how long it watches a Wait that must stay blocked. It is not a bound on
	// speed: a Wait that returns later is fine.
	park = 50 * time.Millisecond
	// defaultPatience bounds how long the suite waits for something the store must
	// do by itself (wake a Wait, expire a record) before reporting that it did not.
	defaultPatience = 15 * time.Second
	// opTimeout bounds the whole subtest, so a hung backend fails instead of
	// hanging the test binary.
	opTimeout = 2 * time.Minute
)

// tb is the part of testing.TB the checks use. *testing.T satisfies it; the
// suite's own tests pass a recorder.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	Context() context.Context
}

// env is one subtest's world: the store, its clock, a tenant of its own.
type env struct {
	t        tb
	s        kvstore.Store
	advance  func(time.Duration)
	outages  []Outage
	tenant   string
	ctx      context.Context // ends with the subtest or after opTimeout
	patience time.Duration
	seq      atomic.Int64
}

func newEnv(t tb, h Harness) *env {
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	t.Cleanup(cancel)
	return &env{
		t:        t,
		s:        h.Store,
		advance:  h.Advance,
		outages:  h.Outages,
		tenant:   randomTenant(),
		ctx:      ctx,
		patience: defaultPatience,
	}
}

// randomTenant returns a valid tenant token no other subtest uses.
func randomTenant() string { return "kvst_" + rand.Text() }

// realClock reports whether the store is judged by a clock the suite cannot move.
func (e *env) realClock() bool { return e.advance == nil }

// pass lets d go by on the store's clock.
func (e *env) pass(d time.Duration) {
	if e.advance != nil {
		e.advance(d)
		return
	}
	time.Sleep(d)
}

// passLease lets a lease of d run out, with a margin.
func (e *env) passLease(d time.Duration) {
	if e.realClock() {
		e.pass(d + realMargin)
		return
	}
	e.pass(d + fakeMargin)
}

// digest returns a fresh key for this subtest: the sha256 of a unique string.
func (e *env) digest() string {
	return sha256Hex(fmt.Sprintf("%s/%d/%s", e.tenant, e.seq.Add(1), rand.Text()))
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// req builds a claim request for digest in the subtest's tenant.
func (e *env) req(digest, holder string, lease time.Duration) kvstore.ClaimRequest {
	return e.reqIn(e.tenant, digest, holder, lease)
}

func (e *env) reqIn(tenant, digest, holder string, lease time.Duration) kvstore.ClaimRequest {
	return kvstore.ClaimRequest{
		Tenant:      tenant,
		Key:         digest,
		Holder:      holder,
		Lease:       lease,
		CheckDigest: sha256Hex("check:" + digest),
		Tool:        "book_seat",
		RunID:       "run-" + holder,
		CallID:      "call-" + holder + "-" + digest[:8],
	}
}

// claim claims req's key and fails the subtest unless it was granted.
func (e *env) claim(req kvstore.ClaimRequest) kvstore.Lease {
	e.t.Helper()
	res, err := e.s.Claim(e.ctx, req)
	if err != nil {
		e.t.Fatalf("Claim(%s) by %q: unexpected error %v", short(req.Key), req.Holder, err)
	}
	if !res.Claimed {
		e.t.Fatalf("Claim(%s) by %q on a free key: Claimed = false, want true (existing record: %s)", short(req.Key), req.Holder,
			fmtRecord(res.Record))
	}
	e.checkLease("Claim", res.Lease, req)
	return res.Lease
}

// claimRefused claims req's key and fails the subtest unless it was refused; it
// returns the existing record the store answered with.
func (e *env) claimRefused(req kvstore.ClaimRequest) kvstore.Record {
	e.t.Helper()
	res, err := e.s.Claim(e.ctx, req)
	if err != nil {
		e.t.Fatalf("Claim(%s) by %q on a taken key: unexpected error %v", short(req.Key), req.Holder, err)
	}
	if res.Claimed {
		e.t.Fatalf("Claim(%s) by %q on a taken key: Claimed = true, want false: the key was granted twice", short(req.Key), req.Holder)
	}
	if res.Record.Tenant != req.Tenant || res.Record.Key != req.Key {
		e.t.Errorf("Claim(%s) refused: existing record names tenant %q digest %s, want %q %s", short(req.Key), res.Record.Tenant,
			short(res.Record.Key), req.Tenant, short(req.Key))
	}
	return res.Record
}

// checkLease reports a lease that does not name the key and holder it was granted
// for.
func (e *env) checkLease(op string, l kvstore.Lease, req kvstore.ClaimRequest) {
	e.t.Helper()
	if l.Tenant != req.Tenant || l.Key != req.Key || l.Holder != req.Holder {
		e.t.Errorf("%s: Lease names tenant %q digest %s holder %q, want %q %s %q", op, l.Tenant, short(l.Key), l.Holder, req.Tenant,
			short(req.Key), req.Holder)
	}
	if l.Token == "" {
		e.t.Errorf("%s: Lease.Token is empty; a lease needs a fencing token", op)
	}
}

// get reads the subtest tenant's record for digest and fails the subtest on error.
func (e *env) get(digest string) kvstore.Record {
	e.t.Helper()
	return e.getIn(e.tenant, digest)
}

func (e *env) getIn(tenant, digest string) kvstore.Record {
	e.t.Helper()
	r, err := e.s.Get(e.ctx, tenant, digest)
	if err != nil {
		e.t.Fatalf("Get(%q, %s): unexpected error %v", tenant, short(digest), err)
	}
	if r.Tenant != tenant || r.Key != digest {
		e.t.Errorf("Get(%q, %s): record names tenant %q digest %s", tenant, short(digest), r.Tenant, short(r.Key))
	}
	return r
}

// wantGone reports a record that Get still finds.
func (e *env) wantGone(why, tenant, digest string) {
	e.t.Helper()
	r, err := e.s.Get(e.ctx, tenant, digest)
	if !errors.Is(err, kvstore.ErrNotFound) {
		e.t.Errorf("Get(%q, %s) %s: got record %s, error %v; want ErrNotFound", tenant, short(digest), why, fmtRecord(r), err)
	}
}

// wantClaimedBy reports how rec differs from the claim req made.
func (e *env) wantClaimedBy(what string, rec kvstore.Record, req kvstore.ClaimRequest) {
	e.t.Helper()
	if rec.State != kvstore.StateClaimed {
		e.t.Errorf("%s: State = %q, want %q (record %s)", what, rec.State, kvstore.StateClaimed, fmtRecord(rec))
		return
	}
	for _, f := range []struct{ name, got, want string }{
		{"Tenant", rec.Tenant, req.Tenant},
		{"Key", rec.Key, req.Key},
		{"Holder", rec.Holder, req.Holder},
		{"Tool", rec.Tool, req.Tool},
		{"RunID", rec.RunID, req.RunID},
		{"CallID", rec.CallID, req.CallID},
		{"CheckDigest", rec.CheckDigest, req.CheckDigest},
	} {
		if f.got != f.want {
			e.t.Errorf("%s: %s = %q, want %q", what, f.name, f.got, f.want)
		}
	}
	if rec.Lease != req.Lease {
		e.t.Errorf("%s: Lease = %v, want %v", what, rec.Lease, req.Lease)
	}
	if rec.LeaseUntil.IsZero() {
		e.t.Errorf("%s: LeaseUntil is zero for a claimed record", what)
	}
}

// wantState reports a record not in state want.
func (e *env) wantState(what string, rec kvstore.Record, want kvstore.State) bool {
	e.t.Helper()
	if rec.State != want {
		e.t.Errorf("%s: State = %q, want %q (record %s)", what, rec.State, want, fmtRecord(rec))
		return false
	}
	return true
}

// wantErr reports err unless it matches target.
func (e *env) wantErr(what string, err, target error) bool {
	e.t.Helper()
	if !errors.Is(err, target) {
		e.t.Errorf("%s: error %v, want %v", what, err, target)
		return false
	}
	return true
}

// noErr reports a non-nil err.
func (e *env) noErr(what string, err error) bool {
	e.t.Helper()
	if err != nil {
		e.t.Errorf("%s: unexpected error %v", what, err)
		return false
	}
	return true
}

// unchanged reports a record that a refused operation altered.
func (e *env) unchanged(why string, before kvstore.Record) {
	e.t.Helper()
	after, err := e.s.Get(e.ctx, before.Tenant, before.Key)
	if err != nil {
		e.t.Errorf("after %s: Get returned error %v; the record was %s", why, err, fmtRecord(before))
		return
	}
	if after.Revision != before.Revision || after.State != before.State || after.Holder != before.Holder || after.Outcome != before.Outcome {
		e.t.Errorf("%s changed the record: before %s, after %s", why, fmtRecord(before), fmtRecord(after))
	}
}

// refused asserts that every holder-only operation refuses lease with
// ErrNotHolder, and that none of them changed the key (before is its record, or
// nil if the key must stay gone).
func (e *env) refused(why string, lease kvstore.Lease, before *kvstore.Record) {
	e.t.Helper()
	e.wantErr(fmt.Sprintf("Record with a lease %s", why), e.s.Record(e.ctx, lease, "stale-outcome"), kvstore.ErrNotHolder)
	e.wantErr(fmt.Sprintf("Release with a lease %s", why), e.s.Release(e.ctx, lease), kvstore.ErrNotHolder)
	e.wantErr(fmt.Sprintf("MarkIndeterminate with a lease %s", why), e.s.MarkIndeterminate(e.ctx, lease, "stale", true), kvstore.ErrNotHolder)
	_, err := e.s.Renew(e.ctx, lease, longLease)
	e.wantErr(fmt.Sprintf("Renew with a lease %s", why), err, kvstore.ErrNotHolder)
	if before == nil {
		e.wantGone("after refused operations on a gone key", lease.Tenant, lease.Key)
		return
	}
	e.unchanged(fmt.Sprintf("operations with a lease %s", why), *before)
}

// waitResult is what a Wait started with startWait returned.
type waitResult struct {
	rec kvstore.Record
	err error
}

// startWait calls Wait in its own goroutine.
func (e *env) startWait(ctx context.Context, seen kvstore.Record) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		r, err := e.s.Wait(ctx, seen)
		ch <- waitResult{r, err}
	}()
	return ch
}

// stillBlocked gives a Wait time to settle and reports it if it returned although
// nothing changed.
func (e *env) stillBlocked(ch <-chan waitResult, before string) bool {
	e.t.Helper()
	select {
	case r := <-ch:
		e.t.Errorf("Wait returned before %s, though the record had not changed: record %s, error %v", before, fmtRecord(r.rec), r.err)
		return false
	case <-time.After(park):
		return true
	}
}

// awaitWait returns what the Wait returned, or fails the subtest if it does not
// return within the suite's patience.
func (e *env) awaitWait(ch <-chan waitResult, after string) waitResult {
	e.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(e.patience):
		e.t.Fatalf("Wait did not return within %v after %s", e.patience, after)
		return waitResult{}
	}
}

// short abbreviates a digest for messages.
func short(d string) string {
	if len(d) > 12 {
		return d[:12] + "…"
	}
	return d
}

// fmtRecord renders the fields of a record that the checks judge.
func fmtRecord(r kvstore.Record) string {
	if r == (kvstore.Record{}) {
		return "{}"
	}
	s := fmt.Sprintf("{%s/%s state=%q holder=%q rev=%d", r.Tenant, short(r.Key), r.State, r.Holder, r.Revision)
	switch r.State {
	case kvstore.StateClaimed:
		s += fmt.Sprintf(" lease=%v expired=%t", r.Lease, r.LeaseExpired)
	case kvstore.StateCompleted:
		s += fmt.Sprintf(" outcome=%.40q", r.Outcome)
	case kvstore.StateIndeterminate:
		s += fmt.Sprintf(" reason=%q body_entered=%t", r.Reason, r.BodyEntered)
	}
	return s + "}"
}
