package mcptool_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/internal/testkit/mcptest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/httptool"
	"github.com/tesserix/toolexec/tool/mcptool"
)

// TestOutcome: what the upstream answers becomes the outcome by one rule:
// content that is not all text as MCP content (see TestContentOutcome), else
// structured content as its JSON (numbers and member order as sent), else
// the texts joined with newlines.
func TestOutcome(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := open(t, kind, mcptest.Options{}, mcptool.Config{})
			for _, tt := range []struct {
				remote string
				want   string
			}{
				{"text", "hello\nworld"},
				{"single", "just this"},
				{"empty", ""},
				{"structured", `{"b":2,"a":[1,"x"]}`},
				{"big", `{"n":9007199254740993}`},
			} {
				out, err := f.call(t, tool.Effectful, tt.remote, callCtx, `{}`)
				if err != nil || out != tt.want {
					t.Errorf("%s: %q, %v; want %q", tt.remote, out, err, tt.want)
				}
			}
			out, err := f.call(t, tool.Effectful, "image", callCtx, `{}`)
			result, ok := mcptool.ParseContentOutcome(out)
			var r struct {
				Content []struct {
					Type, Data, MIMEType, Text string
				}
			}
			if err != nil || !ok || json.Unmarshal(result, &r) != nil || len(r.Content) != 2 ||
				r.Content[0].Type != "image" || r.Content[0].Data != "UE5H" || r.Content[0].MIMEType != "image/png" ||
				r.Content[1].Type != "text" || r.Content[1].Text != "a picture" {
				t.Errorf("image: %q, %v; want MCP content: the image and the text item as sent", out, err)
			}
		})
	}
}

// TestCallCarriesTheKey: the key goes in _meta, and over HTTP as the
// Idempotency-Key header of the tools/call request; with no key, neither is
// sent. Tenant, run and call ids go in _meta; the arguments as given.
func TestCallCarriesTheKey(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := open(t, kind, mcptest.Options{}, mcptool.Config{})
			args := `{"flight":"BA117","seats":2,"n":9007199254740993}`
			for _, tt := range []struct {
				name string
				tc   tool.Context
				want map[string]any
			}{
				{"with a key", callCtx, map[string]any{
					mcptool.MetaIdempotencyKey: callCtx.IdempotencyKey, mcptool.MetaTenant: "acme",
					mcptool.MetaRunID: "run_1", mcptool.MetaCallID: "call_1",
				}},
				{"without a key", tool.Context{Tenant: "acme", RunID: "run_1", CallID: "call_2"}, map[string]any{
					mcptool.MetaTenant: "acme", mcptool.MetaRunID: "run_1", mcptool.MetaCallID: "call_2",
				}},
			} {
				out, err := f.call(t, tool.Effectful, "meta", tt.tc, args)
				if err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
				var e mcptest.Echo
				if err := json.Unmarshal([]byte(out), &e); err != nil {
					t.Fatalf("%s: outcome %q: %v", tt.name, out, err)
				}
				ours := map[string]any{}
				for k, v := range e.Meta {
					if strings.HasPrefix(k, mcptool.MetaPrefix) {
						ours[k] = v
					}
				}
				if !reflect.DeepEqual(ours, tt.want) {
					t.Errorf("%s: _meta %v; want %v", tt.name, ours, tt.want)
				}
				if string(e.Arguments) != args {
					t.Errorf("%s: arguments %s; want %s", tt.name, e.Arguments, args)
				}
				switch {
				case isStdio(kind) && (e.HasKey || e.Headers != nil):
					t.Errorf("%s: over stdio the server saw HTTP headers %v", tt.name, e.Headers)
				case !isStdio(kind) && (e.HasKey != (tt.tc.IdempotencyKey != "") || e.IdempotencyKey != tt.tc.IdempotencyKey):
					t.Errorf("%s: Idempotency-Key header %q (present: %v); want %q", tt.name, e.IdempotencyKey, e.HasKey, tt.tc.IdempotencyKey)
				}
			}
		})
	}
}

