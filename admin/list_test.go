package admin_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/memstore"
)

// parkKeys makes n indeterminate records of tenant in store, oldest first, and
// returns their keys.
func parkKeys(t *testing.T, store kvstore.Store, tenant string, n int) []string {
	t.Helper()
	var keys []string
	for i := range n {
		k := digest(fmt.Sprintf("%s-%d", tenant, i))
		res, err := store.Claim(ctxT(t), kvstore.ClaimRequest{Tenant: tenant, Key: k, Holder: "w1", Lease: time.Minute,
			Tool: "book", RunID: "run-1", CallID: fmt.Sprintf("call-%d", i)})
		if err != nil || !res.Claimed {
			t.Fatalf("claim: %+v, %v", res, err)
		}
		if err := store.MarkIndeterminate(ctxT(t), res.Lease, string(events.ReasonBodyFailed), true); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
		time.Sleep(2 * time.Millisecond) // distinct UpdatedAt, so the order is known
	}
	return keys
}

// TestList lists a tenant's indeterminate records over the admin subject:
// oldest first, with what an operator needs, within the limit; other states on
// request; bad requests refused.
func TestList(t *testing.T) {
	h := newHarness(t)
	store := memstore.New(memstore.Config{})
	t.Cleanup(func() { store.Close() })
	adm, err := admin.Serve(h.js, store, admin.Config{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	ctx := ctxT(t)
	keys := parkKeys(t, store, "acme", 3)
	parkKeys(t, store, "globex", 1)
	before := time.Now()

	resp, err := h.client.List(ctx, admin.ListRequest{Tenant: "acme"})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(resp.Records) != 3 || resp.More {
		t.Fatalf("List = %d records, more %t; want 3", len(resp.Records), resp.More)
	}
	for i, r := range resp.Records {
		if r.Key != keys[i] || r.State != kvstore.StateIndeterminate || r.Reason != "body_failed" || !r.BodyEntered ||
			r.Tool != "book" || r.RunID != "run-1" || r.CallID != fmt.Sprintf("call-%d", i) || r.UpdatedAt == nil {
			t.Errorf("record %d: %+v", i, r)
		}
		if age := resp.Now.Sub(*r.UpdatedAt); age < 0 || age > time.Minute {
			t.Errorf("record %d is %v old by the executor's clock", i, age)
		}
	}
	if resp.Now.Before(before.Add(-time.Second)) {
		t.Errorf("Now = %v, before the request", resp.Now)
	}

	resp, err = h.client.List(ctx, admin.ListRequest{Tenant: "acme", Limit: 2})
	if err != nil || len(resp.Records) != 2 || !resp.More || resp.Records[0].Key != keys[0] {
		t.Fatalf("List(limit 2) = %+v, %v; want the two oldest and More", resp, err)
	}
	resp, err = h.client.List(ctx, admin.ListRequest{Tenant: "acme", State: kvstore.StateCompleted})
	if err != nil || len(resp.Records) != 0 || resp.Records == nil {
		t.Fatalf("List(completed) = %+v, %v; want an empty list", resp, err)
	}
	if _, err := h.client.Resolve(ctx, admin.ResolveRequest{Tenant: "acme", Key: keys[0], Action: events.ActionComplete, Outcome: "PNR"}); err != nil {
		t.Fatal(err)
	}
	resp, err = h.client.List(ctx, admin.ListRequest{Tenant: "acme", State: kvstore.StateCompleted})
	if err != nil || len(resp.Records) != 1 || resp.Records[0].Outcome != "PNR" {
		t.Fatalf("List(completed) after a resolution = %+v, %v", resp, err)
	}
	if resp, err := h.client.List(ctx, admin.ListRequest{Tenant: "acme"}); err != nil || len(resp.Records) != 2 {
		t.Fatalf("List after a resolution = %+v, %v; want two left", resp, err)
	}

	for _, bad := range []admin.ListRequest{
		{Tenant: "ac me"},
		{Tenant: ""},
		{Tenant: "acme", State: "released"},
		{Tenant: "acme", Limit: -1},
	} {
		if _, err := h.client.List(ctx, bad); !errors.Is(err, kvstore.ErrInvalid) {
			t.Errorf("List(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}

// TestListFitsAReply: a list whose records would not fit one reply is cut,
// with More set, instead of failing.
func TestListFitsAReply(t *testing.T) {
	h := newHarness(t, natstest.WithMaxPayload(64<<10))
	store := memstore.New(memstore.Config{})
	t.Cleanup(func() { store.Close() })
	adm, err := admin.Serve(h.js, store, admin.Config{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	big := strings.Repeat("x", 8<<10)
	for i := range 20 {
		res, err := store.Claim(ctxT(t), kvstore.ClaimRequest{Tenant: "acme", Key: digest(fmt.Sprint(i)), Holder: "w", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Record(ctxT(t), res.Lease, big); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := h.client.List(ctxT(t), admin.ListRequest{Tenant: "acme", State: kvstore.StateCompleted})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(resp.Records) == 0 || len(resp.Records) >= 20 || !resp.More {
		t.Fatalf("List of 20 records of 8 KiB under a 64 KiB max_payload: %d records, more %t", len(resp.Records), resp.More)
	}
}

// notLister is a store without the List capability.
type notLister struct{ kvstore.Store }

// TestListUnsupported: a store that cannot list says so, matching
// errors.ErrUnsupported.
func TestListUnsupported(t *testing.T) {
	h := newHarness(t)
	store := memstore.New(memstore.Config{})
	t.Cleanup(func() { store.Close() })
	adm, err := admin.Serve(h.js, notLister{store}, admin.Config{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	if _, err := h.client.List(ctxT(t), admin.ListRequest{Tenant: "acme"}); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("List = %v, want errors.ErrUnsupported", err)
	}
	if _, err := adm.List(ctxT(t), admin.ListRequest{Tenant: "acme"}); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Service.List = %v, want errors.ErrUnsupported", err)
	}
}

// TestInProcess: Service.Resolve and Service.List, for the console, do what
// the admin subjects do — a resolution publishes its resolved audit event.
func TestInProcess(t *testing.T) {
	h := newHarness(t)
	store := memstore.New(memstore.Config{})
	t.Cleanup(func() { store.Close() })
	adm, err := admin.Serve(h.js, store, admin.Config{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	keys := parkKeys(t, store, "acme", 2)
	wctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	audit, err := h.watcher.Watch(wctx, wire.KindSubjects(events.KindResolved))
	if err != nil {
		t.Fatal(err)
	}

	resp, err := adm.List(ctxT(t), admin.ListRequest{Tenant: "acme", Limit: 1})
	if err != nil || len(resp.Records) != 1 || !resp.More || resp.Records[0].Key != keys[0] {
		t.Fatalf("Service.List = %+v, %v", resp, err)
	}
	rec, err := adm.Resolve(ctxT(t), admin.ResolveRequest{Tenant: "acme", Key: keys[0], Action: events.ActionComplete, Outcome: "PNR-7", Operator: "console"})
	if err != nil || rec.State != kvstore.StateCompleted || rec.Outcome != "PNR-7" {
		t.Fatalf("Service.Resolve = %+v, %v", rec, err)
	}
	rec, err = adm.Resolve(ctxT(t), admin.ResolveRequest{Tenant: "acme", Key: keys[1], Action: events.ActionRelease})
	if err != nil || rec.State != kvstore.StateIndeterminate {
		t.Fatalf("Service.Resolve(release) = %+v, %v", rec, err)
	}
	for _, want := range []struct {
		key    string
		action events.Action
		op     string
	}{{keys[0], events.ActionComplete, "console"}, {keys[1], events.ActionRelease, admin.DefaultOperator}} {
		select {
		case a := <-audit:
			if a.Kind != events.KindResolved || a.Key != want.key || a.Action != want.action || a.Operator != want.op {
				t.Errorf("audit event %+v, want %s of %s by %s", a, want.action, want.key, want.op)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no resolved event for %s", want.key)
		}
	}
	if _, err := adm.Resolve(ctxT(t), admin.ResolveRequest{Tenant: "acme", Key: keys[0], Action: events.ActionRelease}); !errors.Is(err, kvstore.ErrNotIndeterminate) {
		t.Errorf("Service.Resolve of a completed key = %v, want ErrNotIndeterminate", err)
	}
	if err := error(&admin.Error{Code: admin.CodeUnsupported}); !errors.Is(err, errors.ErrUnsupported) {
		t.Error("CodeUnsupported does not match errors.ErrUnsupported")
	}
}
