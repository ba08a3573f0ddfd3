package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/clienttest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/tool"
)

// TestCallModes runs calls in structured and binary mode against workers that
// answer in either mode; the trace context reaches the tool and the answer.
func TestCallModes(t *testing.T) {
	const traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, binaryAnswers := range []bool{false, true} {
		t.Run(fmt.Sprintf("binary answers %t", binaryAnswers), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			var (
				mu     sync.Mutex // protects traces
				traces []string
			)
			reg := registry(t, bookTool(t, "book", tool.Idempotent, func(_ context.Context, tc tool.Context, args json.RawMessage) (string, error) {
				mu.Lock()
				traces = append(traces, tc.TraceParent)
				mu.Unlock()
				return "booked " + string(args), nil
			}))
			h.startWorker(t, reg, bus.WorkerConfig{BinaryAnswers: binaryAnswers}, 0)
			for i, binaryCalls := range []bool{false, true} {
				opts := []toolexec.ClientOption{toolexec.WithSource("/agents/test")}
				if binaryCalls {
					opts = append(opts, toolexec.WithBinaryMode())
				}
				c := clienttest.New(t, h.nc, opts...)
				call := call("book", "run-1", fmt.Sprintf("call-%d", i), fmt.Sprintf(`{"flight":"LH%d"}`, i))
				call.TraceParent = traceParent
				a, err := c.Call(ctxT(t), call)
				if err != nil {
					t.Fatalf("binary calls %t: %v", binaryCalls, err)
				}
				if a.Kind != events.KindCompleted || a.Outcome != "booked "+string(call.Arguments) {
					t.Errorf("binary calls %t: answer %s %q", binaryCalls, a.Kind, a.Outcome)
				}
				if a.TraceParent != traceParent {
					t.Errorf("answer traceparent %q", a.TraceParent)
				}
				if len(a.Key) != 64 {
					t.Errorf("answer key %q", a.Key)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, tp := range traces {
				if tp != traceParent {
					t.Errorf("tool saw traceparent %q, want %q", tp, traceParent)
				}
			}
			if len(traces) != 2 {
				t.Errorf("body entered %d times, want 2", len(traces))
			}
		})
	}
}

// TestAttachLate attaches to a call's answer after it was stored, and before it
// exists.
func TestAttachLate(t *testing.T) {
	h := newHarness(t)
	reg := registry(t, bookTool(t, "book", tool.Effectful, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return "booked", nil
	}))
	c := call("book", "run-1", "late-1", `{"flight":"LH1"}`)
	if _, err := h.client.Publish(ctxT(t), c); err != nil {
		t.Fatal(err)
	}

	// Before any worker runs: Attach waits.
	early := make(chan events.Answer, 1)
	go func() {
		a, err := h.client.Attach(ctxT(t), c.Tenant, c.Tool, c.RunID, c.CallID)
		if err != nil {
			t.Errorf("early Attach: %v", err)
		}
		early <- a
	}()
	time.Sleep(50 * time.Millisecond)
	wk := h.startWorker(t, reg, bus.WorkerConfig{}, 0)
	a := <-early
	if a.Kind != events.KindCompleted || a.CallID != c.CallID || a.Outcome != "booked" {
		t.Fatalf("early Attach answer %+v", a)
	}
	wait.Eventually(t, 5*time.Second, "the answer to be counted", func() bool { return wk.w.Stats().Answered.Load() == 1 })

	// Long after: Attach reads the stored answer.
	late, err := h.client.Attach(ctxT(t), c.Tenant, c.Tool, c.RunID, c.CallID)
	if err != nil {
		t.Fatal(err)
	}
	if late.Kind != a.Kind || late.Outcome != a.Outcome || late.Key != a.Key {
		t.Errorf("late Attach %+v, want %+v", late, a)
	}

	// Attach to a call nobody made waits until its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := h.client.Attach(ctx, "acme", "book", "run-1", "never"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Attach to an unknown call: %v, want DeadlineExceeded", err)
	}
	if _, err := h.client.Attach(ctxT(t), "acme", "book", "run 1", "x"); !errors.Is(err, events.ErrInvalidToken) {
		t.Errorf("Attach with a bad run id: %v, want ErrInvalidToken", err)
	}
}

