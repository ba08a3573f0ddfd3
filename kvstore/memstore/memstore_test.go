package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/clock"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/kvstoretest"
	"github.com/tesserix/toolexec/kvstore/memstore"
)

// Every store in this module withdraws claims read back (kvstore.Withdrawer).
var _ kvstore.Withdrawer = (*memstore.Store)(nil)

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestConformanceFakeClock(t *testing.T) {
	kvstoretest.Run(t, func(t *testing.T, opts kvstoretest.Options) kvstoretest.Harness {
		fc := clock.NewFake(start)
		s := memstore.New(memstore.Config{Clock: fc, Retention: opts.Retention})
		t.Cleanup(func() {
			memstore.Held(s) // checks the expiry list
			s.Close()
		})
		return kvstoretest.Harness{Store: s, Advance: fc.Advance}
	})
}

func TestConformanceRealClock(t *testing.T) {
	// One store shared by every subtest, as a server-backed store would be, except
	// where a subtest asks for its own retention.
	shared := memstore.New(memstore.Config{})
	t.Cleanup(func() { shared.Close() })
	kvstoretest.Run(t, func(t *testing.T, opts kvstoretest.Options) kvstoretest.Harness {
		if opts.Retention == 0 {
			return kvstoretest.Harness{Store: shared}
		}
		s := memstore.New(memstore.Config{Retention: opts.Retention})
		t.Cleanup(func() { s.Close() })
		return kvstoretest.Harness{Store: s}
	})
}

const (
	tenant = "acme"
	digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
)

func claimReq(holder string, lease time.Duration) kvstore.ClaimRequest {
	return kvstore.ClaimRequest{Tenant: tenant, Key: digest, Holder: holder, Lease: lease, Tool: "book_seat"}
}

func mustClaim(t *testing.T, s *memstore.Store, req kvstore.ClaimRequest) kvstore.Lease {
	t.Helper()
	res, err := s.Claim(context.Background(), req)
	if err != nil || !res.Claimed {
		t.Fatalf("Claim = %+v, %v; want claimed", res, err)
	}
	return res.Lease
}

func TestDefaults(t *testing.T) {
	fc := clock.NewFake(start)
	s := memstore.New(memstore.Config{Clock: fc})
	defer s.Close()
	mustClaim(t, s, claimReq("w1", time.Minute))
	rec, err := s.Get(context.Background(), tenant, digest)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.ExpiresAt.Sub(rec.UpdatedAt); got != 24*time.Hour {
		t.Errorf("retention = %v, want 24h", got)
	}
	if !rec.CreatedAt.Equal(start) || !rec.LeaseUntil.Equal(start.Add(time.Minute)) {
		t.Errorf("times not from the injected clock: %+v", rec)
	}
	fc.Advance(24*time.Hour - time.Nanosecond)
	if _, err := s.Get(context.Background(), tenant, digest); err != nil {
		t.Errorf("Get just before retention ends: %v", err)
	}
	fc.Advance(time.Nanosecond)
	if _, err := s.Get(context.Background(), tenant, digest); !errors.Is(err, kvstore.ErrNotFound) {
		t.Errorf("Get when retention ends: %v, want ErrNotFound", err)
	}

	// The zero Config runs on the wall clock.
	r := memstore.New(memstore.Config{})
	defer r.Close()
	before := time.Now()
	res, err := r.Claim(context.Background(), claimReq("w1", time.Minute))
	if err != nil || !res.Claimed || res.Record.CreatedAt.Before(before) || res.Record.CreatedAt.After(time.Now()) {
		t.Errorf("Claim on a zero-Config store: %+v, %v", res, err)
	}
}

