package bus_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/tool"
)

// TestWorkerKilledMidCall kills a worker (its connection closes: no more
// in-progress signals, lease renewals or answers) while its tool body blocks.
// JetStream redelivers the call to a second worker, which finds the claim. Once
// the dead holder's lease runs out, an Effectful call is answered indeterminate
// (holder_lost) without re-running the body; an Idempotent one is taken over and
// completed.
func TestWorkerKilledMidCall(t *testing.T) {
	tests := []struct {
		name        string
		kind        tool.Kind
		wantKind    events.Kind
		wantReason  events.Reason
		wantEntered int64 // bodies entered on the second worker
		wantState   kvstore.State
	}{
		{name: "effectful", kind: tool.Effectful, wantKind: events.KindIndeterminate, wantReason: events.ReasonHolderLost, wantState: kvstore.StateIndeterminate},
		{name: "idempotent", kind: tool.Idempotent, wantKind: events.KindCompleted, wantEntered: 1, wantState: kvstore.StateCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			const lease = 2 * time.Second
			cfg := bus.WorkerConfig{AckWait: time.Second}

			entered := make(chan struct{}, 1)
			release := make(chan struct{})
			var firstEntered, secondEntered atomic.Int64
			first := h.startWorker(t, registry(t, bookTool(t, "book", tt.kind, func(context.Context, tool.Context, json.RawMessage) (string, error) {
				firstEntered.Add(1)
				entered <- struct{}{}
				<-release // ignores its context, as a hung body would
				return "first", nil
			})), cfg, lease)
			t.Cleanup(func() {
				select {
				case <-release:
				default:
					close(release)
				}
			})

			c := call("book", "run-1", "call-1", `{"flight":"LH1"}`)
			if _, err := h.client.Publish(ctxT(t), c); err != nil {
				t.Fatal(err)
			}
			select {
			case <-entered:
			case <-time.After(20 * time.Second):
				t.Fatal("the first worker never entered the body")
			}
			first.nc.Close() // the process dies: nothing more reaches the server from it

			second := h.startWorker(t, registry(t, bookTool(t, "book", tt.kind, func(context.Context, tool.Context, json.RawMessage) (string, error) {
				secondEntered.Add(1)
				return "second", nil
			})), cfg, lease)

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			a, err := h.client.Attach(ctx, c.Tenant, c.Tool, c.RunID, c.CallID)
			if err != nil {
				t.Fatalf("Attach: %v", err)
			}
			if a.Kind != tt.wantKind || a.Reason != tt.wantReason {
				t.Fatalf("answer %s (%s), want %s (%s)", a.Kind, a.Reason, tt.wantKind, tt.wantReason)
			}
			if tt.wantKind == events.KindIndeterminate && !a.BodyEntered {
				t.Error("holder_lost answer says the body was not entered")
			}
			if tt.wantKind == events.KindCompleted && a.Outcome != "second" {
				t.Errorf("outcome %q, want the second worker's", a.Outcome)
			}
			if n := secondEntered.Load(); n != tt.wantEntered {
				t.Errorf("second worker entered the body %d times, want %d", n, tt.wantEntered)
			}
			if second.w.Stats().Received.Load() < 1 {
				t.Error("the second worker never received the call")
			}

			// The dead worker's body returns at last; nothing it does reaches the
			// server, and its Run ends.
			close(release)
			if err := first.wait(t); err == nil {
				t.Error("Run of the killed worker returned nil; want the closed connection")
			}
			if n := firstEntered.Load(); n != 1 {
				t.Errorf("first worker entered the body %d times", n)
			}

			rec, err := second.store.Get(ctxT(t), c.Tenant, a.Key)
			if err != nil {
				t.Fatalf("record: %v", err)
			}
			if rec.State != tt.wantState {
				t.Errorf("record state %s, want %s", rec.State, tt.wantState)
			}
			consumerSettled(t, h.js)
			subjects := eventSubjects(t, h.js, wire.AnswerFilter(c.Tenant, c.Tool, c.RunID, c.CallID))
			if len(subjects) != 1 {
				t.Errorf("stored answers for the call: %v, want exactly one", subjects)
			}
		})
	}
}
