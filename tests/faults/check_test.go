package faults_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/tests/faults"
	"github.com/tesserix/toolexec/tool"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// at returns t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

const (
	keyA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	keyB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func hcall(id string, kind tool.Kind, key string, sent float64) faults.Call {
	name := "book"
	if kind == tool.Idempotent {
		name = "set_seat"
	}
	return faults.Call{Tenant: "acme", RunID: "r1", CallID: id, Tool: name, Kind: kind, Key: key, Sent: at(sent), Acked: at(sent)}
}

func hanswer(c faults.Call, kind events.Kind, stored float64) faults.StoredAnswer {
	a := events.Answer{Kind: kind, Tenant: c.Tenant, RunID: c.RunID, CallID: c.CallID, Tool: c.Tool, Key: c.Key}
	if kind == events.KindCompleted || kind == events.KindDeduplicated {
		a.Outcome = faults.Outcome(c.Tool, c.Key)
	}
	return faults.StoredAnswer{Answer: a, Subject: wire.AnswerSubject(a), Stored: at(stored)}
}

func hindeterminate(c faults.Call, reason events.Reason, entered bool, stored float64) faults.StoredAnswer {
	a := hanswer(c, events.KindIndeterminate, stored)
	a.Reason, a.BodyEntered = reason, entered
	return a
}

func heffect(c faults.Call, executor string, t float64) faults.Effect {
	return faults.Effect{Key: c.Key, CallID: c.CallID, Tool: c.Tool, Executor: executor, At: at(t)}
}

// TestCheckRules feeds the checker small histories, clean and broken, and
// compares the violations it reports, rule by rule.
func TestCheckRules(t *testing.T) {
	e1 := hcall("e1", tool.Effectful, keyA, 0)
	e2 := hcall("e2", tool.Effectful, keyA, 0.1)
	i1 := hcall("i1", tool.Idempotent, keyB, 0)
	i2 := hcall("i2", tool.Idempotent, keyB, 0.1)
	kill := faults.Fault{Name: "kill x1", Start: at(1), End: at(2), Keys: []string{keyA, keyB}}
	killOther := faults.Fault{Name: "kill x1", Start: at(1), End: at(2), Keys: []string{"c"}}
	slowX1 := faults.Fault{Name: "slow clock x1", Start: at(0), End: at(5), Holders: []string{"x1"}}
	away := faults.Fault{Name: "store away", Start: at(1), End: at(3), StoreAway: true}
	longAgo := faults.Fault{Name: "store away", Start: at(-100), End: at(-90), StoreAway: true}

	tests := []struct {
		name string
		h    faults.History
		want map[faults.Rule]int
		// wantRepeats is the number of explained Idempotent repeats.
		wantRepeats int
	}{
		{
			name: "clean: one effect, completed and deduplicated",
			h: faults.History{
				Calls:   []faults.Call{e1, e2},
				Answers: []faults.StoredAnswer{hanswer(e1, events.KindCompleted, 1), hanswer(e2, events.KindDeduplicated, 1)},
				Effects: []faults.Effect{heffect(e1, "x1", 0.5)},
			},
		},
		{
			name: "lost call",
			h: faults.History{
				Calls:   []faults.Call{e1, e2},
				Answers: []faults.StoredAnswer{hanswer(e1, events.KindCompleted, 1)},
				Effects: []faults.Effect{heffect(e1, "x1", 0.5)},
			},
			want: map[faults.Rule]int{faults.RuleLostCall: 1},
		},
		{
			name: "duplicate answer",
			h: faults.History{
				Calls: []faults.Call{e1},
				Answers: []faults.StoredAnswer{hanswer(e1, events.KindCompleted, 1),
					hindeterminate(e1, events.ReasonHolderLost, true, 2)},
				Effects: []faults.Effect{heffect(e1, "x1", 0.5)},
				Faults:  []faults.Fault{kill},
			},
			want: map[faults.Rule]int{faults.RuleDuplicateAnswer: 1},
		},
		{
			name: "answer to a call never published",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hanswer(e1, events.KindCompleted, 1), hanswer(e2, events.KindDeduplicated, 1)},
				Effects: []faults.Effect{heffect(e1, "x1", 0.5)},
			},
			want: map[faults.Rule]int{faults.RuleStrayAnswer: 1},
		},
		{
			name: "double effect is never excused",
			h: faults.History{
				Calls:   []faults.Call{e1, e2},
				Answers: []faults.StoredAnswer{hanswer(e1, events.KindCompleted, 1), hanswer(e2, events.KindCompleted, 1)},
				Effects: []faults.Effect{heffect(e1, "x1", 0.5), heffect(e2, "x2", 0.6)},
				Faults:  []faults.Fault{kill},
			},
			want: map[faults.Rule]int{faults.RuleDoubleEffect: 1},
		},
		{
			name: "idempotent repeat without a fault",
			h: faults.History{
				Calls:   []faults.Call{i1, i2},
				Answers: []faults.StoredAnswer{hanswer(i1, events.KindCompleted, 1), hanswer(i2, events.KindCompleted, 1)},
				Effects: []faults.Effect{heffect(i1, "x1", 0.5), heffect(i2, "x2", 0.6)},
			},
			want: map[faults.Rule]int{faults.RuleUnexplainedRepeat: 1},
		},
		{
			name: "idempotent repeat after its holder was killed",
			h: faults.History{
				Calls:   []faults.Call{i1},
				Answers: []faults.StoredAnswer{hanswer(i1, events.KindCompleted, 4)},
				Effects: []faults.Effect{heffect(i1, "x1", 0.5), heffect(i1, "x2", 3.5)},
				Faults:  []faults.Fault{kill},
			},
			wantRepeats: 1,
		},
		{
			name: "idempotent repeat after another key's holder was killed",
			h: faults.History{
				Calls:   []faults.Call{i1},
				Answers: []faults.StoredAnswer{hanswer(i1, events.KindCompleted, 4)},
				Effects: []faults.Effect{heffect(i1, "x1", 0.5), heffect(i1, "x2", 3.5)},
				Faults:  []faults.Fault{killOther},
			},
			want: map[faults.Rule]int{faults.RuleUnexplainedRepeat: 1},
		},
		{
			name: "idempotent repeat of a key the slow holder ran",
			h: faults.History{
				Calls:   []faults.Call{i1, i2},
				Answers: []faults.StoredAnswer{hanswer(i1, events.KindCompleted, 2), hanswer(i2, events.KindCompleted, 2)},
				Effects: []faults.Effect{heffect(i1, "x1", 0.5), heffect(i2, "x2", 1.6)},
				Faults:  []faults.Fault{slowX1},
			},
			wantRepeats: 1,
		},
		{
			name: "holder_lost for the killed holder's key",
			h: faults.History{
				Calls:   []faults.Call{e1, e2},
				Answers: []faults.StoredAnswer{hindeterminate(e1, events.ReasonHolderLost, true, 4), hindeterminate(e2, events.ReasonHolderLost, true, 4)},
				Effects: []faults.Effect{heffect(e1, "x1", 0.5)},
				Faults:  []faults.Fault{kill},
			},
		},
		{
			name: "holder_lost with no fault",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hindeterminate(e1, events.ReasonHolderLost, true, 4)},
				Effects: []faults.Effect{heffect(e1, "x1", 0.5)},
			},
			want: map[faults.Rule]int{faults.RuleUnexplainedIndeterminate: 1},
		},
		{
			name: "holder_lost when another key's holder was killed",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hindeterminate(e1, events.ReasonHolderLost, true, 4)},
				Effects: []faults.Effect{heffect(e1, "x1", 0.5)},
				Faults:  []faults.Fault{killOther},
			},
			want: map[faults.Rule]int{faults.RuleUnexplainedIndeterminate: 1},
		},
		{
			name: "holder_lost while the store was away",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hindeterminate(e1, events.ReasonHolderLost, true, 4)},
				Effects: []faults.Effect{heffect(e1, "x1", 0.5)},
				Faults:  []faults.Fault{away},
			},
		},
		{
			name: "holder_lost long after the store came back",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hindeterminate(e1, events.ReasonHolderLost, true, 4)},
				Effects: []faults.Effect{heffect(e1, "x1", 0.5)},
				Faults:  []faults.Fault{longAgo},
			},
			want: map[faults.Rule]int{faults.RuleUnexplainedIndeterminate: 1},
		},
		{
			name: "store_unavailable while the store was away",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hindeterminate(e1, events.ReasonStoreUnavailable, false, 1.5)},
				Faults:  []faults.Fault{away},
			},
		},
		{
			name: "store_unavailable with no store away",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hindeterminate(e1, events.ReasonStoreUnavailable, false, 1.5)},
				Faults:  []faults.Fault{kill, longAgo},
			},
			want: map[faults.Rule]int{faults.RuleUnexplainedIndeterminate: 1},
		},
		{
			// A later delivery of the call cannot say what an earlier one did.
			name: "store_unavailable saying the body may have been entered, while the store was away",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hindeterminate(e1, events.ReasonStoreUnavailable, true, 1.5)},
				Faults:  []faults.Fault{away},
			},
			want: map[faults.Rule]int{},
		},
		{
			name: "store_unavailable saying the body may have been entered, with no store away",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hindeterminate(e1, events.ReasonStoreUnavailable, true, 1.5)},
			},
			want: map[faults.Rule]int{faults.RuleUnexplainedIndeterminate: 1},
		},
		{
			name: "store_unavailable for a call whose body the downstream saw",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hindeterminate(e1, events.ReasonStoreUnavailable, false, 1.5)},
				Effects: []faults.Effect{heffect(e1, "x2", 1.2)},
				Faults:  []faults.Fault{away},
			},
			want: map[faults.Rule]int{faults.RuleFalseNotEntered: 1},
		},
		{
			name: "body_failed is never injected",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hindeterminate(e1, events.ReasonBodyFailed, true, 1.5)},
				Effects: []faults.Effect{heffect(e1, "x1", 0.5)},
				Faults:  []faults.Fault{kill, away},
			},
			want: map[faults.Rule]int{faults.RuleUnexplainedIndeterminate: 1},
		},
		{
			name: "effectful effect while the store was away",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hanswer(e1, events.KindCompleted, 3)},
				Effects: []faults.Effect{heffect(e1, "x1", 2.5)},
				Faults:  []faults.Fault{away},
			},
			want: map[faults.Rule]int{faults.RuleEffectWhileStoreAway: 1},
		},
		{
			name: "effectful effect just after the store went, or after it came back",
			h: faults.History{
				Calls: []faults.Call{e1, i1},
				Answers: []faults.StoredAnswer{hanswer(e1, events.KindCompleted, 3),
					hanswer(i1, events.KindCompleted, 3)},
				Effects: []faults.Effect{heffect(e1, "x1", 1.5), heffect(i1, "x1", 2.5)},
				Faults:  []faults.Fault{away, {Name: "store away again", Start: at(0), End: at(1.2), StoreAway: true}},
			},
		},
		{
			name: "effectful effect from an executor that could still reach the store",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hanswer(e1, events.KindCompleted, 3)},
				Effects: []faults.Effect{heffect(e1, "x2", 2.5)},
				Faults:  []faults.Fault{{Name: "x1 cut off", Start: at(1), End: at(3), StoreAway: true, Executors: []string{"x1"}}},
			},
		},
		{
			name: "effectful effect from the executor cut off from the store",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hanswer(e1, events.KindCompleted, 3)},
				Effects: []faults.Effect{heffect(e1, "x1", 2.5)},
				Faults:  []faults.Fault{{Name: "x1 cut off", Start: at(1), End: at(3), StoreAway: true, Executors: []string{"x1"}}},
			},
			want: map[faults.Rule]int{faults.RuleEffectWhileStoreAway: 1},
		},
		{
			name: "effectful effect after the store was back, before the repair was recorded",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hanswer(e1, events.KindCompleted, 3)},
				Effects: []faults.Effect{heffect(e1, "x1", 2.8)},
				Faults: []faults.Fault{{Name: "stopped", Start: at(1), End: at(3), AwayFrom: at(1.2), AwayUntil: at(2.7),
					StoreAway: true}},
			},
		},
		{
			name: "effectful effect between the inner window's ends",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hanswer(e1, events.KindCompleted, 3)},
				Effects: []faults.Effect{heffect(e1, "x1", 2.6)},
				Faults: []faults.Fault{{Name: "stopped", Start: at(1), End: at(3), AwayFrom: at(1.2), AwayUntil: at(2.7),
					StoreAway: true}},
			},
			want: map[faults.Rule]int{faults.RuleEffectWhileStoreAway: 1},
		},
		{
			name: "completed without an effect",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hanswer(e1, events.KindCompleted, 1)},
			},
			want: map[faults.Rule]int{faults.RulePhantomOutcome: 1},
		},
		{
			name: "two outcomes for one effectful key",
			h: faults.History{
				Calls: []faults.Call{e1, e2},
				Answers: []faults.StoredAnswer{hanswer(e1, events.KindCompleted, 1), func() faults.StoredAnswer {
					a := hanswer(e2, events.KindDeduplicated, 1)
					a.Outcome = "something else"
					return a
				}()},
				Effects: []faults.Effect{heffect(e1, "x1", 0.5)},
			},
			want: map[faults.Rule]int{faults.RuleOutcomeDisagreement: 1},
		},
		{
			name: "answer naming another tool",
			h: faults.History{
				Calls: []faults.Call{e1},
				Answers: []faults.StoredAnswer{func() faults.StoredAnswer {
					a := hanswer(e1, events.KindCompleted, 1)
					a.Tool = "other"
					return a
				}()},
				Effects: []faults.Effect{heffect(e1, "x1", 0.5)},
			},
			want: map[faults.Rule]int{faults.RuleMismatchedAnswer: 1},
		},
		{
			name: "effect for a key nobody called",
			h: faults.History{
				Calls:   []faults.Call{e1},
				Answers: []faults.StoredAnswer{hanswer(e1, events.KindCompleted, 1)},
				Effects: []faults.Effect{heffect(e1, "x1", 0.5), heffect(i1, "x1", 0.5)},
			},
			want: map[faults.Rule]int{faults.RuleStrayEffect: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := faults.Check(tt.h)
			got := map[faults.Rule]int{}
			for _, v := range rep.Violations {
				got[v.Rule]++
			}
			if !maps.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
				t.Errorf("violations = %v, want %v\n%s", got, tt.want, rep)
			}
			if rep.OK() != (len(tt.want) == 0) {
				t.Errorf("OK() = %v with %d violations", rep.OK(), len(rep.Violations))
			}
			if rep.Repeats != tt.wantRepeats {
				t.Errorf("Repeats = %d, want %d", rep.Repeats, tt.wantRepeats)
			}
		})
	}
}

