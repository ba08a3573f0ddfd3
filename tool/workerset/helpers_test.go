package workerset_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/workerset"
	"github.com/tesserix/toolexec/worker"
)

const bookSchema = `{"type":"object","properties":{"flight":{"type":"string"},"seats":{"type":"integer"}},"required":["flight"]}`

// logRecord is one line a Set logged.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// logs records what a Set logs.
type logs struct {
	mu      sync.Mutex // protects records
	records []logRecord
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logs) WithGroup(string) slog.Handler            { return l }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	l.records = append(l.records, rec)
	l.mu.Unlock()
	return nil
}

// at returns the records of level logged so far.
func (l *logs) at(level slog.Level) []logRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logRecord
	for _, r := range l.records {
		if r.level == level {
			out = append(out, r)
		}
	}
	return out
}

// observer records what a Set tells it.
type observer struct {
	mu     sync.Mutex // protects the fields below
	rounds []workerset.Round
	began  []string
}

func (o *observer) Refreshed(r workerset.Round) {
	o.mu.Lock()
	o.rounds = append(o.rounds, r)
	o.mu.Unlock()
}

func (o *observer) ConflictBegan(tool string) {
	o.mu.Lock()
	o.began = append(o.began, tool)
	o.mu.Unlock()
}

func (o *observer) last() workerset.Round {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.rounds[len(o.rounds)-1]
}

func (o *observer) conflictsBegun() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.began...)
}

// harness is a server, an executor's registry and a Set keeping it.
type harness struct {
	srv  *server.Server
	nc   *nats.Conn
	reg  *tool.Registry
	set  *workerset.Set
	logs *logs
	obs  *observer
}

// absent is the harness's Config.Absent.
const absent = 2

// newHarness makes a Set over a registry holding own, with served naming the
// tools of own that workers serve.
func newHarness(t *testing.T, served map[string]string, own ...*tool.Tool) *harness {
	t.Helper()
	h := &harness{srv: natstest.Start(t), logs: &logs{}, obs: &observer{}}
	h.nc = natstest.Connect(t, h.srv)
	reg, err := tool.NewRegistry(own...)
	if err != nil {
		t.Fatal(err)
	}
	h.reg = reg
	h.set, err = workerset.New(h.nc, reg, workerset.Config{
		Window: 100 * time.Millisecond, Absent: absent, Served: served, Logger: slog.New(h.logs), Observer: h.obs,
	})
	if err != nil {
		t.Fatalf("workerset.New: %v", err)
	}
	return h
}

// refresh runs one round, failing the test if it fails.
func (h *harness) refresh(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.set.Refresh(ctx); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
}

// names returns the registry's served tools.
func (h *harness) names() string { return strings.Join(h.reg.Names(), ",") }

// spec declares a tool called name over the booking schema.
func spec(name string, kind tool.Kind, keys ...string) tool.Spec {
	s := tool.Spec{Name: name, Description: "The " + name + " tool.", Parameters: json.RawMessage(bookSchema)}
	if kind != "" {
		s.Idempotency = &tool.Policy{Kind: kind, KeyArguments: keys}
	}
	return s
}

// build makes a tool of spec whose body answers out.
func build(t *testing.T, s tool.Spec, out string) *tool.Tool {
	t.Helper()
	tl, err := tool.New(s, func(context.Context, tool.Context, json.RawMessage) (string, error) { return out, nil })
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// goWorker serves tools from Go on a connection of its own; stop it with
// Stop, or it stops when the test ends.
func (h *harness) goWorker(t *testing.T, tools ...*tool.Tool) *worker.Worker {
	t.Helper()
	w, err := worker.Serve(natstest.Connect(t, h.srv), worker.Config{Version: "1.0.0", Logger: slog.New(slog.DiscardHandler)}, tools...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return w
}

// endpoint is one endpoint of a worker written by hand.
type endpoint struct {
	name, subject, queue string
	metadata             map[string]string
}

// rawWorker runs a toolexec-worker service with the endpoints as given, valid
// or not, that answers every request with "raw"; it returns the service's id.
func (h *harness) rawWorker(t *testing.T, eps ...endpoint) string {
	t.Helper()
	nc := natstest.Connect(t, h.srv)
	svc, err := micro.AddService(nc, micro.Config{Name: wire.WorkerService, Version: "0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	for _, ep := range eps {
		opts := []micro.EndpointOpt{micro.WithEndpointSubject(ep.subject), micro.WithEndpointMetadata(ep.metadata)}
		if ep.queue == "" {
			opts = append(opts, micro.WithEndpointQueueGroupDisabled())
		} else {
			opts = append(opts, micro.WithEndpointQueueGroup(ep.queue))
		}
		if err := svc.AddEndpoint(ep.name, micro.HandlerFunc(func(r micro.Request) { _ = r.Respond([]byte("raw")) }), opts...); err != nil {
			t.Fatalf("endpoint %s: %v", ep.name, err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return svc.Info().ID
}

// declared is the metadata of an endpoint declaring decl.
func declared(decl string) map[string]string {
	return map[string]string{wire.DeclarationMetadata: decl}
}

// callTool calls the registry's tool name once.
func (h *harness) callTool(t *testing.T, name string) (string, error) {
	t.Helper()
	tl, err := h.reg.Get(name)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return tl.Call(ctx, tool.Context{Tool: name}, json.RawMessage(`{"flight":"BA117"}`))
}

// workerLabel is how the Set names the worker of id in its messages.
func workerLabel(id, version string) string {
	return fmt.Sprintf("worker %s (version %s)", id, version)
}
