package kvstoretest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tesserix/toolexec/kvstore"
)

// checkRetention: records live for the retention counted from their last write,
// then are gone everywhere and the key is free.
func checkRetention(e *env) {
	const r = shortRetention
	d := e.digest()    // claimed, then recorded part-way through
	idle := e.digest() // claimed and never touched again
	l := e.claim(e.req(d, "holder-a", longLease))
	e.claim(e.req(idle, "holder-a", longLease))

	e.pass(r * 6 / 10)
	wrote := time.Now()
	if err := e.s.Record(e.ctx, l, "kept a while"); err != nil {
		e.t.Fatalf("Record: unexpected error %v", err)
	}
	e.pass(r * 6 / 10) // past the retention counted from the claim, within the one from the Record
	rec, err := e.s.Get(e.ctx, e.tenant, d)
	switch {
	case e.realClock() && time.Since(wrote) >= r:
		e.t.Logf("note: the machine took %v to get here; not judging whether retention counts from the last write", time.Since(wrote))
	case err != nil:
		e.t.Errorf(
			"Get %v after a record's last write with a retention of %v: error %v; retention must count from the last write (as JetStream KV "+
				"MaxAge does)", r*6/10, r, err)
	default:
		e.wantState("Get within the retention of the last write", rec, kvstore.StateCompleted)
	}

	if !e.realClock() {
		e.pass(r * 5 / 10)
	}
	e.eventuallyGone("a record completed more than the retention ago", d, wrote.Add(r))
	e.eventuallyGone("a claim left untouched for more than the retention", idle, wrote.Add(r))
	e.wantErr("Resolve of an expired record", resolveErr(e, d), kvstore.ErrNotFound)
	reqB := e.req(d, "holder-b", longLease)
	e.claim(reqB)
	e.wantClaimedBy("Get after claiming an expired key", e.get(d), reqB)
}

func resolveErr(e *env, d string) error {
	_, err := e.s.Resolve(e.ctx, e.tenant, d, kvstore.Resolution{Outcome: "x"})
	return err
}