// TestUpstreamAnswers: the upstream's answers that are not outcomes. isError
// and the refusing JSON-RPC errors fail without effect; an internal error may
// come after the tool acted, so it is a plain error (indeterminate for an
// Effectful tool).
func TestUpstreamAnswers(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := open(t, kind, mcptest.Options{}, mcptool.Config{})
			for _, tt := range []struct {
				remote   string
				noEffect bool
				check    func(error) bool
			}{
				{"fail", true, func(err error) bool {
					var te *mcptool.ToolError
					return errors.As(err, &te) && te.Tool == "fail" && te.Upstream == "test" && te.Message == "the flight is full"
				}},
				{"invalid_params", true, func(err error) bool {
					var re *mcptool.RPCError
					return errors.As(err, &re) && re.Code == -32602 && strings.Contains(re.Message, "not a flight")
				}},
				{"no_such_tool", true, func(err error) bool {
					var re *mcptool.RPCError
					return errors.As(err, &re) && re.Code == -32602
				}},
				{"internal_error", false, func(err error) bool {
					var re *mcptool.RPCError
					return errors.As(err, &re) && re.Code == -32603
				}},
			} {
				out, err := f.call(t, tool.Effectful, tt.remote, callCtx, `{}`)
				if err == nil || tool.IsNoEffect(err) != tt.noEffect || !tt.check(err) {
					t.Errorf("%s: %q, %v (no effect: %v); want no effect %v", tt.remote, out, err, tool.IsNoEffect(err), tt.noEffect)
				}
				if errors.Is(err, mcptool.ErrNotSent) {
					t.Errorf("%s: %v matches ErrNotSent, but the request was answered", tt.remote, err)
				}
			}
			if kind == "stdio" {
				// Only the new protocol returns input-required results (the
				// SDK's HTTP server tries to fulfil them itself, and answers
				// a JSON-RPC error when it cannot).
				_, err := f.call(t, tool.Effectful, "needs_input", callCtx, `{}`)
				if !errors.Is(err, mcptool.ErrInputRequired) || !tool.IsNoEffect(err) {
					t.Errorf("needs_input: %v; want ErrInputRequired without effect", err)
				}
			}
		})
	}
}

// TestKilledMidCall: a stdio server killed while it runs a call leaves that
// call's outcome unknown (a plain error, not "no effect"), and the next call
// runs on a new process.
func TestKilledMidCall(t *testing.T) {
	for _, kind := range []string{"stdio", "stdio-legacy"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := open(t, kind, mcptest.Options{}, mcptool.Config{})
			done := make(chan error, 1)
			go func() {
				_, err := f.call(t, tool.Effectful, "hang", callCtx, `{"entity":"e1"}`)
				done <- err
			}()
			first := mcptest.WaitEffects(t, f.effects, 1, 30*time.Second)[0]
			if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err == nil || tool.IsNoEffect(err) || errors.Is(err, mcptool.ErrNotSent) {
					t.Errorf("call in flight when the server was killed: %v; want an unknown outcome", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the call in flight did not end after the server was killed")
			}
			out, err := f.call(t, tool.Effectful, "effect", callCtx, `{"entity":"e2"}`)
			if err != nil || out != "done" {
				t.Fatalf("call after the kill: %q, %v", out, err)
			}
			effects := mcptest.Effects(t, f.effects)
			if len(effects) != 2 || effects[1].PID == first.PID {
				t.Errorf("effects %+v; want a second one from a new process", effects)
			}
		})
	}
}

// TestConnectionDroppedMidCall: over HTTP, the connection carrying a call
// dropped before its answer leaves the outcome unknown; the next call works.
func TestConnectionDroppedMidCall(t *testing.T) {
	for _, kind := range []string{"http", "http-legacy"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := open(t, kind, mcptest.Options{}, mcptool.Config{})
			done := make(chan error, 1)
			go func() {
				_, err := f.call(t, tool.Effectful, "hang", callCtx, `{"entity":"e1"}`)
				done <- err
			}()
			mcptest.WaitEffects(t, f.effects, 1, 30*time.Second)
			f.srv.CloseClientConnections()
			select {
			case err := <-done:
				if err == nil || tool.IsNoEffect(err) || errors.Is(err, mcptool.ErrNotSent) {
					t.Errorf("call whose connection dropped: %v; want an unknown outcome", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the call did not end after its connection dropped")
			}
			if out, err := f.call(t, tool.Effectful, "effect", callCtx, `{"entity":"e2"}`); err != nil || out != "done" {
				t.Fatalf("call after the drop: %q, %v", out, err)
			}
		})
	}
}

