package faults

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/tool"
)

// Rule names one property of a history that [Check] enforces.
type Rule string

// The rules. Each violation names the one it breaks.
const (
	// RuleDoubleEffect: a key of an Effectful tool reached the downstream more
	// than once. Nothing excuses it.
	RuleDoubleEffect Rule = "double_effect"
	// RuleUnexplainedRepeat: a key of an Idempotent tool ran more than once with
	// no fault to explain it (a killed holder, a lost lease, a store away).
	RuleUnexplainedRepeat Rule = "unexplained_repeat"
	// RuleLostCall: a published call has no answer.
	RuleLostCall Rule = "lost_call"
	// RuleDuplicateAnswer: a call has more than one answer.
	RuleDuplicateAnswer Rule = "duplicate_answer"
	// RuleStrayAnswer: an answer names a call that was never published.
	RuleStrayAnswer Rule = "stray_answer"
	// RuleMismatchedAnswer: an answer's tool, run or key is not its call's.
	RuleMismatchedAnswer Rule = "mismatched_answer"
	// RuleUnexplainedIndeterminate: an indeterminate answer that no injected
	// fault explains.
	RuleUnexplainedIndeterminate Rule = "unexplained_indeterminate"
	// RuleEffectWhileStoreAway: an Effectful tool reached the downstream while
	// the store was away (after the fault's settle time).
	RuleEffectWhileStoreAway Rule = "effect_while_store_away"
	// RulePhantomOutcome: a completed or deduplicated answer for a key the
	// downstream never saw.
	RulePhantomOutcome Rule = "phantom_outcome"
	// RuleOutcomeDisagreement: the answers of one Effectful key carry different
	// outcomes.
	RuleOutcomeDisagreement Rule = "outcome_disagreement"
	// RuleStrayEffect: the downstream saw a key that no published call derives.
	RuleStrayEffect Rule = "stray_effect"
	// RuleFalseNotEntered: an indeterminate answer says the body was not
	// entered, but the downstream saw a request of that very call.
	RuleFalseNotEntered Rule = "false_not_entered"
)

// Violation is one breach of a rule.
type Violation struct {
	Rule   Rule
	Key    string // the idempotency key concerned, when there is one
	CallID string // the call concerned, when there is one
	Detail string
}

// String returns the violation on one line: its rule, call, key (shortened)
// and detail.
func (v Violation) String() string {
	var b strings.Builder
	b.WriteString(string(v.Rule))
	if v.CallID != "" {
		fmt.Fprintf(&b, " call=%s", v.CallID)
	}
	if v.Key != "" {
		fmt.Fprintf(&b, " key=%s", short(v.Key))
	}
	if v.Detail != "" {
		b.WriteString(": ")
		b.WriteString(v.Detail)
	}
	return b.String()
}

// Report is what [Checker.Check] found: the figures of the history and its
// violations.
type Report struct {
	// Calls counts published calls; Keys the distinct keys they derive.
	Calls, Keys int
	// Answers counts stored answers by kind (duplicates included).
	Answers map[events.Kind]int
	// Indeterminate counts indeterminate answers by reason.
	Indeterminate map[events.Reason]int
	// Effects counts the requests the witness saw; EffectKeys their distinct keys.
	Effects, EffectKeys int
	// Repeats counts Idempotent keys that ran more than once, each explained by a
	// fault (unexplained ones are violations).
	Repeats int
	// Unrun counts keys answered holder_lost that the downstream never saw:
	// claims granted (or written, with the reply lost) whose body never ran.
	// The answer is conservative — "unknown" where nothing happened — not
	// wrong.
	Unrun int
	// Unrecorded counts keys answered holder_lost although a call of the key was
	// answered completed: the holder ran the body and knew its outcome, but the
	// outcome never reached the record (the store away for longer than the
	// holder kept trying, or the claim taken over from a holder that lagged)
	// and a duplicate found the claim run out. Conservative, not wrong.
	Unrecorded int
	// Faults counts the injected faults.
	Faults int
	// Violations lists every breach found, sorted by rule, key and call.
	Violations []Violation
}

// OK reports whether the history broke no rule.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Count returns how many violations of rule the report holds.
func (r Report) Count(rule Rule) int {
	n := 0
	for _, v := range r.Violations {
		if v.Rule == rule {
			n++
		}
	}
	return n
}

