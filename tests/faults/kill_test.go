package faults_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/tests/faults"
)

// TestKillExecutorMidCall SIGKILLs an executor process while it has four calls
// in the downstream — two bookings (Effectful) and two seat changes
// (Idempotent) — and more calls of the same keys, and of others, keep coming.
// The victim runs with a concurrency of four and the witness holds its
// requests, so when it dies it holds exactly those four keys. Two other
// executors take the rest.
//
// The bookings end indeterminate (holder_lost) for every call of their keys,
// and the witness saw each exactly once: never re-run. The seat changes are
// taken over by a survivor once the dead holder's lease runs out, by the
// store's clock, and completed: the witness saw each twice, the victim's run
// and the survivor's. The long suite repeats this over several rounds, with
// new processes each time.
func TestKillExecutorMidCall(t *testing.T) {
	parallel(t)
	srv := natstest.Start(t, natstest.SyncAlways())
	s := newScenario(t, "kill-executor", srv.ClientURL(), 1)
	ctx := ctxFor(t, pick(2*time.Minute, 10*time.Minute))
	rounds := pick(1, 3)
	keys, perKey, rate := pick(60, 400), pick(4, 5), pick(200, 300)

	type victimKeys struct {
		round    int
		name     string
		effects  map[string]bool // Effectful keys held at the kill
		repeated map[string]bool // Idempotent keys held at the kill
		prefix   string
	}
	var victims []victimKeys
	total := 0
	for r := range rounds {
		victim := fmt.Sprintf("victim%d", r)
		prefix := fmt.Sprintf("v%d", r)
		s.witness.Hold(victim)
		v := s.executor(victim, "--concurrency", "4")
		s.step("round %d: %s ready", r, victim)

		first := plan(prefix, 4, 1)
		if err := <-s.publish(ctx, first); err != nil {
			t.Fatal(err)
		}
		total += len(first)
		held, err := s.witness.WaitHeld(ctx, victim, 4)
		if err != nil {
			t.Fatal(err)
		}
		vk := victimKeys{round: r, name: victim, prefix: prefix, effects: map[string]bool{}, repeated: map[string]bool{}}
		var heldKeys []string
		for _, e := range held {
			heldKeys = append(heldKeys, e.Key)
			if e.Tool == toolBook {
				vk.effects[e.Key] = true
			} else {
				vk.repeated[e.Key] = true
			}
		}
		if len(vk.effects) != 2 || len(vk.repeated) != 2 {
			t.Fatalf("the victim holds %d bookings and %d seat changes, want 2 and 2", len(vk.effects), len(vk.repeated))
		}
		victims = append(victims, vk)

		survivors := []*executor{
			s.executor(fmt.Sprintf("x%d-a", r), "--concurrency", "16"),
			s.executor(fmt.Sprintf("x%d-b", r), "--concurrency", "16"),
		}
		rest := append(planFrom(prefix, 4, 1, perKey), plan(fmt.Sprintf("L%d", r), keys, perKey)...)
		s.pub.Rate = rate
		done := s.publish(ctx, rest)
		s.waitPublished(ctx, total+len(rest)/3)
		s.step("round %d: SIGKILL %s, holding %d keys", r, victim, len(heldKeys))
		f := s.rec.Inject(faults.Fault{Name: "SIGKILL " + victim, Keys: heldKeys})
		v.kill()
		s.rec.Repair(f)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		total += len(rest)
		s.pub.Rate = 0
		if err := s.settle(ctx); err != nil {
			t.Fatal(err)
		}
		s.step("round %d: settled", r)
		for _, x := range survivors {
			x.stop()
		}
	}

	rep := s.finish(ctx)
	if rep.Calls != total {
		t.Errorf("recorded %d calls, published %d", rep.Calls, total)
	}

	// Beyond the checker: what happened to exactly the keys the victims held.
	byKey := effectsByKey(s.witness.Effects())
	answers, err := faults.ReadAnswers(ctx, s.js)
	if err != nil {
		t.Fatal(err)
	}
	answerOf := map[string][]events.Answer{}
	for _, a := range answers {
		answerOf[a.Key] = append(answerOf[a.Key], a.Answer)
	}
	holderLost := 0
	for _, vk := range victims {
		for key := range vk.effects {
			es := byKey[key]
			if len(es) != 1 || es[0].Executor != vk.name {
				t.Errorf("round %d: booking %s reached the downstream %d times (%v), want once, from the victim", vk.round, key[:12], len(es), es)
			}
			if len(answerOf[key]) != perKey {
				t.Errorf("round %d: booking %s has %d answers, want %d", vk.round, key[:12], len(answerOf[key]), perKey)
			}
			for _, a := range answerOf[key] {
				if a.Kind != events.KindIndeterminate || a.Reason != events.ReasonHolderLost || !a.BodyEntered {
					t.Errorf("round %d: booking %s call %s answered %s/%s, want indeterminate/holder_lost", vk.round, key[:12], a.CallID, a.Kind, a.Reason)
				}
				holderLost++
			}
		}
		for key := range vk.repeated {
			es := byKey[key]
			if len(es) != 2 || es[0].Executor != vk.name || es[1].Executor == vk.name {
				t.Errorf("round %d: seat change %s ran %d times (%v), want twice: the victim, then a survivor", vk.round, key[:12], len(es), es)
			}
			for _, a := range answerOf[key] {
				if a.Kind != events.KindCompleted && a.Kind != events.KindDeduplicated {
					t.Errorf("round %d: seat change %s call %s answered %s/%s, want completed or deduplicated", vk.round, key[:12], a.CallID, a.Kind, a.Reason)
				}
			}
		}
	}
	if got := rep.Indeterminate[events.ReasonHolderLost]; got != holderLost {
		t.Errorf("%d holder_lost answers in all, want %d: those of the victims' bookings only", got, holderLost)
	}
	if rep.Repeats != 2*rounds {
		t.Errorf("%d Idempotent keys ran twice, want %d", rep.Repeats, 2*rounds)
	}
}
