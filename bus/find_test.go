package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/clienttest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/tool"
)

// TestFind: a call's stored answer is found by its tenant and call id alone,
// through JetStream and through the history service; another tenant's, or an
// unknown id, is not found, and nothing waits.
func TestFind(t *testing.T) {
	h := newHarness(t)
	h.serveHistory(t)
	book := bookTool(t, "book", tool.Effectful, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return "PNR1", nil
	})
	h.startWorker(t, registry(t, book), bus.WorkerConfig{}, 0)
	ctx := ctxT(t)
	if a, err := h.client.Call(ctx, call("book", "run-1", "c-1", `{"flight":"BA117"}`)); err != nil || a.Kind != events.KindCompleted {
		t.Fatalf("Call = %+v, %v", a, err)
	}
	// A caller hears an answer when the server routes it, which under load
	// can come before the events stream stores it; Find reads the stream.
	wait.Eventually(t, 10*time.Second, "the answer to be stored", func() bool {
		return len(eventSubjects(t, h.js, wire.AnswerFilter("acme", "book", "run-1", "c-1"))) == 1
	})
	for name, c := range map[string]clienttest.Client{"jetstream": h.client, "service": h.serviceClient(t)} {
		t.Run(name, func(t *testing.T) {
			a, found, err := c.Find(ctx, "acme", "c-1")
			if err != nil || !found || a.Outcome != "PNR1" || a.RunID != "run-1" || a.Tool != "book" {
				t.Fatalf("Find(acme, c-1) = %+v, %v, %v; want the completed answer", a, found, err)
			}
			for _, tc := range []struct{ tenant, callID string }{{"acme", "c-2"}, {"globex", "c-1"}} {
				if a, found, err := c.Find(ctx, tc.tenant, tc.callID); err != nil || found {
					t.Errorf("Find(%s, %s) = %+v, %v, %v; want not found", tc.tenant, tc.callID, a, found, err)
				}
			}
			if _, _, err := c.Find(ctx, "acme", "c.1"); !errors.Is(err, events.ErrInvalidToken) {
				t.Errorf("Find with a bad call id: %v, want ErrInvalidToken", err)
			}
		})
	}
}
