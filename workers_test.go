package toolexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/app/metrics"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/natstool"
	"github.com/tesserix/toolexec/tool/workerset"
	"github.com/tesserix/toolexec/worker"
)

// counter counts the entries of a worker's body per key.
type counter struct {
	mu      sync.Mutex // protects entries
	entries map[string]int
}

func (c *counter) enter(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[key]++
	return c.entries[key]
}

func (c *counter) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[key]
}

// errorLog records the messages logged at error level, with their attributes.
type errorLog struct {
	mu    sync.Mutex // protects lines
	lines []string
}

func (l *errorLog) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelError }
func (l *errorLog) WithAttrs([]slog.Attr) slog.Handler               { return l }
func (l *errorLog) WithGroup(string) slog.Handler                    { return l }
func (l *errorLog) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.Key + "=" + a.Value.String()
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	return nil
}

func (l *errorLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// workerFixture is an embedded server, an executor with no tools of its own
// that learns them from workers, its metrics, and a client.
type workerFixture struct {
	srv     *server.Server
	ex      *toolexec.Executor
	client  *toolexec.Client
	metrics *prometheus.Registry
	errors  *errorLog
}

// rounds are the discovery settings of the tests: quick, so that a worker
// that leaves is forgotten within a second.
var rounds = workerset.Config{Interval: 100 * time.Millisecond, Window: 100 * time.Millisecond, Absent: 2}

func newWorkerFixture(t *testing.T) *workerFixture {
	t.Helper()
	f := &workerFixture{srv: natstest.Start(t), metrics: prometheus.NewRegistry(), errors: &errorLog{}}
	m, err := metrics.New(f.metrics, metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rounds
	ctx, cancel := context.WithCancel(context.Background())
	f.ex, err = toolexec.NewExecutor(ctx, natstest.Connect(t, f.srv), toolexec.ExecutorConfig{
		Workers: &cfg, Lease: 2 * time.Second, Logger: slog.New(f.errors), Observer: m, DrainTimeout: 5 * time.Second,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.ex.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Executor.Run: %v", err)
		}
		f.ex.Close()
	})
	if f.client, err = toolexec.NewClient(natstest.Connect(t, f.srv), toolexec.WithLogger(quiet())); err != nil {
		t.Fatal(err)
	}
	return f
}

// bookSpec is the effectful booking the workers serve, keyed by flight, with
// a timeout short enough for a test to wait out.
func bookSpec(keys ...string) tool.Spec {
	if keys == nil {
		keys = []string{"flight"}
	}
	return tool.Spec{
		Name: "book", Description: "Take a seat.", Timeout: time.Second,
		Parameters:  json.RawMessage(`{"type":"object","properties":{"flight":{"type":"string"},"seats":{"type":"integer"}},"required":["flight"]}`),
		Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: keys},
	}
}

