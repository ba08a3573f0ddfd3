// Package binding carries CloudEvents over NATS messages, both ways, in the two
// modes toolexec speaks:
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
// is not a usable CloudEvent as an [*events.RejectError], with the code a
// rejected answer carries. [Peek] reads, from any message however malformed, the
// call id and run id it claims, so that a rejection can still be addressed to the
// caller waiting for it. [Encode] writes an event in either mode.
package wire
