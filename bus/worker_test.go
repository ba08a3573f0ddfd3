package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/tool"
)

func TestNewWorkerNeedsItsParts(t *testing.T) {
	h := newHarness(t)
	if _, err := bus.NewWorker(nil, nil, bus.WorkerConfig{}); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Errorf("NewWorker(nil, nil) = %v, want ErrInvalidConfig", err)
	}
	if _, err := bus.NewWorker(h.js, nil, bus.WorkerConfig{}); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Errorf("NewWorker(js, nil) = %v, want ErrInvalidConfig", err)
	}
}

func TestRunTwice(t *testing.T) {
	h := newHarness(t)
	wk := h.startWorker(t, registry(t), bus.WorkerConfig{}, 0)
	// Run creates the consumer after marking itself started.
	wait.Eventually(t, 10*time.Second, "the consumer", func() bool {
		_, err := h.js.Consumer(ctxT(t), wire.CallStream, bus.DefaultDurable)
		return err == nil
	})
	if err := wk.w.Run(ctxT(t)); !errors.Is(err, bus.ErrRunning) {
		t.Errorf("second Run = %v, want ErrRunning", err)
	}
}

// TestShutdownBeforeRun: a worker shut down before it runs never takes a call.
func TestShutdownBeforeRun(t *testing.T) {
	h := newHarness(t)
	w, err := bus.NewWorker(h.js, nil2(t, h), bus.WorkerConfig{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctxT(t)); err != nil {
		t.Errorf("Run after Shutdown = %v, want nil", err)
	}
	if _, err := h.js.Consumer(ctxT(t), wire.CallStream, bus.DefaultDurable); err == nil {
		t.Error("the consumer was created by a worker that never ran")
	}
}

// nil2 returns a dispatcher that must never be called.
func nil2(t *testing.T, _ *harness) dispatch.Runner {
	return runnerFunc(func(context.Context) (dispatch.Result, error) {
		t.Error("dispatcher called")
		return dispatch.Result{}, errBoom
	})
}

// TestGracefulShutdown: calls in flight run to their answer with their context
// intact; calls not started stay in the stream for another worker.
func TestGracefulShutdown(t *testing.T) {
	h := newHarness(t)
	entered := make(chan struct{}, 4)
	release := make(chan struct{})
	var cancelled atomic.Bool
	reg := registry(t, bookTool(t, "book", tool.Effectful, func(ctx context.Context, _ tool.Context, _ json.RawMessage) (string, error) {
		entered <- struct{}{}
		<-release
		if ctx.Err() != nil {
			cancelled.Store(true)
		}
		return "booked", nil
	}))
	wk := h.startWorker(t, reg, bus.WorkerConfig{Concurrency: 1}, 0)
	c1 := call("book", "r1", "g1", `{"flight":"A"}`)
	c2 := call("book", "r1", "g2", `{"flight":"B"}`)
	for _, c := range []events.Call{c1, c2} {
		if _, err := h.client.Publish(ctxT(t), c); err != nil {
			t.Fatal(err)
		}
	}
	<-entered

	stopped := make(chan error, 1)
	go func() { stopped <- wk.w.Shutdown(ctxT(t)) }()
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned %v while a call was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := wk.wait(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if cancelled.Load() {
		t.Error("a graceful shutdown cancelled the body's context")
	}
	a, err := h.client.Attach(ctxT(t), c1.Tenant, c1.Tool, c1.RunID, c1.CallID)
	if err != nil || a.Kind != events.KindCompleted {
		t.Fatalf("in-flight call answered %+v, %v; want completed", a, err)
	}
	if n := wk.w.Stats().Received.Load(); n != 1 {
		t.Errorf("the stopping worker received %d calls, want 1", n)
	}
	// The acknowledgement reached the server before Run returned (it flushes),
	// but the work queue removes the call a moment after.
	wait.Eventually(t, 5*time.Second, "TOOLEXEC_CALLS to hold only the call not started", func() bool {
		return streamMsgs(t, h.js, wire.CallStream) == 1
	})

	h.startWorker(t, reg, bus.WorkerConfig{}, 0)
	if a, err := h.client.Attach(ctxT(t), c2.Tenant, c2.Tool, c2.RunID, c2.CallID); err != nil || a.Kind != events.KindCompleted {
		t.Fatalf("second call answered %+v, %v; want completed by the next worker", a, err)
	}
}

// TestHardStop: when Shutdown's context ends, calls in flight are cancelled and
// handed back; the next worker answers them, once.
func TestHardStop(t *testing.T) {
	h := newHarness(t)
	entered := make(chan struct{}, 1)
	var first atomic.Bool
	first.Store(true)
	reg := registry(t, bookTool(t, "book", tool.Idempotent, func(ctx context.Context, _ tool.Context, _ json.RawMessage) (string, error) {
		if first.CompareAndSwap(true, false) {
			entered <- struct{}{}
			<-ctx.Done()
			return "", ctx.Err()
		}
		return "booked", nil
	}))
	wk := h.startWorker(t, reg, bus.WorkerConfig{}, 0)
	c := call("book", "r1", "h1", `{"flight":"A"}`)
	if _, err := h.client.Publish(ctxT(t), c); err != nil {
		t.Fatal(err)
	}
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := wk.w.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want DeadlineExceeded", err)
	}
	if err := wk.wait(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := wk.w.Stats().HandedBack.Load(); n != 1 {
		t.Errorf("handed back %d calls, want 1", n)
	}
	h.startWorker(t, reg, bus.WorkerConfig{}, 0)
	a, err := h.client.Attach(ctxT(t), c.Tenant, c.Tool, c.RunID, c.CallID)
	if err != nil || a.Kind != events.KindCompleted || a.Outcome != "booked" {
		t.Fatalf("answer %+v, %v; want completed by the next worker", a, err)
	}
	consumerSettled(t, h.js)
	if got := eventSubjects(t, h.js, wire.AnswerFilter(c.Tenant, c.Tool, c.RunID, c.CallID)); len(got) != 1 {
		t.Errorf("answers stored: %v, want one", got)
	}
}

// slowBooking serves an Effectful book whose body counts its runs in entered
// and takes 2.5 s: more than twice an ack wait of one second.
func slowBooking(t *testing.T, entered *atomic.Int64) *tool.Registry {
	return registry(t, bookTool(t, "book", tool.Effectful, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		entered.Add(1)
		time.Sleep(2500 * time.Millisecond)
		return "booked", nil
	}))
}

// TestInProgressHoldsSlowCalls: a body that runs past the ack wait is not
// redelivered while its worker tells JetStream it is still working.
func TestInProgressHoldsSlowCalls(t *testing.T) {
	h := newHarness(t)
	var entered atomic.Int64
	reg := slowBooking(t, &entered)
	cfg := bus.WorkerConfig{AckWait: time.Second}
	w1 := h.startWorker(t, reg, cfg, 0)
	w2 := h.startWorker(t, reg, cfg, 0)
	c := call("book", "r1", "slow-1", `{"flight":"A"}`)
	a, err := h.client.Call(ctxT(t), c)
	if err != nil || a.Kind != events.KindCompleted {
		t.Fatalf("answer %+v, %v", a, err)
	}
	info := consumerSettled(t, h.js)
	if info.NumRedelivered != 0 {
		t.Errorf("redelivered %d", info.NumRedelivered)
	}
	if n := w1.w.Stats().Received.Load() + w2.w.Stats().Received.Load(); n != 1 {
		t.Errorf("the call was delivered %d times, want once", n)
	}
	if n := entered.Load(); n != 1 {
		t.Errorf("body entered %d times", n)
	}
}

// TestDispatchWithoutAnswerIsHandedBack: ErrNoAnswer from the dispatcher hands the
// call back for redelivery, and the dispatcher is told which delivery each is.
func TestDispatchWithoutAnswerIsHandedBack(t *testing.T) {
	h := newHarness(t)
	var (
		calls      atomic.Int64
		mu         sync.Mutex // protects deliveries
		deliveries []int
	)
	wk := h.startWorkerWith(t, registry(t, bookTool(t, "book", "", func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return "ok", nil
	})), bus.WorkerConfig{}, 0, func(d dispatch.Runner) dispatch.Runner {
		return callRunnerFunc(func(ctx context.Context, c events.Call) (dispatch.Result, error) {
			mu.Lock()
			deliveries = append(deliveries, c.Delivery)
			mu.Unlock()
			if calls.Add(1) == 1 {
				return dispatch.Result{}, errNoAnswer
			}
			return d.Run(ctx, c)
		})
	})
	a, err := h.client.Call(ctxT(t), call("book", "r1", "nak-1", `{"flight":"A"}`))
	if err != nil || a.Kind != events.KindCompleted {
		t.Fatalf("answer %+v, %v", a, err)
	}
	mu.Lock()
	if !slices.Equal(deliveries, []int{1, 2}) {
		t.Errorf("the dispatcher saw deliveries %v, want [1 2]", deliveries)
	}
	mu.Unlock()
	if n := wk.w.Stats().HandedBack.Load(); n != 1 {
		t.Errorf("handed back %d, want 1", n)
	}
	if n := wk.w.Stats().Received.Load(); n != 2 {
		t.Errorf("received %d deliveries, want 2", n)
	}
}

