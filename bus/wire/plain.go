package wire

import (
	"bytes"
	"encoding/json"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/extensions"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/tesserix/toolexec/internal/jsonobj"
)

// plainExtensions are the extensions plainEvent reads: toolexec's own and the
// distributed tracing ones.
var plainExtensions = map[string]bool{
	ExtTenant: true, ExtRunID: true, ExtCallID: true, ExtIdempotencyKey: true,
	extensions.TraceParentExtension: true, extensions.TraceStateExtension: true,
}

// plainEvent builds the event of a structured payload whose top-level members
// are top, when the payload has the plain shape toolexec's own writers give
// it: no member but the context attributes, the extensions toolexec and
// tracing use, and JSON data (datacontenttype application/json); every
// attribute a non-empty string without escapes; a time and a source the SDK
// parses. The event is the one the SDK's reader builds from the same payload
// (FuzzPlainEvent holds it to that), without the reader's second pass over the
// bytes and its allocations. For anything else ok is false and the SDK reads
// the payload, with its own errors. The caller has checked that the payload is
// valid JSON and that specversion is "1.0".
func plainEvent(top jsonobj.Object) (e event.Event, ok bool) {
	ec := &event.EventContextV1{}
	var data json.RawMessage
	for _, m := range top {
		name, raw := m.Name, m.Value
		if name == "data" {
			data = raw
			continue
		}
		v, ok := plainString(raw)
		if !ok {
			return event.Event{}, false
		}
		switch name {
		case "specversion":
			if v != event.CloudEventsVersionV1 {
				return event.Event{}, false
			}
		case "id":
			ec.ID = v
		case "type":
			ec.Type = v
		case "source":
			ref := types.ParseURIRef(v)
			if ref == nil {
				return event.Event{}, false
			}
			ec.Source = *ref
		case "subject":
			ec.Subject = ptr(v)
		case "datacontenttype":
			ec.DataContentType = ptr(v)
		case "time":
			t, err := types.ParseTimestamp(v)
			if err != nil || t == nil {
				return event.Event{}, false
			}
			ec.Time = t
		default:
			if !plainExtensions[name] {
				return event.Event{}, false
			}
			if ec.Extensions == nil {
				ec.Extensions = make(map[string]any, 6)
			}
			ec.Extensions[name] = v
		}
	}
	e.Context = ec
	if data != nil {
		if ec.DataContentType == nil || *ec.DataContentType != event.ApplicationJSON {
			return event.Event{}, false
		}
		e.DataEncoded = data
	}
	return e, true
}

// ptr returns a pointer to a copy of s. (Taking the address of the loop's
// variable instead would move it to the heap for every attribute.)
func ptr(s string) *string { return &s }

// plainString returns the string a JSON value holds when it is a non-empty
// string without escapes.
func plainString(raw json.RawMessage) (string, bool) {
	if len(raw) < 3 || raw[0] != '"' || raw[len(raw)-1] != '"' || bytes.IndexByte(raw, '\\') >= 0 {
		return "", false
	}
	return string(raw[1 : len(raw)-1]), true
}