// TestHTTPStatus: a 5xx answer to the tools/call POST is an unknown outcome;
// a refusing 4xx is "no effect".
func TestHTTPStatus(t *testing.T) {
	f := open(t, "http", mcptest.Options{}, mcptool.Config{})
	for _, tt := range []struct {
		code     int
		noEffect bool
	}{
		{500, false}, {502, false}, {503, false}, {504, false},
		{400, true}, {403, true}, {409, true}, {429, true},
	} {
		f.faults.status.Store(int32(tt.code))
		_, err := f.call(t, tool.Effectful, "effect", callCtx, `{"entity":"e"}`)
		var se *httptool.StatusError
		if !errors.As(err, &se) || se.StatusCode != tt.code || tool.IsNoEffect(err) != tt.noEffect || errors.Is(err, mcptool.ErrNotSent) {
			t.Errorf("status %d: %v (no effect: %v); want a StatusError, no effect %v", tt.code, err, tool.IsNoEffect(err), tt.noEffect)
		}
	}
	f.faults.status.Store(0)
	if out, err := f.call(t, tool.Effectful, "effect", callCtx, `{"entity":"e"}`); err != nil || out != "done" {
		t.Fatalf("call after the faults: %q, %v", out, err)
	}
	if n := len(mcptest.Effects(t, f.effects)); n != 1 {
		t.Errorf("%d effects; want 1 (the faults stopped the others)", n)
	}
}

// TestSessionForgotten: an HTTP server restarted behind the same URL answers
// 404 to the old session; the call is tried once more on a new session, and
// runs once.
func TestSessionForgotten(t *testing.T) {
	for _, kind := range []string{"http", "http-legacy"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := open(t, kind, mcptest.Options{}, mcptool.Config{})
			if _, err := f.call(t, tool.Effectful, "effect", callCtx, `{"entity":"e1"}`); err != nil {
				t.Fatal(err)
			}
			f.faults.restart()
			if out, err := f.call(t, tool.Effectful, "effect", callCtx, `{"entity":"e2"}`); err != nil || out != "done" {
				t.Fatalf("call after the server forgot the session: %q, %v", out, err)
			}
			if n := len(mcptest.Effects(t, f.effects)); n != 2 {
				t.Errorf("%d effects; want 2", n)
			}
		})
	}
}

// TestCannotStart: an upstream that cannot be started or connected fails
// Open with ErrUnavailable.
func TestCannotStart(t *testing.T) {
	failFile := t.TempDir() + "/fail"
	if err := os.WriteFile(failFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	failing, failingEnv := mcptest.Command(mcptest.Options{FailFile: failFile})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/mcp?token=hunter2"
	ln.Close()
	for _, tt := range []struct {
		name string
		cfg  mcptool.Config
	}{
		{"no such program", mcptool.Config{Command: []string{"/nonexistent/mcp-server"}}},
		{"exits before answering", mcptool.Config{Command: failing, Env: failingEnv}},
		{"connection refused", mcptool.Config{URL: refused}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Name = "test"
			tt.cfg.Logger = testenv.Logger()
			u, err := mcptool.Open(testenv.Context(t, time.Minute), tt.cfg)
			if !errors.Is(err, mcptool.ErrUnavailable) {
				t.Errorf("Open: %v, %v; want ErrUnavailable", u, err)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error repeats the URL's query: %v", err)
			}
		})
	}
}

