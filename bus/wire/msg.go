package wire

import (
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/events"
)

// TraceParentHeader names the W3C trace context header that call and answer
// messages carry beside the CloudEvents tracing extension, so that tracing at
// the NATS level sees it.
const TraceParentHeader = "traceparent"

// CallMsg returns the complete NATS message that publishes c in the given
// mode, as every caller sends it:
//
//   - subject [CallSubject] of c's tenant, tool and call id;
//   - the call's event (see [CallEvent]): in [Structured] mode the payload
//     [CallJSON] returns, under Content-Type application/cloudevents+json; in
//     [Binary] mode a ce- header for each attribute and extension, as
//     [Encode] writes the event, Content-Type application/json and the data
//     as the payload;
//   - Nats-Expected-Stream [CallStream], so that a stream of wire version 1,
//     which takes every call subject, refuses the call instead of storing
//     what its executors cannot read;
//   - [TraceParentHeader] when c.TraceParent is set;
//   - [RepeatHeader] when c.Repeat is set (see [MarkRepeat]);
//   - [InteractionsHeader], the interactions joined by commas, when c has any.
//
// c.Source is taken as given: a caller's default source is the caller's to
// fill in. Errors are [CallJSON]'s, in either mode: an
// [*events.RejectedError] with the code an executor would answer with.
func CallMsg(c events.Call, mode Mode) (*nats.Msg, error) {
	p, err := callParts(c)
	if err != nil {
		return nil, err
	}
	h, data := p.message(mode, 4)
	if c.TraceParent != "" {
		h.set(TraceParentHeader, c.TraceParent)
	}
	h.set(jetstream.ExpectedStreamHeader, CallStream)
	if c.Repeat {
		h.set(RepeatHeader, "true")
	}
	if len(c.Interactions) > 0 {
		h.set(InteractionsHeader, strings.Join(c.Interactions, ","))
	}
	return &nats.Msg{Subject: CallSubject(c.Tenant, c.Tool, c.CallID), Header: h.h, Data: data}, nil
}

// MarkRepeat marks msg, a call message, as one that may repeat a call
// published before: it sets [RepeatHeader] to "true". msg must have a header
// (as [CallMsg]'s messages do).
func MarkRepeat(msg *nats.Msg) { msg.Header[RepeatHeader] = []string{"true"} }

// AnswerMsg returns the complete NATS message that publishes a, from source,
// in the given mode, as every executor and the admin service send it:
//
//   - subject [AnswerSubject];
//   - the answer's event (see [AnswerEvent]): in [Structured] mode the
//     payload [AnswerJSON] returns, under Content-Type
//     application/cloudevents+json; in [Binary] mode a ce- header for each
//     attribute and extension, as [Encode] writes the event, Content-Type
//     application/json and the data as the payload;
//   - Nats-Msg-Id [MsgID], so that each call keeps one answer event whoever
//     publishes it, and Nats-Expected-Stream [EventStream];
//   - [TraceParentHeader] when a.TraceParent is set.
//
// a is written as given (a publisher that bounds the error text cuts it
// first). Errors are [AnswerJSON]'s, in either mode, matching
// [events.ErrInvalidAnswer] or [ErrInvalidData]; either is a bug in the
// caller.
func AnswerMsg(a events.Answer, source string, mode Mode) (*nats.Msg, error) {
	p, err := answerParts(a, source)
	if err != nil {
		return nil, err
	}
	h, data := p.message(mode, 3)
	if a.TraceParent != "" {
		h.set(TraceParentHeader, a.TraceParent)
	}
	h.set(jetstream.MsgIDHeader, p.id) // MsgID(a), which is the event's id
	h.set(jetstream.ExpectedStreamHeader, EventStream)
	return &nats.Msg{Subject: AnswerSubject(a), Header: h.h, Data: data}, nil
}

// message returns the header and payload of the message that carries p's
// event in the given mode, the header sized for extra fields more.
func (p *eventParts) message(mode Mode, extra int) (msgHeader, []byte) {
	if mode == Structured {
		h := newMsgHeader(1 + extra)
		h.set(ContentType, StructuredJSON)
		return h, p.appendJSON(make([]byte, 0, p.jsonSize()))
	}
	h := newMsgHeader(p.binaryFields() + extra)
	return h, p.writeBinary(&h)
}

// msgHeader builds a message's header, the values of all its fields in one
// array.
type msgHeader struct {
	h    nats.Header
	vals []string
}

// newMsgHeader returns an empty msgHeader with room for n fields.
func newMsgHeader(n int) msgHeader {
	return msgHeader{h: make(nats.Header, n), vals: make([]string, 0, n)}
}

// set sets the field name to the one value v.
func (m *msgHeader) set(name, v string) {
	m.vals = append(m.vals, v)
	n := len(m.vals)
	m.h[name] = m.vals[n-1 : n : n]
}

// setEncoded sets the field name to v percent-encoded, unless v is empty.
func (m *msgHeader) setEncoded(name, v string) {
	if v != "" {
		m.set(name, PercentEncode(v))
	}
}
