package demo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/app/demo"
	"github.com/tesserix/toolexec/kvstore/memstore"
	"github.com/tesserix/toolexec/tool"
)

// TestUnderTheDispatcher runs the demo's story through the real dispatcher and an
// in-memory store (no NATS): duplicates collapse, a lost answer is indeterminate
// and stays so, a refusal releases the key, and the airline's own counters show
// that nothing landed twice.
func TestUnderTheDispatcher(t *testing.T) {
	a := demo.New()
	reg, err := tool.NewRegistry(a.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatch.New(dispatch.Config{Tools: reg, Store: memstore.New(memstore.Config{}),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := 0
	send := func(toolName, args string) events.Answer {
		t.Helper()
		n++
		a, err := d.Dispatch(ctx, events.Call{Tenant: "acme", RunID: "run_1", CallID: fmt.Sprintf("c%d", n), Tool: toolName,
			Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatalf("Dispatch %s %s: %v", toolName, args, err)
		}
		return a
	}
	expect := func(got events.Answer, kind events.Kind) {
		t.Helper()
		if got.Kind != kind {
			t.Fatalf("answer %+v; want %s", got, kind)
		}
	}

	// A booking, then the retry that renumbered its request id: one seat.
	first := send("book", `{"flight":"BA117","seats":2,"request_id":"r1"}`)
	expect(first, events.KindCompleted)
	dup := send("book", `{"flight":"BA117","seats":2,"request_id":"r2"}`)
	expect(dup, events.KindDeduplicated)
	if dup.Outcome != first.Outcome {
		t.Errorf("duplicate answered %q; want the first PNR %q", dup.Outcome, first.Outcome)
	}
	// A "duplicate" asking for other seats is refused, not answered with the PNR.
	mismatch := send("book", `{"flight":"BA117","seats":3,"request_id":"r3"}`)
	if mismatch.Kind != events.KindRejected || mismatch.Code != events.CodeArgumentsMismatch {
		t.Errorf("seats changed: answer %+v; want rejected arguments_mismatch", mismatch)
	}
	if got := a.Bookings("BA117"); got != 1 {
		t.Errorf("Bookings(BA117) = %d; want 1", got)
	}

	// The answer is lost after the seat was taken: indeterminate, and the retry
	// does not book again.
	lost := send("book", `{"flight":"LH400","seats":1,"request_id":"r1","fail_after_effect":true}`)
	if lost.Kind != events.KindIndeterminate || lost.Reason != events.ReasonBodyFailed || !lost.BodyEntered {
		t.Errorf("lost answer: %+v; want indeterminate, body_failed, body entered", lost)
	}
	expect(send("book", `{"flight":"LH400","seats":1,"request_id":"r2"}`), events.KindIndeterminate)
	if got := a.Bookings("LH400"); got != 1 {
		t.Errorf("Bookings(LH400) = %d; want 1", got)
	}

	// A cancelled flight is refused before acting: failed, and the key is free.
	a.Cancel("UA901")
	refused := send("book", `{"flight":"UA901","seats":1,"request_id":"r1"}`)
	if refused.Kind != events.KindFailed || refused.Code != events.CodeNoEffect {
		t.Errorf("cancelled flight: %+v; want failed no_effect", refused)
	}
	expect(send("book", `{"flight":"UA901","seats":1,"request_id":"r2"}`), events.KindFailed)
	if got := a.Bookings("UA901"); got != 0 {
		t.Errorf("Bookings(UA901) = %d; want 0", got)
	}

	// Invalid arguments never reach the airline.
	bad := send("book", `{"flight":"BA117","seats":0,"request_id":"r9"}`)
	if bad.Kind != events.KindRejected || bad.Code != events.CodeSchemaViolation {
		t.Errorf("seats 0: %+v; want rejected schema_violation", bad)
	}

	// The idempotent profile update: written once, duplicates answered, a change
	// of mind within the run refused.
	expect(send("update_profile", `{"passenger":"ada","seat":"window"}`), events.KindCompleted)
	expect(send("update_profile", `{"passenger":"ada","seat":"window"}`), events.KindDeduplicated)
	changed := send("update_profile", `{"passenger":"ada","seat":"aisle"}`)
	if changed.Kind != events.KindRejected || changed.Code != events.CodeArgumentsMismatch {
		t.Errorf("seat changed: %+v; want rejected arguments_mismatch", changed)
	}
	if w := a.ProfileWrites("ada"); w != 1 {
		t.Errorf("ProfileWrites(ada) = %d; want 1", w)
	}

	// Fares are read-only: every call runs.
	expect(send("lookup_fare", `{"flight":"BA117"}`), events.KindCompleted)
	if fare := send("lookup_fare", `{"flight":"BA117"}`); fare.Kind != events.KindCompleted || fare.Outcome != "GBP 612.40" {
		t.Errorf("fare: %+v", fare)
	}
}
