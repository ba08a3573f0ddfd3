package events_test

import (
	"encoding/json"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/tesserix/toolexec/events"
)

// benchAnswer is the answer the encoding benchmarks write.
var benchAnswer = events.Answer{Kind: events.KindCompleted, Tenant: "acme", RunID: "run_1", CallID: "call-7", Tool: "book",
	Key: key, Outcome: `{"seat":"12A","price":{"amount":120,"currency":"GBP"}}`, TraceParent: traceParent, Time: when}

// BenchmarkAnswerEvent builds a completed answer's event through the SDK and
// marshals it (the path a binary-mode answer, or any caller of Answer.Event,
// takes).
func BenchmarkAnswerEvent(b *testing.B) {
	a := benchAnswer
	b.ReportAllocs()
	for b.Loop() {
		e, err := a.Event(source)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAnswerStructuredJSON writes the same answer's event directly, as
// the executor does for every call it answers in structured mode.
func BenchmarkAnswerStructuredJSON(b *testing.B) {
	a := benchAnswer
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.StructuredJSON(source); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallStructuredJSON writes a call's structured event, as a client
// does for every call it publishes in structured mode.
func BenchmarkCallStructuredJSON(b *testing.B) {
	c := events.Call{Tenant: "acme", RunID: "run_1", CallID: "call-7", Tool: "book", Source: "agents/planner",
		Arguments:   json.RawMessage(`{"flight":"BA117","seats":2,"request_id":"a","passengers":[{"name":"Ada"},{"name":"Alan"}]}`),
		TraceParent: traceParent}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.StructuredJSON(); err != nil {
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
	e, err := events.NewCallEvent(c)
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
		if _, err := events.CallFromEvent(in, "acme", "book"); err != nil {
			b.Fatal(err)
		}
	}
}
