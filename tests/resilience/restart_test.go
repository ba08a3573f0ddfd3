package resilience_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/kvstore"
)

// TestRecordsAndClaimsSurviveARestart writes a completed record, a claim with a
// long lease, a claim with a short lease and an indeterminate record; restarts
// the server (politely, then by a crash); and checks after each restart, over
// the same clients as before (as a running executor would), that:
//   - the completed record still answers, and a new Effectful call for its key
//     is deduplicated without running the body;
//   - the long claim is still held by its holder: another claim is refused, a
//     take-over is refused, and the holder's lease still works;
//   - the short claim's lease runs out by the server's clock, and only then can
//     it be taken over;
//   - the indeterminate record is still indeterminate.
func TestRecordsAndClaimsSurviveARestart(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			srv := b.start(t)
			st := srv.open(t, srv.addr)
			bk := newBooking(t)
			d := bk.dispatcher(t, st, "w1", 30*time.Second)

			for i, restart := range []struct {
				name string
				down func(testing.TB)
			}{
				{"stop", srv.stop},
				{"crash", srv.crash},
			} {
				flight := "F" + restart.name
				first, err := d.Dispatch(ctxT(t), bookCall("first-"+restart.name, flight))
				if err != nil || first.Kind != events.KindCompleted {
					t.Fatalf("%s: first call: %+v, %v", restart.name, first, err)
				}
				held := claim(t, st, "held-"+restart.name, "w-held", 10*time.Minute)
				short := claim(t, st, "short-"+restart.name, "w-short", time.Second)
				parked := claim(t, st, "parked-"+restart.name, "w-parked", 10*time.Minute)
				if err := st.MarkIndeterminate(ctxT(t), parked.Lease, string(events.ReasonBodyFailed), true); err != nil {
					t.Fatalf("MarkIndeterminate: %v", err)
				}
				heldBefore := get(t, st, held.Lease.Key)

				restart.down(t)
				srv.start(t)
				waitUsable(t, st)

				// The completed record, through the store and through the dispatcher.
				rec := get(t, st, first.Key)
				if rec.State != kvstore.StateCompleted || rec.Outcome != first.Outcome {
					t.Errorf("%s: completed record after the restart: state %s outcome %q, want completed %q",
						restart.name, rec.State, rec.Outcome, first.Outcome)
				}
				again, err := d.Dispatch(ctxT(t), bookCall("again-"+restart.name, flight))
				if err != nil || again.Kind != events.KindDeduplicated || again.Outcome != first.Outcome {
					t.Errorf("%s: the same key after the restart: %+v, %v; want deduplicated %q",
						restart.name, again, err, first.Outcome)
				}
				if n := bk.runsOf(first.Key); n != 1 {
					t.Errorf("%s: the body ran %d times for the key, want once", restart.name, n)
				}

				// The long claim is still held.
				rec = get(t, st, held.Lease.Key)
				if rec.State != kvstore.StateClaimed || rec.Holder != "w-held" || rec.LeaseExpired {
					t.Errorf("%s: held claim after the restart: state %s holder %q lease expired %v",
						restart.name, rec.State, rec.Holder, rec.LeaseExpired)
				}
				if moved := rec.LeaseUntil.Sub(heldBefore.LeaseUntil); moved < -time.Millisecond || moved > time.Millisecond {
					t.Errorf("%s: held claim's lease deadline moved by %v across the restart", restart.name, moved)
				}
				other, err := st.Claim(ctxT(t), claimReq("held-"+restart.name, "w-other", time.Minute))
				if err != nil || other.Claimed || other.Record.Holder != "w-held" {
					t.Errorf("%s: a second claim of a held key: claimed %v holder %q, %v; want refused, held by w-held",
						restart.name, other.Claimed, other.Record.Holder, err)
				}
				if _, err := st.TakeOver(ctxT(t), rec, claimReq("held-"+restart.name, "w-other", time.Minute)); !errors.Is(err, kvstore.ErrLeaseHeld) {
					t.Errorf("%s: take-over of a held claim: %v, want ErrLeaseHeld", restart.name, err)
				}
				if _, err := st.Renew(ctxT(t), held.Lease, 10*time.Minute); err != nil {
					t.Errorf("%s: the holder's lease after the restart: Renew: %v", restart.name, err)
				}

				// The short claim runs out by the server's clock (Get need not say
				// so; Wait must), then can be taken over.
				expired := get(t, st, short.Lease.Key)
				if !expired.LeaseExpired {
					if expired, err = st.Wait(ctxT(t), expired); err != nil {
						t.Fatalf("%s: waiting for the short claim to run out: %v", restart.name, err)
					}
				}
				if expired.State != kvstore.StateClaimed || !expired.LeaseExpired || expired.Holder != "w-short" {
					t.Errorf("%s: short claim after the restart: state %s holder %q lease expired %v; want claimed by w-short, run out",
						restart.name, expired.State, expired.Holder, expired.LeaseExpired)
				} else if _, err := st.TakeOver(ctxT(t), expired, claimReq("short-"+restart.name, "w-next", time.Minute)); err != nil {
					t.Errorf("%s: take-over of a run-out claim: %v", restart.name, err)
				}

				// The indeterminate record.
				rec = get(t, st, parked.Lease.Key)
				if rec.State != kvstore.StateIndeterminate || rec.Reason != string(events.ReasonBodyFailed) || !rec.BodyEntered {
					t.Errorf("%s: indeterminate record after the restart: state %s reason %q body entered %v",
						restart.name, rec.State, rec.Reason, rec.BodyEntered)
				}
				if t.Failed() {
					t.Fatalf("after restart %d (%s)", i+1, restart.name)
				}
			}
			bk.checkOnce(t)
		})
	}
}

func claimReq(name, holder string, lease time.Duration) kvstore.ClaimRequest {
	return kvstore.ClaimRequest{
		Tenant: tenant, Key: digest(name), Holder: holder, Lease: lease,
		Tool: "book", RunID: "run-1", CallID: "call-" + name,
	}
}

// claim claims the key named name and fails the test unless it got it.
func claim(t *testing.T, s kvstore.Store, name, holder string, lease time.Duration) kvstore.ClaimResult {
	t.Helper()
	res, err := s.Claim(ctxT(t), claimReq(name, holder, lease))
	if err != nil || !res.Claimed {
		t.Fatalf("Claim(%s): claimed %v, %v", name, res.Claimed, err)
	}
	return res
}

func get(t *testing.T, s kvstore.Store, key string) kvstore.Record {
	t.Helper()
	rec, err := s.Get(ctxT(t), tenant, key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return rec
}