// serveBook runs a Go worker of book on a connection of its own, its body
// counting entries per key in c and behaving as the flight says: HOLD waits
// for hold to close (or its context), REFUSE fails without effect the first
// time and books the second. It returns the worker and its connection.
func (f *workerFixture) serveBook(t *testing.T, spec tool.Spec, c *counter, held chan<- struct{}, hold <-chan struct{}) (*worker.Worker, *nats.Conn) {
	t.Helper()
	book, err := tool.New(spec, func(ctx context.Context, tc tool.Context, args json.RawMessage) (string, error) {
		var a struct{ Flight string }
		if err := json.Unmarshal(args, &a); err != nil {
			return "", err
		}
		n := c.enter(tc.IdempotencyKey)
		switch {
		case a.Flight == "HOLD":
			held <- struct{}{}
			select {
			case <-hold:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		case a.Flight == "REFUSE" && n == 1:
			return "", tool.NoEffect(errors.New("the fare is gone"))
		}
		return fmt.Sprintf("PNR-%s-%d", a.Flight, n), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t, f.srv)
	w, err := worker.Serve(nc, worker.Config{Version: "1.0.0", Logger: quiet()}, book)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	return w, nc
}

// waitLimit is how long these tests wait for what they poll.
const waitLimit = 15 * time.Second

// call makes one call of book for acme in run run_1 and returns its answer,
// whatever its kind.
func (f *workerFixture) call(t *testing.T, callID, args string) events.Answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := f.client.Call(ctx, "acme", "book", json.RawMessage(args), toolexec.WithRunID("run_1"), toolexec.WithFreshCallID(callID))
	if a == nil {
		t.Fatalf("Call %s: %v", callID, err)
	}
	return *a
}

// TestWorkerServesEffectfulTool: an executor with no tools of its own learns
// book from a Go worker and runs it with the worker's body: a storm of
// identical calls enters the body once, a worker killed while it holds a
// request leaves the key indeterminate and never runs it again, and a
// no_effect reply frees the key for the next call.
func TestWorkerServesEffectfulTool(t *testing.T) {
	f := newWorkerFixture(t)
	c := &counter{entries: map[string]int{}}
	held, hold := make(chan struct{}, 1), make(chan struct{})
	_, workerConn := f.serveBook(t, bookSpec(), c, held, hold)
	wait.Eventually(t, waitLimit, "the executor to learn book", func() bool { return strings.Join(f.ex.Tools(), ",") == "book" })
	decls, err := f.client.Tools(context.Background(), "acme")
	if err != nil || len(decls) != 1 || decls[0].Name != "book" || decls[0].Kind != tool.Effectful || decls[0].TimeoutMillis != 1000 {
		t.Fatalf("the catalog lists %+v, %v; want book as the worker declares it", decls, err)
	}

	t.Run("storm", func(t *testing.T) {
		const calls = 100
		answers := make([]events.Answer, calls)
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() { answers[i] = f.call(t, fmt.Sprintf("storm-%03d", i), `{"flight":"BA117","seats":2}`) })
		}
		wg.Wait()
		completed := 0
		for _, a := range answers {
			switch a.Kind {
			case events.KindCompleted:
				completed++
			case events.KindDeduplicated:
			default:
				t.Errorf("call %s answered %s %s %s", a.CallID, a.Kind, a.Reason, a.Code)
			}
			if a.Outcome != "PNR-BA117-1" || a.Key != answers[0].Key {
				t.Errorf("call %s answered %q under %s; want PNR-BA117-1 under one key", a.CallID, a.Outcome, a.Key)
			}
		}
		if completed != 1 || c.count(answers[0].Key) != 1 {
			t.Errorf("%d calls completed and the body was entered %d times; want once each", completed, c.count(answers[0].Key))
		}
	})

	outer := t // workers started in a subtest live on for the next
	t.Run("worker killed mid-body", func(t *testing.T) {
		answer := make(chan events.Answer, 1)
		go func() { answer <- f.call(t, "kill-1", `{"flight":"HOLD"}`) }()
		<-held
		workerConn.Close() // the worker dies holding the request: its reply is never sent
		a := <-answer
		if a.Kind != events.KindIndeterminate || a.Reason != events.ReasonTimeout || !a.BodyEntered {
			t.Fatalf("answered %s %s (body entered %v); want indeterminate, timeout, body entered", a.Kind, a.Reason, a.BodyEntered)
		}
		// By now the dead worker has gone unheard long enough to be forgotten,
		// and book with it. A new worker comes up, and the key is not run again.
		f.serveBook(outer, bookSpec(), c, held, hold)
		wait.Eventually(t, waitLimit, "the executor to learn book again", func() bool { return strings.Join(f.ex.Tools(), ",") == "book" })
		again := f.call(t, "kill-2", `{"flight":"HOLD"}`)
		if again.Kind != events.KindIndeterminate || again.Reason != events.ReasonTimeout || again.Key != a.Key {
			t.Errorf("the same key again: %s %s; want the same indeterminate answer", again.Kind, again.Reason)
		}
		if n := c.count(a.Key); n != 1 {
			t.Errorf("the body was entered %d times for the key, want once", n)
		}
	})

	t.Run("no_effect frees the key", func(t *testing.T) {
		first := f.call(t, "refuse-1", `{"flight":"REFUSE"}`)
		if first.Kind != events.KindFailed || first.Code != events.CodeNoEffect || !strings.Contains(first.Error, "the fare is gone") {
			t.Fatalf("answered %s %s %q; want failed no_effect with the worker's reason", first.Kind, first.Code, first.Error)
		}
		second := f.call(t, "refuse-2", `{"flight":"REFUSE"}`)
		if second.Kind != events.KindCompleted || second.Outcome != "PNR-REFUSE-2" || c.count(second.Key) != 2 {
			t.Errorf("the next call: %s %q, body entered %d times; want it run again and completed", second.Kind, second.Outcome, c.count(second.Key))
		}
	})
}

