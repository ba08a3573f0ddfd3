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
// marshals it, as any caller of AnswerEvent does.
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

// BenchmarkBinaryCallMsg writes a call's binary-mode message both ways: sdk
// builds the SDK's event of the call and writes it (sdkCallMsg: CallEvent,
// Encode and the headers beside the event), wire is CallMsg.
func BenchmarkBinaryCallMsg(b *testing.B) {
	benchBinary(b, func() error {
		_, err := sdkCallMsg(benchCall, wire.Binary)
		return err
	}, func() error {
		_, err := wire.CallMsg(benchCall, wire.Binary)
		return err
	})
}

// BenchmarkBinaryAnswerMsg writes a completed answer's binary-mode message
// both ways, as BenchmarkBinaryCallMsg does a call's.
func BenchmarkBinaryAnswerMsg(b *testing.B) {
	const source = "/toolexec/executor/bench"
	benchBinary(b, func() error {
		_, err := sdkAnswerMsg(benchAnswer, source, wire.Binary)
		return err
	}, func() error {
		_, err := wire.AnswerMsg(benchAnswer, source, wire.Binary)
		return err
	})
}

// benchBinary runs sdkWrite and wireWrite as the sub-benchmarks sdk and wire.
func benchBinary(b *testing.B, sdkWrite, wireWrite func() error) {
	for _, bench := range []struct {
		name  string
		write func() error
	}{{"sdk", sdkWrite}, {"wire", wireWrite}} {
		b.Run(bench.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bench.write(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