// Answered returns how many answers the report counts, of every kind.
func (r Report) Answered() int {
	n := 0
	for _, c := range r.Answers {
		n += c
	}
	return n
}

// String returns the figures on one line, then at most 20 violations, one a
// line.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "calls=%d keys=%d answers=%d", r.Calls, r.Keys, r.Answered())
	for _, k := range events.AnswerKinds() {
		if n := r.Answers[k]; n > 0 {
			fmt.Fprintf(&b, " %s=%d", k, n)
		}
	}
	for _, reason := range events.Reasons() {
		if n := r.Indeterminate[reason]; n > 0 {
			fmt.Fprintf(&b, " indeterminate/%s=%d", reason, n)
		}
	}
	fmt.Fprintf(&b,
		" effects=%d effect_keys=%d idempotent_repeats=%d holder_lost_unrun=%d holder_lost_unrecorded=%d faults=%d lost=%d double_effects=%d "+
			"violations=%d",
		r.Effects, r.EffectKeys, r.Repeats, r.Unrun, r.Unrecorded, r.Faults, r.Count(RuleLostCall), r.Count(RuleDoubleEffect), len(r.Violations))
	for i, v := range r.Violations {
		if i == 20 {
			fmt.Fprintf(&b, "\n  ... and %d more", len(r.Violations)-i)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(v.String())
	}
	return b.String()
}

// Defaults for [Checker].
const (
	// DefaultAftermath is how long after a fault is repaired its consequences may
	// still show: clients reconnecting, pools replacing broken connections,
	// answers decided during the fault and published after it.
	DefaultAftermath = 10 * time.Second
	// DefaultSettle is how long after a store goes away an Effectful effect may
	// still arrive downstream from a claim granted just before.
	DefaultSettle = time.Second
)

// Checker judges histories. The zero value uses the defaults.
type Checker struct {
	// Aftermath extends every repaired fault's window; default DefaultAftermath.
	Aftermath time.Duration
	// Settle is the part of a store-away window, from its start, in which an
	// Effectful effect is not held against the store; default DefaultSettle.
	Settle time.Duration
}

// Check judges h with the default [Checker].
func Check(h History) Report { return Checker{}.Check(h) }

// Check judges h and returns its figures and violations (see the package
// documentation for the rules).
func (c Checker) Check(h History) Report {
	if c.Aftermath <= 0 {
		c.Aftermath = DefaultAftermath
	}
	if c.Settle <= 0 {
		c.Settle = DefaultSettle
	}
	j := newJudge(c, h)
	j.checkAnswers()
	j.checkEffects()
	slices.SortFunc(j.rep.Violations, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Key, b.Key), cmp.Compare(a.CallID, b.CallID),
			cmp.Compare(a.Detail, b.Detail))
	})
	return j.rep
}

// callID identifies a call across tenants.
type callID struct{ tenant, id string }

// judge holds the indexes one check needs.
type judge struct {
	c   Checker
	h   History
	rep Report

	calls     map[callID]Call
	kinds     map[string]tool.Kind // key -> kind of the tool its calls name
	firstSent map[string]time.Time // key -> earliest Sent of its calls
	effects   map[string][]Effect  // key -> effects, in order of arrival
}

func newJudge(c Checker, h History) *judge {
	j := &judge{
		c: c, h: h,
		calls:     make(map[callID]Call, len(h.Calls)),
		kinds:     map[string]tool.Kind{},
		firstSent: map[string]time.Time{},
		effects:   map[string][]Effect{},
		rep: Report{
			Calls: len(h.Calls), Answers: map[events.Kind]int{}, Indeterminate: map[events.Reason]int{},
			Effects: len(h.Effects), Faults: len(h.Faults),
		},
	}
	for _, call := range h.Calls {
		j.calls[callID{call.Tenant, call.CallID}] = call
		if call.Key == "" {
			continue
		}
		j.kinds[call.Key] = call.Kind
		if t, ok := j.firstSent[call.Key]; !ok || call.Sent.Before(t) {
			j.firstSent[call.Key] = call.Sent
		}
	}
	j.rep.Keys = len(j.firstSent)
	for _, e := range h.Effects {
		j.effects[e.Key] = append(j.effects[e.Key], e)
	}
	for k := range j.effects {
		slices.SortStableFunc(j.effects[k], func(a, b Effect) int { return a.At.Compare(b.At) })
	}
	j.rep.EffectKeys = len(j.effects)
	return j
}

