package dispatch

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/internal/backoff"
	"github.com/tesserix/toolexec/internal/clock"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/tool"
)

// Defaults for [Config].
const (
	DefaultLease           = 15 * time.Second
	DefaultMaxOutcomeBytes = 512 << 10
)

// Config configures a [Dispatcher].
type Config struct {
	// Tools are the tools served. Required.
	Tools *tool.Registry
	// Store keeps the idempotency records. Required.
	Store kvstore.Store
	// Holder names this worker in the records it claims; default
	// "<hostname>-<pid>-<random>".
	Holder string
	// Lease is how long a claim lasts unless renewed; the body renews it every
	// Lease/3 while it runs. Default DefaultLease.
	Lease time.Duration
	// Clock drives lease renewal and retry backoff; default the wall clock.
	Clock clock.Clock
	// Jitter returns numbers in [0, 1) for retry backoff; default math/rand/v2.
	Jitter func() float64
	// MaxOutcomeBytes bounds the outcome a body may return (it is recorded and
	// answered in full); larger outcomes are failures. Default
	// DefaultMaxOutcomeBytes.
	MaxOutcomeBytes int
	// Limits bound what a call's arguments may expand to (members of an object,
	// elements of an array, values in all); a call over one is rejected
	// too_many_values before anything else is done with it. Zero fields take
	// idemkey's defaults.
	Limits idemkey.Limits
	// Logger receives one line per notable event (never arguments); default
	// slog.Default().
	Logger *slog.Logger
	// Observer is told what the dispatcher does, for metrics; default none.
	Observer Observer
	// TracerProvider makes the spans of calls (see SpanCall); default none: no
	// spans, and tools receive the call's own traceparent.
	TracerProvider trace.TracerProvider
}

// Stats counts what the dispatcher did. Its fields are safe to read concurrently.
type Stats struct {
	// BodiesEntered counts tool bodies entered, attempts included.
	BodiesEntered atomic.Int64
	// Unguarded counts Idempotent calls run without a claim because the key could not
	// be derived or the store could not be reached.
	Unguarded atomic.Int64
	// Answers counts answers by kind.
	Completed, Deduplicated, Indeterminate, Failed, Rejected atomic.Int64
	// Withdrawn counts claims withdrawn after their grant was lost: a Claim
	// without an answer whose write had landed, read back once the store answered
	// and taken back because nothing ran under it.
	Withdrawn atomic.Int64
}

// Dispatcher runs tool calls under their idempotency policies. It is safe for
// concurrent use; one Dispatcher serves every call of a worker.
type Dispatcher struct {
	tools      *tool.Registry
	store      kvstore.Store
	holder     string
	lease      time.Duration
	clock      clock.Clock
	jitter     func() float64
	maxOutcome int
	limits     idemkey.Limits
	log        *slog.Logger
	obs        Observer
	tracer     trace.Tracer
	stats      Stats
	book       claimBook
}

// New returns a dispatcher, or an error if cfg lacks Tools or Store.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Tools == nil {
		return nil, errors.New("dispatch: Config.Tools is required")
	}
	if cfg.Store == nil {
		return nil, errors.New("dispatch: Config.Store is required")
	}
	d := &Dispatcher{
		tools: cfg.Tools, store: cfg.Store, holder: cfg.Holder, lease: cfg.Lease,
		clock: cfg.Clock, jitter: cfg.Jitter, maxOutcome: cfg.MaxOutcomeBytes, limits: cfg.Limits, log: cfg.Logger,
		obs: cfg.Observer, tracer: newTracer(cfg.TracerProvider),
	}
	if d.obs == nil {
		d.obs = nopObserver{}
	}
	if d.holder == "" {
		d.holder = defaultHolder()
	}
	if d.lease <= 0 {
		d.lease = DefaultLease
	}
	if d.clock == nil {
		d.clock = clock.Real{}
	}
	if d.jitter == nil {
		d.jitter = rand.Float64
	}
	if d.maxOutcome <= 0 {
		d.maxOutcome = DefaultMaxOutcomeBytes
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	return d, nil
}