// eventuallyGone reports a record still found once its retention ran out. With a
// fake clock the record must be gone at once; with a real one the backend may take
// up to the suite's patience past from to remove it.
func (e *env) eventuallyGone(what, digest string, from time.Time) {
	e.t.Helper()
	if !e.realClock() {
		e.wantGone("for "+what, e.tenant, digest)
		return
	}
	deadline := from.Add(e.patience)
	for {
		rec, err := e.s.Get(e.ctx, e.tenant, digest)
		if errors.Is(err, kvstore.ErrNotFound) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Errorf("Get for %s: still %s, error %v, %v after the retention ran out; want ErrNotFound", what, fmtRecord(rec), err, e.patience)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkForget: Forget removes every record of the tenant, in every state, and none
// of another tenant's; the old holder cannot record onto a new claim.
func checkForget(e *env) {
	claimed, completed, indeterminate := e.digest(), e.digest(), e.digest()
	lc := e.claim(e.req(claimed, "holder-a", longLease))
	l := e.claim(e.req(completed, "holder-a", longLease))
	e.noErr("Record", e.s.Record(e.ctx, l, "done"))
	l = e.claim(e.req(indeterminate, "holder-a", longLease))
	e.noErr("MarkIndeterminate", e.s.MarkIndeterminate(e.ctx, l, "body_failed", true))

	other := randomTenant()
	lo := e.claim(e.reqIn(other, completed, "holder-o", longLease)) // the same digest, another tenant
	e.noErr("Record in the other tenant", e.s.Record(e.ctx, lo, "other tenant's"))
	otherClaimed := e.digest()
	e.claim(e.reqIn(other, otherClaimed, "holder-o", longLease))
	keep := []kvstore.Record{e.getIn(other, completed), e.getIn(other, otherClaimed)}

	n, err := e.s.Forget(e.ctx, e.tenant)
	if err != nil {
		e.t.Fatalf("Forget: unexpected error %v", err)
	}
	switch {
	case n == -1:
	case n < 3:
		e.t.Errorf("Forget of a tenant with 3 records: reports %d removed, want 3 (or -1 if the backend cannot tell)", n)
	case n > 3:
		e.t.Logf("note: Forget of a tenant with 3 records reports %d removed", n)
	}
	for _, d := range []string{claimed, completed, indeterminate} {
		e.wantGone("after Forget of its tenant", e.tenant, d)
	}
	for _, r := range keep {
		e.unchanged("Forget of another tenant", r)
	}

	reqB := e.req(claimed, "holder-b", longLease)
	e.claim(reqB)
	e.wantErr("Record by the holder of a forgotten claim, onto a new claim of the key", e.s.Record(e.ctx, lc, "stale"), kvstore.ErrNotHolder)
	e.wantClaimedBy("Get after a forgotten holder tried to record", e.get(claimed), reqB)

	n, err = e.s.Forget(e.ctx, randomTenant())
	if e.noErr("Forget of a tenant without records", err) && n != 0 && n != -1 {
		e.t.Errorf("Forget of a tenant without records: reports %d removed, want 0 (or -1)", n)
	}
}

// indeterminate claims a fresh key and parks it; it returns the digest.
func (e *env) indeterminate(reason string) string {
	e.t.Helper()
	d := e.digest()
	l := e.claim(e.req(d, "holder-a", longLease))
	if err := e.s.MarkIndeterminate(e.ctx, l, reason, true); err != nil {
		e.t.Fatalf("MarkIndeterminate: unexpected error %v", err)
	}
	return d
}

// checkResolveComplete: resolving an indeterminate record with an outcome
// completes it for everyone.
func checkResolveComplete(e *env) {
	d := e.indeterminate("body_failed")
	before := e.get(d)
	rec, err := e.s.Resolve(e.ctx, e.tenant, d, kvstore.Resolution{Outcome: "operator: seat was booked"})
	if err != nil {
		e.t.Fatalf("Resolve with an outcome: unexpected error %v", err)
	}
	if rec.State != kvstore.StateCompleted || rec.Outcome != "operator: seat was booked" {
		e.t.Errorf("Resolve with an outcome returned %s, want completed with the outcome", fmtRecord(rec))
	}
	if rec.Revision == before.Revision {
		e.t.Errorf("Resolve with an outcome: Revision still %d; it must change on every write", rec.Revision)
	}
	if got := e.get(d); got.State != kvstore.StateCompleted || got.Outcome != "operator: seat was booked" {
		e.t.Errorf("Get after Resolve: %s, want completed with the outcome", fmtRecord(got))
	}
	if again := e.claimRefused(e.req(d, "holder-b", longLease)); again.State != kvstore.StateCompleted ||
		again.Outcome != "operator: seat was booked" {
		e.t.Errorf("Claim after Resolve: existing record %s, want completed with the outcome", fmtRecord(again))
	}
}

// checkResolveRelease: resolving an indeterminate record by release frees the key
// and returns the record as it was.
func checkResolveRelease(e *env) {
	d := e.indeterminate("holder_lost")
	rec, err := e.s.Resolve(e.ctx, e.tenant, d, kvstore.Resolution{Release: true})
	if err != nil {
		e.t.Fatalf("Resolve by release: unexpected error %v", err)
	}
	if rec.State != kvstore.StateIndeterminate || rec.Reason != "holder_lost" || rec.Key != d {
		e.t.Errorf("Resolve by release returned %s, want the indeterminate record as it was", fmtRecord(rec))
	}
	e.wantGone("after Resolve by release", e.tenant, d)
	e.claim(e.req(d, "holder-b", longLease))
}

// checkResolveWrongState: only indeterminate records can be resolved; the others
// are left as they are.
func checkResolveWrongState(e *env) {
	done := e.digest()
	l := e.claim(e.req(done, "holder-a", longLease))
	e.noErr("Record", e.s.Record(e.ctx, l, "done"))
	held := e.digest()
	e.claim(e.req(held, "holder-a", longLease))

	for _, c := range []struct {
		what   string
		digest string
	}{
		{"a completed record", done},
		{"a claimed record", held},
	} {
		before := e.get(c.digest)
		for _, res := range []kvstore.Resolution{{Outcome: "operator"}, {Release: true}} {
			_, err := e.s.Resolve(e.ctx, e.tenant, c.digest, res)
			e.wantErr(fmt.Sprintf("Resolve(%+v) of %s", res, c.what), err, kvstore.ErrNotIndeterminate)
		}
		e.unchanged("a refused Resolve of "+c.what, before)
	}
	_, err := e.s.Resolve(e.ctx, e.tenant, e.digest(), kvstore.Resolution{Outcome: "operator"})
	e.wantErr("Resolve of a key never claimed", err, kvstore.ErrNotFound)
}

// checkInvalidInput: malformed tenants and digests and non-positive leases are
// refused with ErrInvalid by every operation, as are a claim without a holder, a
// take-over request that does not name the record's key and a lease without a
// holder or token (the contract's checks, kvstore.ClaimRequest.Validate and the
// others); the boundaries of the valid forms are accepted.
func checkInvalidInput(e *env) {
	okDigest := e.digest()
	badTenants := []string{
		"", "has space", "dot.ted", "star*", "gt>", "slash/x", "colon:x", "ünï", "new\nline",
		"nul\x00x", "..", strings.Repeat("a", 129),
	}
	badDigests := []string{
		"", okDigest[:63], okDigest + "0", strings.Repeat("AB", 32), okDigest[:63] + "g",
		"0x" + okDigest[:62], okDigest[:32] + " " + okDigest[33:], strings.Repeat("é", 32),
	}
	type key struct{ tenant, digest string }
	var bad []key
	for _, t := range badTenants {
		bad = append(bad, key{t, okDigest})
	}
	for _, d := range badDigests {
		bad = append(bad, key{e.tenant, d})
	}
	for _, k := range bad {
		name := fmt.Sprintf("(tenant %q, digest %q)", k.tenant, k.digest)
		req := kvstore.ClaimRequest{Tenant: k.tenant, Key: k.digest, Holder: "holder-a", Lease: longLease}
		_, err := e.s.Claim(e.ctx, req)
		e.wantErr("Claim"+name, err, kvstore.ErrInvalid)
		_, err = e.s.Get(e.ctx, k.tenant, k.digest)
		e.wantErr("Get"+name, err, kvstore.ErrInvalid)
		_, err = e.s.Resolve(e.ctx, k.tenant, k.digest, kvstore.Resolution{Outcome: "x"})
		e.wantErr("Resolve"+name, err, kvstore.ErrInvalid)
		seen := kvstore.Record{Tenant: k.tenant, Key: k.digest, State: kvstore.StateClaimed, Holder: "holder-a", Revision: 1}
		_, err = e.s.TakeOver(e.ctx, seen, req)
		e.wantErr("TakeOver"+name, err, kvstore.ErrInvalid)
		ctx, cancel := context.WithTimeout(e.ctx, time.Second)
		_, err = e.s.Wait(ctx, seen)
		cancel()
		e.wantErr("Wait"+name, err, kvstore.ErrInvalid)

		lease := kvstore.Lease{Tenant: k.tenant, Key: k.digest, Holder: "holder-a", Token: "1"}
		leaseOps := map[string]error{
			"Record":            e.s.Record(e.ctx, lease, "x"),
			"Release":           e.s.Release(e.ctx, lease),
			"MarkIndeterminate": e.s.MarkIndeterminate(e.ctx, lease, "x", false),
		}
		_, leaseOps["Renew"] = e.s.Renew(e.ctx, lease, longLease)
		for op, err := range leaseOps {
			if !errorsIsAny(err, kvstore.ErrInvalid, kvstore.ErrNotHolder) {
				e.t.Errorf("%s with a lease for %s: error %v, want ErrInvalid (or ErrNotHolder)", op, name, err)
			}
		}
	}
	for _, t := range badTenants {
		_, err := e.s.Forget(e.ctx, t)
		e.wantErr(fmt.Sprintf("Forget(%q)", t), err, kvstore.ErrInvalid)
	}

	// Non-positive leases.
	for _, lease := range []time.Duration{0, -time.Second} {
		d := e.digest()
		_, err := e.s.Claim(e.ctx, e.req(d, "holder-a", lease))
		e.wantErr(fmt.Sprintf("Claim with lease %v", lease), err, kvstore.ErrInvalid)
		e.wantGone(fmt.Sprintf("after a Claim with lease %v", lease), e.tenant, d)
	}
	d := e.digest()
	l := e.claim(e.req(d, "holder-a", longLease))
	before := e.get(d)
	for _, lease := range []time.Duration{0, -time.Second} {
		_, err := e.s.Renew(e.ctx, l, lease)
		e.wantErr(fmt.Sprintf("Renew by %v", lease), err, kvstore.ErrInvalid)
		_, err = e.s.TakeOver(e.ctx, before, e.req(d, "holder-b", lease))
		e.wantErr(fmt.Sprintf("TakeOver with lease %v", lease), err, kvstore.ErrInvalid)
	}
	e.unchanged("refused Renew and TakeOver calls", before)

	// A claim without a holder; a take-over request that does not name the
	// record's key; a lease without a holder or a token.
	noHolder := e.req(e.digest(), "", longLease)
	_, err := e.s.Claim(e.ctx, noHolder)
	e.wantErr("Claim with an empty holder", err, kvstore.ErrInvalid)
	e.wantGone("after a Claim with an empty holder", e.tenant, noHolder.Key)
	for what, req := range map[string]kvstore.ClaimRequest{
		"an empty holder": e.req(d, "", longLease),
		"no key":          {Holder: "holder-b", Lease: longLease},
		"no tenant":       {Key: d, Holder: "holder-b", Lease: longLease},
		"another key":     e.req(e.digest(), "holder-b", longLease),
		"another tenant":  e.reqIn(randomTenant(), d, "holder-b", longLease),
	} {
		_, err := e.s.TakeOver(e.ctx, before, req)
		e.wantErr("TakeOver with a request naming "+what, err, kvstore.ErrInvalid)
	}
	for what, bad := range map[string]kvstore.Lease{
		"without a holder": {Tenant: l.Tenant, Key: l.Key, Token: l.Token},
		"without a token":  {Tenant: l.Tenant, Key: l.Key, Holder: l.Holder},
	} {
		e.wantErr("Record with a lease "+what, e.s.Record(e.ctx, bad, "x"), kvstore.ErrInvalid)
		e.wantErr("Release with a lease "+what, e.s.Release(e.ctx, bad), kvstore.ErrInvalid)
		e.wantErr("MarkIndeterminate with a lease "+what, e.s.MarkIndeterminate(e.ctx, bad, "x", false), kvstore.ErrInvalid)
		_, err := e.s.Renew(e.ctx, bad, longLease)
		e.wantErr("Renew with a lease "+what, err, kvstore.ErrInvalid)
	}
	e.unchanged("refused TakeOver calls and holder operations with malformed leases", before)

	// The edges of the valid forms are accepted.
	long := ("A-z_" + rand.Text() + rand.Text() + rand.Text() + rand.Text() + rand.Text())[:128]
	e.claim(e.reqIn(long, okDigest, "holder-a", longLease))
	e.getIn(long, okDigest)
	for _, dg := range []string{strings.Repeat("0", 64), strings.Repeat("f", 64)} {
		e.claim(e.req(dg, "holder-a", longLease))
	}
	if n, err := e.s.Forget(e.ctx, long); e.noErr("Forget of a 128-character tenant", err) && n != 1 && n != -1 {
		e.t.Errorf("Forget of a 128-character tenant with one record: reports %d removed", n)
	}
}

// checkNoArguments: a record never holds the arguments its digest was derived
// from: not in the Record returned, and (if the store can show them) not in the
// bytes it stores.
func checkNoArguments(e *env) {
	sentinel := "ARGS-SENTINEL-" + rand.Text()
	args := fmt.Sprintf(`{"card_number":%q,"amount_cents":4200,"seat":"14C"}`, sentinel)
	completed := sha256Hex(e.tenant + "\x00book_seat\x00" + args)
	parked := sha256Hex(e.tenant + "\x00cancel_seat\x00" + args)
	check := sha256Hex(args)

	for _, c := range []struct {
		digest string
		finish func(l kvstore.Lease) error
	}{
		{completed, func(l kvstore.Lease) error { return e.s.Record(e.ctx, l, `{"status":"booked"}`) }},
		{parked, func(l kvstore.Lease) error { return e.s.MarkIndeterminate(e.ctx, l, "body_failed", true) }},
	} {
		req := e.req(c.digest, "holder-a", longLease)
		req.CheckDigest = check
		l := e.claim(req)
		if err := c.finish(l); err != nil {
			e.t.Fatalf("finishing the claim: unexpected error %v", err)
		}
		rec := e.get(c.digest)
		if strings.Contains(fmt.Sprintf("%#v", rec), sentinel) {
			e.t.Errorf("Get returned a record that contains the call's arguments: %#v", rec)
		}
	}

	dumper, ok := e.s.(RawDumper)
	if !ok {
		e.t.Logf("note: the store does not implement kvstoretest.RawDumper; its stored bytes were not inspected")
		return
	}
	raw, err := dumper.DumpRaw(e.ctx, e.tenant)
	if err != nil {
		e.t.Fatalf("DumpRaw: unexpected error %v", err)
	}
	all := bytes.Join(raw, []byte("\n"))
	if bytes.Contains(all, []byte(sentinel)) {
		e.t.Errorf("the stored bytes contain the call's arguments:\n%s", all)
	}
	for _, d := range []string{completed, parked} {
		if !bytes.Contains(all, []byte(d)) {
			e.t.Errorf("DumpRaw returned %d records (%d bytes) without the digest %s: it does not show what is stored", len(raw), len(all), short(d))
		}
	}
}
