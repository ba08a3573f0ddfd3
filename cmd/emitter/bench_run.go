package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/tool"
)

// benchSpec is one benchmark run: which calls to make and how many at once.
type benchSpec struct {
	tenant, tool, runID string
	plan                []int // key number of each call
	concurrency         int
	args                *argsTemplate
	decl                *tool.Tool // nil when unknown
	timeout             time.Duration
}

// callRecord is what became of one call.
type callRecord struct {
	answered    bool
	failedSend  bool
	latency     time.Duration // publish → answer received
	kind        events.Kind
	key         string // the key the answer carries
	want        string // the key derived here, when the declaration is known
	bodyEntered bool   // indeterminate answers: whether the body was entered
	argBytes    int
}

// pendingCall is a published call whose answer has not arrived yet.
type pendingCall struct {
	idx   int
	start time.Time
	done  chan struct{} // closed once the answer is filed
}

// benchRun drives one benchmark: concurrency workers each publish a call and
// wait for its answer, so that exactly that many calls are in flight; one
// subscription to the run's answer subjects files every answer under its call.
type benchRun struct {
	spec   benchSpec
	client *toolexec.Client
	nc     *nats.Conn

	recs []callRecord // by call number; an entry is written by one goroutine, read after done

	mu      sync.Mutex              // protects pending
	pending map[string]*pendingCall // by call id

	next      atomic.Int64 // the next call number to publish
	answered  atomic.Int64
	inFlight  atomic.Int64
	repeated  atomic.Int64 // answers to calls already answered (a republished answer)
	strays    atomic.Int64 // answers that could not be read
	lastError atomic.Value // string: the last publish error
}

// callID is the call id of call number i: unique within the run, and the run id
// is new for every run.
func (r *benchRun) callID(i int) string { return r.spec.runID + "-" + strconv.Itoa(i) }

// onAnswer files an answer under its call. It runs on the subscription's
// goroutine: the time is taken first, so that the queue does not count.
func (r *benchRun) onAnswer(m *nats.Msg) {
	now := time.Now()
	a, err := wire.DecodeAnswer(m.Header, m.Data)
	if err != nil {
		r.strays.Add(1)
		return
	}
	r.mu.Lock()
	p, ok := r.pending[a.CallID]
	if ok {
		delete(r.pending, a.CallID)
	}
	r.mu.Unlock()
	if !ok {
		r.repeated.Add(1)
		return
	}
	rec := &r.recs[p.idx]
	rec.answered = true
	rec.latency = now.Sub(p.start)
	rec.kind = a.Kind
	rec.key = a.Key
	rec.bodyEntered = a.BodyEntered
	r.answered.Add(1)
	close(p.done)
}

// run publishes every planned call and waits for the answers, or for ctx to
// end. It returns the wall time from the first publish to the last answer.
func (r *benchRun) run(ctx context.Context) (time.Duration, error) {
	n := len(r.spec.plan)
	r.recs = make([]callRecord, n)
	r.pending = make(map[string]*pendingCall, r.spec.concurrency*2)
	filter := wire.AnswerFilter(r.spec.tenant, r.spec.tool, r.spec.runID, "*")
	sub, err := r.nc.Subscribe(filter, r.onAnswer)
	if err != nil {
		return 0, fmt.Errorf("subscribing to %s: %w", filter, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// A benchmark must not lose answers to the slow-consumer limits.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return 0, err
	}
	// Make sure the server knows the subscription before the first call.
	if err := r.nc.FlushTimeout(10 * time.Second); err != nil {
		return 0, fmt.Errorf("subscribing to %s: %w", filter, err)
	}

	start := time.Now()
	var wg sync.WaitGroup
	for range min(r.spec.concurrency, n) {
		wg.Go(func() { r.worker(ctx) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return elapsed, err
	}
	return elapsed, nil
}

// worker publishes calls one at a time, each after the previous one's answer.
func (r *benchRun) worker(ctx context.Context) {
	var timer *time.Timer
	if r.spec.timeout > 0 {
		timer = time.NewTimer(r.spec.timeout)
		timer.Stop()
	}
	for ctx.Err() == nil {
		i := int(r.next.Add(1) - 1)
		if i >= len(r.spec.plan) {
			return
		}
		r.one(ctx, i, timer)
	}
}

// one makes call number i and waits for its answer.
func (r *benchRun) one(ctx context.Context, i int, timer *time.Timer) {
	s := &r.spec
	args := s.args.render(s.plan[i], i)
	rec := &r.recs[i]
	rec.argBytes = len(args)
	if s.decl != nil {
		if p := s.decl.Policy(); p != nil && p.Kind.Deduplicated() {
			if k, err := idemkey.Derive(s.tenant, s.runID, s.tool, args, p.KeyArguments); err == nil {
				rec.want = k.Hex
			}
		}
	}
	id := r.callID(i)
	p := &pendingCall{idx: i, done: make(chan struct{})}

	r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	p.start = time.Now()
	r.mu.Lock()
	r.pending[id] = p
	r.mu.Unlock()
	if _, err := r.client.Publish(ctx, s.tenant, s.tool, args, toolexec.WithRunID(s.runID), toolexec.WithFreshCallID(id)); err != nil {
		r.mu.Lock()
		_, still := r.pending[id]
		delete(r.pending, id)
		r.mu.Unlock()
		if still {
			// Unless the answer came all the same (the call was stored and the
			// acknowledgement lost), the call counts as not sent.
			rec.failedSend = true
			r.lastError.Store(err.Error())
			return
		}
	}
	var expired <-chan time.Time
	if timer != nil {
		timer.Reset(s.timeout)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-p.done:
	case <-expired:
		r.abandon(id, p)
	case <-ctx.Done():
		r.abandon(id, p)
	}
}

// abandon stops waiting for call id. An answer filed meanwhile still counts.
func (r *benchRun) abandon(id string, p *pendingCall) {
	r.mu.Lock()
	_, still := r.pending[id]
	delete(r.pending, id)
	r.mu.Unlock()
	if !still {
		<-p.done // filed just now: wait for the record to be complete
	}
}

// errBenchCheck is returned, after the report is printed, by a benchmark whose
// check failed or whose calls were not all answered.
var errBenchCheck = errors.New("benchmark check failed")
