package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/clock"
	"github.com/tesserix/toolexec/tool"
)

// fakeDelivery records what a Settler does with a delivery.
type fakeDelivery struct {
	mu       sync.Mutex // protects ops and confirms
	ops      []string
	confirms []error // what the next ConfirmAcks return, in turn; nil once used up
}

func (d *fakeDelivery) did(op string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ops = append(d.ops, op)
}

func (d *fakeDelivery) Ack() error { d.did("ack"); return nil }

func (d *fakeDelivery) ConfirmAck(context.Context) error {
	d.did("confirm")
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.confirms) == 0 {
		return nil
	}
	err := d.confirms[0]
	d.confirms = d.confirms[1:]
	return err
}

func (d *fakeDelivery) Terminate(reason string) error { d.did("terminate: " + reason); return nil }

func (d *fakeDelivery) HandBack(delay time.Duration) error {
	d.did(fmt.Sprintf("hand back after %v", delay))
	return nil
}

func (d *fakeDelivery) done() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.ops)
}

var _ dispatch.Delivery = (*fakeDelivery)(nil)

// fakeAnswers is an answer store: Publish fails with publishErr, if set;
// Answered says stored, or fails with lookErr.
type fakeAnswers struct {
	publishErr error
	stored     bool
	lookErr    error

	mu        sync.Mutex // protects published, looks and ctxs
	published []events.Answer
	looks     []string          // tenant/tool/callID of each look-up
	ctxs      []context.Context // of each Publish
}

func (a *fakeAnswers) Publish(ctx context.Context, ans events.Answer) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ctxs = append(a.ctxs, ctx)
	if a.publishErr != nil {
		return a.publishErr
	}
	a.published = append(a.published, ans)
	return nil
}

func (a *fakeAnswers) Answered(_ context.Context, tenant, tool, callID string) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.looks = append(a.looks, tenant+"/"+tool+"/"+callID)
	return a.stored, a.lookErr
}

func (a *fakeAnswers) kinds() []events.Kind {
	a.mu.Lock()
	defer a.mu.Unlock()
	var k []events.Kind
	for _, ans := range a.published {
		k = append(k, ans.Kind)
	}
	return k
}

var _ dispatch.Answers = (*fakeAnswers)(nil)

// fakeRunner answers every call with answer, or fails with err.
type fakeRunner struct {
	answer events.Answer
	err    error
	runs   atomic.Int64
}

func (r *fakeRunner) Run(_ context.Context, c events.Call) (dispatch.Result, error) {
	r.runs.Add(1)
	if r.err != nil {
		return dispatch.Result{}, r.err
	}
	a := r.answer
	a.Tenant, a.RunID, a.CallID, a.Tool = c.Tenant, c.RunID, c.CallID, c.Tool
	return dispatch.Result{Answer: a}, nil
}

var _ dispatch.Runner = (*fakeRunner)(nil)

var errLost = errors.New("no reply")