// TestWorkerConflict: a second worker declaring book otherwise puts it in
// conflict — calls rejected tool_conflict, the conflict logged at error level
// naming both workers and what differs, counted — and once it leaves book is
// served again.
func TestWorkerConflict(t *testing.T) {
	f := newWorkerFixture(t)
	c := &counter{entries: map[string]int{}}
	first, _ := f.serveBook(t, bookSpec(), c, nil, nil)
	wait.Eventually(t, waitLimit, "the executor to learn book", func() bool { return strings.Join(f.ex.Tools(), ",") == "book" })
	if a := f.call(t, "before", `{"flight":"BA117"}`); a.Kind != events.KindCompleted {
		t.Fatalf("before the conflict: %s", a.Kind)
	}

	second, _ := f.serveBook(t, bookSpec("flight", "seats"), c, nil, nil)
	wait.Eventually(t, waitLimit, "the conflict", func() bool { return len(f.ex.Conflicts()) == 1 })
	a := f.call(t, "during", `{"flight":"LH400"}`)
	if a.Kind != events.KindRejected || a.Code != events.CodeToolConflict {
		t.Fatalf("during the conflict: %s %s; want rejected tool_conflict", a.Kind, a.Code)
	}
	for _, want := range []string{first.ID(), second.ID(), "key_arguments"} {
		if !strings.Contains(a.Error, want) {
			t.Errorf("the rejection says %q; want it to name %q", a.Error, want)
		}
	}
	if len(f.ex.Tools()) != 0 {
		t.Errorf("the executor serves %v during the conflict", f.ex.Tools())
	}
	logged := false
	for _, l := range f.errors.all() {
		logged = logged || strings.Contains(l, "tool=book") && strings.Contains(l, first.ID()) && strings.Contains(l, second.ID())
	}
	if !logged {
		t.Errorf("no error line names book and both workers: %q", f.errors.all())
	}
	if n := metricValue(t, f.metrics, "toolexec_worker_tool_conflicts"); n != 1 {
		t.Errorf("toolexec_worker_tool_conflicts = %v, want 1", n)
	}

	if err := second.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, waitLimit, "book served again", func() bool { return strings.Join(f.ex.Tools(), ",") == "book" })
	if a := f.call(t, "after", `{"flight":"LH400"}`); a.Kind != events.KindCompleted {
		t.Errorf("after the second worker left: %s %s %s, want completed", a.Kind, a.Code, a.Error)
	}
	if n := metricValue(t, f.metrics, "toolexec_worker_conflicts_total"); n != 1 {
		t.Errorf("toolexec_worker_conflicts_total = %v, want 1", n)
	}
	if n := metricValue(t, f.metrics, "toolexec_worker_tool_conflicts"); n != 0 {
		t.Errorf("toolexec_worker_tool_conflicts = %v after the conflict ended, want 0", n)
	}
}

// TestNATSToolsOfTheExecutor: a tool the executor declares with a body served
// by workers (a tools file's nats: tool) is run by a worker declaring it
// alike, and rejected tool_conflict while one declares it otherwise; with no
// worker, its calls fail without effect and free their key.
func TestNATSToolsOfTheExecutor(t *testing.T) {
	srv := natstest.Start(t)
	cfg := rounds
	ctx, cancel := context.WithCancel(context.Background())
	ex, err := toolexec.NewExecutor(ctx, natstest.Connect(t, srv), toolexec.ExecutorConfig{
		NATSTools: []natstool.Pending{{Spec: bookSpec()}}, Workers: &cfg, Logger: quiet(), DrainTimeout: 5 * time.Second,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		ex.Close()
	})
	client, err := toolexec.NewClient(natstest.Connect(t, srv), toolexec.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	f := &workerFixture{srv: srv, ex: ex, client: client}

	if a := f.call(t, "no-worker", `{"flight":"BA117"}`); a.Kind != events.KindFailed || a.Code != events.CodeNoEffect {
		t.Fatalf("with no worker: %s %s %q; want failed no_effect", a.Kind, a.Code, a.Error)
	}
	c := &counter{entries: map[string]int{}}
	f.serveBook(t, bookSpec(), c, nil, nil)
	if a := f.call(t, "alike", `{"flight":"BA117"}`); a.Kind != events.KindCompleted || c.count(a.Key) != 1 {
		t.Fatalf("with a worker declaring book alike: %s %s; want completed, the key freed by the call before", a.Kind, a.Code)
	}
	other, _ := f.serveBook(t, bookSpec("flight", "seats"), c, nil, nil)
	wait.Eventually(t, waitLimit, "the conflict", func() bool { return len(ex.Conflicts()) == 1 })
	if a := f.call(t, "otherwise", `{"flight":"LH400"}`); a.Kind != events.KindRejected || a.Code != events.CodeToolConflict ||
		!strings.Contains(a.Error, "the executor") {
		t.Errorf("with a worker declaring book otherwise: %s %s %q; want rejected tool_conflict naming the executor's declaration", a.Kind, a.Code, a.Error)
	}
	if err := other.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, waitLimit, "the conflict to end", func() bool { return len(ex.Conflicts()) == 0 })
}

// metricValue returns the value of the one series of the gauge or counter
// name in reg.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		if m := mf.GetMetric()[0]; m.GetGauge() != nil {
			return m.GetGauge().GetValue()
		} else {
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no series %s", name)
	return 0
}
