package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/clock"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/tool"
)

// recordingObserver keeps every observation as a line.
type recordingObserver struct {
	mu    sync.Mutex // protects lines
	lines []string
}

func (o *recordingObserver) add(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lines = append(o.lines, fmt.Sprintf(format, args...))
}

func (o *recordingObserver) CallStarted(tool string) { o.add("start %s", tool) }
func (o *recordingObserver) CallEnded(tool string, k events.Kind, r events.Reason, d time.Duration) {
	if d < 0 {
		o.add("negative duration")
	}
	o.add("end %s %s %s", tool, k, r)
}
func (o *recordingObserver) BodyEntered(tool string) { o.add("body %s", tool) }
func (o *recordingObserver) RanUnguarded(tool string, r events.Reason) {
	o.add("unguarded %s %s", tool, r)
}
func (o *recordingObserver) WaitedForHolder(tool string, d time.Duration) {
	if d < 0 {
		o.add("negative wait")
	}
	o.add("waited %s", tool)
}

func (o *recordingObserver) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.lines
	o.lines = nil
	return l
}

var _ dispatch.Observer = (*recordingObserver)(nil)

// observed returns a dispatcher over e's store that reports to o and, if sr is
// set, traces into sr.
func (e *env) observed(t *testing.T, s kvstore.Store, o dispatch.Observer, sr *tracetest.SpanRecorder) *dispatch.Dispatcher {
	t.Helper()
	cfg := dispatch.Config{
		Tools: e.reg, Store: s, Holder: "w1", Lease: lease, Clock: clock.Real{},
		Jitter: func() float64 { return 0 }, Logger: quiet, Observer: o,
	}
	if sr != nil {
		cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	}
	d, err := dispatch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestObserver: the observer hears of every call's start and end with its kind
// and reason, of each body entry, of unguarded runs and of waits for a holder —
// and only ever of registered tool names.
func TestObserver(t *testing.T) {
	ctx := context.Background()
	failing := &body{fn: func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return "", errors.New("gateway reset")
	}}
	e := newEnv(t,
		newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, &body{}),
		newTool(t, "cancel", policy(tool.Effectful, "flight"), tool.Retry{}, failing),
		newTool(t, "sync", policy(tool.Idempotent, "flight"), tool.Retry{}, &body{}),
	)
	o := &recordingObserver{}
	d := e.observed(t, e.store, o, nil)

	tests := []struct {
		name string
		call events.Call
		want []string
	}{
		{"completed", call("book", "c1", `{"flight":"BA117"}`), []string{"start book", "body book", "end book completed "}},
		{"deduplicated", call("book", "c2", `{"flight":"BA117"}`), []string{"start book", "end book deduplicated "}},
		{"indeterminate", call("cancel", "c3", `{"flight":"BA117"}`), []string{"start cancel", "body cancel", "end cancel indeterminate body_failed"}},
		{"indeterminate again", call("cancel", "c4", `{"flight":"BA117"}`), []string{"start cancel", "end cancel indeterminate body_failed"}},
		{"unguarded", call("sync", "c5", `{"seats":2}`), []string{"start sync", "unguarded sync key_underivable", "body sync", "end sync completed "}},
		{"unknown tool", call("launch_rocket", "c6", `{}`), []string{"start ", "end  rejected "}},
		{"bad token", call("book", "c 7", `{"flight":"BA117"}`), []string{"start book", "end book rejected "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustDispatch(t, d, tt.call)
			if got := o.take(); !slices.Equal(got, tt.want) {
				t.Fatalf("observations = %q, want %q", got, tt.want)
			}
		})
	}

	t.Run("store unavailable", func(t *testing.T) {
		od := e.observed(t, downStore{e.store}, o, nil)
		mustDispatch(t, od, call("sync", "c8", `{"flight":"BA117"}`))
		want := []string{"start sync", "unguarded sync store_unavailable", "body sync", "end sync completed "}
		if got := o.take(); !slices.Equal(got, want) {
			t.Fatalf("observations = %q, want %q", got, want)
		}
	})

	t.Run("waits for a holder", func(t *testing.T) {
		held := holdKey(t, e.store, "book", `{"flight":"LH400"}`, []string{"flight"})
		got := dispatchAsync(ctx, d, call("book", "c9", `{"flight":"LH400"}`))
		e.clock.BlockUntil(1, nil)
		if err := e.store.Record(ctx, held.Lease, "PNR-9"); err != nil {
			t.Fatal(err)
		}
		if a := <-got; a.Kind != events.KindDeduplicated {
			t.Fatalf("answer %+v", a)
		}
		want := []string{"start book", "waited book", "end book deduplicated "}
		if got := o.take(); !slices.Equal(got, want) {
			t.Fatalf("observations = %q, want %q", got, want)
		}
	})

	t.Run("no answer", func(t *testing.T) {
		holdKey(t, e.store, "book", `{"flight":"AF1"}`, []string{"flight"})
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := d.Dispatch(cctx, call("book", "c10", `{"flight":"AF1"}`))
			done <- err
		}()
		e.clock.BlockUntil(1, nil)
		cancel()
		if err := <-done; !errors.Is(err, dispatch.ErrHandBack) {
			t.Fatalf("err = %v", err)
		}
		want := []string{"start book", "waited book", "end book  "}
		if got := o.take(); !slices.Equal(got, want) {
			t.Fatalf("observations = %q, want %q", got, want)
		}
	})
}

