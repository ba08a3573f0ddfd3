package admin_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/natsstore"
)

// TestRoundTrips inspects, resolves and forgets through the admin
// subjects, against a JetStream KV store.
func TestRoundTrips(t *testing.T) {
	h := newHarness(t)
	store, err := natsstore.New(ctxT(t), h.js, natsstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// Two responders in one queue group, as two executors would run them.
	for range 2 {
		nc := natstest.Connect(t, h.srv)
		adm, err := admin.Serve(natstest.JetStream(t, nc), store, admin.Config{Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = adm.Close() })
	}
	ctx := ctxT(t)

	// An indeterminate key of acme, a completed one of globex.
	k1, k2 := digest("acme-1"), digest("globex-1")
	claim := func(tenant, key string) kvstore.Lease {
		t.Helper()
		res, err := store.Claim(ctx, kvstore.ClaimRequest{Tenant: tenant, Key: key, Holder: "w1", Lease: time.Minute,
			Tool: "book", RunID: "run-1", CallID: "call-1"})
		if err != nil || !res.Claimed {
			t.Fatalf("claim: %+v, %v", res, err)
		}
		return res.Lease
	}
	if err := store.MarkIndeterminate(ctx, claim("acme", k1), string(events.ReasonBodyFailed), true); err != nil {
		t.Fatal(err)
	}
	if err := store.Record(ctx, claim("globex", k2), "done"); err != nil {
		t.Fatal(err)
	}

	rec, err := h.client.Inspect(ctx, "acme", k1)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if rec.State != kvstore.StateIndeterminate || rec.Reason != "body_failed" || !rec.BodyEntered || rec.Tool != "book" || rec.Key != k1 {
		t.Errorf("inspected %+v", rec)
	}
	if _, err := h.client.Inspect(ctx, "acme", digest("nothing")); !errors.Is(err, kvstore.ErrNotFound) {
		t.Errorf("Inspect(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := h.client.Inspect(ctx, "acme", "not-a-key"); !errors.Is(err, kvstore.ErrInvalid) {
		t.Errorf("Inspect(bad key) = %v, want ErrInvalid", err)
	}
	if _, err := h.client.Inspect(ctx, "ac.me", k1); !errors.Is(err, kvstore.ErrInvalid) {
		t.Errorf("Inspect(bad tenant) = %v, want ErrInvalid", err)
	}

	// Resolve: the record completes and a resolved event is stored.
	audit, err := h.nc.SubscribeSync(wire.KindSubjects(events.KindResolved))
	if err != nil {
		t.Fatal(err)
	}
	// An operator name the audit event could not carry is refused before the
	// resolution is applied.
	if _, err := h.client.Resolve(ctx, admin.ResolveRequest{Tenant: "acme", Key: k1, Action: events.ActionComplete,
		Outcome: "refunded", Operator: strings.Repeat("é", events.MaxOperatorLen+1)}); !errors.Is(err, kvstore.ErrInvalid) {
		t.Errorf("Resolve(long operator) = %v, want ErrInvalid", err)
	}
	if rec, err := h.client.Inspect(ctx, "acme", k1); err != nil || rec.State != kvstore.StateIndeterminate {
		t.Fatalf("after a refused resolution the record is %+v, %v; want it still indeterminate", rec, err)
	}
	rec, err = h.client.Resolve(ctx, admin.ResolveRequest{Tenant: "acme", Key: k1, Action: events.ActionComplete, Outcome: "refunded", Operator: "alice"})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if rec.State != kvstore.StateCompleted || rec.Outcome != "refunded" {
		t.Errorf("resolved record %+v", rec)
	}
	m, err := audit.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no resolved event: %v", err)
	}
	a := decodeMsg(t, m)
	if a.Kind != events.KindResolved || a.Tenant != "acme" || a.Key != k1 || a.Action != events.ActionComplete ||
		a.Outcome != "refunded" || a.Operator != "alice" || a.CallID != "call-1" || a.Tool != "book" {
		t.Errorf("resolved event %+v", a)
	}
	if m.Subject != "toolexec.event.acme.resolved.book.run-1.call-1" {
		t.Errorf("resolved event on %s", m.Subject)
	}
	if n := len(eventSubjects(t, h.js, wire.KindSubjects(events.KindResolved))); n != 1 {
		t.Errorf("%d resolved events stored, want 1", n)
	}
	if _, err := h.client.Resolve(ctx, admin.ResolveRequest{Tenant: "acme", Key: k1, Action: events.ActionRelease}); !errors.Is(err, kvstore.ErrNotIndeterminate) {
		t.Errorf("Resolve(completed) = %v, want ErrNotIndeterminate", err)
	}
	if _, err := h.client.Resolve(ctx, admin.ResolveRequest{Tenant: "acme", Key: k1, Action: "undo"}); !errors.Is(err, kvstore.ErrInvalid) {
		t.Errorf("Resolve(bad action) = %v, want ErrInvalid", err)
	}
	if _, err := h.client.Resolve(ctx, admin.ResolveRequest{Tenant: "acme", Key: k1, Action: events.ActionRelease, Outcome: "x"}); !errors.Is(err, kvstore.ErrInvalid) {
		t.Errorf("Resolve(release with outcome) = %v, want ErrInvalid", err)
	}

	// Forget: acme's records, calls (in the calls stream of wire version 1 too,
	// where it still exists) and events go; globex's stay.
	if _, err := h.js.CreateStream(ctx, jetstream.StreamConfig{Name: wire.LegacyCallStream, Subjects: []string{wire.LegacyCallSubjects},
		Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"toolexec.call.acme.book.c1", "toolexec.call.globex.book.c1", "toolexec.call.acme.book", "toolexec.call.globex.book"} {
		if _, err := h.js.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.js.PublishMsg(ctx, &nats.Msg{Subject: "toolexec.event.globex.completed.book.r.c", Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	n, err := h.client.Forget(ctx, "acme")
	if err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if n != 1 && n != -1 { // the JetStream store purges without counting
		t.Errorf("Forget erased %d records, want 1 (or -1: unknown)", n)
	}
	if _, err := h.client.Inspect(ctx, "acme", k1); !errors.Is(err, kvstore.ErrNotFound) {
		t.Errorf("Inspect after Forget = %v, want ErrNotFound", err)
	}
	if rec, err := h.client.Inspect(ctx, "globex", k2); err != nil || rec.State != kvstore.StateCompleted {
		t.Errorf("other tenant's record: %+v, %v", rec, err)
	}
	for _, stream := range []string{wire.CallStream, wire.LegacyCallStream} {
		if got := streamSubjects(t, h.js, stream, wire.TenantCallSubjects("acme")); len(got) != 0 {
			t.Errorf("acme calls left in %s: %v", stream, got)
		}
		if got := streamSubjects(t, h.js, stream, wire.TenantCallSubjects("globex")); len(got) != 1 {
			t.Errorf("globex calls in %s: %v, want one", stream, got)
		}
	}
	if got := eventSubjects(t, h.js, wire.TenantEventSubjects("acme")); len(got) != 0 {
		t.Errorf("acme events left: %v", got)
	}
	if got := eventSubjects(t, h.js, wire.TenantEventSubjects("globex")); len(got) != 1 {
		t.Errorf("globex events: %v, want one", got)
	}
	if _, err := h.client.Forget(ctx, "a b"); !errors.Is(err, kvstore.ErrInvalid) {
		t.Errorf("Forget(bad tenant) = %v, want ErrInvalid", err)
	}
}

func TestWithoutResponder(t *testing.T) {
	h := newHarness(t)
	if _, err := h.client.Forget(ctxT(t), "acme"); !errors.Is(err, admin.ErrNoResponder) {
		t.Errorf("Forget with no executor = %v, want ErrNoResponder", err)
	}
}

func TestErrorIs(t *testing.T) {
	tests := []struct {
		code string
		want error
	}{
		{admin.CodeInvalid, kvstore.ErrInvalid},
		{admin.CodeNotFound, kvstore.ErrNotFound},
		{admin.CodeNotIndeterminate, kvstore.ErrNotIndeterminate},
		{admin.CodeTooLarge, kvstore.ErrTooLarge},
		{admin.CodeUnavailable, kvstore.ErrUnavailable},
		{admin.CodeAuditFailed, admin.ErrAuditNotPublished},
		{admin.CodeForbidden, admin.ErrForbidden},
	}
	for _, tt := range tests {
		err := error(&admin.Error{Code: tt.code, Message: "m"})
		if !errors.Is(err, tt.want) {
			t.Errorf("code %s does not match %v", tt.code, tt.want)
		}
		if errors.Is(err, errBoom) {
			t.Errorf("code %s matches an unrelated error", tt.code)
		}
	}
	if errors.Is(&admin.Error{Code: admin.CodeInternal}, kvstore.ErrNotFound) {
		t.Error("internal matches ErrNotFound")
	}
}

// TestDefaults: resolved events come from where the executors' answers come
// from, and a client needs a connection.
func TestDefaults(t *testing.T) {
	if admin.DefaultSource != bus.DefaultAnswerSource {
		t.Errorf("DefaultSource %q, want bus.DefaultAnswerSource %q", admin.DefaultSource, bus.DefaultAnswerSource)
	}
	if _, err := admin.NewClient(nil); !errors.Is(err, admin.ErrInvalidConfig) {
		t.Errorf("NewClient(nil) = %v, want ErrInvalidConfig", err)
	}
	if _, err := admin.Serve(nil, nil, admin.Config{}); !errors.Is(err, admin.ErrInvalidConfig) {
		t.Errorf("Serve(nil, nil) = %v, want ErrInvalidConfig", err)
	}
}
