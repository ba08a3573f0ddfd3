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
//   - the call's event (see [CallEvent]): in [Structured] mode written by
//     [CallJSON] under Content-Type application/cloudevents+json, in [Binary]
//     mode as [Encode] writes it;
//   - Nats-Expected-Stream [CallStream], so that a stream of wire version 1,
//     which takes every call subject, refuses the call instead of storing
//     what its executors cannot read;
//   - [TraceParentHeader] when c.TraceParent is set;
//   - [RepeatHeader] when c.Repeat is set (see [MarkRepeat]);
//   - [InteractionsHeader], the interactions joined by commas, when c has any.
//
// c.Source is taken as given: a caller's default source is the caller's to
// fill in. Errors are those of [CallJSON] and [CallEvent], an
// [*events.RejectedError] with the code an executor would answer with, or, in
// binary mode, one of [Encode] matching [ErrUnsupported].
func CallMsg(c events.Call, mode Mode) (*nats.Msg, error) {
	subject := CallSubject(c.Tenant, c.Tool, c.CallID)
	var msg *nats.Msg
	if mode == Structured {
		data, err := CallJSON(c)
		if err != nil {
			return nil, err
		}
		msg = StructuredMsg(subject, data)
	} else {
		e, err := CallEvent(c)
		if err != nil {
			return nil, err
		}
		if msg, err = NewMsg(subject, e, mode); err != nil {
			return nil, err
		}
	}
	if c.TraceParent != "" {
		msg.Header[TraceParentHeader] = []string{c.TraceParent}
	}
	msg.Header[jetstream.ExpectedStreamHeader] = []string{CallStream}
	if c.Repeat {
		MarkRepeat(msg)
	}
	if len(c.Interactions) > 0 {
		msg.Header[InteractionsHeader] = []string{strings.Join(c.Interactions, ",")}
	}
	return msg, nil
}

// MarkRepeat marks msg, a call message, as one that may repeat a call
// published before: it sets [RepeatHeader] to "true". msg must have a header
// (as [CallMsg]'s messages do).
func MarkRepeat(msg *nats.Msg) { msg.Header[RepeatHeader] = []string{"true"} }

// AnswerMsg returns the complete NATS message that publishes a, from source,
// in the given mode, as every executor and the admin service send it:
//
//   - subject [AnswerSubject];
//   - the answer's event (see [AnswerEvent]): in [Structured] mode written by
//     [AnswerJSON] under Content-Type application/cloudevents+json, in
//     [Binary] mode as [Encode] writes it;
//   - Nats-Msg-Id [MsgID], so that each call keeps one answer event whoever
//     publishes it, and Nats-Expected-Stream [EventStream];
//   - [TraceParentHeader] when a.TraceParent is set.
//
// a is written as given (a publisher that bounds the error text cuts it
// first). Errors are those of [AnswerJSON] and [AnswerEvent], matching
// [events.ErrInvalidAnswer] or [ErrInvalidData], or, in binary mode, one of
// [Encode] matching [ErrUnsupported]; any of them is a bug in the caller.
func AnswerMsg(a events.Answer, source string, mode Mode) (*nats.Msg, error) {
	subject := AnswerSubject(a)
	var msg *nats.Msg
	if mode == Structured {
		data, err := AnswerJSON(a, source)
		if err != nil {
			return nil, err
		}
		msg = StructuredMsg(subject, data)
	} else {
		e, err := AnswerEvent(a, source)
		if err != nil {
			return nil, err
		}
		if msg, err = NewMsg(subject, e, mode); err != nil {
			return nil, err
		}
	}
	if a.TraceParent != "" {
		msg.Header[TraceParentHeader] = []string{a.TraceParent}
	}
	msg.Header[jetstream.MsgIDHeader] = []string{MsgID(a)}
	msg.Header[jetstream.ExpectedStreamHeader] = []string{EventStream}
	return msg, nil
}
