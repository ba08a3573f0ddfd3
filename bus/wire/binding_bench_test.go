package wire_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// The call and the answer the benchmarks encode and decode: a booking, as the
// demo airline's book tool takes and answers it.
var (
	benchCall = events.Call{
		Tenant: "acme", RunID: "run_1", CallID: "call_6705c7fa0eed93c47b9439ce", Tool: "book", Source: "/agents/planner",
		Arguments:   json.RawMessage(`{"flight":"BA117","seats":2,"request_id":"r-7f3a"}`),
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
	benchAnswer = events.Answer{
		Kind: events.KindCompleted, Tenant: "acme", RunID: "run_1", CallID: "call_6705c7fa0eed93c47b9439ce", Tool: "book",
		Key: "dcaca72c477ec402dd504f145eb9fa54d2964d52f26edc7cd656608baca21496", Outcome: "VGUQR2",
		Time: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
	}
	benchModes = []wire.Mode{wire.Structured, wire.Binary}
)

// BenchmarkEncodeCall builds a call's CloudEvent through the SDK and its NATS
// message (CallEvent, NewMsg), as any caller of NewMsg does; CallMsg writes
// the message straight from the call (BenchmarkCallMsg).
func BenchmarkEncodeCall(b *testing.B) {
	subject := wire.CallSubject(benchCall.Tenant, benchCall.Tool, benchCall.CallID)
	for _, mode := range benchModes {
		b.Run(mode.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e, err := wire.CallEvent(benchCall)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := wire.NewMsg(subject, e, mode); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeCall reads a call message back into a call, as a worker does
// for every message it takes.
func BenchmarkDecodeCall(b *testing.B) {
	e, err := wire.CallEvent(benchCall)
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range benchModes {
		b.Run(mode.String(), func(b *testing.B) {
			h, data, err := wire.Encode(e, mode)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				in, err := wire.Decode(h, data)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := wire.CallFromEvent(in, benchCall.Tenant, benchCall.Tool); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeAnswer builds a completed answer's event through the SDK and
// its message (AnswerEvent, NewMsg), as any caller of NewMsg does; AnswerMsg
// writes the message straight from the answer (BenchmarkAnswerMsg).
func BenchmarkEncodeAnswer(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e, err := wire.AnswerEvent(benchAnswer, "/toolexec/executor/bench")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := wire.NewMsg(wire.AnswerSubject(benchAnswer), e, mode); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeAnswer reads an answer message back, as a waiting client does.
func BenchmarkDecodeAnswer(b *testing.B) {
	e, err := wire.AnswerEvent(benchAnswer, "/toolexec/executor/bench")
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range benchModes {
		b.Run(mode.String(), func(b *testing.B) {
			h, data, err := wire.Encode(e, mode)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				in, err := wire.Decode(h, data)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := wire.AnswerFromEvent(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCallMsg builds a call's complete message, as the client does for
// every call it publishes.
func BenchmarkCallMsg(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := wire.CallMsg(benchCall, mode); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAnswerMsg builds a completed answer's complete message, as a
// worker does for every answer it publishes.
func BenchmarkAnswerMsg(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := wire.AnswerMsg(benchAnswer, "/toolexec/executor/bench", mode); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
