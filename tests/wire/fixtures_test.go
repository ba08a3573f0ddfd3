package wire_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/idemkey"
)

// The one call the goldens are written from, and its answers: fixed ids,
// times and trace context, so that every message is the same on every run.
const (
	tenant   = "acme"
	toolName = "book"
	runID    = "run_1"
	callID   = "call_5f0c3e1a9b7d42c68e1f0a2b3c4d5e6f" // as the clients draw them: call_ and 32 hex digits
	source   = "/agents/trip-planner?user=zoë"         // percent-encoded in binary mode

	// executorSource answers the calls; a resolution comes from the admin
	// service's source.
	executorSource = "/toolexec/executor/ex-1"
	adminSource    = "/toolexec/executor"

	traceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	traceState  = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"

	// arguments are sent byte for byte: the spacing and member order stay.
	arguments = `{"flight":"BA117", "seats":2, "request_id":"r-1"}`
	// outcome is a JSON document with characters an HTML-escaping encoder
	// would change, and one outside ASCII.
	outcome = `{"pnr":"K7Q2ZD","seat":"<12A> & 12B","note":"confirmé"}`
)

var (
	callTime   = time.Date(2026, 7, 28, 9, 30, 0, 123456000, time.UTC)
	answerTime = time.Date(2026, 7, 28, 9, 30, 1, 987654321, time.UTC)
	// resolveTime is when an operator settled the indeterminate key.
	resolveTime = time.Date(2026, 7, 28, 11, 5, 0, 0, time.UTC)
	// keyArguments are book's: the flight identifies the effect.
	keyArguments = []string{"flight"}
)

// modes are the two message layouts, each golden message written in both.
var modes = []wire.Mode{wire.Structured, wire.Binary}

// goldenCall is the call every golden answers: every attribute and header a
// call may carry is set.
func goldenCall() events.Call {
	return events.Call{
		Tenant: tenant, RunID: runID, CallID: callID, Tool: toolName, Source: source,
		Arguments:   json.RawMessage(arguments),
		TraceParent: traceParent, TraceState: traceState,
		Time:         callTime,
		Repeat:       true,
		Interactions: []string{wire.CanElicit, wire.CanSample},
	}
}

// key returns the call's idempotency key, as the executors derive it.
func key(t *testing.T) string {
	t.Helper()
	k, err := idemkey.Derive(tenant, runID, toolName, []byte(arguments), keyArguments)
	if err != nil {
		t.Fatal(err)
	}
	return k.Hex
}

// answerCase is one golden answer and the source it is published from.
type answerCase struct {
	name   string // the golden's name: the kind
	answer events.Answer
	source string
}

// goldenAnswers returns one answer of each kind to goldenCall, the audit
// kind resolved too.
func goldenAnswers(t *testing.T) []answerCase {
	k := key(t)
	base := events.Answer{
		Tenant: tenant, RunID: runID, CallID: callID, Tool: toolName,
		TraceParent: traceParent, TraceState: traceState, Time: answerTime,
	}
	with := func(f func(a *events.Answer)) events.Answer {
		a := base
		f(&a)
		return a
	}
	return []answerCase{
		{"completed", with(func(a *events.Answer) {
			a.Kind, a.Key, a.Outcome = events.KindCompleted, k, outcome
		}), executorSource},
		{"deduplicated", with(func(a *events.Answer) {
			a.Kind, a.Key, a.Outcome = events.KindDeduplicated, k, outcome
		}), executorSource},
		{"indeterminate", with(func(a *events.Answer) {
			a.Kind, a.Key, a.Reason, a.BodyEntered = events.KindIndeterminate, k, events.ReasonBodyFailed, true
			a.Error = `POST http://booking.internal/book: read tcp: connection reset by peer`
		}), executorSource},
		{"failed", with(func(a *events.Answer) {
			a.Kind, a.Key, a.Code = events.KindFailed, k, events.CodeNoEffect
			a.Error = `409 Conflict: "flight BA117 is full"`
		}), executorSource},
		{"rejected", with(func(a *events.Answer) {
			a.Kind, a.Code, a.Field = events.KindRejected, events.CodeSchemaViolation, "/arguments/seats"
			a.Error = "at /seats: must be <= 9, got 12"
		}), executorSource},
		{"resolved", events.Answer{
			Kind: events.KindResolved, Tenant: tenant, RunID: runID, CallID: callID, Tool: toolName,
			Key: k, Action: events.ActionComplete, Outcome: outcome, Operator: "ana", Time: resolveTime,
		}, adminSource},
	}
}

// goldenNotes returns one note of each kind of goldenCall's body, as the
// executor running it records them.
func goldenNotes() []wire.Note {
	const nonce = "5b1e0c2d9f8a7e6d"
	progress := wire.Note{
		Kind: wire.NoteProgress, Tenant: tenant, Tool: toolName, RunID: runID, CallID: callID, Seq: 1,
		Time: answerTime.Add(-time.Second), Source: executorSource,
		Progress: 2, Total: 5, Message: "holding seat 12A",
	}
	progress.ID = wire.NoteID(tenant, toolName, callID, nonce, progress.Seq)
	log := wire.Note{
		Kind: wire.NoteLog, Tenant: tenant, Tool: toolName, RunID: runID, CallID: callID, Seq: 2,
		Time: answerTime.Add(-time.Second / 2), Source: executorSource,
		Level: "warning", Logger: "booking", Data: json.RawMessage(`{"retry_after_ms":250,"upstream":"gds-2"}`),
	}
	log.ID = wire.NoteID(tenant, toolName, callID, nonce, log.Seq)
	return []wire.Note{progress, log}
}