// TestExpiredIsAbsent: once retention runs out, every operation treats the record
// as gone.
func TestExpiredIsAbsent(t *testing.T) {
	ctx := context.Background()
	fc := clock.NewFake(start)
	s := memstore.New(memstore.Config{Clock: fc, Retention: time.Hour})
	defer s.Close()
	l := mustClaim(t, s, claimReq("w1", time.Minute))
	if err := s.MarkIndeterminate(ctx, l, "body_failed", true); err != nil {
		t.Fatal(err)
	}
	seen, err := s.Get(ctx, tenant, digest)
	if err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Hour)

	tests := []struct {
		name string
		call func() error
	}{
		{"Get", func() error { _, err := s.Get(ctx, tenant, digest); return err }},
		{"Resolve", func() error {
			_, err := s.Resolve(ctx, tenant, digest, kvstore.Resolution{Outcome: "x"})
			return err
		}},
		{"TakeOver", func() error { _, err := s.TakeOver(ctx, seen, claimReq("w2", time.Minute)); return err }},
		{"Wait", func() error { _, err := s.Wait(ctx, seen); return err }},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, kvstore.ErrNotFound) {
			t.Errorf("%s on an expired record: %v, want ErrNotFound", tt.name, err)
		}
	}
	if err := s.Record(ctx, l, "late"); !errors.Is(err, kvstore.ErrNotHolder) {
		t.Errorf("Record on an expired record: %v, want ErrNotHolder", err)
	}
	if raw, err := s.DumpRaw(ctx, tenant); err != nil || len(raw) != 0 {
		t.Errorf("DumpRaw after expiry = %q, %v; want nothing", raw, err)
	}
	if n, err := s.Forget(ctx, tenant); err != nil || n != 0 {
		t.Errorf("Forget after expiry = %d, %v; want 0", n, err)
	}
	mustClaim(t, s, claimReq("w2", time.Minute))
}

// TestWaitWokenByRetention: a Wait on a completed record returns ErrNotFound when
// the record's retention runs out, driven by the fake clock alone.
func TestWaitWokenByRetention(t *testing.T) {
	ctx := context.Background()
	fc := clock.NewFake(start)
	s := memstore.New(memstore.Config{Clock: fc, Retention: time.Hour})
	defer s.Close()
	l := mustClaim(t, s, claimReq("w1", time.Minute))
	if err := s.Record(ctx, l, "done"); err != nil {
		t.Fatal(err)
	}
	seen, _ := s.Get(ctx, tenant, digest)
	done := make(chan error, 1)
	go func() { _, err := s.Wait(ctx, seen); done <- err }()
	if !fc.BlockUntil(1, nil) {
		t.Fatal("Wait armed no timer")
	}
	fc.Advance(time.Hour)
	if err := <-done; !errors.Is(err, kvstore.ErrNotFound) {
		t.Errorf("Wait when retention ran out: %v, want ErrNotFound", err)
	}
}

// TestWaitExpiredSeenBlocks: a Wait given a record already reported expired
// blocks until a real change instead of returning the same news again.
func TestWaitExpiredSeenBlocks(t *testing.T) {
	ctx := context.Background()
	fc := clock.NewFake(start)
	s := memstore.New(memstore.Config{Clock: fc})
	defer s.Close()
	l := mustClaim(t, s, claimReq("w1", time.Minute))
	fc.Advance(time.Minute)
	seen, _ := s.Get(ctx, tenant, digest)
	if !seen.LeaseExpired {
		t.Fatalf("Get after the lease: %+v, want LeaseExpired", seen)
	}
	done := make(chan error, 1)
	go func() { _, err := s.Wait(ctx, seen); done <- err }()
	if !fc.BlockUntil(1, nil) {
		t.Fatal("Wait armed no timer")
	}
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v without a change", err)
	case <-time.After(20 * time.Millisecond):
	}
	if err := s.Release(ctx, l); err != nil {
		t.Fatalf("Release by the holder after its lease ran out (nobody took over): %v", err)
	}
	if err := <-done; !errors.Is(err, kvstore.ErrNotFound) {
		t.Errorf("Wait after Release: %v, want ErrNotFound", err)
	}
}