func defaultHolder() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "worker"
	}
	var b [4]byte
	_, _ = cryptoRead(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

var cryptoRead = crand.Read

// Holder returns the name this dispatcher claims keys under.
func (d *Dispatcher) Holder() string { return d.holder }

// Stats returns the dispatcher's counters.
func (d *Dispatcher) Stats() *Stats { return &d.stats }

// Dispatch runs c to its answer. It reads the call's tenant, run id, call id,
// tool, arguments and trace parent; where the call came from (its source, time
// and trace state) is the wire's business. It returns exactly one answer per call,
// or ErrHandBack (wrapping ctx's error) when ctx ended before the call was answered
// and nothing irreversible had happened; the caller should then hand the call back
// to be tried again.
func (d *Dispatcher) Dispatch(ctx context.Context, c events.Call) (events.Answer, error) {
	res, err := d.Run(ctx, c)
	return res.Answer, err
}

// Run is Dispatch, and also returns the span context of the call's span (see
// [Result]), with the error as well as with the answer. It implements
// [Runner].
func (d *Dispatcher) Run(ctx context.Context, c events.Call) (Result, error) {
	v, span, err := d.dispatch(ctx, c)
	return Result{Answer: v.answer, Span: span}, err
}

// Result is what running a call came to.
type Result struct {
	// Answer is the call's answer; zero when the run ended without one.
	Answer events.Answer
	// Span is the span context of the call's span (SpanCall), for the log
	// lines written about the call once it has run; not valid when the
	// dispatcher makes no spans.
	Span trace.SpanContext
}

// Call runs c and returns its outcome (for completed and deduplicated answers) or
// the error [events.Answer.Err] gives, wrapping the body's own error where
// there was one: errors.As finds *events.IndeterminateOutcomeError,
// *events.FailedError or *events.RejectedError.
func (d *Dispatcher) Call(ctx context.Context, c events.Call) (string, error) {
	v, _, err := d.dispatch(ctx, c)
	if err != nil {
		return "", err
	}
	err = v.answer.Err()
	switch e := err.(type) {
	case *events.IndeterminateOutcomeError:
		e.Err = v.cause
	case *events.FailedError:
		e.Err = v.cause
	}
	if err != nil {
		return "", err
	}
	return v.answer.Outcome, nil
}

// verdict is where a call's way ended: its answer, and the body's own error
// behind a failed or indeterminate answer, which Call wraps in its error.
type verdict struct {
	answer events.Answer
	cause  error
}

// dispatch runs c to its verdict, in the call's span, whose span context it
// returns.
func (d *Dispatcher) dispatch(ctx context.Context, c events.Call) (verdict, trace.SpanContext, error) {
	start := time.Now()
	label := ""
	if _, err := d.tools.Get(c.Tool); err == nil || errors.Is(err, tool.ErrToolConflict) || errors.Is(err, tool.ErrUnavailable) {
		label = c.Tool
	}
	d.obs.CallStarted(label)
	ctx, span := d.startCall(ctx, c)
	r := &run{d: d, call: c, label: label, logCtx: logContext(ctx, c.TraceParent), base: events.Answer{
		Tenant: c.Tenant, RunID: c.RunID, CallID: c.CallID, Tool: c.Tool, TraceParent: c.TraceParent,
	}}
	v, err := r.do(ctx)
	endCall(span, v.answer, err)
	if err != nil {
		d.obs.CallEnded(label, "", "", time.Since(start))
		return verdict{}, span.SpanContext(), err
	}
	d.count(v.answer.Kind)
	d.obs.CallEnded(label, v.answer.Kind, v.answer.Reason, time.Since(start))
	return v, span.SpanContext(), nil
}

func (d *Dispatcher) count(k events.Kind) {
	switch k {
	case events.KindCompleted:
		d.stats.Completed.Add(1)
	case events.KindDeduplicated:
		d.stats.Deduplicated.Add(1)
	case events.KindIndeterminate:
		d.stats.Indeterminate.Add(1)
	case events.KindFailed:
		d.stats.Failed.Add(1)
	case events.KindRejected:
		d.stats.Rejected.Add(1)
	}
}

// run is the state of one call on its way to an answer.
type run struct {
	d     *Dispatcher
	call  events.Call
	label string // the tool's name for the observer: "" if it is not registered
	// logCtx is what the call's log lines are logged with: it carries the
	// call's span, or without tracing the caller's, from its traceparent.
	logCtx context.Context
	base   events.Answer
	tool   *tool.Tool
	args   *idemkey.Arguments
	key    string // the idempotency key, once derived
	check  string // the digest of the check arguments
}

// errOutcomeTooLarge marks a body whose outcome exceeds MaxOutcomeBytes.
var errOutcomeTooLarge = errors.New("outcome too large to record")

func (r *run) do(ctx context.Context) (verdict, error) {
	c := r.call
	for _, f := range []struct{ name, value string }{
		{"tenant", c.Tenant}, {"run_id", c.RunID}, {"call_id", c.CallID}, {"tool", c.Tool},
	} {
		if !events.ValidToken(f.value) {
			return verdict{answer: r.rejected(events.CodeBadToken, fmt.Sprintf("%s %q must match [A-Za-z0-9_-]{1,128}", f.name, f.value))}, nil
		}
	}
	t, err := r.d.tools.Get(c.Tool)
	switch {
	case errors.Is(err, tool.ErrToolConflict):
		return verdict{answer: r.rejected(events.CodeToolConflict, err.Error())}, nil
	case errors.Is(err, tool.ErrUnavailable):
		return verdict{answer: r.rejected(events.CodeUpstreamUnavailable, err.Error())}, nil
	case err != nil:
		return verdict{answer: r.rejected(events.CodeUnknownTool, fmt.Sprintf("no tool named %q", c.Tool))}, nil
	}
	r.tool = t
	// One pass over the arguments gives both the canonical form the key is derived
	// from and the decoded value the schema check reads; the body gets the JSON as
	// the caller sent it.
	args, value, err := r.d.limits.ParseValue(c.Arguments)
	if err != nil {
		return verdict{answer: r.rejected(events.Code(idemkey.Code(err)), "arguments: "+err.Error())}, nil
	}
	r.args = args
	if err := t.ValidateValue(value); err != nil {
		return verdict{answer: r.rejected(events.CodeSchemaViolation, err.Error())}, nil
	}

	pol := t.Policy()
	if pol == nil || !pol.Kind.Deduplicated() {
		return r.unguarded(ctx)
	}
	key, err := args.Key(c.Tenant, c.RunID, c.Tool, pol.KeyArguments)
	if err != nil {
		if pol.Kind == tool.Effectful {
			return verdict{answer: r.indeterminate(events.ReasonKeyUnderivable, false), cause: err}, nil
		}
		r.d.stats.Unguarded.Add(1)
		r.d.obs.RanUnguarded(r.label, events.ReasonKeyUnderivable)
		r.d.log.WarnContext(r.logCtx, "idempotent call runs without a claim: key underivable",
			"tool", c.Tool, "tenant", c.Tenant, "run_id", c.RunID, "call_id", c.CallID, "error", err)
		return r.unguarded(ctx)
	}
	r.key = key.Hex
	r.base.Key = key.Hex
	r.check = args.CheckDigest(pol.CheckArguments)
	return r.guarded(ctx)
}

// answer returns the base answer with kind k.
func (r *run) answer(k events.Kind) events.Answer {
	a := r.base
	a.Kind = k
	a.Time = r.d.clock.Now()
	return a
}

func (r *run) rejected(code events.Code, msg string) events.Answer {
	a := r.answer(events.KindRejected)
	a.Code, a.Error = code, msg
	return a
}

func (r *run) failed(code events.Code, err error) events.Answer {
	a := r.answer(events.KindFailed)
	a.Code, a.Error = code, err.Error()
	return a
}

func (r *run) completed(k events.Kind, outcome string) events.Answer {
	a := r.answer(k)
	a.Outcome = outcome
	return a
}

func (r *run) indeterminate(reason events.Reason, bodyEntered bool) events.Answer {
	a := r.answer(events.KindIndeterminate)
	a.Reason, a.BodyEntered = reason, bodyEntered
	return a
}

// toolContext is what the body is told; ctx is the body's, whose span is the
// parent of whatever the tool does downstream.
func (r *run) toolContext(ctx context.Context, attempt int) tool.Context {
	return tool.Context{
		IdempotencyKey: r.key, Tenant: r.call.Tenant, RunID: r.call.RunID, CallID: r.call.CallID,
		Tool: r.call.Tool, Attempt: attempt, TraceParent: traceParent(ctx, r.call.TraceParent),
	}
}

// attempt is what one entry of a tool's body came to.
type attempt struct {
	out      string
	err      error // the body's error; nil when it returned an outcome
	timedOut bool  // err is the tool's own timeout
}

// body enters the tool once, under its timeout, turning a panic into an error.
func (r *run) body(ctx context.Context, n int) attempt {
	var (
		out      string
		err      error
		timedOut bool
	)
	sctx, span := r.span(ctx, SpanBody, AttrAttempt.Int(n))
	defer func() {
		// The tool's error text may quote anything, its arguments included: the
		// span says only how it failed.
		if err != nil && span.IsRecording() {
			span.SetStatus(codes.Error, string(failureCode(err, timedOut)))
		}
		span.End()
	}()
	bctx, cancel := sctx, context.CancelFunc(func() {})
	if to := r.tool.Timeout(); to > 0 {
		bctx, cancel = context.WithTimeout(sctx, to)
	}
	defer cancel()
	r.d.stats.BodiesEntered.Add(1)
	r.d.obs.BodyEntered(r.label)
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("tool %s panicked: %v", r.call.Tool, p)
			}
		}()
		out, err = r.tool.Call(bctx, r.toolContext(bctx, n), r.call.Arguments)
	}()
	if err == nil && len(out) > r.d.maxOutcome {
		err = fmt.Errorf("%w: %d bytes, the limit is %d", errOutcomeTooLarge, len(out), r.d.maxOutcome)
		return attempt{err: err}
	}
	if err != nil && ctx.Err() == nil && errors.Is(bctx.Err(), context.DeadlineExceeded) {
		timedOut = true
	}
	return attempt{out: out, err: err, timedOut: timedOut}
}

