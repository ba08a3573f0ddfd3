package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/testkit/mcptest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/mcptool"
)

// stubCaller answers every request with its answer, and records what it was
// asked and told.
type stubCaller struct {
	answer json.RawMessage
	mu     sync.Mutex
	asked  []string
	told   []string
}

func (c *stubCaller) Ask(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, method+" "+string(params))
	return c.answer, nil
}

func (c *stubCaller) Notify(method string, params json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.told = append(c.told, method)
}

// TestUpstreamRequestsGoToTheCaller: over stdio, an upstream's elicitation
// during a call (a request on the old protocol, an input-required result on
// the newest) is asked of the call's caller and its answer decides; a call
// whose caller cannot answer has it refused at once, without effect; the
// upstream's progress and log notifications reach the caller.
func TestUpstreamRequestsGoToTheCaller(t *testing.T) {
	for _, legacy := range []bool{true, false} {
		t.Run(map[bool]string{true: "request", false: "input-required"}[legacy], func(t *testing.T) {
			ctx := testenv.Context(t, time.Minute)
			argv, env := mcptest.Command(mcptest.Options{Legacy: legacy})
			u, err := mcptool.Open(ctx, mcptool.Config{Name: "up", Command: argv, Env: env, Logger: testenv.Logger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { u.Close() })
			confirm, err := u.Tool(tool.Spec{Name: "confirm"}, "confirm")
			if err != nil {
				t.Fatal(err)
			}
			chatty, err := u.Tool(tool.Spec{Name: "chatty"}, "chatty")
			if err != nil {
				t.Fatal(err)
			}
			tc := tool.Context{Tenant: "acme", RunID: "run_1", CallID: "call_1", Tool: "confirm", Attempt: 1}

			c := &stubCaller{answer: json.RawMessage(`{"action":"accept","content":{}}`)}
			out, err := confirm.Call(tool.WithCaller(ctx, c), tc, json.RawMessage(`{}`))
			if err != nil || out != "accept" {
				t.Fatalf("confirm: %q, %v; want accept", out, err)
			}
			if len(c.asked) != 1 {
				t.Errorf("the caller was asked %q; want one elicitation", c.asked)
			}

			start := time.Now()
			out, err = confirm.Call(ctx, tc, json.RawMessage(`{}`))
			if err == nil || !tool.IsNoEffect(err) {
				t.Errorf("confirm with no one to ask: %q, %v; want a failure without effect", out, err)
			}
			var te *mcptool.ToolError
			if !legacy && !errors.Is(err, mcptool.ErrInputRequired) || legacy && !errors.As(err, &te) {
				t.Errorf("confirm with no one to ask: %v", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("the refusal took %s", d)
			}

			c = &stubCaller{}
			if out, err := chatty.Call(tool.WithCaller(ctx, c), tc, json.RawMessage(`{}`)); err != nil || out != "done" {
				t.Fatalf("chatty: %q, %v", out, err)
			}
			c.mu.Lock()
			told := c.told
			c.mu.Unlock()
			if len(told) != 2 || told[0] != "notifications/progress" || told[1] != "notifications/message" {
				t.Errorf("the caller was told %q; want the progress and the log message", told)
			}
		})
	}
}

// TestStdioRequestOfTwoCallsIsRefused: over stdio, whose messages name no
// call, a request the upstream sends while two calls are in flight cannot be
// told to belong to either, so no caller is asked (it might be another
// tenant's): it is refused at once.
func TestStdioRequestOfTwoCallsIsRefused(t *testing.T) {
	ctx := testenv.Context(t, time.Minute)
	effects := t.TempDir() + "/effects"
	argv, env := mcptest.Command(mcptest.Options{Legacy: true, EffectsFile: effects})
	u, err := mcptool.Open(ctx, mcptool.Config{Name: "up", Command: argv, Env: env, Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	hang, err := u.Tool(tool.Spec{Name: "hang"}, "hang")
	if err != nil {
		t.Fatal(err)
	}
	confirm, err := u.Tool(tool.Spec{Name: "confirm"}, "confirm")
	if err != nil {
		t.Fatal(err)
	}
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	other := &stubCaller{answer: json.RawMessage(`{"action":"accept"}`)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = hang.Call(tool.WithCaller(hctx, other), tool.Context{CallID: "call_other"}, json.RawMessage(`{"entity":"x"}`))
	}()
	mcptest.WaitEffects(t, effects, 1, time.Minute) // hang is in flight

	c := &stubCaller{answer: json.RawMessage(`{"action":"accept"}`)}
	start := time.Now()
	out, err := confirm.Call(tool.WithCaller(ctx, c), tool.Context{CallID: "call_1"}, json.RawMessage(`{}`))
	var te *mcptool.ToolError
	if !errors.As(err, &te) || !tool.IsNoEffect(err) {
		t.Errorf("confirm beside another call: %q, %v; want the upstream's failure, without effect", out, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the refusal took %s", d)
	}
	if len(c.asked) != 0 || len(other.asked) != 0 {
		t.Errorf("asked %q and %q; want no one", c.asked, other.asked)
	}
	stop()
	<-done
}