// TestHolderAfterLeaseUntilTakenOver: a holder whose lease ran out may still act
// until someone takes the claim over; then it is fenced off.
func TestHolderAfterLeaseUntilTakenOver(t *testing.T) {
	ctx := context.Background()
	fc := clock.NewFake(start)
	s := memstore.New(memstore.Config{Clock: fc})
	defer s.Close()
	l := mustClaim(t, s, claimReq("w1", time.Minute))
	fc.Advance(2 * time.Minute)
	l, err := s.Renew(ctx, l, time.Minute)
	if err != nil {
		t.Fatalf("Renew after the lease ran out, nobody took over: %v", err)
	}
	fc.Advance(2 * time.Minute)
	seen, _ := s.Get(ctx, tenant, digest)
	if _, err := s.TakeOver(ctx, seen, claimReq("w2", time.Minute)); err != nil {
		t.Fatalf("TakeOver: %v", err)
	}
	if err := s.Record(ctx, l, "late"); !errors.Is(err, kvstore.ErrNotHolder) {
		t.Errorf("Record by the holder taken over: %v, want ErrNotHolder", err)
	}
}

// TestWaitLeavesNothingBehind: Waits that return, for every reason, leave no
// goroutine, timer or subscription behind.
func TestWaitLeavesNothingBehind(t *testing.T) {
	ctx := context.Background()
	fc := clock.NewFake(start)
	s := memstore.New(memstore.Config{Clock: fc})
	defer s.Close()
	baseline := runtime.NumGoroutine()

	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		d := fmt.Sprintf("%064x", i)
		res, err := s.Claim(ctx, kvstore.ClaimRequest{Tenant: tenant, Key: d, Holder: "w", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			_, _ = s.Wait(wctx, res.Record)
		}()
		// Let the Wait arm its timer (the ones of earlier Waits left for their
		// lease are still armed), so that most of them are woken while blocked.
		if !fc.BlockUntil(i/4+1, nil) {
			t.Fatal("Wait armed no timer")
		}
		switch i % 4 {
		case 0: // woken by a change
			_ = s.Record(ctx, res.Lease, "x")
		case 1: // woken by a release
			_ = s.Release(ctx, res.Lease)
		case 2: // cancelled
			cancel()
		case 3: // left for the lease to run out
		}
	}
	fc.Advance(time.Minute)
	wg.Wait()

	if got := fc.Timers(); got != 0 {
		t.Errorf("%d timers still armed after every Wait returned", got)
	}
	if got := memstore.Waiters(s); got != 0 {
		t.Errorf("%d subscriptions left after every Wait returned", got)
	}
	wait.Until(5*time.Second, func() bool { return runtime.NumGoroutine() <= baseline })
	if got := runtime.NumGoroutine(); got > baseline {
		t.Errorf("%d goroutines after every Wait returned, %d before", got, baseline)
	}
}

// TestWaitArmsAgainWhenClockMoves: a fake clock advanced while a Wait arms its
// timer must not leave the Wait asleep past the lease.
func TestWaitArmsAgainWhenClockMoves(t *testing.T) {
	ctx := context.Background()
	for i := range 200 {
		fc := clock.NewFake(start)
		s := memstore.New(memstore.Config{Clock: fc})
		res, err := s.Claim(ctx, claimReq("w1", time.Second))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan kvstore.Record, 1)
		go func() {
			r, _ := s.Wait(ctx, res.Record)
			done <- r
		}()
		fc.Advance(500 * time.Millisecond)
		fc.Advance(500 * time.Millisecond)
		select {
		case r := <-done:
			if !r.LeaseExpired {
				t.Fatalf("round %d: Wait returned %+v, want LeaseExpired", i, r)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Wait still blocked after the lease ran out", i)
		}
		s.Close()
	}
}

