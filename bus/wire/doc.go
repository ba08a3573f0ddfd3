// Package wire is how toolexec's calls and answers travel: the NATS subjects and
// streams they are published on, the CloudEvents that carry them, those events
// in NATS messages, and the JSON Schemas their data is held to. What the calls
// and answers are (an [events.Call], an [events.Answer] and its kinds, codes and
// tokens) is package events'; this package turns them into bytes and back.
//
// # Subjects
//
//	toolexec.call.<tenant>.<tool>.<call_id>                        calls ([CallSubject])
//	toolexec.event.<tenant>.<kind>.<tool>.<run_id>.<call_id>       answers ([EventSubject], [AnswerSubject])
//	toolexec.event.<tenant>.*.<tool>.<run_id>.<call_id>            one call's answer ([AnswerFilter])
//	toolexec.history.<tenant>                                      a tenant's stored events, on request ([HistorySubject])
//	toolexec.body.<tool>                                           a tool's body, run by a worker ([BodySubject])
//
// Calls are kept by the work-queue stream [CallStream], one per call subject,
// answers and audit events by the limits stream [EventStream]. An answer is
// published with Nats-Msg-Id [MsgID], derived from the tenant, tool and call
// id, so that each call keeps one answer event whoever publishes it.
//
// # Events
//
// A call is a CloudEvent of type [CallType] ([CallEvent], [CallFromEvent]); an
// answer one of type [EventType] of its kind ([AnswerEvent], [AnswerFromEvent]),
// with the extensions [ExtTenant], [ExtRunID], [ExtCallID] and
// [ExtIdempotencyKey] and the distributed tracing extension. [CallJSON] and
// [AnswerJSON] write the same events in the JSON event format straight from
// the call or answer, as the SDK's writer writes the SDK's event.
//
// # Messages
//
// Events travel over NATS messages in the two modes toolexec speaks:
//
//   - Structured mode (the released NATS protocol binding, 1.0.2): the payload is
//     the event in the JSON event format and the Content-Type header is
//     application/cloudevents+json.
//   - Binary mode (the binding's next revision): each attribute and extension
//     travels in a header ce-<name> whose value is percent-encoded, the
//     datacontenttype in Content-Type, and the data is the payload.
//
// A message is structured when it has a Content-Type header whose media type
// starts with application/cloudevents, compared without regard to case (the
// header's name as well: nats.go's Header.Get is case-sensitive, this package is
// not), or when it has neither a Content-Type nor any ce- header, as messages of
// the released binding, which predates NATS headers, do; every other message is
// read as binary. A binary-mode header value may hold quoted strings, which are
// unescaped before the value is percent-decoded.
//
// [Decode] reads a message into an event and reports what is wrong with one that
// is not a usable CloudEvent as an [*events.RejectedError], with the code a
// rejected answer carries. [Peek] reads, from any message however malformed, the
// call id and run id it claims, so that a rejection can still be addressed to the
// caller waiting for it. [Encode] writes an event in either mode.
//
// [CallMsg] and [AnswerMsg] build the complete message of a call and of an
// answer, in either mode, as every publisher sends it: the subject, the event,
// written straight from the call or answer (in structured mode as [CallJSON]
// and [AnswerJSON] write it, in binary mode as [Encode] writes the SDK's
// event), and the headers a call or an answer carries beside it
// (Nats-Expected-Stream; an answer's Nats-Msg-Id; a call's [RepeatHeader] and
// [InteractionsHeader]; [TraceParentHeader]). Property tests hold them to the
// SDK's event written by the SDK.
//
// # Schemas
//
// The data of every event is held to its JSON Schema, embedded from package
// schemas: [Validate] and [ValidateCall] check it, [CallFromEvent] rejects a
// call whose data breaks the call schema, [AnswerFromEvent] refuses an answer
// whose data breaks its kind's, and the answer writers validate what they write
// where the fields' checks do not already ensure it. A violation matches
// [ErrInvalidData].
package wire
