package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/internal/app/demo"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore/memstore"
	"github.com/tesserix/toolexec/tool"
)

// quiet discards the logs of the executor pieces the tests run.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is an embedded NATS server for one test, with or without the toolexec
// streams and an executor serving the demo airline.
type env struct {
	srv     *server.Server
	url     string
	nc      *nats.Conn
	js      jetstream.JetStream
	airline *demo.Airline // nil until startExecutor
	store   *memstore.Store
	worker  *bus.Worker   // nil until startExecutor
	auth    []nats.Option // how the test's own connections authenticate
}

// newBareEnv starts a server; with streams it also creates the toolexec
// streams, as an executor would, but no executor runs.
func newBareEnv(t *testing.T, streams bool) *env {
	t.Helper()
	return newBareEnvOn(t, natstest.Start(t), streams)
}

// newBareEnvOn is newBareEnv on a server of the test's own, reached with auth.
func newBareEnvOn(t *testing.T, srv *server.Server, streams bool, auth ...nats.Option) *env {
	t.Helper()
	nc := natstest.Connect(t, srv, auth...)
	js := natstest.JetStream(t, nc)
	if streams {
		if err := bus.EnsureStreams(ctxT(t), js, bus.StreamsConfig{}); err != nil {
			t.Fatalf("EnsureStreams: %v", err)
		}
	}
	return &env{srv: srv, url: srv.ClientURL(), nc: nc, js: js, auth: auth}
}

// newEnv starts a server with the streams and an executor: a worker, its
// dispatcher over a memory store, and the admin, history and catalog responders,
// serving the demo airline's tools.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := newBareEnv(t, true)
	e.startExecutor(t)
	return e
}

// startExecutor runs an executor on e's server until the test ends.
func (e *env) startExecutor(t *testing.T) {
	t.Helper()
	e.airline = demo.New()
	reg, err := tool.NewRegistry(e.airline.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t, e.srv, e.auth...)
	js := natstest.JetStream(t, nc)
	e.store = memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = e.store.Close() })
	d, err := dispatch.New(dispatch.Config{Tools: reg, Store: e.store, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	adm, err := admin.Serve(js, e.store, admin.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	hist, err := bus.ServeHistory(js, bus.HistoryConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hist.Close() })
	cat, err := bus.ServeCatalog(nc, reg, bus.CatalogConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	w, err := bus.NewWorker(js, d, bus.WorkerConfig{Logger: quiet, Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	e.worker = w
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := w.Shutdown(ctx); err != nil {
			t.Errorf("worker Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("worker Run: %v", err)
		}
	})
}

// ctxT returns a context that ends with the test or after two minutes.
func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// emit runs the emitter in-process against e's server and returns its exit
// status and output.
func (e *env) emit(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return e.emitCtx(t, ctxT(t), stdin, args...)
}

func (e *env) emitCtx(t *testing.T, ctx context.Context, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(ctx, append([]string{"--server", e.url}, args...), strings.NewReader(stdin), &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// mustExit fails the test unless r exited with want.
func mustExit(t *testing.T, r result, want int) {
	t.Helper()
	if r.code != want {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, want, r.stdout, r.stderr)
	}
}

// parseAnswer parses the one JSON object --json printed for an answer.
func parseAnswer(t *testing.T, out string) answerJSON {
	t.Helper()
	var a answerJSON
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		t.Fatalf("stdout %q is not an answer in JSON: %v", out, err)
	}
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("stdout %q is not exactly one line", out)
	}
	return a
}

// bookKey is the idempotency key of a book call: keyed by flight.
func bookKey(t *testing.T, tenant, run, args string) string {
	t.Helper()
	k, err := idemkey.Derive(tenant, run, "book", []byte(args), []string{"flight"})
	if err != nil {
		t.Fatal(err)
	}
	return k.Hex
}

// callsStored returns the state of TOOLEXEC_CALLS.
func (e *env) callsStored(t *testing.T) jetstream.StreamState {
	t.Helper()
	s, err := e.js.Stream(ctxT(t), wire.CallStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

// syncBuffer is a bytes.Buffer safe to read while a command writes to it.
type syncBuffer struct {
	mu sync.Mutex // protects b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lines returns the complete lines written so far.
func (s *syncBuffer) lines() []string {
	out := s.String()
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		return strings.Split(out[:i], "\n")
	}
	return nil
}

// background runs the emitter until its context is cancelled; stop cancels it
// and returns the exit status.
type background struct {
	stdout, stderr *syncBuffer
	cancel         context.CancelFunc
	done           chan int
}

func (e *env) emitBackground(t *testing.T, args ...string) *background {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxT(t))
	b := &background{stdout: &syncBuffer{}, stderr: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	go func() {
		b.done <- run(ctx, append([]string{"--server", e.url}, args...), strings.NewReader(""), b.stdout, b.stderr)
	}()
	t.Cleanup(func() { cancel() })
	return b
}

// waitLines waits until the command has written at least n lines on stdout
// and returns them.
func (b *background) waitLines(t *testing.T, n int) []string {
	t.Helper()
	wait.Eventually(t, waitLimit, "output lines", func() bool { return len(b.stdout.lines()) >= n })
	return b.stdout.lines()
}

// stop interrupts the command and returns its exit status.
func (b *background) stop(t *testing.T) int {
	t.Helper()
	b.cancel()
	select {
	case code := <-b.done:
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not return after its context ended")
		return -1
	}
}

// waitLimit is how long these tests wait for what they poll.
const waitLimit = 30 * time.Second