// failureCode classifies a body's final error for a failed answer.
func failureCode(err error, timedOut bool) events.Code {
	switch {
	case errors.Is(err, errOutcomeTooLarge):
		return events.CodeOutcomeTooLarge
	case tool.IsNoEffect(err):
		return events.CodeNoEffect
	case timedOut:
		return events.CodeTimeout
	}
	return events.CodeToolError
}

// unavailable reports whether a body's error says that the server it calls
// could not be reached and nothing ran: such a call is answered rejected
// upstream_unavailable (its claim released), as it is when the tool is marked
// unavailable before the call arrives, and is not retried now.
func unavailable(err error) bool {
	return tool.IsNoEffect(err) && errors.Is(err, tool.ErrUnavailable)
}

// backoff waits before attempt n+1; it reports false if ctx ended first.
func (r *run) backoff(ctx context.Context, n int) bool {
	return backoff.SleepOn(ctx, r.d.clock, r.tool.Retry().Backoff(n, r.d.jitter()))
}

// unguarded runs the body with no claim under the tool's retry policy: tools
// without a policy, ReadOnly tools, and Idempotent tools whose key could not be
// derived or whose store could not be reached.
func (r *run) unguarded(ctx context.Context) (verdict, error) {
	attempts := r.tool.Retry().Attempts()
	for n := 1; ; n++ {
		at := r.body(ctx, n)
		if at.err == nil {
			return verdict{answer: r.completed(events.KindCompleted, at.out)}, nil
		}
		if unavailable(at.err) {
			return verdict{answer: r.rejected(events.CodeUpstreamUnavailable, at.err.Error()), cause: at.err}, nil
		}
		if n >= attempts || errors.Is(at.err, errOutcomeTooLarge) {
			return verdict{answer: r.failed(failureCode(at.err, at.timedOut), at.err), cause: at.err}, nil
		}
		if !r.backoff(ctx, n) {
			return verdict{}, fmt.Errorf("%w: %w", ErrHandBack, ctx.Err())
		}
	}
}