// TestNotSent: a call to an HTTP upstream that went away fails without
// effect, as never sent, and as the upstream being unavailable: the session
// is ended, and the upstream found down.
func TestNotSent(t *testing.T) {
	f := open(t, "http", mcptest.Options{}, mcptool.Config{})
	f.srv.Close()
	_, err := f.call(t, tool.Effectful, "effect", callCtx, `{"entity":"e"}`)
	if !tool.IsNoEffect(err) || !errors.Is(err, mcptool.ErrNotSent) || !errors.Is(err, tool.ErrUnavailable) {
		t.Errorf("call to a closed server: %v; want ErrNotSent and unavailable, without effect", err)
	}
	if st := f.u.Status(); st.State != mcptool.StateDown {
		t.Errorf("status after the call: %+v; want down", st)
	}
}

// TestRestart: a stdio server that dies is started again in the background;
// while it cannot start, the upstream is down and calls fail at once,
// without effect and matching tool.ErrUnavailable; once it can, it is
// started again without a call asking for it.
func TestRestart(t *testing.T) {
	failFile := t.TempDir() + "/fail"
	logs := &testenv.LogBuffer{}
	states := &stateLog{}
	f := open(t, "stdio", mcptest.Options{FailFile: failFile}, mcptool.Config{
		MinRestartDelay: 300 * time.Millisecond, MaxRestartDelay: time.Second,
		Logger: bufferLogger(logs), OnState: states.add,
	})
	if _, err := f.call(t, tool.Effectful, "effect", callCtx, `{"entity":"e1"}`); err != nil {
		t.Fatal(err)
	}
	first := mcptest.Effects(t, f.effects)[0]
	if err := os.WriteFile(failFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 30*time.Second, "the upstream to be down", func() bool { return f.u.Status().State == mcptool.StateDown })
	st := f.u.Status()
	if !errors.Is(st.Err, mcptool.ErrUnavailable) || st.Failures < 1 || st.RetryAt.IsZero() {
		t.Errorf("status while down: %+v", st)
	}
	_, err := f.call(t, tool.Effectful, "effect", callCtx, `{"entity":"e2"}`)
	if !errors.Is(err, mcptool.ErrUnavailable) || !errors.Is(err, mcptool.ErrNotSent) || !tool.IsNoEffect(err) ||
		!errors.Is(err, tool.ErrUnavailable) || !strings.Contains(err.Error(), "next attempt in") {
		t.Fatalf("call while the server cannot start: %v; want ErrUnavailable, not sent, naming the next attempt", err)
	}
	wait.Eventually(t, 30*time.Second, "two starts to fail", func() bool { return f.u.Status().Failures >= 3 })
	if err := os.Remove(failFile); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 30*time.Second, "the upstream to be connected again, with no call asking", func() bool {
		return f.u.Status().State == mcptool.StateConnected
	})
	out, err := f.call(t, tool.Effectful, "effect", callCtx, `{"entity":"e4"}`)
	effects := mcptest.Effects(t, f.effects)
	if err != nil || out != "done" || len(effects) != 2 || effects[1].PID == first.PID || effects[1].Arguments != `{"entity":"e4"}` {
		t.Errorf("after the restart: %q, %v, effects %+v", out, err, effects)
	}
	if got, want := states.compact(), "connected down connected"; got != want {
		t.Errorf("states reported: %q, want %q", got, want)
	}
	// The failed starts were logged at warn level once, not once per attempt.
	if n := strings.Count(logs.String(), "level=WARN msg=\"mcp server failed to start"); n != 1 {
		t.Errorf("%d failed starts logged at warn level, want 1:\n%s", n, logs)
	}
}

