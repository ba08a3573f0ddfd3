package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/natstool"
	"github.com/tesserix/toolexec/worker"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const schema = `{"type":"object","properties":{"flight":{"type":"string"}},"required":["flight"]}`

// newTool declares a tool called name with body fn.
func newTool(t *testing.T, name string, pol *tool.Policy, fn tool.Func) *tool.Tool {
	t.Helper()
	tl, err := tool.New(tool.Spec{Name: name, Description: "The " + name + " tool.", Parameters: json.RawMessage(schema),
		Idempotency: pol, Timeout: 2 * time.Second}, fn)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func answer(out string) tool.Func {
	return func(context.Context, tool.Context, json.RawMessage) (string, error) { return out, nil }
}

// serve runs a worker of tools on nc, stopped when the test ends.
func serve(t *testing.T, nc *nats.Conn, cfg worker.Config, tools ...*tool.Tool) *worker.Worker {
	t.Helper()
	cfg.Logger = quiet
	w, err := worker.Serve(nc, cfg, tools...)
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	return w
}

// caller returns the tool an executor would build for name on nc.
func caller(t *testing.T, nc *nats.Conn, name string, subject string) *tool.Tool {
	t.Helper()
	tl, err := natstool.New(tool.Spec{Name: name, Parameters: json.RawMessage(schema)}, natstool.Endpoint{Conn: nc, Subject: subject})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestServeAdvertises: a worker answers the service API's INFO request for
// toolexec-worker with an endpoint per tool, on the tool's body subject (or
// the one it was given), in the queue group toolexec.body, its declaration in
// the metadata.
func TestServeAdvertises(t *testing.T) {
	s := natstest.Start(t)
	book := newTool(t, "book", &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}}, answer("PNR"))
	echo := newTool(t, "echo", nil, answer("hi"))
	w := serve(t, natstest.Connect(t, s), worker.Config{Version: "1.2.3", Subjects: map[string]string{"echo": "toolexec.body.echo-v2"}}, book, echo)

	m, err := natstest.Connect(t, s).Request(wire.WorkerInfoSubject, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(m.Data, &info); err != nil {
		t.Fatal(err)
	}
	if info.Name != wire.WorkerService || info.Version != "1.2.3" || info.ID != w.ID() || info.Type != micro.InfoResponseType {
		t.Errorf("info %+v; want toolexec-worker 1.2.3, id %s", info.ServiceIdentity, w.ID())
	}
	if len(info.Endpoints) != 2 {
		t.Fatalf("endpoints %+v, want book and echo", info.Endpoints)
	}
	for _, ep := range info.Endpoints {
		want := map[string]*tool.Tool{"book": book, "echo": echo}[ep.Name]
		subject := map[string]string{"book": "toolexec.body.book", "echo": "toolexec.body.echo-v2"}[ep.Name]
		if want == nil || ep.Subject != subject || ep.QueueGroup != wire.BodyQueue {
			t.Errorf("endpoint %+v; want a tool's, on %s in queue group %s", ep, subject, wire.BodyQueue)
			continue
		}
		spec, err := natstool.ParseDeclaration([]byte(ep.Metadata[wire.DeclarationMetadata]))
		if err != nil {
			t.Errorf("endpoint %s: its declaration is refused: %v", ep.Name, err)
			continue
		}
		if !reflect.DeepEqual(spec, want.Spec()) {
			t.Errorf("endpoint %s declares %+v, want %+v", ep.Name, spec, want.Spec())
		}
	}
}

// TestServeRefuses: a configuration that cannot serve is refused at Serve.
func TestServeRefuses(t *testing.T) {
	s := natstest.Start(t)
	nc := natstest.Connect(t, s)
	book := newTool(t, "book", nil, answer("PNR"))
	tests := []struct {
		name  string
		nc    *nats.Conn
		cfg   worker.Config
		tools []*tool.Tool
	}{
		{"no connection", nil, worker.Config{}, []*tool.Tool{book}},
		{"no tools", nc, worker.Config{}, nil},
		{"a nil tool", nc, worker.Config{}, []*tool.Tool{nil}},
		{"a tool twice", nc, worker.Config{}, []*tool.Tool{book, book}},
		{"a subject for no tool", nc, worker.Config{Subjects: map[string]string{"cancel": "x.cancel"}}, []*tool.Tool{book}},
		{"a wildcard subject", nc, worker.Config{Subjects: map[string]string{"book": "toolexec.body.*"}}, []*tool.Tool{book}},
		{"a version that is not SemVer", nc, worker.Config{Version: "v1"}, []*tool.Tool{book}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if w, err := worker.Serve(tt.nc, tt.cfg, tt.tools...); !errors.Is(err, worker.ErrInvalidConfig) {
				if w != nil {
					_ = w.Stop(context.Background())
				}
				t.Fatalf("Serve = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// TestBodySeesTheCall: the body receives the call's context from the
// request's headers and its arguments byte for byte; its errors come back as
// the codes the executor reads.
func TestBodySeesTheCall(t *testing.T) {
	s := natstest.Start(t)
	seen := make(chan tool.Context, 1)
	var args atomic.Value
	book := newTool(t, "book", &tool.Policy{Kind: tool.Effectful}, func(_ context.Context, tc tool.Context, a json.RawMessage) (string, error) {
		seen <- tc
		args.Store(string(a))
		switch {
		case strings.Contains(string(a), "refused"):
			return "", tool.NoEffect(errors.New("fare gone\x00\x1b[31m\r\nInjected: header"))
		case strings.Contains(string(a), "broken"):
			return "", errors.New("the line dropped")
		}
		return "PNR-1", nil
	})
	serve(t, natstest.Connect(t, s), worker.Config{}, book)
	tl := caller(t, natstest.Connect(t, s), "book", "")

	tc := tool.Context{IdempotencyKey: strings.Repeat("cd", 32), Tenant: "acme", RunID: "run_1", CallID: "c-1", Tool: "book",
		Attempt: 1, TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	const sent = `{ "flight" : "BA117" }`
	out, err := tl.Call(ctxT(t), tc, json.RawMessage(sent))
	if err != nil || out != "PNR-1" {
		t.Fatalf("Call = %q, %v", out, err)
	}
	if got := <-seen; got != tc {
		t.Errorf("the body saw %+v, want %+v", got, tc)
	}
	if args.Load() != sent {
		t.Errorf("the body saw the arguments %q, want %q", args.Load(), sent)
	}

	_, err = tl.Call(ctxT(t), tc, json.RawMessage(`{"flight":"refused"}`))
	var be *natstool.BodyError
	if !errors.As(err, &be) || be.Code != natstool.CodeNoEffect || !tool.IsNoEffect(err) ||
		strings.ContainsFunc(be.Description, func(r rune) bool { return r < ' ' }) || !strings.Contains(be.Description, "Injected: header") {
		t.Errorf("a no-effect failure came back as %v (%q); want code no_effect, its message without control characters", err, be.Description)
	}
	<-seen
	_, err = tl.Call(ctxT(t), tc, json.RawMessage(`{"flight":"broken"}`))
	if !errors.As(err, &be) || be.Code != worker.CodeToolError || tool.IsNoEffect(err) || !strings.Contains(be.Description, "the line dropped") {
		t.Errorf("a failure came back as %v; want code tool_error with its message", err)
	}
	<-seen
}

// TestConcurrency: a worker runs up to Concurrency bodies at once, and more
// wait for room rather than being refused.
func TestConcurrency(t *testing.T) {
	s := natstest.Start(t)
	var now, most atomic.Int64
	release := make(chan struct{})
	book := newTool(t, "book", nil, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		n := now.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		now.Add(-1)
		return "ok", nil
	})
	serve(t, natstest.Connect(t, s), worker.Config{Concurrency: 2}, book)
	tl := caller(t, natstest.Connect(t, s), "book", "")
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := tl.Call(ctxT(t), tool.Context{}, json.RawMessage(`{"flight":"A"}`))
			errs <- err
		}()
	}
	wait.Until(5*time.Second, func() bool { return now.Load() >= 2 })
	time.Sleep(100 * time.Millisecond) // a third body would have started by now
	close(release)
	for range 3 {
		if err := <-errs; err != nil {
			t.Errorf("a call waiting for room failed: %v", err)
		}
	}
	if most.Load() != 2 {
		t.Errorf("%d bodies ran at once, want 2", most.Load())
	}
}

// TestStop: a body running when Stop is called still replies; afterwards no
// request reaches the worker; and a Stop whose context ends cancels the bodies
// still running.
func TestStop(t *testing.T) {
	s := natstest.Start(t)
	entered, release := make(chan struct{}, 2), make(chan struct{})
	book := newTool(t, "book", nil, func(ctx context.Context, _ tool.Context, a json.RawMessage) (string, error) {
		entered <- struct{}{}
		if strings.Contains(string(a), "stuck") {
			<-ctx.Done()
			return "", ctx.Err()
		}
		<-release
		return "finished", nil
	})
	w, err := worker.Serve(natstest.Connect(t, s), worker.Config{Logger: quiet}, book)
	if err != nil {
		t.Fatal(err)
	}
	tl := caller(t, natstest.Connect(t, s), "book", "")
	type result struct {
		out string
		err error
	}
	results := make(chan result, 2)
	for _, a := range []string{`{"flight":"A"}`, `{"flight":"stuck"}`} {
		go func() {
			out, err := tl.Call(ctxT(t), tool.Context{}, json.RawMessage(a))
			results <- result{out, err}
		}()
		<-entered
	}
	stopped := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { stopped <- w.Stop(ctx) }()
	time.Sleep(50 * time.Millisecond)
	close(release)
	first := <-results
	if first.err != nil || first.out != "finished" {
		t.Errorf("the body running at Stop came back %q, %v; want its outcome", first.out, first.err)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned %v while a body still ran", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Errorf("Stop = %v, want the context's error", err)
	}
	if second := <-results; second.err == nil {
		t.Errorf("the stuck body's call succeeded: %q", second.out)
	}
	if _, err := tl.Call(ctxT(t), tool.Context{}, json.RawMessage(`{"flight":"B"}`)); !errors.Is(err, natstool.ErrNoWorker) {
		t.Errorf("a call after Stop: %v, want ErrNoWorker", err)
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Errorf("Stop again: %v", err)
	}
}

// TestWorkersShareATool: two workers of one tool share its requests, each
// request reaching one of them.
func TestWorkersShareATool(t *testing.T) {
	s := natstest.Start(t)
	var runs [2]atomic.Int64
	for i := range runs {
		book := newTool(t, "book", nil, func(context.Context, tool.Context, json.RawMessage) (string, error) {
			runs[i].Add(1)
			return "ok", nil
		})
		serve(t, natstest.Connect(t, s), worker.Config{}, book)
	}
	tl := caller(t, natstest.Connect(t, s), "book", "")
	const calls = 40
	for range calls {
		if _, err := tl.Call(ctxT(t), tool.Context{}, json.RawMessage(`{"flight":"A"}`)); err != nil {
			t.Fatal(err)
		}
	}
	got := []int64{runs[0].Load(), runs[1].Load()}
	if got[0]+got[1] != calls || slices.Contains(got, 0) {
		t.Errorf("the workers ran %v of %d requests; want every request once, shared", got, calls)
	}
}

// TestServeReturnsReachable: once Serve returns, the server routes requests to
// the worker: a request sent at once from another connection is answered, never
// refused for want of a responder.
func TestServeReturnsReachable(t *testing.T) {
	s := natstest.Start(t)
	tl := caller(t, natstest.Connect(t, s), "book", "")
	book := newTool(t, "book", nil, answer("ok"))
	for i := range 50 {
		w, err := worker.Serve(natstest.Connect(t, s), worker.Config{Logger: quiet}, book)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tl.Call(ctxT(t), tool.Context{}, json.RawMessage(`{"flight":"A"}`))
		_ = w.Stop(context.Background())
		if err != nil {
			t.Fatalf("a request right after Serve returned (round %d): %v", i, err)
		}
	}
}

// TestRepliesRaceNothing: bodies reply from goroutines of their own, after
// the service's handler returned, while the service updates its statistics
// of the request; under -race, many calls of quick bodies, succeeding and
// failing, must show no data race, and each caller gets its body's reply.
// More threads than the machine's two CPUs make the race, when there is one,
// likely to show: a body's reply written before the handler's return.
func TestRepliesRaceNothing(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	s := natstest.Start(t)
	fail := newTool(t, "fail", nil, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return "", tool.NoEffect(errors.New("nothing done"))
	})
	serve(t, natstest.Connect(t, s), worker.Config{Concurrency: 16}, newTool(t, "ok", nil, answer("done")), fail)
	nc := natstest.Connect(t, s)
	okCaller, failCaller := caller(t, nc, "ok", ""), caller(t, nc, "fail", "")
	var wg sync.WaitGroup
	for i := range 400 {
		wg.Go(func() {
			c, want := okCaller, "done"
			if i%2 == 1 {
				c, want = failCaller, ""
			}
			out, err := c.Call(ctxT(t), tool.Context{CallID: fmt.Sprint("call_", i)}, json.RawMessage(`{"flight":"BA117"}`))
			if want != "" && (err != nil || out != want) {
				t.Errorf("ok: %q, %v", out, err)
			}
			if want == "" && !tool.IsNoEffect(err) {
				t.Errorf("fail: %q, %v; want no effect", out, err)
			}
		})
	}
	wg.Wait()
}