// TestNoCallWaitsUnstarted: a worker is delivered no more calls than it has
// goroutines free to start them, so a call never waits out its ack wait in one
// worker, unsignalled, while another is idle — it would be redelivered there
// and its body entered twice.
func TestNoCallWaitsUnstarted(t *testing.T) {
	h := newHarness(t)
	var entered atomic.Int64
	reg := slowBooking(t, &entered)
	cfg := bus.WorkerConfig{AckWait: time.Second, Concurrency: 1}
	w1 := h.startWorker(t, reg, cfg, 0)
	w2 := h.startWorker(t, reg, cfg, 0)
	calls := []events.Call{
		call("book", "r1", "q1", `{"flight":"A"}`), call("book", "r1", "q2", `{"flight":"B"}`),
		call("book", "r1", "q3", `{"flight":"C"}`), call("book", "r1", "q4", `{"flight":"D"}`),
	}
	for _, c := range calls {
		if _, err := h.client.Publish(ctxT(t), c); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range calls {
		a, err := h.client.Attach(ctxT(t), c.Tenant, c.Tool, c.RunID, c.CallID)
		if err != nil || a.Kind != events.KindCompleted {
			t.Fatalf("%s answered %+v, %v; want completed", c.CallID, a, err)
		}
	}
	info := consumerSettled(t, h.js)
	if info.NumRedelivered != 0 {
		t.Errorf("redelivered %d calls", info.NumRedelivered)
	}
	if n := w1.w.Stats().Received.Load() + w2.w.Stats().Received.Load(); n != int64(len(calls)) {
		t.Errorf("%d deliveries of %d calls", n, len(calls))
	}
	if n := entered.Load(); n != int64(len(calls)) {
		t.Errorf("bodies entered %d times for %d calls", n, len(calls))
	}
}

// TestConsumerCreatedAgain: a worker whose consumer is deleted under it
// creates it again and goes on taking calls.
func TestConsumerCreatedAgain(t *testing.T) {
	h := newHarness(t)
	reg := registry(t, bookTool(t, "book", tool.Idempotent, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return "booked", nil
	}))
	wk := h.startWorker(t, reg, bus.WorkerConfig{PullWait: time.Second}, 0)
	// Deleting the consumer while Run is still creating it fails Run (the
	// create answers "consumer closed"): wait until the worker is pulling.
	wait.Eventually(t, 10*time.Second, "the worker's first pull", func() bool {
		c, err := h.js.Consumer(ctxT(t), wire.CallStream, bus.DefaultDurable)
		return err == nil && c.CachedInfo().NumWaiting > 0
	})
	if err := h.js.DeleteConsumer(ctxT(t), wire.CallStream, bus.DefaultDurable); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 20*time.Second)
	defer cancel()
	a, err := h.client.Call(ctx, call("book", "r1", "again-1", `{"flight":"A"}`))
	if err != nil || a.Kind != events.KindCompleted {
		info, ierr := h.js.Consumer(ctxT(t), wire.CallStream, bus.DefaultDurable)
		state := fmt.Sprint(ierr)
		if ierr == nil {
			ci := info.CachedInfo()
			state = fmt.Sprintf("pending %d, ack pending %d, waiting %d, delivered %d", ci.NumPending, ci.NumAckPending, ci.NumWaiting, ci.Delivered.Consumer)
		}
		t.Fatalf("answer %+v, %v; want completed by the consumer created again (worker received %d; consumer: %s)",
			a, err, wk.w.Stats().Received.Load(), state)
	}
}