// TestReportFigures checks the counts a report gives and its one-line form.
func TestReportFigures(t *testing.T) {
	e1 := hcall("e1", tool.Effectful, keyA, 0)
	e2 := hcall("e2", tool.Effectful, keyA, 0.1)
	i1 := hcall("i1", tool.Idempotent, keyB, 0)
	lost := hcall("lost", tool.Effectful, keyA, 0.2)
	rep := faults.Check(faults.History{
		Calls: []faults.Call{e1, e2, i1, lost},
		Answers: []faults.StoredAnswer{
			hanswer(e1, events.KindCompleted, 1), hanswer(e2, events.KindDeduplicated, 1),
			hindeterminate(i1, events.ReasonStoreUnavailable, false, 1.5),
		},
		Effects: []faults.Effect{heffect(e1, "x1", 0.5)},
		Faults:  []faults.Fault{{Name: "away", Start: at(1), End: at(2), StoreAway: true}},
	})
	if rep.Calls != 4 || rep.Keys != 2 || rep.Answered() != 3 || rep.Effects != 1 || rep.EffectKeys != 1 || rep.Faults != 1 {
		t.Errorf("figures: %+v", rep)
	}
	if rep.Answers[events.KindCompleted] != 1 || rep.Answers[events.KindDeduplicated] != 1 ||
		rep.Indeterminate[events.ReasonStoreUnavailable] != 1 {
		t.Errorf("by kind: %v %v", rep.Answers, rep.Indeterminate)
	}
	if rep.Unrun != 0 {
		t.Errorf("Unrun = %d, want 0", rep.Unrun)
	}
	if rep.Count(faults.RuleLostCall) != 1 || len(rep.Violations) != 1 || rep.Violations[0].CallID != "lost" {
		t.Errorf("violations: %v", rep.Violations)
	}
	s := rep.String()
	for _, want := range []string{"calls=4", "completed=1", "indeterminate/store_unavailable=1", "lost=1", "double_effects=0", "lost_call call=lost"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() lacks %q:\n%s", want, s)
		}
	}
}

