package bus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/tool"
)

// workerObservations keeps what a worker reported, as lines.
type workerObservations struct {
	mu    sync.Mutex // protects lines
	lines []string
}

func (o *workerObservations) add(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lines = append(o.lines, s)
}

func (o *workerObservations) MessageReceived(redelivered bool) {
	o.add(fmt.Sprintf("received redelivered=%t", redelivered))
}
func (o *workerObservations) MessageRejected(code events.Code) { o.add("rejected " + string(code)) }
func (o *workerObservations) CallHandedBack()                  { o.add("handed back") }
func (o *workerObservations) AnswerPublishRetried()            { o.add("publish retried") }

func (o *workerObservations) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.lines
	o.lines = nil
	return l
}

var _ bus.WorkerObserver = (*workerObservations)(nil)

// TestWorkerObserver: the observer hears of each delivery (and whether it is a
// redelivery), of the worker's own rejections and of calls handed back.
func TestWorkerObserver(t *testing.T) {
	h := newHarness(t)
	obs := &workerObservations{}
	var first sync.Once
	h.startWorkerWith(t, registry(t, bookTool(t, "book", "", func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return "ok", nil
	})), bus.WorkerConfig{Observer: obs}, 0, func(d dispatch.Runner) dispatch.Runner {
		return callRunnerFunc(func(ctx context.Context, c events.Call) (dispatch.Result, error) {
			handBack := false
			if c.CallID == "again" {
				first.Do(func() { handBack = true })
			}
			if handBack {
				return dispatch.Result{}, errNoAnswer
			}
			return d.Run(ctx, c)
		})
	})
	ctx := ctxT(t)

	if a, err := h.client.Call(ctx, call("book", "r1", "c1", `{"flight":"A"}`)); err != nil || a.Kind != events.KindCompleted {
		t.Fatalf("answer %+v, %v", a, err)
	}
	if got, want := obs.take(), []string{"received redelivered=false"}; !slices.Equal(got, want) {
		t.Errorf("a call answered: observations %q, want %q", got, want)
	}

	sub, err := h.nc.SubscribeSync(wire.EventSubject("acme", events.KindRejected, "book", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.nc.PublishMsg(structuredMsg(wire.CallSubject("acme", "book", "bad-1"), "{not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("no rejection: %v", err)
	}
	wait.Eventually(t, 10*time.Second, "the rejection to be observed", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return len(obs.lines) >= 2
	})
	if got, want := obs.take(), []string{"received redelivered=false", "rejected invalid_json"}; !slices.Equal(got, want) {
		t.Errorf("a malformed call: observations %q, want %q", got, want)
	}

	if a, err := h.client.Call(ctx, call("book", "r1", "again", `{"flight":"B"}`)); err != nil || a.Kind != events.KindCompleted {
		t.Fatalf("answer %+v, %v", a, err)
	}
	if got, want := obs.take(), []string{"received redelivered=false", "handed back", "received redelivered=true"}; !slices.Equal(got, want) {
		t.Errorf("a call handed back: observations %q, want %q", got, want)
	}
}

// TestWorkerLogsAnswers: every stored answer is logged with what identifies it
// (tenant, tool, run, call, kind; reason and key where there are some), and no
// log line of a call's whole path holds its arguments.
func TestWorkerLogsAnswers(t *testing.T) {
	h := newHarness(t)
	const secret = "ARG-SENTINEL-5120"
	var logs logBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	book := bookTool(t, "book", tool.Effectful, func(_ context.Context, _ tool.Context, args json.RawMessage) (string, error) {
		if strings.Contains(string(args), "fail") {
			return "", fmt.Errorf("the gateway reset the connection")
		}
		return "PNR-1", nil
	})
	h.startWorker(t, registry(t, book), bus.WorkerConfig{Logger: log}, 0)
	ctx := ctxT(t)
	for _, c := range []struct{ id, args string }{
		{"c1", `{"flight":"A","request_id":"` + secret + `"}`},
		{"c2", `{"flight":"A","request_id":"` + secret + `-2"}`},
		{"c3", `{"flight":"fail","request_id":"` + secret + `"}`},
		{"c4", `{"flight":17,"request_id":"` + secret + `"}`},
	} {
		if _, err := h.client.Call(ctx, call("book", "r1", c.id, c.args)); err != nil {
			t.Fatalf("call %s: %v", c.id, err)
		}
	}
	want := map[string]string{"c1": "completed", "c2": "deduplicated", "c3": "indeterminate", "c4": "rejected"}
	wait.Eventually(t, 10*time.Second, "a log line for each answer", func() bool {
		return strings.Count(logs.String(), `"call_id"`) >= len(want)
	})
	got := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(line, secret) {
			t.Errorf("a log line holds the call's arguments: %s", line)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %s", line)
		}
		if id, ok := m["call_id"].(string); ok && m["kind"] != nil {
			got[id] = m
		}
	}
	for id, kind := range want {
		m := got[id]
		if m == nil {
			t.Errorf("no log line for the answer to %s", id)
			continue
		}
		if m["kind"] != kind || m["tenant"] != "acme" || m["tool"] != "book" || m["run_id"] != "r1" {
			t.Errorf("log line for %s: %v; want kind %s, tenant, tool and run id", id, m, kind)
		}
		if kind != "rejected" && m["key"] == nil {
			t.Errorf("log line for %s has no key: %v", id, m)
		}
	}
	if m := got["c3"]; m != nil && (m["reason"] != "body_failed" || m["level"] != "INFO") {
		t.Errorf("indeterminate answer logged as %v; want reason body_failed at INFO", m)
	}
}