// TestDownAtStart: an HTTP upstream that cannot be reached when it is made
// is down, its calls fail at once without effect, and it is connected in the
// background once its server listens, with a backoff between attempts.
func TestDownAtStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logs := &testenv.LogBuffer{}
	states := &stateLog{}
	u, err := mcptool.New(mcptool.Config{
		Name: "later", URL: "http://" + addr + "/mcp", Logger: bufferLogger(logs), OnState: states.add,
		MinRestartDelay: 50 * time.Millisecond, MaxRestartDelay: 400 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	if _, err := u.ListTools(testenv.Context(t, time.Minute)); !errors.Is(err, mcptool.ErrUnavailable) {
		t.Fatalf("ListTools while nothing listens: %v; want ErrUnavailable", err)
	}
	_, err = callTool(t, u, tool.Effectful, "effect", callCtx, `{"entity":"e"}`)
	if !tool.IsNoEffect(err) || !errors.Is(err, tool.ErrUnavailable) {
		t.Fatalf("call while nothing listens: %v; want unavailable, without effect", err)
	}
	time.Sleep(time.Second)
	// 50, 100, 200, 400, 400 ms...: a handful of attempts, not one per
	// millisecond.
	if st := u.Status(); st.State != mcptool.StateDown || st.Failures < 2 || st.Failures > 6 {
		t.Errorf("after a second down: %+v; want down after 2 to 6 attempts", st)
	}

	effects := filepath.Join(t.TempDir(), "effects")
	s := mcptest.NewServer(mcptest.Options{EffectsFile: effects})
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)}}
	srv.Start()
	t.Cleanup(srv.Close)
	wait.Eventually(t, 10*time.Second, "the upstream to connect", func() bool { return u.Status().State == mcptool.StateConnected })
	if out, err := callTool(t, u, tool.Effectful, "effect", callCtx, `{"entity":"e"}`); err != nil || out != "done" {
		t.Fatalf("call once connected: %q, %v", out, err)
	}
	if n := len(mcptest.Effects(t, effects)); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
	if got, want := states.compact(), "down connected"; got != want {
		t.Errorf("states reported: %q, want %q", got, want)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings logged while down, want 1:\n%s", n, logs)
	}
	u.Close()
	if st := u.Status(); st.State != mcptool.StateClosed {
		t.Errorf("after Close: %+v", st)
	}
}

// TestHTTPServerGoneNoticed: an HTTP server that goes away while no call is
// made is noticed by the session's ping, and the upstream is down without a
// call finding out.
func TestHTTPServerGoneNoticed(t *testing.T) {
	states := &stateLog{}
	f := open(t, "http", mcptest.Options{}, mcptool.Config{
		MinRestartDelay: 50 * time.Millisecond, MaxRestartDelay: 200 * time.Millisecond, OnState: states.add,
	})
	time.Sleep(500 * time.Millisecond) // pings answered: it stays connected
	if st := f.u.Status(); st.State != mcptool.StateConnected {
		t.Fatalf("with the server up: %+v", st)
	}
	f.srv.Close()
	wait.Eventually(t, 10*time.Second, "the upstream to be down", func() bool { return f.u.Status().State == mcptool.StateDown })
	if got, want := states.compact(), "connected down"; got != want {
		t.Errorf("states reported: %q, want %q", got, want)
	}
}

// TestFlapping: a stdio server that exits soon after each start is started
// once per restart delay, doubling, not once per exit; each start that
// lasts too little counts as a failure.
func TestFlapping(t *testing.T) {
	logs := &testenv.LogBuffer{}
	f := open(t, "stdio", mcptest.Options{ExitAfter: 20 * time.Millisecond}, mcptool.Config{
		MinRestartDelay: 50 * time.Millisecond, MaxRestartDelay: 400 * time.Millisecond,
		Logger: bufferLogger(logs),
	})
	time.Sleep(2 * time.Second)
	// Without a backoff: a start every ~30 ms, some 60. With it: 20 ms up,
	// then 50, 100, 200, 400, 400, ... ms down, about 8 (fewer under the race
	// detector, whose processes linger a second at exit).
	starts := strings.Count(logs.String(), "mcptest: serving on stdio")
	if starts < 2 || starts > 12 {
		t.Errorf("%d starts in 2s; want a handful:\n%s", starts, logs)
	}
	if st := f.u.Status(); st.State == mcptool.StateConnected && st.Failures != 0 {
		t.Errorf("status: %+v", st)
	}
}

