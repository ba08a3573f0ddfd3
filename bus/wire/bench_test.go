package wire_test

import (
	"encoding/json"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// benchJSONAnswer is the answer the encoding benchmarks write.
var benchJSONAnswer = events.Answer{Kind: events.KindCompleted, Tenant: "acme", RunID: "run_1", CallID: "call-7", Tool: "book",
	Key: key, Outcome: `{"seat":"12A","price":{"amount":120,"currency":"GBP"}}`, TraceParent: traceParent, Time: when}

// BenchmarkAnswerEvent builds a completed answer's event through the SDK and
// marshals it (the path a binary-mode answer, or any caller of AnswerEvent,
// takes).
func BenchmarkAnswerEvent(b *testing.B) {
	a := benchJSONAnswer
	b.ReportAllocs()
	for b.Loop() {
		e, err := wire.AnswerEvent(a, source)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAnswerJSON writes the same answer's event directly, as
// the executor does for every call it answers in structured mode.
func BenchmarkAnswerJSON(b *testing.B) {
	a := benchJSONAnswer
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.AnswerJSON(a, source); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallJSON writes a call's structured event, as a client
// does for every call it publishes in structured mode.
func BenchmarkCallJSON(b *testing.B) {
	c := events.Call{Tenant: "acme", RunID: "run_1", CallID: "call-7", Tool: "book", Source: "agents/planner",
		Arguments:   json.RawMessage(`{"flight":"BA117","seats":2,"request_id":"a","passengers":[{"name":"Ada"},{"name":"Alan"}]}`),
		TraceParent: traceParent}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.CallJSON(c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallFromEvent decodes a structured call and reads it, as the bus does
// for every message.
func BenchmarkCallFromEvent(b *testing.B) {
	c := events.Call{Tenant: "acme", RunID: "run_1", CallID: "call-7", Tool: "book", Source: "agents/planner",
		Arguments:   json.RawMessage(`{"flight":"BA117","seats":2,"request_id":"a","passengers":[{"name":"Ada"},{"name":"Alan"}]}`),
		TraceParent: traceParent}
	e, err := wire.CallEvent(c)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := json.Marshal(e)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		var in event.Event
		if err := json.Unmarshal(raw, &in); err != nil {
			b.Fatal(err)
		}
		if _, err := wire.CallFromEvent(in, "acme", "book"); err != nil {
			b.Fatal(err)
		}
	}
}
