package wire

import (
	"time"

	"github.com/cloudevents/sdk-go/v2/extensions"
	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/tesserix/toolexec/idemkey/canonical"
)

// The structured-mode writers of calls and answers ([CallJSON],
// [AnswerJSON]) write the CloudEvents JSON event format directly, member for
// member and byte for byte as the SDK's writer (event.WriteJson) does for the
// same event, with one exception: strings are escaped by toolexec's one
// escaper (canonical.AppendQuoted), which writes U+0008 and U+000C as \b and \f
// where the SDK writes \u0008 and \u000c. Property tests hold them to it.

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
	b = canonical.AppendQuoted(b, id)
	b = append(b, `,"source":`...)
	b = canonical.AppendQuoted(b, source)
	b = append(b, `,"type":`...)
	b = canonical.AppendQuoted(b, typ)
	if subject != "" {
		b = append(b, `,"subject":`...)
		b = canonical.AppendQuoted(b, subject)
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
	return canonical.AppendQuoted(b, v)
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
