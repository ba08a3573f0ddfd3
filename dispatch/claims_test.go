package dispatch_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/clock"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/memstore"
	"github.com/tesserix/toolexec/tool"
)

// faultyStore is a memstore on the wall clock (Withdraw included) whose
// answers can be lost or refused, as a store restarting or cut off would.
type faultyStore struct {
	*memstore.Store

	mu          sync.Mutex // protects loseClaims and failClaims
	loseClaims  int        // the next Claims write, then answer errDown
	failClaims  int        // the next Claims write nothing and answer errDown
	getsDown    atomic.Bool
	recordsDown atomic.Bool
	renewsDown  atomic.Bool
	renewals    atomic.Int64
}

func newFaultyStore() *faultyStore {
	return &faultyStore{Store: memstore.New(memstore.Config{Clock: clock.Real{}})}
}

func (f *faultyStore) Claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	f.mu.Lock()
	lose, fail := f.loseClaims > 0, f.failClaims > 0
	switch {
	case lose:
		f.loseClaims--
	case fail:
		f.failClaims--
	}
	f.mu.Unlock()
	if fail && !lose {
		return kvstore.ClaimResult{}, errDown
	}
	res, err := f.Store.Claim(ctx, req)
	if lose {
		return kvstore.ClaimResult{}, errDown
	}
	return res, err
}

func (f *faultyStore) Get(ctx context.Context, tenant, digest string) (kvstore.Record, error) {
	if f.getsDown.Load() {
		return kvstore.Record{}, errDown
	}
	return f.Store.Get(ctx, tenant, digest)
}

func (f *faultyStore) Record(ctx context.Context, l kvstore.Lease, out string) error {
	if f.recordsDown.Load() {
		return errDown
	}
	return f.Store.Record(ctx, l, out)
}

func (f *faultyStore) Renew(ctx context.Context, l kvstore.Lease, d time.Duration) (kvstore.Lease, error) {
	if f.renewsDown.Load() {
		return kvstore.Lease{}, errDown
	}
	f.renewals.Add(1)
	return f.Store.Renew(ctx, l, d)
}