// TestObserverOptional: a dispatcher without an observer or a tracer passes
// the call's own traceparent to the tool, as it did before either existed.
func TestObserverOptional(t *testing.T) {
	b := &body{}
	e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
	d := e.observed(t, e.store, nil, nil)
	for _, tp := range []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "not a traceparent", ""} {
		c := call("book", "c"+fmt.Sprint(len(b.contexts())), fmt.Sprintf(`{"flight":"F%d"}`, len(b.contexts())))
		c.TraceParent = tp
		mustDispatch(t, d, c)
		ctxs := b.contexts()
		if got := ctxs[len(ctxs)-1].TraceParent; got != tp {
			t.Errorf("tool saw traceparent %q, want the call's %q", got, tp)
		}
	}
}

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
	callerTP    = "00-" + callerTrace + "-" + callerSpan + "-01"
	argSentinel = "ARG-SENTINEL-7731"
)

// spansByName indexes ended spans by name.
func spansByName(sr *tracetest.SpanRecorder) map[string][]sdktrace.ReadOnlySpan {
	m := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		m[s.Name()] = append(m[s.Name()], s)
	}
	return m
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

// noArguments fails if any span's name, attribute or status holds the sentinel.
func noArguments(t *testing.T, sr *tracetest.SpanRecorder) {
	t.Helper()
	for _, s := range sr.Ended() {
		text := s.Name() + " " + s.Status().Description
		for _, a := range s.Attributes() {
			text += " " + string(a.Key) + "=" + a.Value.Emit()
		}
		for _, ev := range s.Events() {
			text += " " + ev.Name
			for _, a := range ev.Attributes {
				text += " " + a.Value.Emit()
			}
		}
		if strings.Contains(text, argSentinel) {
			t.Errorf("span %s carries the call's arguments: %s", s.Name(), text)
		}
	}
}

// TestTraceCompleted: a call is one span continuing the caller's trace, with
// children for the claim, the body and the record; the tool receives the body
// span's traceparent, so its downstream sees the body as its parent.
func TestTraceCompleted(t *testing.T) {
	b := &body{}
	e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
	sr := tracetest.NewSpanRecorder()
	d := e.observed(t, e.store, nil, sr)
	c := call("book", "c1", `{"flight":"BA117","request_id":"`+argSentinel+`"}`)
	c.TraceParent = callerTP
	a := mustDispatch(t, d, c)

	spans := spansByName(sr)
	if len(spans[dispatch.SpanCall]) != 1 {
		t.Fatalf("spans: %v; want one %s", names(sr), dispatch.SpanCall)
	}
	root := spans[dispatch.SpanCall][0]
	if got := root.SpanContext().TraceID().String(); got != callerTrace {
		t.Errorf("call span trace id %s, want the caller's %s", got, callerTrace)
	}
	if got := root.Parent().SpanID().String(); got != callerSpan || !root.Parent().IsRemote() {
		t.Errorf("call span parent %s (remote %t), want the caller's span %s", got, root.Parent().IsRemote(), callerSpan)
	}
	if root.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("call span kind %v, want consumer", root.SpanKind())
	}
	for key, want := range map[string]string{
		string(dispatch.AttrTool): "book", string(dispatch.AttrTenant): "acme", string(dispatch.AttrRunID): "run_1",
		string(dispatch.AttrCallID): "c1", string(dispatch.AttrKind): "completed", string(dispatch.AttrKey): a.Key,
	} {
		if got := attr(root, key); got != want {
			t.Errorf("call span %s = %q, want %q", key, got, want)
		}
	}
	for _, name := range []string{dispatch.SpanClaim, dispatch.SpanBody, dispatch.SpanRecord} {
		if len(spans[name]) != 1 {
			t.Errorf("want one %s span, got %d (spans %v)", name, len(spans[name]), names(sr))
			continue
		}
		s := spans[name][0]
		if s.Parent().SpanID() != root.SpanContext().SpanID() || s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("%s is not a child of the call span", name)
		}
		if attr(s, string(dispatch.AttrTool)) != "book" {
			t.Errorf("%s has no tool attribute", name)
		}
	}
	if got := attr(spans[dispatch.SpanClaim][0], string(dispatch.AttrClaimed)); got != "true" {
		t.Errorf("claim span claimed = %q", got)
	}
	bodySpan := spans[dispatch.SpanBody][0].SpanContext()
	want := "00-" + callerTrace + "-" + bodySpan.SpanID().String() + "-01"
	if got := b.contexts()[0].TraceParent; got != want {
		t.Errorf("tool received traceparent %q, want the body span's %q", got, want)
	}
	if a.TraceParent != callerTP {
		t.Errorf("answer traceparent %q, want the caller's %q", a.TraceParent, callerTP)
	}
	noArguments(t, sr)

	// Without a traceparent the call starts a trace of its own.
	sr.Reset()
	c = call("book", "c2", `{"flight":"LH400"}`)
	mustDispatch(t, d, c)
	spans = spansByName(sr)
	root = spans[dispatch.SpanCall][0]
	if root.Parent().IsValid() {
		t.Errorf("call without traceparent has parent %v", root.Parent())
	}
	if got := b.contexts()[1].TraceParent; !strings.Contains(got, root.SpanContext().TraceID().String()) {
		t.Errorf("tool received traceparent %q, outside the call's trace %s", got, root.SpanContext().TraceID())
	}
}