// TestSettlerRules runs each settlement rule against fakes of a delivery, an
// answer store and a runner: what is run, what is published and how the
// delivery ends.
func TestSettlerRules(t *testing.T) {
	completed := events.Answer{Kind: events.KindCompleted, Outcome: "PNR-1"}
	unentered := events.Answer{Kind: events.KindIndeterminate, Reason: events.ReasonStoreUnavailable}
	permanent := fmt.Errorf("%w: the answer is larger than the server takes", dispatch.ErrPermanent)
	rejection := events.Answer{Kind: events.KindRejected, Tenant: "acme", Tool: "book", CallID: "c1", Code: events.CodeInvalidJSON}
	tests := []struct {
		name      string
		delivery  int            // the call's delivery count
		repeat    bool           // the call is marked as a repeat
		callID    string         // default c1
		made      *events.Answer // settle this answer (Settler.Answer) instead of running a call
		answer    events.Answer  // the runner's answer
		runErr    error          // the runner's error
		stored    bool           // the answer store holds an earlier answer
		lookErr   error          // the answer store's look-ups fail
		pubErr    error          // the answer store's publications fail
		confirms  []error        // what the delivery's ConfirmAcks return
		want      dispatch.Settlement
		wantOps   []string
		wantKinds []events.Kind // published
		wantRuns  int64
		wantLooks int // look-ups of an earlier answer
	}{
		{name: "answered: acknowledged", delivery: 1, answer: completed,
			want: dispatch.Answered, wantOps: []string{"ack"}, wantKinds: []events.Kind{events.KindCompleted}, wantRuns: 1},
		{name: "deduplicated: acknowledged", delivery: 1, answer: events.Answer{Kind: events.KindDeduplicated, Outcome: "PNR-1"},
			want: dispatch.Answered, wantOps: []string{"ack"}, wantKinds: []events.Kind{events.KindDeduplicated}, wantRuns: 1},
		{name: "failed: acknowledged", delivery: 1, answer: events.Answer{Kind: events.KindFailed, Code: events.CodeToolError},
			want: dispatch.Answered, wantOps: []string{"ack"}, wantKinds: []events.Kind{events.KindFailed}, wantRuns: 1},
		{name: "delivery count unknown: the first, not looked up", delivery: 0, answer: completed,
			stored: true,
			want:   dispatch.Answered, wantOps: []string{"ack"}, wantKinds: []events.Kind{events.KindCompleted}, wantRuns: 1},
		{name: "redelivery already answered: acknowledged unrun", delivery: 2, answer: completed,
			stored: true,
			want:   dispatch.AnsweredBefore, wantOps: []string{"ack"}, wantLooks: 1},
		{name: "repeat already answered: acknowledged unrun", delivery: 1, repeat: true, answer: completed,
			stored: true,
			want:   dispatch.AnsweredBefore, wantOps: []string{"ack"}, wantLooks: 1},
		{name: "redelivery not answered yet: run", delivery: 3, answer: completed,
			want: dispatch.Answered, wantOps: []string{"ack"}, wantKinds: []events.Kind{events.KindCompleted}, wantRuns: 1, wantLooks: 1},
		{name: "redelivery whose look-up fails: run", delivery: 2, answer: completed,
			stored: true, lookErr: errLost,
			want: dispatch.Answered, wantOps: []string{"ack"}, wantKinds: []events.Kind{events.KindCompleted}, wantRuns: 1, wantLooks: 1},
		{name: "redelivery with a malformed call id: not looked up, run", delivery: 2, callID: "c.1",
			answer: events.Answer{Kind: events.KindRejected, Code: events.CodeBadToken},
			stored: true,
			want:   dispatch.Answered, wantOps: []string{"terminate: rejected: bad_token"}, wantKinds: []events.Kind{events.KindRejected},
			wantRuns: 1},
		{name: "rejection: answered, then terminated", delivery: 1,
			answer: events.Answer{Kind: events.KindRejected, Code: events.CodeSchemaViolation},
			want:   dispatch.Answered, wantOps: []string{"terminate: rejected: schema_violation"},
			wantKinds: []events.Kind{events.KindRejected}, wantRuns: 1},
		{name: "the adapter's rejection: answered, then terminated", made: &rejection,
			want: dispatch.Answered, wantOps: []string{"terminate: rejected: invalid_json"}, wantKinds: []events.Kind{events.KindRejected}},
		{name: "the adapter's rejection not stored in time: handed back", made: &rejection,
			pubErr: context.Canceled,
			want:   dispatch.HandedBack, wantOps: []string{"hand back after 0s"}},
		{name: "indeterminate, body not entered: confirmed acknowledgement", delivery: 1, answer: unentered,
			want: dispatch.Answered, wantOps: []string{"confirm"}, wantKinds: []events.Kind{events.KindIndeterminate}, wantRuns: 1},
		{name: "indeterminate, body not entered, confirmation lost twice: tried again", delivery: 1, answer: unentered,
			confirms: []error{errLost, errLost},
			want:     dispatch.Answered, wantOps: []string{"confirm", "confirm", "confirm"},
			wantKinds: []events.Kind{events.KindIndeterminate}, wantRuns: 1},
		{name: "indeterminate, body not entered, confirmation never comes: three tries", delivery: 1, answer: unentered,
			confirms: []error{errLost, errLost, errLost, errLost},
			want:     dispatch.Answered, wantOps: []string{"confirm", "confirm", "confirm"},
			wantKinds: []events.Kind{events.KindIndeterminate}, wantRuns: 1},
		{name: "indeterminate, body not entered, confirmation refused for good: one try", delivery: 1, answer: unentered,
			confirms: []error{permanent},
			want:     dispatch.Answered, wantOps: []string{"confirm"}, wantKinds: []events.Kind{events.KindIndeterminate}, wantRuns: 1},
		{name: "indeterminate, body entered: acknowledged", delivery: 1,
			answer: events.Answer{Kind: events.KindIndeterminate, Reason: events.ReasonBodyFailed, BodyEntered: true},
			want:   dispatch.Answered, wantOps: []string{"ack"}, wantKinds: []events.Kind{events.KindIndeterminate}, wantRuns: 1},
		{name: "answer that can never be published: terminated", delivery: 1, answer: completed,
			pubErr: permanent,
			want:   dispatch.Unpublishable, wantOps: []string{"terminate: answer cannot be published"}, wantRuns: 1},
		{name: "rejection that can never be published: terminated", delivery: 1,
			answer: events.Answer{Kind: events.KindRejected, Code: events.CodeSchemaViolation},
			pubErr: permanent,
			want:   dispatch.Unpublishable, wantOps: []string{"terminate: answer cannot be published"}, wantRuns: 1},
		{name: "answer not stored before the context ended: handed back", delivery: 1, answer: unentered,
			pubErr: fmt.Errorf("publishing: %w", context.Canceled),
			want:   dispatch.HandedBack, wantOps: []string{"hand back after 0s"}, wantRuns: 1},
		{name: "run ended without an answer (ErrHandBack): handed back", delivery: 1,
			runErr: fmt.Errorf("%w: %w", dispatch.ErrHandBack, context.Canceled),
			want:   dispatch.HandedBack, wantOps: []string{"hand back after 0s"}, wantRuns: 1},
		{name: "run failed otherwise: handed back after a pause", delivery: 1, runErr: errors.New("broken runner"),
			want: dispatch.HandedBack, wantOps: []string{"hand back after 1s"}, wantRuns: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &fakeRunner{answer: tt.answer, err: tt.runErr}
			answers := &fakeAnswers{stored: tt.stored, lookErr: tt.lookErr, publishErr: tt.pubErr}
			del := &fakeDelivery{confirms: tt.confirms}
			s := dispatch.NewSettler(r, answers, quiet)
			var got dispatch.Settlement
			if tt.made != nil {
				got = s.Answer(context.Background(), *tt.made, del)
			} else {
				c := call("book", "c1", `{"flight":"BA117"}`)
				if tt.callID != "" {
					c.CallID = tt.callID
				}
				c.Delivery, c.Repeat = tt.delivery, tt.repeat
				got = s.Settle(context.Background(), c, del)
			}
			if got != tt.want {
				t.Errorf("settlement %d, want %d", got, tt.want)
			}
			if ops := del.done(); !slices.Equal(ops, tt.wantOps) {
				t.Errorf("delivery settled by %q, want %q", ops, tt.wantOps)
			}
			if k := answers.kinds(); !slices.Equal(k, tt.wantKinds) {
				t.Errorf("published %v, want %v", k, tt.wantKinds)
			}
			if n := r.runs.Load(); n != tt.wantRuns {
				t.Errorf("run %d times, want %d", n, tt.wantRuns)
			}
			if n := len(answers.looks); n != tt.wantLooks {
				t.Errorf("looked for an earlier answer %d times (%q), want %d", n, answers.looks, tt.wantLooks)
			}
			if tt.wantLooks > 0 && answers.looks[0] != "acme/book/c1" {
				t.Errorf("looked for %q, want acme/book/c1", answers.looks[0])
			}
		})
	}
}