// TestUnrunHolderLost counts keys answered holder_lost that the downstream
// never saw, and only those.
func TestUnrunHolderLost(t *testing.T) {
	e1 := hcall("e1", tool.Effectful, keyA, 0)
	e2 := hcall("e2", tool.Effectful, keyB, 0)
	away := faults.Fault{Name: "store away", Start: at(1), End: at(3), StoreAway: true}
	rep := faults.Check(faults.History{
		Calls: []faults.Call{e1, e2},
		Answers: []faults.StoredAnswer{
			hindeterminate(e1, events.ReasonHolderLost, true, 4),
			hindeterminate(e2, events.ReasonHolderLost, true, 4),
		},
		Effects: []faults.Effect{heffect(e2, "x1", 0.5)},
		Faults:  []faults.Fault{away},
	})
	if !rep.OK() || rep.Unrun != 1 {
		t.Errorf("Unrun = %d (violations %v), want 1 and none", rep.Unrun, rep.Violations)
	}
	if !strings.Contains(rep.String(), "holder_lost_unrun=1") {
		t.Errorf("String() lacks holder_lost_unrun=1: %s", rep)
	}
}

// TestUnrecordedHolderLost counts keys answered holder_lost of which a call was
// answered completed (the outcome known to its holder, never recorded), and
// only those: a key answered holder_lost and deduplicated is not one.
func TestUnrecordedHolderLost(t *testing.T) {
	a1 := hcall("a1", tool.Effectful, keyA, 0)
	a2 := hcall("a2", tool.Effectful, keyA, 0.2)
	b1 := hcall("b1", tool.Effectful, keyB, 0)
	b2 := hcall("b2", tool.Effectful, keyB, 0.2)
	away := faults.Fault{Name: "store away", Start: at(1), End: at(3), StoreAway: true}
	rep := faults.Check(faults.History{
		Calls: []faults.Call{a1, a2, b1, b2},
		Answers: []faults.StoredAnswer{
			hanswer(a1, events.KindCompleted, 1.5),
			hindeterminate(a2, events.ReasonHolderLost, true, 4),
			hanswer(b1, events.KindDeduplicated, 1.5),
			hindeterminate(b2, events.ReasonHolderLost, true, 4),
		},
		Effects: []faults.Effect{heffect(a1, "x1", 0.5), heffect(b1, "x2", 0.5)},
		Faults:  []faults.Fault{away},
	})
	if !rep.OK() || rep.Unrecorded != 1 || rep.Unrun != 0 {
		t.Errorf("Unrecorded = %d, Unrun = %d (violations %v), want 1, 0 and none", rep.Unrecorded, rep.Unrun, rep.Violations)
	}
	if !strings.Contains(rep.String(), "holder_lost_unrecorded=1") {
		t.Errorf("String() lacks holder_lost_unrecorded=1: %s", rep)
	}
}
