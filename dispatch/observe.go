package dispatch

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tesserix/toolexec/events"
)

// Observer is told what a [Dispatcher] does, for metrics. Its methods are
// called on the call's goroutine and must return quickly; they must be safe for
// concurrent use. Package metrics implements it with Prometheus.
//
// tool is the name of a registered tool, or "" when the call names none (it is
// then rejected): a call cannot grow the set of names an observer sees. No
// method is given arguments, keys, run ids or call ids.
type Observer interface {
	// CallStarted is called when Dispatch takes a call.
	CallStarted(tool string)
	// CallEnded is called when Dispatch returns, after d: with the answer's kind
	// and, for an indeterminate answer, its reason; with an empty kind when the
	// call ended without an answer (ErrHandBack: it is handed back).
	CallEnded(tool string, kind events.Kind, reason events.Reason, d time.Duration)
	// BodyEntered is called each time the tool's body is entered, attempts
	// included.
	BodyEntered(tool string)
	// RanUnguarded is called when an Idempotent call runs without a claim, with
	// the reason: events.ReasonKeyUnderivable or events.ReasonStoreUnavailable.
	RanUnguarded(tool string, reason events.Reason)
	// WaitedForHolder is called after the call waited d for another caller that
	// held its key (one Wait on the store; a call may wait more than once).
	WaitedForHolder(tool string, d time.Duration)
}

// nopObserver is the Observer of a Dispatcher configured without one.
type nopObserver struct{}

func (nopObserver) CallStarted(string)                                          {}
func (nopObserver) CallEnded(string, events.Kind, events.Reason, time.Duration) {}
func (nopObserver) BodyEntered(string)                                          {}
func (nopObserver) RanUnguarded(string, events.Reason)                          {}
func (nopObserver) WaitedForHolder(string, time.Duration)                       {}

var _ Observer = nopObserver{}

// TracerName is the instrumentation name of the dispatcher's spans.
const TracerName = "github.com/tesserix/toolexec/dispatch"

// Span names and attributes. Each call is one span, SpanCall, continuing the
// trace of the call's traceparent; its children are the store operations
// (claim, wait, take over, record, mark indeterminate, release) and each entry
// of the tool's body, whose context is the traceparent the tool receives.
// Spans carry the tool, tenant, run and call ids, the answer's kind and reason
// and the key's digest; never a call's arguments or outcome.
const (
	SpanCall              = "toolexec.call"
	SpanClaim             = "toolexec.claim"
	SpanWait              = "toolexec.wait"
	SpanTakeOver          = "toolexec.take_over"
	SpanBody              = "toolexec.body"
	SpanRecord            = "toolexec.record"
	SpanMarkIndeterminate = "toolexec.mark_indeterminate"
	SpanRelease           = "toolexec.release"

	AttrTool        = attribute.Key("toolexec.tool")
	AttrTenant      = attribute.Key("toolexec.tenant")
	AttrRunID       = attribute.Key("toolexec.run_id")
	AttrCallID      = attribute.Key("toolexec.call_id")
	AttrKey         = attribute.Key("toolexec.key")
	AttrKind        = attribute.Key("toolexec.kind")
	AttrReason      = attribute.Key("toolexec.reason")
	AttrCode        = attribute.Key("toolexec.code")
	AttrBodyEntered = attribute.Key("toolexec.body_entered")
	AttrAttempt     = attribute.Key("toolexec.attempt")
	AttrClaimed     = attribute.Key("toolexec.claimed")
	AttrState       = attribute.Key("toolexec.record_state")
)

// traceContext is the W3C trace context propagator: calls carry a traceparent.
var traceContext = propagation.TraceContext{}

// newTracer returns the tracer of tp, or nil without one: the dispatcher then
// makes no spans at all, and spends nothing on them.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(TracerName)
}

// noSpan stands for every span when the dispatcher has no tracer.
var noSpan trace.Span = noop.Span{}

// startCall starts the call's span as a child of the call's traceparent, if it
// carries a valid one.
func (d *Dispatcher) startCall(ctx context.Context, c events.Call) (context.Context, trace.Span) {
	if d.tracer == nil {
		return ctx, noSpan
	}
	if c.TraceParent != "" {
		ctx = traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": c.TraceParent})
	}
	return d.tracer.Start(ctx, SpanCall, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		AttrTool.String(c.Tool), AttrTenant.String(c.Tenant), AttrRunID.String(c.RunID), AttrCallID.String(c.CallID)))
}

// logContext returns ctx, which holds the call's span if one was started, or
// else ctx with the span context of the call's traceparent, when it is a
// valid one: the call's log lines then name the caller's trace.
func logContext(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// endCall records the answer on the call's span and ends it.
func endCall(span trace.Span, a events.Answer, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, "no answer")
		return
	}
	attrs := []attribute.KeyValue{AttrKind.String(string(a.Kind))}
	if a.Key != "" {
		attrs = append(attrs, AttrKey.String(a.Key))
	}
	switch a.Kind {
	case events.KindIndeterminate:
		attrs = append(attrs, AttrReason.String(string(a.Reason)), AttrBodyEntered.Bool(a.BodyEntered))
		span.SetStatus(codes.Error, "indeterminate: "+string(a.Reason))
	case events.KindFailed, events.KindRejected:
		attrs = append(attrs, AttrCode.String(string(a.Code)))
		span.SetStatus(codes.Error, string(a.Kind)+": "+string(a.Code))
	}
	span.SetAttributes(attrs...)
}

// span starts a child span of the call for one step.
func (r *run) span(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if r.d.tracer == nil {
		return ctx, noSpan
	}
	return r.d.tracer.Start(ctx, name, trace.WithAttributes(append(attrs, AttrTool.String(r.call.Tool))...))
}

// endStep ends a step's span, marking it failed when err is one.
func endStep(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// traceParent returns the traceparent of the span in ctx, or fallback when ctx
// has no valid span context (no valid traceparent on the call, or no tracing).
func traceParent(ctx context.Context, fallback string) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return fallback
	}
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	if tp := carrier.Get("traceparent"); tp != "" {
		return tp
	}
	return fallback
}