func names(sr *tracetest.SpanRecorder) []string {
	var n []string
	for _, s := range sr.Ended() {
		n = append(n, s.Name())
	}
	return n
}

// TestTraceOutcomes: the call span says how the call ended — deduplicated,
// indeterminate with its reason, rejected — and the steps each took are its
// children (a wait for a holder, a mark indeterminate); no span carries
// arguments.
func TestTraceOutcomes(t *testing.T) {
	ctx := context.Background()
	failing := &body{fn: func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return "", errors.New("reset after sending " + argSentinel)
	}}
	e := newEnv(t,
		newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, &body{}),
		newTool(t, "cancel", policy(tool.Effectful, "flight"), tool.Retry{}, failing),
	)
	sr := tracetest.NewSpanRecorder()
	d := e.observed(t, e.store, nil, sr)
	args := `{"flight":"BA117","request_id":"` + argSentinel + `"}`

	check := func(t *testing.T, kind, reason string, steps ...string) {
		t.Helper()
		spans := spansByName(sr)
		if len(spans[dispatch.SpanCall]) != 1 {
			t.Fatalf("spans %v; want one call span", names(sr))
		}
		root := spans[dispatch.SpanCall][0]
		if got := attr(root, string(dispatch.AttrKind)); got != kind {
			t.Errorf("kind = %q, want %q", got, kind)
		}
		if got := attr(root, string(dispatch.AttrReason)); got != reason {
			t.Errorf("reason = %q, want %q", got, reason)
		}
		var got []string
		for _, s := range sr.Ended() {
			if s.Name() != dispatch.SpanCall {
				if s.Parent().SpanID() != root.SpanContext().SpanID() {
					t.Errorf("%s is not a child of the call", s.Name())
				}
				got = append(got, s.Name())
			}
		}
		if !slices.Equal(got, steps) {
			t.Errorf("steps %v, want %v", got, steps)
		}
		noArguments(t, sr)
		sr.Reset()
	}

	mustDispatch(t, d, call("book", "c1", args))
	sr.Reset()
	t.Run("deduplicated", func(t *testing.T) {
		mustDispatch(t, d, call("book", "c2", args))
		check(t, "deduplicated", "", dispatch.SpanClaim)
	})
	t.Run("indeterminate", func(t *testing.T) {
		mustDispatch(t, d, call("cancel", "c3", args))
		check(t, "indeterminate", "body_failed", dispatch.SpanClaim, dispatch.SpanBody, dispatch.SpanMarkIndeterminate)
	})
	t.Run("rejected", func(t *testing.T) {
		mustDispatch(t, d, call("book", "c4", `{"flight":7,"request_id":"`+argSentinel+`"}`))
		check(t, "rejected", "")
	})
	t.Run("waits for the holder", func(t *testing.T) {
		held := holdKey(t, e.store, "book", `{"flight":"LH400"}`, []string{"flight"})
		got := dispatchAsync(ctx, d, call("book", "c5", `{"flight":"LH400"}`))
		e.clock.BlockUntil(1, nil)
		if err := e.store.Record(ctx, held.Lease, "PNR-5"); err != nil {
			t.Fatal(err)
		}
		<-got
		check(t, "deduplicated", "", dispatch.SpanClaim, dispatch.SpanWait)
	})
	t.Run("holder lost", func(t *testing.T) {
		holdKey(t, e.store, "book", `{"flight":"AF1"}`, []string{"flight"})
		got := dispatchAsync(ctx, d, call("book", "c6", `{"flight":"AF1"}`))
		e.clock.BlockUntil(1, nil)
		e.clock.Advance(lease + time.Second)
		<-got
		check(t, "indeterminate", "holder_lost", dispatch.SpanClaim, dispatch.SpanWait, dispatch.SpanTakeOver, dispatch.SpanMarkIndeterminate)
	})
}