// guarded runs an Idempotent or Effectful call under its claim.
func (r *run) guarded(ctx context.Context) (verdict, error) {
	pol := r.tool.Policy()
	attempts := r.tool.Retry().Attempts() // Effectful tools return before retrying
	for n := 1; ; n++ {
		lease, final, err := r.acquire(ctx)
		if err != nil {
			return verdict{}, err
		}
		if final != nil {
			return verdict{answer: *final}, nil
		}
		if lease == nil { // the store is away; only Idempotent tools get here
			r.d.stats.Unguarded.Add(1)
			r.d.obs.RanUnguarded(r.label, events.ReasonStoreUnavailable)
			return r.unguarded(ctx)
		}
		at, rn := r.runClaimed(ctx, *lease, n)
		if at.err == nil {
			r.record(ctx, rn, at.out)
			return verdict{answer: r.completed(events.KindCompleted, at.out)}, nil
		}
		held := rn.stop()
		if pol.Kind == tool.Effectful && !tool.IsNoEffect(at.err) {
			reason := events.ReasonBodyFailed
			if at.timedOut {
				reason = events.ReasonTimeout
			}
			if err := r.markIndeterminate(context.WithoutCancel(ctx), held, reason); err != nil {
				// The claim stays; its lease runs out and whoever comes next marks it
				// holder_lost. Nothing runs twice either way.
				r.d.log.ErrorContext(r.logCtx, "marking indeterminate failed", r.logAttrs("error", err)...)
			}
			return verdict{answer: r.indeterminate(reason, true), cause: at.err}, nil
		}
		if err := r.release(context.WithoutCancel(ctx), held); err != nil {
			r.d.log.WarnContext(r.logCtx, "releasing claim failed", r.logAttrs("error", err)...)
		}
		if unavailable(at.err) {
			return verdict{answer: r.rejected(events.CodeUpstreamUnavailable, at.err.Error()), cause: at.err}, nil
		}
		if pol.Kind == tool.Effectful || n >= attempts || errors.Is(at.err, errOutcomeTooLarge) {
			return verdict{answer: r.failed(failureCode(at.err, at.timedOut), at.err), cause: at.err}, nil
		}
		if !r.backoff(ctx, n) {
			return verdict{}, fmt.Errorf("%w: %w", ErrHandBack, ctx.Err())
		}
	}
}

