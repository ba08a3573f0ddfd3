package admin_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/memstore"
)

// TestNew: a Service made by New answers nothing from the bus, but its
// Resolve publishes the resolved audit event and its Forget purges the
// tenant's calls and events, as Serve's do.
func TestNew(t *testing.T) {
	h := newHarness(t)
	store := memstore.New(memstore.Config{})
	t.Cleanup(func() { store.Close() })
	adm, err := admin.New(h.js, store, admin.Config{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	keys := parkKeys(t, store, "acme", 1)

	ctx, cancel := context.WithTimeout(ctxT(t), 2*time.Second)
	defer cancel()
	if _, err := h.client.Inspect(ctx, "acme", keys[0]); !errors.Is(err, admin.ErrNoResponder) {
		t.Fatalf("Inspect over the bus with only a New Service = %v, want ErrNoResponder", err)
	}

	wctx, stop := context.WithCancel(ctxT(t))
	defer stop()
	audit, err := h.watcher.Watch(wctx, wire.KindSubjects(events.KindResolved))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := adm.Resolve(ctxT(t), admin.ResolveRequest{Tenant: "acme", Key: keys[0], Action: events.ActionComplete, Outcome: "PNR-1", Operator: "ops"})
	if err != nil || rec.State != kvstore.StateCompleted {
		t.Fatalf("Resolve = %+v, %v", rec, err)
	}
	select {
	case a := <-audit:
		if a.Kind != events.KindResolved || a.Key != keys[0] || a.Operator != "ops" || a.Outcome != "PNR-1" {
			t.Errorf("audit event %+v", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no resolved event")
	}

	if _, err := h.js.PublishMsg(ctxT(t), &nats.Msg{Subject: "toolexec.call.acme.book.c1", Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	n, err := adm.Forget(ctxT(t), "acme")
	if err != nil || n != 1 {
		t.Fatalf("Forget = %d, %v; want 1 record", n, err)
	}
	if got := streamSubjects(t, h.js, wire.CallStream, wire.TenantCallSubjects("acme")); len(got) != 0 {
		t.Errorf("acme's calls after Forget: %v", got)
	}
	if got := eventSubjects(t, h.js, wire.TenantEventSubjects("acme")); len(got) != 0 {
		t.Errorf("acme's events after Forget: %v", got)
	}
	if _, err := adm.Forget(ctxT(t), "ac.me"); !errors.Is(err, kvstore.ErrInvalid) {
		t.Errorf("Forget(bad tenant) = %v, want ErrInvalid", err)
	}
}

// TestNewWithoutNATS: with no JetStream context the store still changes,
// and the caller is told what did not happen — no audit event, no purge.
func TestNewWithoutNATS(t *testing.T) {
	store := memstore.New(memstore.Config{})
	t.Cleanup(func() { store.Close() })
	adm, err := admin.New(nil, store, admin.Config{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	keys := parkKeys(t, store, "acme", 2)

	rec, err := adm.Resolve(ctxT(t), admin.ResolveRequest{Tenant: "acme", Key: keys[0], Action: events.ActionRelease})
	if !errors.Is(err, admin.ErrAuditNotPublished) {
		t.Fatalf("Resolve without NATS = %v, want ErrAuditNotPublished", err)
	}
	if rec == nil || rec.Key != keys[0] {
		t.Fatalf("Resolve without NATS returned record %+v, want the released one", rec)
	}
	if _, err := store.Get(ctxT(t), "acme", keys[0]); !errors.Is(err, kvstore.ErrNotFound) {
		t.Errorf("the released key is still there: %v", err)
	}

	n, err := adm.Forget(ctxT(t), "acme")
	if n != 1 || !errors.Is(err, kvstore.ErrUnavailable) {
		t.Fatalf("Forget without NATS = %d, %v; want 1 record erased and ErrUnavailable for the purge", n, err)
	}
	if _, err := store.Get(ctxT(t), "acme", keys[1]); !errors.Is(err, kvstore.ErrNotFound) {
		t.Errorf("a forgotten key is still there: %v", err)
	}

	if _, err := admin.New(nil, nil, admin.Config{}); !errors.Is(err, admin.ErrInvalidConfig) {
		t.Errorf("New(nil store) = %v, want ErrInvalidConfig", err)
	}
}