// TestSettlerOverTheDispatcher: the rules over a real dispatcher whose store
// is down. The first delivery of an Effectful call is answered
// store_unavailable, body not entered, and its acknowledgement confirmed; a
// redelivery, which an earlier delivery may have run, is answered body
// entered and acknowledged plainly; a redelivery once the answer is stored is
// acknowledged without running.
func TestSettlerOverTheDispatcher(t *testing.T) {
	b := &body{}
	e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
	d := e.dispatcherOver(t, "w1", downStore{e.store}, clock.Real{})
	answers := &fakeAnswers{}
	s := dispatch.NewSettler(d, answers, quiet)
	ctx := context.Background()
	c := call("book", "c1", `{"flight":"BA117"}`)
	for _, step := range []struct {
		delivery int
		stored   bool
		want     []string
	}{
		{1, false, []string{"confirm"}},
		{2, false, []string{"ack"}},
		{3, true, []string{"ack"}},
	} {
		answers.stored = step.stored
		del := &fakeDelivery{}
		c.Delivery = step.delivery
		s.Settle(ctx, c, del)
		if ops := del.done(); !slices.Equal(ops, step.want) {
			t.Errorf("delivery %d settled by %q, want %q", step.delivery, ops, step.want)
		}
	}
	if len(answers.published) != 2 {
		t.Fatalf("published %+v, want two answers", answers.published)
	}
	for i, wantEntered := range []bool{false, true} {
		a := answers.published[i]
		if a.Kind != events.KindIndeterminate || a.Reason != events.ReasonStoreUnavailable || a.BodyEntered != wantEntered {
			t.Errorf("answer %d = %+v; want indeterminate store_unavailable, body entered %v", i+1, a, wantEntered)
		}
	}
	if n := b.entered.Load(); n != 0 {
		t.Errorf("body entered %d times with the store down", n)
	}
}