// faultyDispatcher returns a dispatcher over s on the wall clock with a short
// lease.
func faultyDispatcher(t *testing.T, reg *tool.Registry, s kvstore.Store, holder string, lease time.Duration) *dispatch.Dispatcher {
	t.Helper()
	d, err := dispatch.New(dispatch.Config{Tools: reg, Store: s, Holder: holder, Lease: lease, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func bookingRegistry(t *testing.T, b *body) *tool.Registry {
	t.Helper()
	reg, err := tool.NewRegistry(newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestLostClaimReplyWithdrawn: a Claim that wrote its claim but lost its answer
// is answered store_unavailable, body not entered; once the store answers again
// the dispatcher reads the key back, finds its own claim for that call and
// withdraws it, so the key's next call runs instead of waiting for the lease to
// run out and being told its holder was lost.
func TestLostClaimReplyWithdrawn(t *testing.T) {
	b := &body{}
	s := newFaultyStore()
	s.loseClaims = 1
	s.getsDown.Store(true)
	d := faultyDispatcher(t, bookingRegistry(t, b), s, "w1", time.Minute)
	first := mustDispatch(t, d, call("book", "c1", `{"flight":"BA117"}`))
	if first.Kind != events.KindIndeterminate || first.Reason != events.ReasonStoreUnavailable || first.BodyEntered {
		t.Fatalf("first = %+v; want indeterminate store_unavailable, body not entered", first)
	}
	ctx := context.Background()
	rec, err := s.Store.Get(ctx, "acme", first.Key)
	if err != nil || rec.State != kvstore.StateClaimed || rec.Holder != "w1" || rec.CallID != "c1" {
		t.Fatalf("the lost claim = %+v, %v; want claimed by w1 for c1", rec, err)
	}
	time.Sleep(200 * time.Millisecond) // the settler retries while Get fails
	if n := d.Stats().Withdrawn.Load(); n != 0 {
		t.Fatalf("withdrawn %d claims while the store did not answer", n)
	}
	s.getsDown.Store(false)
	wait.Eventually(t, waitLimit, "the lost claim to be withdrawn", func() bool { return d.Stats().Withdrawn.Load() == 1 })
	if _, err := s.Store.Get(ctx, "acme", first.Key); err == nil {
		t.Fatal("the key is still held after the withdrawal")
	}
	// Another executor's duplicate now runs the booking, once.
	other := faultyDispatcher(t, bookingRegistry(t, b), s, "w2", time.Minute)
	if a := mustDispatch(t, other, call("book", "c2", `{"flight":"BA117"}`)); a.Kind != events.KindCompleted || b.entered.Load() != 1 {
		t.Fatalf("duplicate after the withdrawal = %+v, entries %d; want completed, one entry", a, b.entered.Load())
	}
}

// TestLostClaimReplyWakesWaiters: a duplicate already waiting on the lost claim
// (another executor) is woken by the withdrawal and runs the call at once.
func TestLostClaimReplyWakesWaiters(t *testing.T) {
	b := &body{}
	s := newFaultyStore()
	s.loseClaims = 1
	s.getsDown.Store(true)
	d := faultyDispatcher(t, bookingRegistry(t, b), s, "w1", time.Minute)
	first := mustDispatch(t, d, call("book", "c1", `{"flight":"BA117"}`))
	if first.Kind != events.KindIndeterminate || first.BodyEntered {
		t.Fatalf("first = %+v", first)
	}
	// The other executor reaches the store, whose Gets answer it.
	start := time.Now()
	dup := dispatchAsync(context.Background(), faultyDispatcher(t, bookingRegistry(t, b), s.Store, "w2", time.Minute),
		call("book", "c2", `{"flight":"BA117"}`))
	time.Sleep(100 * time.Millisecond) // the duplicate waits on the claim
	s.getsDown.Store(false)
	select {
	case a := <-dup:
		if a.Kind != events.KindCompleted || b.entered.Load() != 1 {
			t.Fatalf("duplicate = %+v, entries %d; want completed, one entry", a, b.entered.Load())
		}
		if waited := time.Since(start); waited > 30*time.Second {
			t.Fatalf("duplicate answered after %v: it waited for the lease", waited)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the duplicate was not answered within 30s of the store answering again (lease 1m)")
	}
}

// TestLostClaimReplyOfARunningCallKept: two deliveries of one call in one
// process. The first is granted the claim and runs; the second's Claim gets no
// answer. The claim read back is in this process's name and for this call, but
// a body runs under it: it is never withdrawn, and the call completes once.
func TestLostClaimReplyOfARunningCallKept(t *testing.T) {
	release := make(chan struct{})
	b := &body{fn: func(context.Context, tool.Context, json.RawMessage) (string, error) {
		<-release
		return "PNR-1", nil
	}}
	s := newFaultyStore()
	d := faultyDispatcher(t, bookingRegistry(t, b), s, "w1", time.Minute)
	ctx := context.Background()
	running := dispatchAsync(ctx, d, call("book", "c1", `{"flight":"BA117"}`))
	wait.Eventually(t, waitLimit, "the body to be entered", func() bool { return b.entered.Load() == 1 })
	s.mu.Lock()
	s.failClaims = 1
	s.mu.Unlock()
	again := mustDispatch(t, d, call("book", "c1", `{"flight":"BA117"}`))
	if again.Kind != events.KindIndeterminate || again.Reason != events.ReasonStoreUnavailable {
		t.Fatalf("second delivery = %+v; want store_unavailable", again)
	}
	time.Sleep(500 * time.Millisecond) // the settler reads the claim back and leaves it
	rec, err := s.Store.Get(ctx, "acme", again.Key)
	if err != nil || rec.State != kvstore.StateClaimed {
		t.Fatalf("the running call's claim = %+v, %v; want it still claimed", rec, err)
	}
	close(release)
	if a := <-running; a.Kind != events.KindCompleted {
		t.Fatalf("running call = %+v", a)
	}
	if n := d.Stats().Withdrawn.Load(); n != 0 || b.entered.Load() != 1 {
		t.Fatalf("withdrawn %d, entries %d; want 0 and 1", n, b.entered.Load())
	}
}

// TestLostClaimReplyAfterAnUnrecordedOutcomeKept: a delivery ran the body and
// could not record its outcome; a later delivery of the same call in the same
// process loses its Claim's answer and reads back the first one's claim. It is
// never withdrawn: the booking happened under it.
func TestLostClaimReplyAfterAnUnrecordedOutcomeKept(t *testing.T) {
	b := &body{}
	s := newFaultyStore()
	s.recordsDown.Store(true)
	s.renewsDown.Store(true)
	const lease = 100 * time.Millisecond
	d := faultyDispatcher(t, bookingRegistry(t, b), s, "w1", lease)
	first := mustDispatch(t, d, call("book", "c1", `{"flight":"BA117"}`)) // gives up after 4 leases
	if first.Kind != events.KindCompleted {
		t.Fatalf("first = %+v", first)
	}
	s.mu.Lock()
	s.failClaims = 1
	s.mu.Unlock()
	again := mustDispatch(t, d, call("book", "c1", `{"flight":"BA117"}`))
	if again.Kind != events.KindIndeterminate || again.Reason != events.ReasonStoreUnavailable {
		t.Fatalf("second delivery = %+v; want store_unavailable", again)
	}
	time.Sleep(500 * time.Millisecond)
	rec, err := s.Store.Get(context.Background(), "acme", first.Key)
	if err != nil || rec.State != kvstore.StateClaimed || rec.Holder != "w1" {
		t.Fatalf("the unrecorded claim = %+v, %v; want it still claimed by w1", rec, err)
	}
	if n := d.Stats().Withdrawn.Load(); n != 0 {
		t.Fatalf("withdrawn %d; want 0", n)
	}
}

// TestRecordKeepsTheClaim: an outcome that cannot be recorded for three leases
// is retried while the lease is renewed, so a duplicate on another executor
// waits for it instead of taking the claim over, and is answered deduplicated.
func TestRecordKeepsTheClaim(t *testing.T) {
	b := &body{}
	s := newFaultyStore()
	s.recordsDown.Store(true)
	const lease = 200 * time.Millisecond
	d := faultyDispatcher(t, bookingRegistry(t, b), s, "w1", lease)
	ctx := context.Background()
	holder := dispatchAsync(ctx, d, call("book", "c1", `{"flight":"BA117"}`))
	wait.Eventually(t, waitLimit, "the body to be entered", func() bool { return b.entered.Load() == 1 })
	dup := dispatchAsync(ctx, faultyDispatcher(t, bookingRegistry(t, b), s, "w2", lease), call("book", "c2", `{"flight":"BA117"}`))
	time.Sleep(3 * lease)
	if s.renewals.Load() == 0 {
		t.Fatal("the lease was not renewed while the outcome waited to be recorded")
	}
	s.recordsDown.Store(false)
	if a := <-holder; a.Kind != events.KindCompleted || a.Outcome != "ok" {
		t.Fatalf("holder = %+v", a)
	}
	if a := <-dup; a.Kind != events.KindDeduplicated || a.Outcome != "ok" || b.entered.Load() != 1 {
		t.Fatalf("duplicate = %+v, entries %d; want deduplicated from the recorded outcome, one entry", a, b.entered.Load())
	}
}

// TestRecordGivesUp: an outcome that can never be recorded is given up after a
// bounded time; the caller still gets its completed answer.
func TestRecordGivesUp(t *testing.T) {
	s := newFaultyStore()
	s.recordsDown.Store(true)
	const lease = 50 * time.Millisecond
	d := faultyDispatcher(t, bookingRegistry(t, &body{}), s, "w1", lease)
	start := time.Now()
	a := mustDispatch(t, d, call("book", "c1", `{"flight":"BA117"}`))
	if a.Kind != events.KindCompleted {
		t.Fatalf("answer = %+v", a)
	}
	if took := time.Since(start); took < 2*lease || took > 40*lease {
		t.Errorf("gave up after %v; want about 4 leases (%v)", took, 4*lease)
	}
}