// TestCallsRacingRestarts: calls made while a stdio server is killed again
// and again each run once or not at all: a call that succeeded ran once, a
// call that failed without effect did not run, and no call ran twice.
func TestCallsRacingRestarts(t *testing.T) {
	f := open(t, "stdio", mcptest.Options{}, mcptool.Config{MinRestartDelay: 20 * time.Millisecond, MaxRestartDelay: 200 * time.Millisecond})
	const n = 60
	errs := make([]error, n)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	killer := make(chan struct{})
	go func() { // kill whatever process ran the last effect, every 30 ms
		defer close(killer)
		for {
			select {
			case <-stop:
				return
			case <-time.After(30 * time.Millisecond):
			}
			if e := mcptest.Effects(t, f.effects); len(e) > 0 {
				_ = syscall.Kill(e[len(e)-1].PID, syscall.SIGKILL)
			}
		}
	}()
	for i := range n {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 10 * time.Millisecond)
			_, errs[i] = f.call(t, tool.Effectful, "effect", callCtx, fmt.Sprintf(`{"entity":"e%d"}`, i))
		})
	}
	wg.Wait()
	close(stop)
	<-killer
	ran := map[string]int{}
	for _, e := range mcptest.Effects(t, f.effects) {
		ran[e.Arguments]++
	}
	var ok, none, unknown int
	for i, err := range errs {
		times := ran[fmt.Sprintf(`{"entity":"e%d"}`, i)]
		switch {
		case times > 1:
			t.Errorf("call %d ran %d times", i, times)
		case err == nil:
			ok++
			if times != 1 {
				t.Errorf("call %d succeeded and ran %d times", i, times)
			}
		case tool.IsNoEffect(err):
			none++
			if times != 0 {
				t.Errorf("call %d failed without effect (%v) and ran", i, err)
			}
		default:
			unknown++ // killed after it was written: ran once or not at all
		}
	}
	t.Logf("%d calls ran, %d did not (rejected), %d were cut off mid-call", ok, none, unknown)
	if ok == 0 {
		t.Error("no call succeeded")
	}
}

// stateLog records the states an upstream reports.
type stateLog struct {
	mu     sync.Mutex
	states []mcptool.State
}

func (l *stateLog) add(st mcptool.Status) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.states = append(l.states, st.State)
}

// compact returns the states reported, space-separated, connecting and
// closed left out (a session lost after it lasted goes through connecting).
func (l *stateLog) compact() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.states {
		if s != mcptool.StateClosed && s != mcptool.StateConnecting {
			out = append(out, string(s))
		}
	}
	return strings.Join(out, " ")
}

// TestStderrIsLogged: what a stdio server writes on its standard error is
// logged, line by line.
func TestStderrIsLogged(t *testing.T) {
	logs := &testenv.LogBuffer{}
	open(t, "stdio", mcptest.Options{}, mcptool.Config{Logger: bufferLogger(logs)})
	wait.Eventually(t, 30*time.Second, "the server's start-up line in the log", func() bool {
		s := logs.String()
		return strings.Contains(s, "upstream stderr") && strings.Contains(s, "mcptest: serving on stdio")
	})
}

// TestConcurrentCalls: one upstream process serves many calls at once.
func TestConcurrentCalls(t *testing.T) {
	for _, kind := range []string{"stdio", "http"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := open(t, kind, mcptest.Options{}, mcptool.Config{})
			const n = 32
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tc := callCtx
					tc.IdempotencyKey = strings.Repeat("k", i+1)
					if out, err := f.call(t, tool.Effectful, "effect", tc, `{"entity":"e"}`); err != nil || out != "done" {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("concurrent call: %v", err)
			}
			effects := mcptest.Effects(t, f.effects)
			pids := map[int]bool{}
			for _, e := range effects {
				pids[e.PID] = true
			}
			if len(effects) != n || len(pids) != 1 {
				t.Errorf("%d effects from %d processes; want %d from 1", len(effects), len(pids), n)
			}
		})
	}
}

