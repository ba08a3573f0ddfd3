package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/tool"
)

// chattyTool reports n progress and n log notifications through its
// caller, then asks it to confirm, and answers what it was told (or why it
// was refused).
func chattyTool(t *testing.T, n int) *tool.Tool {
	t.Helper()
	tl, err := tool.New(tool.Spec{Name: "chatty", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ tool.Context, _ json.RawMessage) (string, error) {
			c := tool.CallerFrom(ctx)
			for i := 1; i <= n; i++ {
				c.Notify("notifications/progress", json.RawMessage(fmt.Sprintf(`{"progressToken":"x","progress":%d,"total":%d}`, i, n)))
				c.Notify("notifications/message", json.RawMessage(fmt.Sprintf(`{"level":"info","data":"line %d"}`, i)))
			}
			res, err := c.Ask(ctx, wire.MethodElicit, json.RawMessage(`{"message":"ok?"}`))
			var ce *tool.CallerError
			if errors.As(err, &ce) {
				return fmt.Sprintf("refused %d", ce.Code), nil
			}
			return string(res), err
		})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// TestNotesAreBoundedAndAnswerReadersIgnoreThem: a body's flood of
// notifications is stored as at most MaxNotes notes and one saying how many
// were dropped (progress coalesced, logs paced); the answer readers (Call, Attach, Watch, Find) see the
// answer alone, WatchEvents sees the notes in their place, and a caller that
// declared nothing has the body's request refused at once.
func TestNotesAreBoundedAndAnswerReadersIgnoreThem(t *testing.T) {
	h := newHarness(t)
	h.startWorker(t, registry(t, chattyTool(t, 500)), bus.WorkerConfig{Relay: bus.RelayLimits{MaxNotes: 20}}, 0)
	ctx := ctxT(t)
	evs, err := h.client.WatchEvents(ctx, wire.EventPrefix+"acme.>")
	if err != nil {
		t.Fatal(err)
	}
	watched, err := h.client.Watch(ctx, wire.EventPrefix+"acme.>")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	a, err := h.client.Call(ctx, call("chatty", "run_1", "call_1", `{}`))
	if err != nil || a.Kind != events.KindCompleted || a.Outcome != "refused -32601" {
		t.Fatalf("Call: %+v, %v; want completed, the request refused", a, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the refused request took %s", d)
	}
	notes := 0
	var last wire.Note
	for last.Logger != "toolexec" {
		select {
		case ev := <-evs:
			if ev.Note == nil {
				if ev.Answer.Kind != events.KindCompleted {
					t.Errorf("WatchEvents: %+v", ev.Answer)
				}
				continue
			}
			notes++
			if ev.Note.Seq != notes || ev.Note.CallID != "call_1" {
				t.Errorf("note %d: %+v", notes, ev.Note)
			}
			last = *ev.Note
		case <-time.After(3 * time.Second):
			t.Fatalf("WatchEvents delivered %d notes, none saying how many were dropped", notes)
		}
	}
	// Progress coalesced, logs paced after a burst: far fewer than the bound.
	if notes < 3 || notes > 21 {
		t.Errorf("%d notes for 1000 notifications; want a few, at most the bound (20) and one saying how many were dropped", notes)
	}
	if n := len(eventSubjects(t, h.js, wire.NoteFilter("acme", "chatty", "call_1"))); n != notes {
		t.Errorf("%d notes stored, %d watched", n, notes)
	}
	select {
	case got := <-watched:
		if got.Kind != events.KindCompleted {
			t.Errorf("Watch delivered %+v; want the answer alone", got)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Watch delivered nothing")
	}
	for _, get := range []func() (events.Answer, error){
		func() (events.Answer, error) { return h.client.Attach(ctx, "acme", "chatty", "run_1", "call_1") },
		func() (events.Answer, error) {
			a, found, err := h.client.Find(ctx, "acme", "call_1")
			if !found && err == nil {
				err = errors.New("not found")
			}
			return a, err
		},
	} {
		if a, err := get(); err != nil || a.Kind != events.KindCompleted {
			t.Errorf("reading the stored answer: %+v, %v", a, err)
		}
	}
}

// TestCallerAnswersThroughInteractions: a caller that declared elicitation
// takes the body's request and answers it; the answer is the outcome.
func TestCallerAnswersThroughInteractions(t *testing.T) {
	h := newHarness(t)
	h.startWorker(t, registry(t, chattyTool(t, 1)), bus.WorkerConfig{}, 0)
	ctx := ctxT(t)
	ix, err := h.client.Interactions("acme", "chatty", "call_2")
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	c := call("chatty", "run_1", "call_2", `{}`)
	c.Interactions = []string{wire.CanElicit}
	done := make(chan events.Answer, 1)
	go func() {
		a, err := h.client.Call(ctx, c)
		if err != nil {
			t.Error(err)
		}
		done <- a
	}()
	in := <-ix.Asks()
	if in.Method != wire.MethodElicit || string(in.Params) != `{"message":"ok?"}` || in.Deadline.IsZero() {
		t.Fatalf("asked %+v", in)
	}
	if err := ix.Take(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	if err := ix.Answer(ctx, in.ID, json.RawMessage(`{"action":"accept"}`), nil); err != nil {
		t.Fatal(err)
	}
	if a := <-done; a.Outcome != `{"action":"accept"}` {
		t.Errorf("answer %+v", a)
	}
	if err := ix.Answer(ctx, in.ID, json.RawMessage(`{}`), nil); err == nil {
		t.Error("an answer after the call: accepted")
	}
}

// TestAsksAreBounded: a call makes at most MaxAsks requests, each at most
// MaxAskBytes; beyond either, the request is refused at once, and a request
// no one takes is refused after TakeWait.
func TestAsksAreBounded(t *testing.T) {
	h := newHarness(t)
	asker, err := tool.New(tool.Spec{Name: "asker", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ tool.Context, _ json.RawMessage) (string, error) {
			c := tool.CallerFrom(ctx)
			var out []string
			for _, params := range []string{`{"n":1}`, `{"big":"` + strings.Repeat("x", 200) + `"}`, `{"n":2}`, `{"n":3}`} {
				res, err := c.Ask(ctx, wire.MethodElicit, json.RawMessage(params))
				var ce *tool.CallerError
				switch {
				case errors.As(err, &ce):
					out = append(out, fmt.Sprint(ce.Code))
				case err != nil:
					return "", err
				default:
					out = append(out, string(res))
				}
			}
			return strings.Join(out, " "), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	h.startWorker(t, registry(t, asker), bus.WorkerConfig{Relay: bus.RelayLimits{MaxAsks: 2, MaxAskBytes: 100, TakeWait: 300 * time.Millisecond}}, 0)
	ctx := ctxT(t)
	ix, err := h.client.Interactions("acme", "asker", "call_b")
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	go func() {
		// The first is answered; the second, left alone, is not taken.
		select {
		case in := <-ix.Asks():
			_ = ix.Take(ctx, in.ID)
			_ = ix.Answer(ctx, in.ID, json.RawMessage(`{"action":"accept"}`), nil)
		case <-ctx.Done():
		}
	}()
	c := call("asker", "run_1", "call_b", `{}`)
	c.Interactions = []string{wire.CanElicit}
	a, err := h.client.Call(ctx, c)
	// accepted; too large (-32602, at once); not taken (-32603); over the
	// count (-32602, at once).
	if err != nil || a.Outcome != `{"action":"accept"} -32602 -32603 -32602` {
		t.Fatalf("Call: %+v, %v", a, err)
	}
}
