package resilience_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/tcpproxy"
	"github.com/tesserix/toolexec/kvstore"
)

// TestLostClaimReply loses the answer to a Claim that landed: the server's
// bytes are held back by the proxy for longer than the store client waits, so
// the claim is written while the executor sees a timeout. For each backend:
//
//  1. the call is answered indeterminate, store_unavailable, body not entered,
//     and the claim is in the store (read past the proxy);
//  2. once the server's answers come through again, the dispatcher reads the
//     key back, finds its own claim for that call and withdraws it — long
//     before the claim's lease (a minute) would have run out;
//  3. a duplicate on another executor then runs the booking, once.
//
// Without the withdrawal the duplicate would wait out the lease and be answered
// holder_lost, body entered, for a booking that never happened.
func TestLostClaimReply(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			srv := b.start(t)
			px := tcpproxy.Start(t, srv.addr)
			st := srv.open(t, px.Addr())
			direct := srv.open(t, srv.addr)
			bk := newBooking(t)
			const lease = time.Minute
			d := bk.dispatcher(t, st, "w1", lease)
			waitUsable(t, st)
			ctx := ctxT(t)
			// Calls run as the bus worker runs them: under a context without a
			// deadline, so that the store's own bounds end its waits.
			call := context.Background()
			// A first booking warms the client up (connections made, statements
			// prepared, scripts loaded), so that the lost Claim is one request.
			if warm, err := d.Dispatch(call, bookCall("warm-1", "LH0")); err != nil || warm.Kind != events.KindCompleted {
				t.Fatalf("warming up: %+v, %v", warm, err)
			}

			// 1. The answer is lost.
			px.Delay(4 * opTimeout)
			a, err := d.Dispatch(call, bookCall("lost-1", "LH1"))
			if err != nil {
				t.Fatal(err)
			}
			if a.Kind != events.KindIndeterminate || a.Reason != events.ReasonStoreUnavailable || a.BodyEntered {
				t.Fatalf("the call whose claim's answer was lost: %s (%s, body entered %v); want indeterminate, store_unavailable, body not entered",
					a.Kind, a.Reason, a.BodyEntered)
			}
			rec, err := direct.Get(ctx, tenant, a.Key)
			if err != nil || rec.State != kvstore.StateClaimed || rec.Holder != "w1" || rec.CallID != "lost-1" {
				t.Fatalf("the claim read past the proxy: %+v, %v; want claimed by w1 for lost-1 (the write must land for this test to mean anything)", rec, err)
			}

			// 2. The answers come through again: the claim is withdrawn.
			px.Delay(0)
			start := time.Now()
			for d.Stats().Withdrawn.Load() == 0 {
				if time.Since(start) > lease/2 {
					t.Fatalf("the claim was not withdrawn within %v of the store answering again", lease/2)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if _, err := direct.Get(ctx, tenant, a.Key); !errors.Is(err, kvstore.ErrNotFound) {
				t.Fatalf("the key after the withdrawal: %v; want ErrNotFound", err)
			}
			t.Logf("withdrawn %v after the store's answers came through", time.Since(start).Round(time.Millisecond))

			// 3. A duplicate on another executor books, once.
			d2 := bk.dispatcher(t, direct, "w2", lease)
			dup, err := d2.Dispatch(call, bookCall("lost-2", "LH1"))
			if err != nil || dup.Kind != events.KindCompleted {
				t.Fatalf("the duplicate after the withdrawal: %+v, %v; want completed", dup, err)
			}
			if n := bk.runsOf(a.Key); n != 1 {
				t.Errorf("the booking ran %d times, want once", n)
			}
		})
	}
}