// TestClose: a call in flight when the upstream closes has an unknown
// outcome; calls after it fail without effect; Close waits for the process.
func TestClose(t *testing.T) {
	f := open(t, "stdio", mcptest.Options{}, mcptool.Config{StopTimeout: 2 * time.Second})
	done := make(chan error, 1)
	go func() {
		_, err := f.call(t, tool.Effectful, "hang", callCtx, `{"entity":"e"}`)
		done <- err
	}()
	pid := mcptest.WaitEffects(t, f.effects, 1, 30*time.Second)[0].PID
	if err := f.u.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || tool.IsNoEffect(err) {
		t.Errorf("call in flight at Close: %v; want an unknown outcome", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the server process %d is still there after Close (kill 0: %v)", pid, err)
	}
	_, err := f.call(t, tool.Effectful, "effect", callCtx, `{"entity":"e"}`)
	if !errors.Is(err, mcptool.ErrClosed) || !tool.IsNoEffect(err) {
		t.Errorf("call after Close: %v; want ErrClosed without effect", err)
	}
}

// TestConfigErrors: Open refuses a bad configuration before starting
// anything, naming the field.
func TestConfigErrors(t *testing.T) {
	cmd := []string{"/bin/true"}
	for _, tt := range []struct {
		name  string
		cfg   mcptool.Config
		field string
	}{
		{"no name", mcptool.Config{Command: cmd}, "name"},
		{"name not a token", mcptool.Config{Name: "a b", Command: cmd}, "name"},
		{"neither command nor url", mcptool.Config{Name: "s"}, "command"},
		{"both command and url", mcptool.Config{Name: "s", Command: cmd, URL: "http://x.example/mcp"}, "command"},
		{"empty program", mcptool.Config{Name: "s", Command: []string{""}}, "command"},
		{"env name with =", mcptool.Config{Name: "s", Command: cmd, Env: map[string]string{"A=B": "c"}}, "env"},
		{"headers with a command", mcptool.Config{Name: "s", Command: cmd, Headers: map[string]string{"A": "b"}}, "headers"},
		{"url not http", mcptool.Config{Name: "s", URL: "ftp://x.example/mcp"}, "url"},
		{"url without host", mcptool.Config{Name: "s", URL: "http:///mcp"}, "url"},
		{"env with a url", mcptool.Config{Name: "s", URL: "http://x.example/mcp", Env: map[string]string{"A": "b"}}, "env"},
		{"dir with a url", mcptool.Config{Name: "s", URL: "http://x.example/mcp", Dir: "/tmp"}, "dir"},
		{"Idempotency-Key header", mcptool.Config{Name: "s", URL: "http://x.example/mcp", Headers: map[string]string{"idempotency-key": "k"}}, "headers"},
		{"Mcp-Session-Id header", mcptool.Config{Name: "s", URL: "http://x.example/mcp", Headers: map[string]string{"Mcp-Session-Id": "k"}}, "headers"},
		{"Toolexec- header", mcptool.Config{Name: "s", URL: "http://x.example/mcp", Headers: map[string]string{"Toolexec-Tenant": "k"}}, "headers"},
		{"bad header name", mcptool.Config{Name: "s", URL: "http://x.example/mcp", Headers: map[string]string{"a b": "k"}}, "headers"},
		{"header value with a newline", mcptool.Config{Name: "s", URL: "http://x.example/mcp", Headers: map[string]string{"A": "b\nC: d"}}, "headers"},
		{"negative timeout", mcptool.Config{Name: "s", Command: cmd, StartTimeout: -time.Second}, "timeouts"},
		{"restart delays crossed", mcptool.Config{Name: "s", Command: cmd, MinRestartDelay: time.Minute, MaxRestartDelay: time.Second}, "timeouts"},
		{"negative content bound", mcptool.Config{Name: "s", Command: cmd, MaxContentBytes: -1}, "max_content_bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mcptool.Open(testenv.Context(t, time.Minute), tt.cfg)
			var ce *mcptool.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field || !errors.Is(err, mcptool.ErrInvalidConfig) {
				t.Errorf("Open: %v; want a ConfigError on %s", err, tt.field)
			}
			if strings.Contains(err.Error(), "b\nC") {
				t.Errorf("the error repeats a header value: %v", err)
			}
		})
	}
}
