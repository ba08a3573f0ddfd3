package wire

import (
	"time"

	"github.com/cloudevents/sdk-go/v2/extensions"
	"github.com/cloudevents/sdk-go/v2/types"
)

// The structured-mode writers of calls and answers ([CallJSON],
// [AnswerJSON]) write the CloudEvents JSON event format directly,
// member for member and byte for byte as the SDK's writer (event.WriteJson)
// does for the same event: property tests hold them to it.

// uriRef returns source as the SDK writes it once parsed as a URI reference,
// and false when it is not one (or is one the SDK would find empty).
func uriRef(source string) (string, bool) {
	ref := types.ParseURIRef(source)
	if ref == nil {
		return "", false
	}
	s := ref.String()
	return s, s != ""
}

// appendAttributes opens a structured event with the attributes the SDK's
// writer puts first, in its order, up to the data member's name: the data and
// then the extensions, in the order of their names, are for the caller.
// subject is left out when empty, time when zero.
func appendAttributes(b []byte, id, source, typ, subject string, t time.Time) []byte {
	b = append(b, `{"specversion":"1.0","id":`...)
	b = appendJSONString(b, id)
	b = append(b, `,"source":`...)
	b = appendJSONString(b, source)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, typ)
	if subject != "" {
		b = append(b, `,"subject":`...)
		b = appendJSONString(b, subject)
	}
	b = append(b, `,"datacontenttype":"application/json"`...)
	if !t.IsZero() {
		b = append(b, `,"time":"`...)
		b = t.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	return append(b, `,"data":`...)
}

// appendExtension appends the member name: v.
func appendExtension(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendJSONString(b, v)
}

// appendTracing appends the distributed tracing extensions, as the SDK's
// tracing extension sets them: none without a traceparent, tracestate only
// when not empty.
func appendTracing(b []byte, parent, state string) []byte {
	if parent == "" {
		return b
	}
	b = appendExtension(b, extensions.TraceParentExtension, parent)
	if state != "" {
		b = appendExtension(b, extensions.TraceStateExtension, state)
	}
	return b
}

// appendJSONString appends s as a JSON string, escaped as the SDK's writer
// escapes attributes: quotation mark, backslash and control characters only.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