// spanLog keeps the span context of each log record, by message.
type spanLog struct {
	mu    sync.Mutex // protects spans
	spans map[string]trace.SpanContext
}

func (l *spanLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *spanLog) Handle(ctx context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spans == nil {
		l.spans = map[string]trace.SpanContext{}
	}
	l.spans[r.Message] = trace.SpanContextFromContext(ctx)
	return nil
}

func (l *spanLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *spanLog) WithGroup(string) slog.Handler      { return l }

// TestSettlerLogsNameTheCallsSpan: the settler's log lines about a call, and
// the context it publishes the answer with (which the adapter logs with), name
// the call's span; without tracing, the caller's span of its traceparent.
func TestSettlerLogsNameTheCallsSpan(t *testing.T) {
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, traced := range []bool{true, false} {
		t.Run(fmt.Sprintf("traced %v", traced), func(t *testing.T) {
			b := &body{}
			e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
			sr := tracetest.NewSpanRecorder()
			cfg := dispatch.Config{Tools: e.reg, Store: e.store, Holder: "w1", Lease: lease, Logger: quiet}
			if traced {
				cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
			}
			d, err := dispatch.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			answers := &fakeAnswers{}
			log := &spanLog{}
			s := dispatch.NewSettler(d, answers, slog.New(log))
			c := call("book", "c1", `{"flight":"BA117"}`)
			c.TraceParent = traceparent
			s.Settle(context.Background(), c, &fakeDelivery{})

			want := "00f067aa0ba902b7" // the caller's span
			if traced {
				var calls []sdktrace.ReadOnlySpan
				for _, sp := range sr.Ended() {
					if sp.Name() == dispatch.SpanCall {
						calls = append(calls, sp)
					}
				}
				if len(calls) != 1 {
					t.Fatalf("%d call spans, want 1", len(calls))
				}
				want = calls[0].SpanContext().SpanID().String()
			}
			sc := log.spans["call answered"]
			if got := sc.SpanID().String(); got != want || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
				t.Errorf("the answer's log line names span %s of trace %s; want span %s of the caller's trace", got, sc.TraceID(), want)
			}
			if len(answers.ctxs) != 1 {
				t.Fatalf("published %d times, want once", len(answers.ctxs))
			}
			if got := trace.SpanContextFromContext(answers.ctxs[0]).SpanID().String(); got != want {
				t.Errorf("the answer was published with span %s in its context, want %s", got, want)
			}
		})
	}
}
