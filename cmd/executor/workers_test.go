package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/worker"
)

// serveWorker runs a Go worker of tools against the server at url.
func serveWorker(t *testing.T, url string, tools ...*tool.Tool) *worker.Worker {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w, err := worker.Serve(nc, worker.Config{Logger: slog.New(slog.DiscardHandler)}, tools...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return w
}

// TestDemoServesWorkersTools: the executor with its embedded server and the
// demo's tools learns the tools of a worker that connects to it, and runs
// them; a worker declaring one of the demo's own tools puts it in conflict,
// which /readyz lists while the executor stays ready.
func TestDemoServesWorkersTools(t *testing.T) {
	addr := testenv.FreeAddr(t)
	url, _ := startExecutor(t, "--demo", "--metrics-addr", addr, "--workers-interval", "100ms", "--workers-window", "100ms")
	greet, err := tool.New(tool.Spec{Name: "greet", Idempotency: &tool.Policy{Kind: tool.ReadOnly}},
		func(_ context.Context, tc tool.Context, _ json.RawMessage) (string, error) {
			return "hello " + tc.Tenant, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	serveWorker(t, url, greet)
	c := client(t, url)
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; ; i++ {
		a := callTool(t, c, "greet", fmt.Sprintf("g-%d", i), `{}`)
		if a.Kind == events.KindCompleted && a.Outcome == "hello acme" {
			break
		}
		if a.Code != events.CodeUnknownTool || time.Now().After(deadline) {
			t.Fatalf("greet answered %s %s %q; want it learned and run", a.Kind, a.Code, a.Error)
		}
		time.Sleep(50 * time.Millisecond)
	}

	book, err := tool.New(tool.Spec{Name: "book"}, func(context.Context, tool.Context, json.RawMessage) (string, error) { return "", nil })
	if err != nil {
		t.Fatal(err)
	}
	intruder := serveWorker(t, url, book)
	var body string
	for deadline = time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var code int
		code, body = httpGet(t, "http://"+addr+"/readyz")
		if code != http.StatusOK {
			t.Fatalf("/readyz: %d %q; a conflict does not make the executor unready", code, body)
		}
		if strings.Contains(body, `tool conflict: tool "book"`) || time.Now().After(deadline) {
			break
		}
	}
	if !strings.HasPrefix(body, "ready\n") || !strings.Contains(body, intruder.ID()) || !strings.Contains(body, "runs its body itself") {
		t.Fatalf("/readyz says %q; want ready, then book's conflict naming the worker", body)
	}
	if a := callTool(t, c, "book", "b-1", `{"flight":"BA117","seats":1,"request_id":"r1"}`); a.Kind != events.KindRejected || a.Code != events.CodeToolConflict {
		t.Errorf("book answered %s %s, want rejected tool_conflict", a.Kind, a.Code)
	}
	_, metrics := httpGet(t, "http://"+addr+"/metrics")
	if !strings.Contains(metrics, "toolexec_worker_tool_conflicts 1\n") || !strings.Contains(metrics, "toolexec_workers 2\n") {
		t.Errorf("/metrics lacks the conflict or the workers:\n%s", grepLines(metrics, "toolexec_worker"))
	}
}

// callTool makes one call of tool for acme.
func callTool(t *testing.T, c *toolexec.Client, name, callID, args string) events.Answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := c.Call(ctx, "acme", name, json.RawMessage(args), toolexec.WithFreshCallID(callID))
	if a == nil {
		t.Fatalf("Call %s: %v", callID, err)
	}
	return *a
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