// TestPublishTwice publishes one call id twice: JetStream stores it once, it is
// answered once, and a Call with the same id afterwards finds that answer.
func TestPublishTwice(t *testing.T) {
	h := newHarness(t)
	var entered atomic.Int64
	reg := registry(t, bookTool(t, "book", tool.Effectful, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		entered.Add(1)
		return "booked", nil
	}))
	c := call("book", "run-1", "twice-1", `{"flight":"LH1"}`)
	if _, err := h.client.Publish(ctxT(t), c); err != nil {
		t.Fatal(err)
	}
	// While the first waits in the stream, the second is refused: its subject
	// holds a call, whose id the client did not choose.
	if _, err := h.client.Publish(ctxT(t), c); !errors.Is(err, events.ErrCallIDTaken) {
		t.Fatalf("second Publish: %v, want ErrCallIDTaken", err)
	}
	if _, err := h.client.Call(ctxT(t), c); !errors.Is(err, events.ErrCallIDTaken) {
		t.Fatalf("Call of a pending call without WithWaitForPending: %v, want ErrCallIDTaken", err)
	}
	if n := streamMsgs(t, h.js, wire.CallStream); n != 1 {
		t.Fatalf("TOOLEXEC_CALLS holds %d messages, want 1", n)
	}
	wk := h.startWorker(t, reg, bus.WorkerConfig{}, 0)
	if _, err := h.client.Attach(ctxT(t), c.Tenant, c.Tool, c.RunID, c.CallID); err != nil {
		t.Fatal(err)
	}
	// A third time, through Call, marked as a repeat, after the answer is
	// stored: stored again once the first has left the stream, it is
	// acknowledged unrun, and Call finds the stored answer.
	again := c
	again.Repeat = true
	a, err := h.client.Call(ctxT(t), again)
	if err != nil {
		t.Fatal(err)
	}
	if a.Kind != events.KindCompleted || a.Outcome != "booked" {
		t.Errorf("answer %+v", a)
	}
	consumerSettled(t, h.js)
	if n := entered.Load(); n != 1 {
		t.Errorf("body entered %d times, want 1", n)
	}
	if n := wk.w.Stats().Received.Load() - wk.w.Stats().AlreadyAnswered.Load(); n != 1 {
		t.Errorf("worker ran %d messages, want 1", n)
	}
	if got := eventSubjects(t, h.js, wire.AnswerFilter(c.Tenant, c.Tool, "*", c.CallID)); len(got) != 1 {
		t.Errorf("answers stored: %v, want one", got)
	}
}

// TestRepeatWithAnotherRunGetsTheFirstAnswer: a tenant, tool and call id name
// one call; published again, marked as a repeat, under another run, it is
// answered with the first run's answer, and the body runs once.
func TestRepeatWithAnotherRunGetsTheFirstAnswer(t *testing.T) {
	h := newHarness(t)
	var entered atomic.Int64
	h.startWorker(t, registry(t, bookTool(t, "book", tool.ReadOnly, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return fmt.Sprint("look-", entered.Add(1)), nil
	})), bus.WorkerConfig{}, 0)
	first, err := h.client.Call(ctxT(t), call("book", "run-1", "runs-1", `{"flight":"LH1"}`))
	if err != nil {
		t.Fatal(err)
	}
	again := call("book", "run-2", "runs-1", `{"flight":"LH1"}`)
	again.Repeat = true
	second, err := h.client.Call(ctxT(t), again)
	if err != nil {
		t.Fatal(err)
	}
	if second.Outcome != first.Outcome || second.RunID != "run-1" {
		t.Errorf("repeat answered %+v, want the first answer %+v", second, first)
	}
	consumerSettled(t, h.js)
	if n := entered.Load(); n != 1 {
		t.Errorf("read-only body entered %d times, want 1", n)
	}
}

// TestCallIDOfAnotherTool: one call id used for two tools names two calls,
// each answered under its own tool; neither answer drops the other.
func TestCallIDOfAnotherTool(t *testing.T) {
	h := newHarness(t)
	mk := func(name string) *tool.Tool {
		return bookTool(t, name, tool.Effectful, func(context.Context, tool.Context, json.RawMessage) (string, error) {
			return name + "-done", nil
		})
	}
	h.startWorker(t, registry(t, mk("book"), mk("cancel")), bus.WorkerConfig{}, 0)
	for _, name := range []string{"book", "cancel"} {
		a, err := h.client.Call(ctxT(t), call(name, "run-1", "shared-1", `{"flight":"LH1"}`))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if a.Kind != events.KindCompleted || a.Outcome != name+"-done" {
			t.Errorf("%s answered %+v", name, a)
		}
	}
}

