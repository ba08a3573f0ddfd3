package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/clienttest"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/tool"
)

// testLogger discards logs unless TOOLEXEC_TEST_LOG is set.
func testLogger() *slog.Logger { return testenv.Logger() }

// harness is one embedded server with both streams, and a client connection.
type harness struct {
	srv    *server.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	client clienttest.Client
	// workerURL, when set, is where workers connect instead of the server: a
	// proxy in front of it.
	workerURL string
}

func newHarness(t *testing.T, opts ...natstest.Option) *harness {
	t.Helper()
	srv := natstest.Start(t, opts...)
	nc := natstest.Connect(t, srv)
	js := natstest.JetStream(t, nc)
	if err := bus.EnsureStreams(ctxT(t), js, bus.StreamsConfig{}); err != nil {
		t.Fatalf("EnsureStreams: %v", err)
	}
	return &harness{srv: srv, nc: nc, js: js, client: clienttest.New(t, nc)}
}

// ctxT returns a context that ends with the test or after a minute.
func ctxT(t *testing.T) context.Context { return testenv.Context(t, time.Minute) }

// worker is one running Worker with its own connection, store and dispatcher,
// like one executor process.
type worker struct {
	w     *bus.Worker
	d     *dispatch.Dispatcher
	nc    *nats.Conn
	store *natsstore.Store
	done  chan error
}

// startWorker runs a worker serving reg. Its dispatcher's lease is lease
// (default dispatch's). The worker is shut down gracefully when the test ends.
func (h *harness) startWorker(t *testing.T, reg *tool.Registry, cfg bus.WorkerConfig, lease time.Duration) *worker {
	t.Helper()
	return h.startWorkerWith(t, reg, cfg, lease, nil)
}

// startWorkerWith is startWorker with the dispatcher wrapped by wrap (when not
// nil) before the worker sees it.
func (h *harness) startWorkerWith(t *testing.T, reg *tool.Registry, cfg bus.WorkerConfig, lease time.Duration,
	wrap func(dispatch.Runner) dispatch.Runner) *worker {
	t.Helper()
	nc := h.connectWorker(t)
	js := natstest.JetStream(t, nc)
	st, err := natsstore.New(ctxT(t), js, natsstore.Config{})
	if err != nil {
		t.Fatalf("natsstore.New: %v", err)
	}
	d, err := dispatch.New(dispatch.Config{Tools: reg, Store: st, Lease: lease, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	var disp dispatch.Runner = d
	if wrap != nil {
		disp = wrap(d)
	}
	w, err := bus.NewWorker(js, disp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	wk := &worker{w: w, d: d, nc: nc, store: st, done: make(chan error, 1)}
	go func() { wk.done <- w.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := w.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		select {
		case <-wk.done:
		case <-time.After(20 * time.Second):
			t.Error("Run did not return after Shutdown")
		}
	})
	return wk
}

// connectWorker connects a worker to the server, through h.workerURL when set.
// The connection is closed when the test ends.
func (h *harness) connectWorker(t *testing.T) *nats.Conn {
	t.Helper()
	if h.workerURL == "" {
		return natstest.Connect(t, h.srv)
	}
	nc, err := nats.Connect(h.workerURL, nats.Name(t.Name()), nats.Timeout(10*time.Second),
		nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatalf("connect %s: %v", h.workerURL, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// wait returns Run's error, failing the test if Run does not return in time.
func (wk *worker) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-wk.done:
		wk.done <- err // for the cleanup
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

const bookSchema = `{"type":"object","properties":{"flight":{"type":"string"},"request_id":{"type":"string"}},"required":["flight"]}`

// bookTool declares a tool over the flight schema keyed by flight; kind "" means
// no policy.
func bookTool(t *testing.T, name string, kind tool.Kind, fn tool.Func) *tool.Tool {
	t.Helper()
	spec := tool.Spec{Name: name, Parameters: json.RawMessage(bookSchema)}
	if kind != "" {
		spec.Idempotency = &tool.Policy{Kind: kind, KeyArguments: []string{"flight"}}
	}
	tl, err := tool.New(spec, fn)
	if err != nil {
		t.Fatalf("tool.New: %v", err)
	}
	return tl
}

func registry(t *testing.T, tools ...*tool.Tool) *tool.Registry {
	t.Helper()
	reg, err := tool.NewRegistry(tools...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func call(tool, runID, callID, args string) events.Call {
	return events.Call{Tenant: "acme", RunID: runID, CallID: callID, Tool: tool, Arguments: json.RawMessage(args)}
}

// eventSubjects returns, for every subject of TOOLEXEC_EVENTS matching filter,
// how many messages it holds.
func eventSubjects(t *testing.T, js jetstream.JetStream, filter string) map[string]uint64 {
	t.Helper()
	return streamSubjects(t, js, wire.EventStream, filter)
}

func streamSubjects(t *testing.T, js jetstream.JetStream, stream, filter string) map[string]uint64 {
	t.Helper()
	return natstest.StreamSubjects(t, js, stream, filter)
}

// consumerSettled waits until the shared consumer has nothing pending and nothing
// waiting for an ack, and returns its info.
func consumerSettled(t *testing.T, js jetstream.JetStream) *jetstream.ConsumerInfo {
	t.Helper()
	var info *jetstream.ConsumerInfo
	wait.Eventually(t, 15*time.Second, "the consumer to settle", func() bool {
		c, err := js.Consumer(ctxT(t), wire.CallStream, bus.DefaultDurable)
		if err != nil {
			return false
		}
		info, err = c.Info(ctxT(t))
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	return info
}

// streamMsgs returns how many messages stream holds.
func streamMsgs(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(ctxT(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// logBuffer is a slog handler target that tests can read.
type logBuffer = testenv.LogBuffer

var errBoom = errors.New("boom")