func (r *run) logAttrs(kv ...any) []any {
	return append([]any{"tool", r.call.Tool, "tenant", r.call.Tenant, "run_id", r.call.RunID,
		"call_id", r.call.CallID, "key", r.key}, kv...)
}

// acquire claims the key. It returns the lease when this call may run the body; a
// final answer when the record answers the call; neither when the store is away and
// the tool is Idempotent (it runs unguarded); or ErrHandBack when ctx ended.
func (r *run) acquire(ctx context.Context) (*kvstore.Lease, *events.Answer, error) {
	effectful := r.tool.Policy().Kind == tool.Effectful
	req := kvstore.ClaimRequest{
		Tenant: r.call.Tenant, Key: r.key, Holder: r.d.holder, Lease: r.d.lease,
		CheckDigest: r.check, Tool: r.call.Tool, RunID: r.call.RunID, CallID: r.call.CallID,
	}
	storeAway := func(err error) (*kvstore.Lease, *events.Answer, error) {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrHandBack, ctx.Err())
		}
		r.d.log.WarnContext(r.logCtx, "idempotency store unavailable", r.logAttrs("error", err)...)
		if effectful {
			// This delivery entered no body; an earlier delivery of the call (its
			// acknowledgement late or lost, in this process or another) may have,
			// and without the store nobody can say.
			a := r.indeterminate(events.ReasonStoreUnavailable, r.call.Delivery > 1)
			return nil, &a, nil
		}
		return nil, nil, nil
	}
	final := func(a events.Answer) (*kvstore.Lease, *events.Answer, error) { return nil, &a, nil }

	res, err := r.claim(ctx, req)
	for {
		if err != nil {
			return storeAway(err)
		}
		if res.Claimed {
			lease := res.Lease // not &res.Lease: that would move res to the heap on every call
			return &lease, nil, nil
		}
		rec := res.Record
		if rec.CheckDigest != r.check {
			return final(r.rejected(events.CodeArgumentsMismatch,
				"check arguments differ from those of the call that holds this key"))
		}
		switch rec.State {
		case kvstore.StateCompleted:
			kind := events.KindDeduplicated
			if rec.CallID == r.call.CallID {
				kind = events.KindCompleted // the same call again: the same answer again
			}
			return final(r.completed(kind, rec.Outcome))
		case kvstore.StateIndeterminate:
			return final(r.indeterminate(events.Reason(rec.Reason), rec.BodyEntered))
		case kvstore.StateClaimed:
		default:
			return storeAway(fmt.Errorf("record in unknown state %q", rec.State))
		}

		if !rec.LeaseExpired {
			var w kvstore.Record
			w, err = r.wait(ctx, rec)
			switch {
			case err == nil:
				res = kvstore.ClaimResult{Record: w}
			case errors.Is(err, kvstore.ErrNotFound): // released: claim again
				res, err = r.claim(ctx, req)
			}
			continue
		}

		// The holder's lease ran out: it crashed, hung or lost the store.
		lease, terr := r.takeOver(ctx, rec, req)
		switch {
		case terr == nil:
			if !effectful {
				r.d.log.InfoContext(r.logCtx, "took over an expired claim", r.logAttrs("previous_holder", rec.Holder)...)
				return &lease, nil, nil
			}
			if err := r.markIndeterminate(ctx, lease, events.ReasonHolderLost); err != nil {
				r.d.log.ErrorContext(r.logCtx, "marking holder_lost failed", r.logAttrs("error", err)...)
			}
			return final(r.indeterminate(events.ReasonHolderLost, true))
		case errors.Is(terr, kvstore.ErrLeaseHeld): // renewed or taken by someone else: look again
			var g kvstore.Record
			g, err = r.d.store.Get(ctx, r.call.Tenant, r.key)
			res = kvstore.ClaimResult{Record: g}
			if errors.Is(err, kvstore.ErrNotFound) {
				res, err = r.claim(ctx, req)
			}
		case errors.Is(terr, kvstore.ErrNotFound):
			res, err = r.claim(ctx, req)
		default:
			err = terr
		}
	}
}