func (j *judge) violate(rule Rule, key, call, format string, args ...any) {
	j.rep.Violations = append(j.rep.Violations, Violation{Rule: rule, Key: key, CallID: call, Detail: fmt.Sprintf(format, args...)})
}

// checkAnswers checks one answer per call, that each answer fits its call, that
// every indeterminate answer is explained, and that outcomes are backed by
// effects and agree.
func (j *judge) checkAnswers() {
	byCall := map[callID][]StoredAnswer{}
	for _, a := range j.h.Answers {
		if !a.Kind.IsAnswer() {
			continue
		}
		j.rep.Answers[a.Kind]++
		byCall[callID{a.Tenant, a.CallID}] = append(byCall[callID{a.Tenant, a.CallID}], a)
	}
	for id, as := range byCall {
		if _, ok := j.calls[id]; !ok {
			j.violate(RuleStrayAnswer, as[0].Key, id.id, "%d answer(s) to a call that was never published, first %s",
				len(as), as[0].Subject)
		}
	}
	outcomes := map[string]map[string]bool{} // Effectful key -> outcomes answered
	unrun := map[string]bool{}               // keys answered holder_lost, never seen downstream
	holderLost := map[string]bool{}          // keys answered holder_lost
	completed := map[string]bool{}           // keys of which a call was answered completed
	for _, call := range j.h.Calls {
		as := byCall[callID{call.Tenant, call.CallID}]
		switch {
		case len(as) == 0:
			j.violate(RuleLostCall, call.Key, call.CallID, "published %s, never answered", call.Acked.Format(time.RFC3339Nano))
			continue
		case len(as) > 1:
			kinds := make([]string, len(as))
			for i, a := range as {
				kinds[i] = string(a.Kind)
			}
			j.violate(RuleDuplicateAnswer, call.Key, call.CallID, "%d answers: %s", len(as), strings.Join(kinds, ", "))
		}
		for _, a := range as {
			if a.Tool != call.Tool || a.RunID != call.RunID || (a.Key != "" && call.Key != "" && a.Key != call.Key) {
				j.violate(RuleMismatchedAnswer, call.Key, call.CallID, "answer names tool %q run %q key %s",
					a.Tool, a.RunID, short(a.Key))
			}
			switch a.Kind {
			case events.KindIndeterminate:
				j.rep.Indeterminate[a.Reason]++
				if !a.BodyEntered {
					for _, e := range j.effects[call.Key] {
						if e.CallID == call.CallID {
							j.violate(RuleFalseNotEntered, call.Key, call.CallID, "%s says the body was not entered; %s sent it at %s",
								a.Reason, e.Executor, e.At.Format("15:04:05.000"))
							break
						}
					}
				}
				if a.Reason == events.ReasonHolderLost && call.Key != "" {
					holderLost[call.Key] = true
					if len(j.effects[call.Key]) == 0 {
						unrun[call.Key] = true
					}
				}
				if why := j.unexplained(call, a); why != "" {
					j.violate(RuleUnexplainedIndeterminate, call.Key, call.CallID, "%s: %s", a.Reason, why)
				}
			case events.KindCompleted, events.KindDeduplicated:
				if call.Key == "" {
					continue
				}
				if a.Kind == events.KindCompleted {
					completed[call.Key] = true
				}
				if len(j.effects[call.Key]) == 0 {
					j.violate(RulePhantomOutcome, call.Key, call.CallID, "%s, but the downstream never saw the key", a.Kind)
				}
				if call.Kind == tool.Effectful {
					if outcomes[call.Key] == nil {
						outcomes[call.Key] = map[string]bool{}
					}
					outcomes[call.Key][a.Outcome] = true
				}
			}
		}
	}
	j.rep.Unrun = len(unrun)
	for key := range holderLost {
		if completed[key] {
			j.rep.Unrecorded++
		}
	}
	for key, seen := range outcomes {
		if len(seen) > 1 {
			list := make([]string, 0, len(seen))
			for o := range seen {
				list = append(list, fmt.Sprintf("%q", o))
			}
			slices.Sort(list)
			j.violate(RuleOutcomeDisagreement, key, "", "%d different outcomes: %s", len(seen), strings.Join(list, ", "))
		}
	}
}

