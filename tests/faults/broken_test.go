package faults_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/memstore"
	"github.com/tesserix/toolexec/tests/faults"
)

// grantTwice is a deliberately broken store: the first time a claim is refused
// for a key, it grants it anyway, with a forged lease. Everything else goes to
// the honest store underneath.
type grantTwice struct {
	kvstore.Store

	mu      sync.Mutex // protects granted
	granted map[string]bool
}

var _ kvstore.Store = (*grantTwice)(nil)

func (g *grantTwice) Claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	res, err := g.Store.Claim(ctx, req)
	if err != nil || res.Claimed {
		return res, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.granted[req.Key] {
		return res, nil
	}
	g.granted[req.Key] = true
	return kvstore.ClaimResult{Claimed: true, Lease: kvstore.Lease{
		Tenant: req.Tenant, Key: req.Key, Holder: req.Holder, Token: "forged",
	}}, nil
}

// TestCheckerCatchesBrokenRuns runs the same workload twice through two
// in-process workers sharing a store — once an honest store, once one that
// grants every key a second time — and then plants two more faults in the
// history the way a broken system would make them: a call acknowledged by the
// server and purged from the stream before any executor took it (a lost
// call), and a second answer to a call published under another message id (a
// duplicate answer). The checker finds nothing wrong with the honest run, and
// in the broken one reports exactly the doubly granted keys, the lost call and
// the duplicate answer.
func TestCheckerCatchesBrokenRuns(t *testing.T) {
	t.Parallel()
	for _, broken := range []bool{false, true} {
		name := "honest store"
		if broken {
			name = "store that grants twice"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := natstest.Start(t)
			s := newScenario(t, "checker-"+map[bool]string{false: "honest", true: "broken"}[broken], srv.ClientURL(), 1)
			ctx := ctxFor(t, time.Minute)
			var store kvstore.Store = memstore.New(memstore.Config{})
			if broken {
				store = &grantTwice{Store: store, granted: map[string]bool{}}
			}
			var workers []*inProcess
			for _, w := range []string{"w0", "w1"} {
				js := natstest.JetStream(t, natstest.Connect(t, srv))
				workers = append(workers, s.startInProcess(w, js, store, nil, lease))
			}
			// Slow bodies, so that every key's duplicates arrive while its first
			// call still holds the claim.
			s.witness.SetDelay(200 * time.Millisecond)
			const keys, perKey = 16, 3
			if err := <-s.publish(ctx, plan("b", keys, perKey)); err != nil {
				t.Fatal(err)
			}
			if err := s.settle(ctx); err != nil {
				t.Fatal(err)
			}
			for _, w := range workers {
				w.stop(t)
			}
			if !broken {
				rep := s.finish(ctx)
				if rep.Calls != keys*perKey || rep.Effects != keys {
					t.Errorf("honest run: %d calls, %d effects; want %d and %d", rep.Calls, rep.Effects, keys*perKey, keys)
				}
				return
			}

			// The lost call: acknowledged, then gone before anyone took it.
			lostCall := newCall("lost", 0, 0)
			if err := <-s.publish(ctx, []events.Call{lostCall}); err != nil {
				t.Fatal(err)
			}
			calls, err := s.js.Stream(ctx, wire.CallStream)
			if err != nil {
				t.Fatal(err)
			}
			if err := calls.Purge(ctx); err != nil {
				t.Fatal(err)
			}
			// The duplicate answer: a second completed event for a call that has
			// one, under a message id of its own.
			victim := s.rec.Calls()[0]
			dup := events.Answer{Kind: events.KindCompleted, Tenant: victim.Tenant, RunID: victim.RunID, CallID: victim.CallID,
				Tool: victim.Tool, Key: victim.Key, Outcome: faults.Outcome(victim.Tool, victim.Key), Time: time.Now()}
			publishAnswer(t, s.js, dup, "a-second-answer")

			// Not s.finish, which fails the test on violations: here they are the point.
			answers, err := faults.ReadAnswers(ctx, s.js)
			if err != nil {
				t.Fatal(err)
			}
			rep := faults.Check(s.rec.History(answers, s.witness.Effects()))
			t.Logf("FIGURES checker-broken: %s", rep)

			wantDouble := map[string]bool{}
			for _, c := range s.rec.Calls() {
				if c.Tool == toolBook && c.CallID != lostCall.CallID {
					wantDouble[c.Key] = true
				}
			}
			var gotDouble []string
			for _, v := range rep.Violations {
				switch v.Rule {
				case faults.RuleDoubleEffect:
					gotDouble = append(gotDouble, v.Key)
					if !wantDouble[v.Key] {
						t.Errorf("double effect reported for key %s, which no booking has", v.Key[:12])
					}
				case faults.RuleLostCall:
					if v.CallID != lostCall.CallID {
						t.Errorf("lost call reported for %s, want %s", v.CallID, lostCall.CallID)
					}
				case faults.RuleDuplicateAnswer:
					if v.CallID != victim.CallID {
						t.Errorf("duplicate answer reported for %s, want %s", v.CallID, victim.CallID)
					}
				case faults.RuleUnexplainedRepeat:
					// The seat changes ran twice as well, with no fault to explain it.
				default:
					t.Errorf("unexpected violation: %s", v)
				}
			}
			slices.Sort(gotDouble)
			if len(gotDouble) != len(wantDouble) || len(slices.Compact(gotDouble)) != len(wantDouble) {
				t.Errorf("double effects reported for %d keys, want every booking's %d", len(gotDouble), len(wantDouble))
			}
			if rep.Count(faults.RuleLostCall) != 1 || rep.Count(faults.RuleDuplicateAnswer) != 1 {
				t.Errorf("lost calls %d, duplicate answers %d; want 1 and 1", rep.Count(faults.RuleLostCall), rep.Count(faults.RuleDuplicateAnswer))
			}
			if rep.Count(faults.RuleUnexplainedRepeat) != keys/2 {
				t.Errorf("unexplained repeats %d, want every seat change's %d", rep.Count(faults.RuleUnexplainedRepeat), keys/2)
			}
		})
	}
}

// publishAnswer stores a in TOOLEXEC_EVENTS under msgID, as a broken executor
// that gives one call two different message ids would.
func publishAnswer(t *testing.T, js jetstream.JetStream, a events.Answer, msgID string) {
	t.Helper()
	e, err := wire.AnswerEvent(a, "/faults/planted")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := wire.NewMsg(wire.AnswerSubject(a), e, wire.Structured)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID)); err != nil {
		t.Fatal(err)
	}
}