// runClaimed runs the body while renewing the lease, and returns what the body
// came to and the renewer, still renewing: the caller stops it once the claim's
// end is written (or given up).
func (r *run) runClaimed(ctx context.Context, lease kvstore.Lease, n int) (attempt, *renewer) {
	rn := &renewer{r: r, ctx: context.WithoutCancel(ctx), current: lease}
	rn.mu.Lock()
	rn.arm()
	rn.mu.Unlock()
	return r.body(ctx, n), rn
}

// renewer renews a claim's lease every third of a lease while its body runs and
// while its outcome is being recorded. A timer waits between renewals, not a
// goroutine: most bodies end long before the first.
type renewer struct {
	r   *run
	ctx context.Context

	mu       sync.Mutex // held during a renewal, a write made through with, and stop
	current  kvstore.Lease
	lost     bool // a renewal was refused: the claim is somebody else's
	stopped  bool
	stopNext func() bool // stops the next renewal's timer
}

// arm sets the timer of the next renewal. rn.mu is held.
func (rn *renewer) arm() {
	rn.stopNext = clock.AfterFunc(rn.r.d.clock, rn.r.d.lease/3, rn.renew)
}

// renew renews the lease, and arms the next renewal unless the claim is lost.
func (rn *renewer) renew() {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.stopped {
		return
	}
	r := rn.r
	nl, err := r.d.store.Renew(rn.ctx, rn.current, r.d.lease)
	switch {
	case err == nil:
		rn.current = nl
	case errors.Is(err, kvstore.ErrNotHolder):
		rn.lost = true
		r.d.log.ErrorContext(r.logCtx, "lease lost while the claim was held", r.logAttrs("error", err)...)
		return
	default:
		r.d.log.WarnContext(r.logCtx, "lease renewal failed; retrying", r.logAttrs("error", err)...)
	}
	rn.arm()
}

// with calls write with the lease as it stands, between renewals. It returns
// kvstore.ErrNotHolder without calling write once a renewal was refused.
func (rn *renewer) with(write func(kvstore.Lease) error) error {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.lost {
		return fmt.Errorf("a renewal was refused: %w", kvstore.ErrNotHolder)
	}
	return write(rn.current)
}

// stop ends the renewals, waiting for one in progress, and returns the lease
// as it stands.
func (rn *renewer) stop() kvstore.Lease {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.stopped = true
	rn.stopNext()
	return rn.current
}

// recordLeases is how many leases record keeps trying while the store does not
// answer.
const recordLeases = 4

