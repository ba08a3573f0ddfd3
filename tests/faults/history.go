package faults

import (
	"slices"
	"sync"
	"time"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/tool"
)

// Call is one call the load generator published, as the checker needs it.
type Call struct {
	Tenant string
	RunID  string
	CallID string
	Tool   string
	// Kind is the tool's declared kind; empty for a tool without a policy.
	Kind tool.Kind
	// Key is the idempotency key the call's arguments derive, computed by the
	// publisher independently of any executor; empty when none applies.
	Key string
	// Sent is when the first attempt to publish the call began, Acked when the
	// server acknowledged it (after any retries).
	Sent, Acked time.Time
}

// StoredAnswer is one answer event read back from TOOLEXEC_EVENTS.
type StoredAnswer struct {
	events.Answer
	// Subject is the subject the event was stored under.
	Subject string
	// Stored is the server's timestamp of the stream message.
	Stored time.Time
}

// Effect is one request the [Witness] received: an effect that landed
// downstream, whatever the executor later made of it.
type Effect struct {
	// Key is the request's Idempotency-Key header (empty when it had none).
	Key string
	// CallID and Tool are the Toolexec-Call-Id and Toolexec-Tool headers.
	CallID string
	Tool   string
	// Executor names the executor whose tools file pointed at the URL the
	// request reached.
	Executor string
	// At is when the witness received the request.
	At time.Time
}

// Fault is one fault a scenario injected, with what it may explain.
type Fault struct {
	// Name says what was done, e.g. "SIGKILL executor x1".
	Name string
	// Start is when injecting the fault began; End when repairing it was done
	// (zero: never within the history). Explanations look at this window.
	Start, End time.Time
	// AwayFrom and AwayUntil bound the part of a StoreAway fault during which the
	// store was certainly away: from when injecting it was done (the server
	// stopped, the proxy black-holed) until repairing it began. Zero values mean
	// Start and End. The rule that no Effectful body runs while the store is
	// away looks at this window.
	AwayFrom, AwayUntil time.Time
	// StoreAway marks a fault during which executors could not reach the
	// idempotency store (the store down or cut off, NATS restarting, a leader
	// killed). It explains store_unavailable answers and holder_lost records of
	// keys live during the window, and repeated effects of Idempotent tools, which
	// run without a claim when the store is away.
	StoreAway bool
	// Keys are keys whose claims the fault took from their holder (the calls a
	// killed executor held). It explains holder_lost for them and a second run of
	// an Idempotent tool.
	Keys []string
	// Holders are executors whose claims the fault may have cost them (a process
	// cut off from the store, a worker whose clock ran slow): it explains
	// holder_lost, and repeats of Idempotent tools, for keys the witness saw an
	// effect for from one of them.
	Holders []string
	// Executors, for a StoreAway fault, are the executors cut off from the store;
	// empty means every one. Only their effects are held against the store being
	// away: the others could still claim.
	Executors []string
}

// window returns the fault's window extended by aftermath past its end; an
// open fault lasts until the end of time.
func (f Fault) window(aftermath time.Duration) (time.Time, time.Time) {
	if f.End.IsZero() {
		return f.Start, time.Unix(1<<62, 0)
	}
	return f.Start, f.End.Add(aftermath)
}

// History is everything a scenario recorded, for [Check].
type History struct {
	Calls   []Call
	Answers []StoredAnswer
	Effects []Effect
	Faults  []Fault
}

// Recorder collects a history from concurrent publishers and fault injectors.
// The zero value is ready to use.
type Recorder struct {
	mu     sync.Mutex // protects calls and faults
	calls  []Call
	faults []Fault
}

// Published records a call the server acknowledged.
func (r *Recorder) Published(c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

// Inject records the start of a fault and returns its index, for [Recorder.Repair].
func (r *Recorder) Inject(f Fault) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f.Start.IsZero() {
		f.Start = time.Now()
	}
	r.faults = append(r.faults, f)
	return len(r.faults) - 1
}

// Repair records the end of fault i, now.
func (r *Recorder) Repair(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults[i].End = time.Now()
}

// MarkAway records that the store of fault i is certainly away from now on
// (its AwayFrom).
func (r *Recorder) MarkAway(i int) { r.stamp(i, func(f *Fault) { f.AwayFrom = time.Now() }) }

// MarkBack records that the store of fault i may be back from now on (its
// AwayUntil).
func (r *Recorder) MarkBack(i int) { r.MarkBackAt(i, time.Now()) }

// MarkBackAt records that the store of fault i may have been back since t: the
// last moment it was seen away, when its return is noticed by polling.
func (r *Recorder) MarkBackAt(i int, t time.Time) { r.stamp(i, func(f *Fault) { f.AwayUntil = t }) }

// Outage records f around an outage: it calls apply (which takes the store
// away), waits hold, then calls repair (which brings it back), and records the
// fault's outer window (Start before apply, End after repair) and its inner one
// (AwayFrom after apply, AwayUntil before repair). It returns the fault as
// recorded.
func (r *Recorder) Outage(f Fault, apply func(), hold time.Duration, repair func()) Fault {
	i := r.Inject(f)
	apply()
	r.MarkAway(i)
	time.Sleep(hold)
	r.MarkBack(i)
	repair()
	r.Repair(i)
	return r.Faults()[i]
}

func (r *Recorder) stamp(i int, set func(*Fault)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	set(&r.faults[i])
}

// Calls returns a copy of the calls recorded so far.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Faults returns a copy of the faults recorded so far.
func (r *Recorder) Faults() []Fault {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.faults)
}

// History returns the recorded calls and faults with the given answers and
// effects.
func (r *Recorder) History(answers []StoredAnswer, effects []Effect) History {
	return History{Calls: r.Calls(), Answers: answers, Effects: effects, Faults: r.Faults()}
}