// TestCallRefusesMalformedCallsLocally: a call that an executor would reject is
// refused before anything is sent.
func TestCallRefusesMalformedCallsLocally(t *testing.T) {
	h := newHarness(t)
	for _, c := range []events.Call{
		call("book", "run 1", "c1", `{}`),
		call("book", "r1", "c1", `[1]`),
		call("bo.ok", "r1", "c1", `{}`),
	} {
		_, err := h.client.Call(ctxT(t), c)
		var re *events.RejectedError
		if !errors.As(err, &re) {
			t.Errorf("Call(%+v) error = %v, want a *events.RejectedError", c, err)
		}
	}
	if n := streamMsgs(t, h.js, wire.CallStream); n != 0 {
		t.Errorf("TOOLEXEC_CALLS holds %d messages", n)
	}
}

// TestWatch is an auditor: it watches deduplicated and indeterminate answers
// across tenants and sees exactly those.
func TestWatch(t *testing.T) {
	h := newHarness(t)
	reg := registry(t,
		bookTool(t, "book", tool.Effectful, func(context.Context, tool.Context, json.RawMessage) (string, error) { return "ok", nil }),
		bookTool(t, "charge", tool.Effectful, func(context.Context, tool.Context, json.RawMessage) (string, error) { return "", errBoom }),
	)
	h.startWorker(t, reg, bus.WorkerConfig{}, 0)
	ctx, cancel := context.WithCancel(ctxT(t))
	dedup, err := h.client.Watch(ctx, wire.KindSubjects(events.KindDeduplicated))
	if err != nil {
		t.Fatal(err)
	}
	indet, err := h.client.Watch(ctx, wire.KindSubjects(events.KindIndeterminate))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []events.Call{
		call("book", "r1", "w1", `{"flight":"A"}`),
		call("book", "r1", "w2", `{"flight":"A"}`), // deduplicated
		call("charge", "r1", "w3", `{"flight":"A"}`),
	} {
		if _, err := h.client.Call(ctxT(t), c); err != nil {
			t.Fatal(err)
		}
	}
	next := func(ch <-chan events.Answer) events.Answer {
		t.Helper()
		select {
		case a := <-ch:
			return a
		case <-time.After(10 * time.Second):
			t.Fatal("Watch delivered nothing")
			return events.Answer{}
		}
	}
	if a := next(dedup); a.Kind != events.KindDeduplicated || a.CallID != "w2" {
		t.Errorf("deduplicated watch got %s %s", a.Kind, a.CallID)
	}
	if a := next(indet); a.Kind != events.KindIndeterminate || a.CallID != "w3" || a.Reason != events.ReasonBodyFailed {
		t.Errorf("indeterminate watch got %s %s %s", a.Kind, a.CallID, a.Reason)
	}

	// From the start, every answer is there in order.
	all, err := h.client.Watch(ctx, "", toolexec.WatchFromStart())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"w1", "w2", "w3"} {
		if a := next(all); a.CallID != want {
			t.Errorf("replayed %s, want %s", a.CallID, want)
		}
	}
	cancel()
	for range dedup {
	}
	if _, err := h.client.Watch(ctxT(t), "toolexec.call.>"); !errors.Is(err, toolexec.ErrBadFilter) {
		t.Errorf("Watch on call subjects: %v, want ErrBadFilter", err)
	}
}

// TestAttachLeavesNothingBehind: attaches read the stored answer without
// making consumers. 1,200 attaches in a row (the server refused the 1,001st
// when each made a consumer that lived 30 s) all find the answer, and the
// events stream has as many consumers afterwards as before.
func TestAttachLeavesNothingBehind(t *testing.T) {
	h := newHarness(t)
	reg := registry(t, bookTool(t, "book", tool.Effectful, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return "booked", nil
	}))
	h.startWorker(t, reg, bus.WorkerConfig{}, 0)
	c := call("book", "run-1", "many-1", `{"flight":"LH1"}`)
	want, err := h.client.Call(ctxT(t), c)
	if err != nil {
		t.Fatal(err)
	}
	consumers := func() int {
		st, err := h.js.Stream(ctxT(t), wire.EventStream)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().State.Consumers
	}
	before := consumers()
	for i := range 1200 {
		a, err := h.client.Attach(ctxT(t), c.Tenant, c.Tool, c.RunID, c.CallID)
		if err != nil {
			t.Fatalf("attach %d: %v", i+1, err)
		}
		if a.Kind != want.Kind || a.Outcome != want.Outcome || a.CallID != c.CallID {
			t.Fatalf("attach %d: %+v, want %+v", i+1, a, want)
		}
	}
	if after := consumers(); after != before {
		t.Errorf("the events stream has %d consumers after 1,200 attaches, %d before", after, before)
	}
}
