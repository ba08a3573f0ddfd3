package mcptool_test

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/mcptest"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/mcptool"
)

// TestExecutorEndToEnd runs Effectful tools of a stdio upstream in an
// executor over an embedded NATS server. Two identical calls make one upstream
// effect, the second deduplicated; a call whose upstream process is killed
// while it runs is answered indeterminate, and calling it again is answered
// from the parked key without running the upstream again.
func TestExecutorEndToEnd(t *testing.T) {
	ctx := testenv.Context(t, 2*time.Minute)
	effects := filepath.Join(t.TempDir(), "effects")
	argv, env := mcptest.Command(mcptest.Options{EffectsFile: effects})
	u, err := mcptool.Open(ctx, mcptool.Config{Name: "up", Command: argv, Env: env, Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	effectful := &tool.Policy{Kind: tool.Effectful}
	remember, err := u.Tool(tool.Spec{Name: "remember", Idempotency: effectful}, "effect")
	if err != nil {
		t.Fatal(err)
	}
	book, err := u.Tool(tool.Spec{Name: "book", Idempotency: effectful}, "hang")
	if err != nil {
		t.Fatal(err)
	}

	srv := natstest.Start(t)
	runCtx, stop := context.WithCancel(context.Background())
	ex, err := toolexec.NewExecutor(ctx, natstest.Connect(t, srv), toolexec.ExecutorConfig{
		Tools: []*tool.Tool{remember, book}, Logger: testenv.Logger(), DrainTimeout: 5 * time.Second,
	})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ex.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Executor.Run: %v", err)
		}
		ex.Close()
	})
	c, err := toolexec.NewClient(natstest.Connect(t, srv), toolexec.WithLogger(testenv.Logger()), toolexec.WithDefaultRunID("run_1"))
	if err != nil {
		t.Fatal(err)
	}
	count := func(remote string) int {
		n := 0
		for _, e := range mcptest.Effects(t, effects) {
			if e.Tool == remote {
				n++
			}
		}
		return n
	}

	first, err := c.Call(ctx, "acme", "remember", map[string]any{"entity": "alice"})
	if err != nil || first.Kind != events.KindCompleted || first.Outcome != "done" {
		t.Fatalf("first call: %+v, %v", first, err)
	}
	second, err := c.Call(ctx, "acme", "remember", map[string]any{"entity": "alice"})
	if err != nil || second.Kind != events.KindDeduplicated || second.Outcome != "done" || second.Key != first.Key {
		t.Errorf("identical call: %+v, %v; want deduplicated with the first's outcome and key", second, err)
	}
	if n := count("effect"); n != 1 {
		t.Errorf("the upstream ran %d times for two identical calls; want 1", n)
	}

	type answer struct {
		res *events.Answer
		err error
	}
	answers := make(chan answer, 1)
	go func() {
		res, err := c.Call(ctx, "acme", "book", map[string]any{"entity": "bob"})
		answers <- answer{res, err}
	}()
	var pid int
	for _, e := range mcptest.WaitEffects(t, effects, 2, time.Minute) {
		if e.Tool == "hang" {
			pid = e.PID
		}
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a := <-answers
	var unknown *events.IndeterminateOutcomeError
	if !errors.As(a.err, &unknown) || unknown.Reason != events.ReasonBodyFailed || !unknown.BodyEntered || unknown.Tool != "book" {
		t.Fatalf("call whose upstream was killed: %+v, %v; want indeterminate, body entered", a.res, a.err)
	}
	key := unknown.Key
	res, err := c.Call(ctx, "acme", "book", map[string]any{"entity": "bob"})
	if !errors.As(err, &unknown) || unknown.Key != key {
		t.Errorf("the same call again: %+v, %v; want indeterminate on key %s", res, err, key)
	}
	if n := count("hang"); n != 1 {
		t.Errorf("the upstream ran %d times for the killed call and its repeat; want 1", n)
	}

	// The upstream was restarted for the next call.
	next, err := c.Call(ctx, "acme", "remember", map[string]any{"entity": "carol"})
	if err != nil || next.Kind != events.KindCompleted {
		t.Errorf("a call after the kill: %+v, %v", next, err)
	}
}
