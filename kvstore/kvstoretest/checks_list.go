package kvstoretest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tesserix/toolexec/kvstore"
)

// listGap separates the writes whose order List must keep: wide enough for every
// backend's timestamps (Redis keeps milliseconds) on a busy machine.
const listGap = 20 * time.Millisecond

// checkList: a store that implements kvstore.Lister lists exactly the tenant's
// live records in the state asked for, oldest first and within the limit, with
// what an operator needs to decide (tool, run, call, reason, body entered, when);
// a record leaves the list when it leaves the state; another tenant's records
// never appear; bad input is refused.
func checkList(e *env) {
	lister, ok := e.s.(kvstore.Lister)
	if !ok {
		e.t.Logf("note: the store does not implement kvstore.Lister; List was not checked")
		return
	}
	list := func(what, tenant string, state kvstore.State, limit int) []kvstore.Record {
		e.t.Helper()
		recs, err := lister.List(e.ctx, tenant, state, limit)
		if err != nil {
			e.t.Fatalf("List(%s): unexpected error %v", what, err)
		}
		return recs
	}

	// Three indeterminate records, written in a known order, among records in
	// every other state and in another tenant.
	type parked struct {
		req    kvstore.ClaimRequest
		reason string
		body   bool
	}
	var want []parked
	for i, reason := range []string{"body_failed", "timeout", "holder_lost"} {
		req := e.req(e.digest(), fmt.Sprintf("holder-%d", i), longLease)
		l := e.claim(req)
		body := i != 1
		if err := e.s.MarkIndeterminate(e.ctx, l, reason, body); err != nil {
			e.t.Fatalf("MarkIndeterminate: unexpected error %v", err)
		}
		want = append(want, parked{req, reason, body})
		e.pass(listGap)
	}
	completed := e.digest()
	l := e.claim(e.req(completed, "holder-c", longLease))
	e.noErr("Record", e.s.Record(e.ctx, l, "done"))
	claimed := e.digest()
	e.claim(e.req(claimed, "holder-d", longLease))
	released := e.digest()
	l = e.claim(e.req(released, "holder-e", longLease))
	e.noErr("Release", e.s.Release(e.ctx, l))
	other := randomTenant()
	l = e.claim(e.reqIn(other, want[0].req.Key, "holder-o", longLease)) // the same digest, another tenant
	e.noErr("MarkIndeterminate in another tenant", e.s.MarkIndeterminate(e.ctx, l, "body_failed", true))

	got := list("indeterminate, no limit", e.tenant, kvstore.StateIndeterminate, 0)
	if digests(got) != digestsOf(want, func(p parked) string { return p.req.Key }) {
		e.t.Errorf("List(indeterminate) = %s; want the tenant's three indeterminate records, oldest first: %s",
			digests(got), digestsOf(want, func(p parked) string { return p.req.Key }))
	}
	for i, r := range got {
		if i >= len(want) || r.Key != want[i].req.Key {
			break
		}
		w := want[i]
		for _, f := range []struct{ name, got, want string }{
			{"Tenant", r.Tenant, e.tenant},
			{"State", string(r.State), string(kvstore.StateIndeterminate)},
			{"Tool", r.Tool, w.req.Tool},
			{"RunID", r.RunID, w.req.RunID},
			{"CallID", r.CallID, w.req.CallID},
			{"Reason", r.Reason, w.reason},
		} {
			if f.got != f.want {
				e.t.Errorf("List(indeterminate)[%d]: %s = %q, want %q", i, f.name, f.got, f.want)
			}
		}
		if r.BodyEntered != w.body {
			e.t.Errorf("List(indeterminate)[%d]: BodyEntered = %t, want %t", i, r.BodyEntered, w.body)
		}
		if r.UpdatedAt.IsZero() || r.CreatedAt.IsZero() {
			e.t.Errorf("List(indeterminate)[%d]: CreatedAt %v, UpdatedAt %v; an operator needs the record's age", i, r.CreatedAt, r.UpdatedAt)
		}
	}
	oldest := digestsOf(want[:2], func(p parked) string { return p.req.Key })
	if got := list("indeterminate, limit 2", e.tenant, kvstore.StateIndeterminate, 2); digests(got) != oldest {
		e.t.Errorf("List(indeterminate, limit 2) = %s; want the two oldest: %s", digests(got), oldest)
	}
	if got := list("completed", e.tenant, kvstore.StateCompleted, 0); digests(got) != "["+short(completed)+"]" {
		e.t.Errorf("List(completed) = %s; want only %s", digests(got), short(completed))
	} else if got[0].Outcome != "done" {
		e.t.Errorf("List(completed)[0].Outcome = %q, want %q", got[0].Outcome, "done")
	}
	if got := list("claimed", e.tenant, kvstore.StateClaimed, 0); digests(got) != "["+short(claimed)+"]" {
		e.t.Errorf("List(claimed) = %s; want only %s (a released record is gone)", digests(got), short(claimed))
	}
	if got := list("the other tenant", other, kvstore.StateIndeterminate, 0); len(got) != 1 || got[0].Tenant != other {
		e.t.Errorf("List(indeterminate) of the other tenant = %s; want its one record", digests(got))
	}
	if got := list("a tenant without records", randomTenant(), kvstore.StateIndeterminate, 0); len(got) != 0 {
		e.t.Errorf("List of a tenant without records = %s; want none", digests(got))
	}

	// Resolved records leave the list: completed joins the completed ones,
	// released is gone.
	if _, err := e.s.Resolve(e.ctx, e.tenant, want[0].req.Key, kvstore.Resolution{Outcome: "by operator"}); err != nil {
		e.t.Fatalf("Resolve: unexpected error %v", err)
	}
	if _, err := e.s.Resolve(e.ctx, e.tenant, want[1].req.Key, kvstore.Resolution{Release: true}); err != nil {
		e.t.Fatalf("Resolve by release: unexpected error %v", err)
	}
	got = list("indeterminate after resolving two", e.tenant, kvstore.StateIndeterminate, 0)
	if digests(got) != "["+short(want[2].req.Key)+"]" {
		e.t.Errorf("List(indeterminate) after resolving two of three = %s; want only %s", digests(got), short(want[2].req.Key))
	}
	got = list("completed after a resolution", e.tenant, kvstore.StateCompleted, 0)
	if !slices.ContainsFunc(got, func(r kvstore.Record) bool {
		return r.Key == want[0].req.Key && r.Outcome == "by operator"
	}) {
		e.t.Errorf("List(completed) after resolving %s with an outcome = %s; want it listed with that outcome", short(want[0].req.Key),
			digests(got))
	}

	for _, bad := range []struct {
		what   string
		tenant string
		state  kvstore.State
	}{
		{"a malformed tenant", "no spaces allowed", kvstore.StateIndeterminate},
		{"an empty tenant", "", kvstore.StateIndeterminate},
		{"an unknown state", e.tenant, kvstore.State("released")},
		{"an empty state", e.tenant, ""},
	} {
		_, err := lister.List(e.ctx, bad.tenant, bad.state, 0)
		e.wantErr("List with "+bad.what, err, kvstore.ErrInvalid)
	}
}

// digests renders the digests of recs, in order, for messages and comparisons.
func digests(recs []kvstore.Record) string {
	return digestsOf(recs, func(r kvstore.Record) string { return r.Key })
}

func digestsOf[T any](xs []T, digest func(T) string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = short(digest(x))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
