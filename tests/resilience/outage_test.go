package resilience_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/tcpproxy"
)

// outageLease is the dispatcher's lease in the outage tests: short, so that a
// claim orphaned by the outage runs out soon after the store is back.
const outageLease = 2 * time.Second

// hangAfter is how long a call may go unanswered before the test calls it hung.
// Each store operation is bounded by about a second here (opTimeout, with a few
// retries inside the clients); this is far beyond that.
const hangAfter = time.Minute

// fault is one way for a store to go away, and come back.
type fault struct {
	name           string
	inject, repair func(t *testing.T, srv *storeServer, px *tcpproxy.Proxy)
}

var faults = []fault{
	{
		name:   "cut", // the connections are reset and new ones refused, as when the server crashes
		inject: func(_ *testing.T, _ *storeServer, px *tcpproxy.Proxy) { px.Cut() },
		repair: func(_ *testing.T, _ *storeServer, px *tcpproxy.Proxy) { px.Restore() },
	},
	{
		name:   "blackhole", // requests vanish and no answer ever comes
		inject: func(_ *testing.T, _ *storeServer, px *tcpproxy.Proxy) { px.Blackhole() },
		repair: func(_ *testing.T, _ *storeServer, px *tcpproxy.Proxy) { px.Restore() },
	},
	{
		name:   "server-stopped",
		inject: func(t *testing.T, srv *storeServer, _ *tcpproxy.Proxy) { srv.stop(t) },
		repair: func(t *testing.T, srv *storeServer, _ *tcpproxy.Proxy) { srv.start(t) },
	},
}

// TestStoreOutage takes the store away in the middle of a call and while calls
// arrive, and brings it back. For each backend and each fault, through a proxy
// between the store's client and its server:
//
//  1. with the store up, a call completes (the body runs once);
//  2. a call's body is entered, and the store goes away while it runs;
//  3. every Effectful call made while the store is away — new keys, and a
//     duplicate of the completed one — answers indeterminate, store_unavailable,
//     body not entered, without hanging; no body runs;
//  4. the running body returns: its call answers completed (the outcome is
//     known, even though it could not be recorded);
//  5. the store comes back: the keys refused during the outage run, once each;
//     the completed key is deduplicated; the key whose body ran during the
//     outage is never run again (its orphaned claim runs out and answers
//     holder_lost, or it answers from its record if that write landed).
//
// Across everything, no key's body ran twice.
func TestStoreOutage(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			srv := b.start(t)
			px := tcpproxy.Start(t, srv.addr)
			st := srv.open(t, px.Addr())
			bk := newBooking(t)
			d := bk.dispatcher(t, st, "w1", outageLease)
			// dispatch runs one call the way the bus worker does: under a context
			// that has no deadline (so the stores' own bounds are what end a wait
			// for a server that is gone), cancelled by a watchdog only if the call
			// hangs. It may be called from any goroutine.
			dispatch := func(callID, flight string) events.Answer {
				t.Helper()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				watchdog := time.AfterFunc(hangAfter, cancel)
				defer watchdog.Stop()
				a, err := d.Dispatch(ctx, bookCall(callID, flight))
				if err != nil {
					t.Errorf("call %s (%s) had no answer after %v: %v", callID, flight, hangAfter, err)
					return events.Answer{Kind: "none"}
				}
				return a
			}

			for _, f := range faults {
				t.Run(f.name, func(t *testing.T) {
					flight := func(s string) string { return f.name + "-" + s }

					// 1. Up.
					done := dispatch("done-1", flight("done"))
					if done.Kind != events.KindCompleted {
						t.Fatalf("before the outage: %s, want completed", done.Kind)
					}
					<-bk.entered
					if t.Failed() {
						return
					}

					// 2. A body is running when the store goes away.
					release := bk.hold(flight("mid"))
					defer release()
					midAnswer := make(chan events.Answer, 1)
					go func() { midAnswer <- dispatch("mid-1", flight("mid")) }()
					select {
					case got := <-bk.entered:
						if got != flight("mid") {
							t.Fatalf("entered %s, want %s", got, flight("mid"))
						}
					case <-time.After(hangAfter):
						t.Fatalf("the body of %s was not entered", flight("mid"))
					}
					f.inject(t, srv, px)

					// 3. Calls while it is away.
					type result struct {
						name string
						a    events.Answer
					}
					var (
						wg      sync.WaitGroup
						results = make(chan result, 10)
					)
					away := []struct{ callID, flight string }{
						{"away-1", flight("new-1")}, {"away-2", flight("new-2")}, {"away-3", flight("new-3")},
						{"done-away", flight("done")},
					}
					for _, c := range away {
						wg.Add(1)
						go func() {
							defer wg.Done()
							results <- result{c.callID, dispatch(c.callID, c.flight)}
						}()
					}
					wg.Wait()
					close(results)
					for r := range results {
						if r.a.Kind != events.KindIndeterminate || r.a.Reason != events.ReasonStoreUnavailable || r.a.BodyEntered {
							t.Errorf("call %s while the store is away: %s reason %q body entered %v; want indeterminate, store_unavailable, body not entered",
								r.name, r.a.Kind, r.a.Reason, r.a.BodyEntered)
						}
					}
					select {
					case got := <-bk.entered:
						t.Errorf("a body (%s) was entered while the store was away", got)
					default:
					}

					// 4. The running body returns.
					release()
					if a := <-midAnswer; a.Kind != events.KindCompleted {
						t.Errorf("the call whose body ran through the outage: %s (%s), want completed", a.Kind, a.Reason)
					}

					// 5. Back.
					f.repair(t, srv, px)
					waitUsable(t, st)
					for i, c := range away[:3] {
						a := dispatch(fmt.Sprintf("back-%d", i+1), c.flight)
						if a.Kind != events.KindCompleted {
							t.Errorf("%s after the outage: %s (%s), want completed", c.flight, a.Kind, a.Reason)
							continue
						}
						<-bk.entered // a completed call entered the body
					}
					if a := dispatch("done-back", flight("done")); a.Kind != events.KindDeduplicated || a.Outcome != done.Outcome {
						t.Errorf("the completed key after the outage: %s %q, want deduplicated %q", a.Kind, a.Outcome, done.Outcome)
					}
					switch a := dispatch("mid-back", flight("mid")); {
					case a.Kind == events.KindIndeterminate && a.Reason == events.ReasonHolderLost && a.BodyEntered:
					case a.Kind == events.KindDeduplicated:
					default:
						t.Errorf("the key whose body ran through the outage, after it: %s (%s, body entered %v); want holder_lost or deduplicated",
							a.Kind, a.Reason, a.BodyEntered)
					}
					select {
					case got := <-bk.entered:
						t.Errorf("a body (%s) was entered again after the outage", got)
					default:
					}
					bk.checkOnce(t)
				})
			}
		})
	}
}
