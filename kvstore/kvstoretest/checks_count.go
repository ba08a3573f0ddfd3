package kvstoretest

import (
	"errors"

	"github.com/tesserix/toolexec/kvstore"
)

// checkCount: a store that implements kvstore.Census counts each tenant's live
// records in the state asked for, and names the oldest one's last write; a
// record leaves the count when it leaves the state, a forgotten tenant's
// records are counted no more, and an unknown state is refused. The backend may
// be shared with other tests, so only this subtest's tenants are looked at.
func checkCount(e *env) {
	census, ok := e.s.(kvstore.Census)
	if !ok {
		e.t.Logf("note: the store does not implement kvstore.Census; Count was not checked")
		return
	}
	count := func(what string, state kvstore.State) map[string]kvstore.TenantCount {
		e.t.Helper()
		got, err := census.Count(e.ctx, state)
		if err != nil {
			e.t.Fatalf("Count(%s): unexpected error %v", what, err)
		}
		return got
	}

	var parked []string
	for _, reason := range []string{"body_failed", "timeout", "holder_lost"} {
		d := e.digest()
		l := e.claim(e.req(d, "holder-"+reason, longLease))
		e.noErr("MarkIndeterminate", e.s.MarkIndeterminate(e.ctx, l, reason, true))
		parked = append(parked, d)
		e.pass(listGap)
	}
	l := e.claim(e.req(e.digest(), "holder-c", longLease))
	e.noErr("Record", e.s.Record(e.ctx, l, "done"))
	e.claim(e.req(e.digest(), "holder-d", longLease))
	l = e.claim(e.req(e.digest(), "holder-e", longLease))
	e.noErr("Release", e.s.Release(e.ctx, l))
	other := randomTenant()
	l = e.claim(e.reqIn(other, parked[0], "holder-o", longLease))
	e.noErr("MarkIndeterminate in another tenant", e.s.MarkIndeterminate(e.ctx, l, "body_failed", true))

	want := func(what string, got map[string]kvstore.TenantCount, tenant string, n int64, oldest string) {
		e.t.Helper()
		c := got[tenant]
		if c.Records != n {
			e.t.Errorf("Count(%s)[%s].Records = %d, want %d", what, tenant, c.Records, n)
		}
		if n == 0 {
			if _, listed := got[tenant]; listed {
				e.t.Errorf("Count(%s) names %s, which has no such record", what, tenant)
			}
			return
		}
		if w := e.getIn(tenant, oldest).UpdatedAt; !c.Oldest.Equal(w) {
			e.t.Errorf("Count(%s)[%s].Oldest = %v, want %v (the last write of %s, the oldest)", what, tenant, c.Oldest, w, short(oldest))
		}
	}
	got := count("indeterminate", kvstore.StateIndeterminate)
	want("indeterminate", got, e.tenant, 3, parked[0])
	want("indeterminate", got, other, 1, parked[0])
	if got := count("completed", kvstore.StateCompleted); got[e.tenant].Records != 1 {
		e.t.Errorf("Count(completed)[%s].Records = %d, want 1", e.tenant, got[e.tenant].Records)
	}
	if got := count("claimed", kvstore.StateClaimed); got[e.tenant].Records != 1 {
		e.t.Errorf("Count(claimed)[%s].Records = %d, want 1 (a released record is gone)", e.tenant, got[e.tenant].Records)
	}

	// The oldest is resolved: two remain, and the next one is the oldest.
	if _, err := e.s.Resolve(e.ctx, e.tenant, parked[0], kvstore.Resolution{Release: true}); err != nil {
		e.t.Fatalf("Resolve by release: unexpected error %v", err)
	}
	if _, err := e.s.Forget(e.ctx, other); err != nil {
		e.t.Fatalf("Forget: unexpected error %v", err)
	}
	got = count("indeterminate after a resolution and a forget", kvstore.StateIndeterminate)
	want("indeterminate after a resolution", got, e.tenant, 2, parked[1])
	want("indeterminate after forgetting the other tenant", got, other, 0, "")

	for _, bad := range []kvstore.State{"released", ""} {
		if _, err := census.Count(e.ctx, bad); !errors.Is(err, kvstore.ErrInvalid) {
			e.t.Errorf("Count(%q): error %v, want kvstore.ErrInvalid", bad, err)
		}
	}
}