// record stores the outcome and stops rn. It keeps trying while the store is
// away, rn renewing the lease between attempts, until the outcome is recorded,
// the claim is found to be somebody else's, or recordLeases leases have passed:
// the store is most likely away for a moment (a restart, a leader election), and
// until somebody takes the claim over its holder may still record, even after
// its lease ran out. A failure to record does not change the answer — the body
// ran and its outcome is known — but leaves the claim to run out, after which
// duplicates of an Effectful call are answered holder_lost, never re-run.
func (r *run) record(ctx context.Context, rn *renewer, out string) {
	ctx, span := r.span(context.WithoutCancel(ctx), SpanRecord)
	var err error
	defer func() { endStep(span, err) }()
	giveUp := r.d.clock.Now().Add(recordLeases * r.d.lease)
	for i := 0; ; i++ {
		err = rn.with(func(l kvstore.Lease) error { return r.d.store.Record(ctx, l, out) })
		if err == nil || errors.Is(err, kvstore.ErrNotHolder) || errors.Is(err, kvstore.ErrTooLarge) {
			break
		}
		pause := storeBackoff.Delay(i + 1)
		if r.d.clock.Now().Add(pause).After(giveUp) {
			break
		}
		backoff.SleepOn(context.Background(), r.d.clock, pause)
	}
	rn.stop()
	r.ended(err == nil || errors.Is(err, kvstore.ErrNotHolder))
	if err != nil {
		r.d.log.ErrorContext(r.logCtx, "recording the outcome failed", r.logAttrs("error", err)...)
	}
}

// ended tells the book that a lease of this call ended, its end written (or the
// claim found somebody else's) or not.
func (r *run) ended(written bool) {
	r.d.book.ended(bookKey{r.call.Tenant, r.key}, written)
}

// endedBy is ended for a holder-only write that returned err.
func (r *run) endedBy(err error) {
	r.ended(err == nil || errors.Is(err, kvstore.ErrNotHolder))
}

// The store operations of a call, each in a span of its own.

func (r *run) claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	ctx, span := r.span(ctx, SpanClaim)
	k := bookKey{req.Tenant, req.Key}
	r.d.book.asking(k)
	res, err := r.d.store.Claim(ctx, req)
	r.d.book.answered(k, err == nil && res.Claimed)
	if err != nil && !errors.Is(err, kvstore.ErrInvalid) {
		r.settleLater()
	}
	if err == nil && span.IsRecording() {
		span.SetAttributes(AttrClaimed.Bool(res.Claimed))
		if !res.Claimed {
			span.SetAttributes(AttrState.String(string(res.Record.State)))
		}
	}
	endStep(span, err)
	return res, err
}

func (r *run) wait(ctx context.Context, seen kvstore.Record) (kvstore.Record, error) {
	start := time.Now()
	ctx, span := r.span(ctx, SpanWait)
	rec, err := r.d.store.Wait(ctx, seen)
	switch {
	case err == nil:
		if span.IsRecording() {
			span.SetAttributes(AttrState.String(string(rec.State)))
		}
		endStep(span, nil)
	case errors.Is(err, kvstore.ErrNotFound):
		endStep(span, nil) // released: not a failure
	default:
		endStep(span, err)
	}
	r.d.obs.WaitedForHolder(r.label, time.Since(start))
	return rec, err
}

func (r *run) takeOver(ctx context.Context, seen kvstore.Record, req kvstore.ClaimRequest) (kvstore.Lease, error) {
	ctx, span := r.span(ctx, SpanTakeOver)
	k := bookKey{req.Tenant, req.Key}
	r.d.book.asking(k)
	l, err := r.d.store.TakeOver(ctx, seen, req)
	r.d.book.answered(k, err == nil)
	if errors.Is(err, kvstore.ErrLeaseHeld) || errors.Is(err, kvstore.ErrNotFound) {
		endStep(span, nil) // someone else moved first: not a failure
	} else {
		endStep(span, err)
	}
	return l, err
}

func (r *run) markIndeterminate(ctx context.Context, lease kvstore.Lease, reason events.Reason) error {
	ctx, span := r.span(ctx, SpanMarkIndeterminate, AttrReason.String(string(reason)))
	err := r.d.store.MarkIndeterminate(ctx, lease, string(reason), true)
	r.endedBy(err)
	endStep(span, err)
	return err
}

func (r *run) release(ctx context.Context, lease kvstore.Lease) error {
	ctx, span := r.span(ctx, SpanRelease)
	err := r.d.store.Release(ctx, lease)
	r.endedBy(err)
	endStep(span, err)
	return err
}