// TestForgetWakesWaiters: waiters on a forgotten tenant's records return
// ErrNotFound; Forget counts live records only.
func TestForgetWakesWaiters(t *testing.T) {
	ctx := context.Background()
	fc := clock.NewFake(start)
	s := memstore.New(memstore.Config{Clock: fc})
	defer s.Close()
	res, err := s.Claim(ctx, claimReq("w1", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.Wait(ctx, res.Record); done <- err }()
	fc.BlockUntil(1, nil)
	n, err := s.Forget(ctx, tenant)
	if err != nil || n != 1 {
		t.Errorf("Forget = %d, %v; want 1", n, err)
	}
	if err := <-done; !errors.Is(err, kvstore.ErrNotFound) {
		t.Errorf("Wait on a forgotten record: %v, want ErrNotFound", err)
	}
}

func TestClose(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.Config{Clock: clock.NewFake(start)})
	res, err := s.Claim(ctx, claimReq("w1", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.Wait(ctx, res.Record); done <- err }()
	time.Sleep(10 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-done; !errors.Is(err, kvstore.ErrUnavailable) {
		t.Errorf("Wait across Close: %v, want ErrUnavailable", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	calls := map[string]error{}
	_, calls["Claim"] = s.Claim(ctx, claimReq("w2", time.Minute))
	_, calls["Get"] = s.Get(ctx, tenant, digest)
	calls["Record"] = s.Record(ctx, res.Lease, "x")
	calls["Release"] = s.Release(ctx, res.Lease)
	calls["MarkIndeterminate"] = s.MarkIndeterminate(ctx, res.Lease, "x", false)
	_, calls["Renew"] = s.Renew(ctx, res.Lease, time.Minute)
	_, calls["TakeOver"] = s.TakeOver(ctx, res.Record, claimReq("w2", time.Minute))
	_, calls["Wait"] = s.Wait(ctx, res.Record)
	_, calls["Forget"] = s.Forget(ctx, tenant)
	_, calls["Resolve"] = s.Resolve(ctx, tenant, digest, kvstore.Resolution{Release: true})
	_, calls["DumpRaw"] = s.DumpRaw(ctx, tenant)
	for name, err := range calls {
		if !errors.Is(err, kvstore.ErrUnavailable) {
			t.Errorf("%s after Close: %v, want ErrUnavailable", name, err)
		}
	}
}

func TestMaxValueSize(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.Config{Clock: clock.NewFake(start), MaxValueSize: 8})
	defer s.Close()
	l := mustClaim(t, s, claimReq("w1", time.Minute))
	big := strings.Repeat("x", 9)
	if err := s.Record(ctx, l, big); !errors.Is(err, kvstore.ErrTooLarge) {
		t.Errorf("Record of 9 bytes with a limit of 8: %v, want ErrTooLarge", err)
	}
	if err := s.MarkIndeterminate(ctx, l, big, true); !errors.Is(err, kvstore.ErrTooLarge) {
		t.Errorf("MarkIndeterminate with a 9-byte reason: %v, want ErrTooLarge", err)
	}
	if rec, _ := s.Get(ctx, tenant, digest); rec.State != kvstore.StateClaimed || rec.Revision != 1 {
		t.Errorf("a refused write changed the record: %+v", rec)
	}
	if err := s.MarkIndeterminate(ctx, l, "body_fai", true); err != nil {
		t.Fatalf("MarkIndeterminate at the limit: %v", err)
	}
	if _, err := s.Resolve(ctx, tenant, digest, kvstore.Resolution{Outcome: big}); !errors.Is(err, kvstore.ErrTooLarge) {
		t.Errorf("Resolve with a 9-byte outcome: %v, want ErrTooLarge", err)
	}
	if rec, err := s.Resolve(ctx, tenant, digest, kvstore.Resolution{Outcome: "12345678"}); err != nil || rec.Outcome != "12345678" {
		t.Errorf("Resolve at the limit = %+v, %v", rec, err)
	}
}

func TestForgetCountsExactly(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.Config{Clock: clock.NewFake(start)})
	defer s.Close()
	for i := range 5 {
		req := kvstore.ClaimRequest{Tenant: tenant, Key: fmt.Sprintf("%064x", i), Holder: "w", Lease: time.Minute}
		if _, err := s.Claim(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Forget(ctx, tenant); err != nil || n != 5 {
		t.Errorf("Forget = %d, %v; want 5", n, err)
	}
}

func TestDumpRawIsJSONOfTheRecord(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.Config{Clock: clock.NewFake(start)})
	defer s.Close()
	l := mustClaim(t, s, claimReq("w1", time.Minute))
	if err := s.Record(ctx, l, "booked"); err != nil {
		t.Fatal(err)
	}
	raw, err := s.DumpRaw(ctx, tenant)
	if err != nil || len(raw) != 1 {
		t.Fatalf("DumpRaw = %q, %v; want one record", raw, err)
	}
	for _, want := range []string{`"Key":"` + digest + `"`, `"State":"completed"`, `"Outcome":"booked"`} {
		if !strings.Contains(string(raw[0]), want) {
			t.Errorf("DumpRaw = %s, lacks %s", raw[0], want)
		}
	}
}

func Example() {
	ctx := context.Background()
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := memstore.New(memstore.Config{Clock: fc})
	defer s.Close()

	req := kvstore.ClaimRequest{Tenant: "acme", Key: digest, Holder: "worker-1", Lease: 30 * time.Second}
	res, _ := s.Claim(ctx, req)
	fmt.Println("claimed:", res.Claimed)

	req.Holder = "worker-2"
	again, _ := s.Claim(ctx, req)
	fmt.Println("second claim:", again.Claimed, again.Record.State, again.Record.Holder)

	_ = s.Record(ctx, res.Lease, `{"seat":"14C"}`)
	rec, _ := s.Get(ctx, "acme", digest)
	fmt.Println(rec.State, rec.Outcome)
	// Output:
	// claimed: true
	// second claim: false claimed worker-1
	// completed {"seat":"14C"}
}

// TestExpiredRecordsLeaveWithLaterWrites: records nobody reads again are
// removed by later writes, a few per write, oldest write first; a record
// rewritten since (renewed, recorded, taken over, resolved) stays for the
// retention after its last write.
func TestExpiredRecordsLeaveWithLaterWrites(t *testing.T) {
	ctx := context.Background()
	fc := clock.NewFake(start)
	s := memstore.New(memstore.Config{Clock: fc, Retention: time.Hour})
	defer s.Close()
	claim := func(i int) kvstore.Lease {
		t.Helper()
		return mustClaim(t, s, kvstore.ClaimRequest{Tenant: tenant, Key: fmt.Sprintf("%064x", i), Holder: "w", Lease: time.Minute})
	}
	const old = 100
	leases := make([]kvstore.Lease, old)
	for i := range old {
		leases[i] = claim(i)
	}
	// Rewrite a few of them half an hour later, each in another way.
	fc.Advance(30 * time.Minute)
	if err := s.Record(ctx, leases[0], "done"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Renew(ctx, leases[1], time.Minute); err != nil {
		t.Fatal(err)
	}
	seen, err := s.Get(ctx, tenant, leases[2].Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeOver(ctx, seen, kvstore.ClaimRequest{Tenant: seen.Tenant, Key: seen.Key, Holder: "v", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkIndeterminate(ctx, leases[3], "body_failed", true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(ctx, tenant, leases[3].Key, kvstore.Resolution{Outcome: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, leases[4]); err != nil {
		t.Fatal(err)
	}
	if got := memstore.Held(s); got != old-1 {
		t.Fatalf("held %d records, want %d", got, old-1)
	}

	// An hour after the first writes, the 95 not rewritten have expired.
	fc.Advance(30 * time.Minute)
	writes := 0
	for memstore.Held(s) > 4+writes {
		if writes == old {
			t.Fatalf("after %d writes the store still holds %d records", writes, memstore.Held(s))
		}
		claim(old + writes)
		writes++
	}
	if max := (old-5)/16 + 1; writes > max {
		t.Errorf("%d writes removed the expired records, want at most %d", writes, max)
	}
	for i := range 4 {
		if _, err := s.Get(ctx, tenant, leases[i].Key); err != nil {
			t.Errorf("record %d, rewritten half an hour ago: %v", i, err)
		}
	}
	// Half an hour later they expire too, and leave with the next writes.
	fc.Advance(30 * time.Minute)
	claim(2 * old)
	if got := memstore.Held(s); got != writes+1 {
		t.Errorf("held %d records, want the %d written since", got, writes+1)
	}
	if _, err := s.Forget(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	if got := memstore.Held(s); got != 0 {
		t.Errorf("held %d records after Forget", got)
	}
}