// unexplained returns why the indeterminate answer a to call is not explained
// by any fault, or "" when it is.
func (j *judge) unexplained(call Call, a StoredAnswer) string {
	switch a.Reason {
	case events.ReasonStoreUnavailable:
		// The body may be said entered: an answer to a later delivery of the call
		// cannot say what an earlier one did (false_not_entered catches the
		// opposite lie).
		for _, f := range j.h.Faults {
			if f.StoreAway && j.overlaps(f, call.Sent, a.Stored) {
				return ""
			}
		}
		return "no store was away while the call was live"
	case events.ReasonHolderLost:
		start := call.Sent
		if t, ok := j.firstSent[call.Key]; ok && t.Before(start) {
			start = t
		}
		for _, f := range j.h.Faults {
			if j.overlaps(f, start, a.Stored) && j.tookHolder(f, call.Key) {
				return ""
			}
		}
		return "no fault took out the key's holder or the store while the key was live"
	default:
		return "no injected fault makes this reason possible"
	}
}

// tookHolder reports whether f can have cost key's holder its claim.
func (j *judge) tookHolder(f Fault, key string) bool {
	if f.StoreAway || slices.Contains(f.Keys, key) {
		return true
	}
	for _, e := range j.effects[key] {
		if slices.Contains(f.Holders, e.Executor) {
			return true
		}
	}
	return false
}

// overlaps reports whether f's window, extended by the aftermath, meets [from, to].
func (j *judge) overlaps(f Fault, from, to time.Time) bool {
	fs, fe := f.window(j.c.Aftermath)
	return !fe.Before(from) && !to.Before(fs)
}

// checkEffects checks effects per key: at most one for Effectful keys, repeats of
// Idempotent keys explained, none while a store was away, none for keys no
// call derives.
func (j *judge) checkEffects() {
	for key, es := range j.effects {
		kind, ok := j.kinds[key]
		if !ok {
			j.violate(RuleStrayEffect, key, es[0].CallID, "%d request(s) for a key no published call derives", len(es))
			continue
		}
		if kind == tool.Effectful {
			j.storeAway(key, es)
		}
		if len(es) < 2 {
			continue
		}
		from := make([]string, len(es))
		for i, e := range es {
			from[i] = e.Executor + "/" + e.CallID
		}
		switch kind {
		case tool.Effectful:
			j.violate(RuleDoubleEffect, key, es[1].CallID, "%d effects, from %s", len(es), strings.Join(from, ", "))
		case tool.Idempotent:
			start, ok := j.firstSent[key]
			if !ok || es[0].At.Before(start) {
				start = es[0].At
			}
			explained := false
			for _, f := range j.h.Faults {
				if j.overlaps(f, start, es[len(es)-1].At) && j.tookHolder(f, key) {
					explained = true
					break
				}
			}
			if explained {
				j.rep.Repeats++
			} else {
				j.violate(RuleUnexplainedRepeat, key, es[1].CallID, "%d runs, from %s", len(es), strings.Join(from, ", "))
			}
		}
	}
}

// storeAway flags Effectful effects that arrived from an executor cut off from
// the store while it was away, past the settle time.
func (j *judge) storeAway(key string, es []Effect) {
	for _, f := range j.h.Faults {
		if !f.StoreAway {
			continue
		}
		cutOff := func(e Effect) bool { return len(f.Executors) == 0 || slices.Contains(f.Executors, e.Executor) }
		from, to := f.AwayFrom, f.AwayUntil
		if from.IsZero() {
			from = f.Start
		}
		if to.IsZero() {
			to = f.End
		}
		from = from.Add(j.c.Settle)
		for _, e := range es {
			if cutOff(e) && e.At.After(from) && (to.IsZero() || e.At.Before(to)) {
				j.violate(RuleEffectWhileStoreAway, key, e.CallID, "effect from %s at %s, %v into %q",
					e.Executor, e.At.Format("15:04:05.000"), e.At.Sub(f.Start).Round(time.Millisecond), f.Name)
			}
		}
	}
}

func short(key string) string {
	if len(key) > 12 {
		return key[:12]
	}
	return key
}