// TestPullsAgainAfterServerRestart: a restarted server has forgotten the pulls
// a worker had sent; the worker gives them up once its connection is back,
// rather than waiting for an end that will never come, and takes calls again.
// Its pulls are a minute long, so waiting them out would outlast the test.
func TestPullsAgainAfterServerRestart(t *testing.T) {
	h := newHarness(t)
	reg := registry(t, bookTool(t, "book", tool.Idempotent, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return "booked", nil
	}))
	h.startWorker(t, reg, bus.WorkerConfig{PullWait: time.Minute}, 0)
	wait.Eventually(t, 10*time.Second, "the worker's first pull", func() bool {
		c, err := h.js.Consumer(ctxT(t), wire.CallStream, bus.DefaultDurable)
		return err == nil && c.CachedInfo().NumWaiting > 0
	})
	h.srv = natstest.Restart(t, h.srv)
	ctx, cancel := context.WithTimeout(ctxT(t), 30*time.Second)
	defer cancel()
	a, err := h.client.Call(ctx, call("book", "r1", "restart-1", `{"flight":"A"}`))
	if err != nil || a.Kind != events.KindCompleted {
		t.Fatalf("answer %+v, %v; want completed by the worker after the restart", a, err)
	}
}

// TestRedeliveryOfAnAnsweredCall: a call delivered again whose answer is
// already stored (an earlier delivery answered it; its acknowledgement was
// lost) is acknowledged without reaching the dispatcher: running it again
// could contradict the stored answer, as when that answer said nothing ran.
func TestRedeliveryOfAnAnsweredCall(t *testing.T) {
	h := newHarness(t)
	var dispatched atomic.Int64
	c := call("book", "r1", "again-1", `{"flight":"A"}`)
	stored := events.Answer{Kind: events.KindIndeterminate, Tenant: c.Tenant, RunID: c.RunID, CallID: c.CallID, Tool: c.Tool,
		Reason: events.ReasonStoreUnavailable, Key: strings.Repeat("a", 64), Time: time.Now()}
	wk := h.startWorkerWith(t, registry(t, bookTool(t, "book", tool.Effectful, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return "booked", nil
	})), bus.WorkerConfig{}, 0, func(d dispatch.Runner) dispatch.Runner {
		return callRunnerFunc(func(ctx context.Context, c events.Call) (dispatch.Result, error) {
			dispatched.Add(1)
			// The first delivery's answer is stored, but the delivery is handed
			// back as if its acknowledgement had been lost.
			storeAnswer(t, h.js, stored, wire.Structured)
			return dispatch.Result{}, errNoAnswer
		})
	})
	a, err := h.client.Call(ctxT(t), c)
	if err != nil || a.Kind != events.KindIndeterminate || a.Reason != events.ReasonStoreUnavailable || a.BodyEntered {
		t.Fatalf("answer %+v, %v; want the stored store_unavailable", a, err)
	}
	wait.Eventually(t, 10*time.Second, "the redelivery to be acknowledged", func() bool { return wk.w.Stats().AlreadyAnswered.Load() == 1 })
	if n := dispatched.Load(); n != 1 {
		t.Errorf("dispatched %d times, want once", n)
	}
	if n := wk.w.Stats().Received.Load(); n != 2 {
		t.Errorf("received %d deliveries, want 2", n)
	}
	cons, err := h.js.Consumer(ctxT(t), wire.CallStream, bus.DefaultDurable)
	if err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, "no call pending", func() bool {
		info, err := cons.Info(ctxT(t))
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	})
}
