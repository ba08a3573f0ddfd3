package wire

import (
	"time"

	"github.com/cloudevents/sdk-go/v2/extensions"
	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/tesserix/toolexec/idemkey/canonical"
)

// A call's or an answer's event is checked once, into an eventParts, and
// written from there in either mode: the JSON event format by appendJSON,
// member for member and byte for byte as the SDK's writer (event.WriteJson)
// writes the SDK's event of the same call or answer, and the binary mode by
// writeBinary, header for header as Encode writes that event. The one
// exception: strings in JSON are escaped by toolexec's one escaper
// (canonical.AppendQuoted), which writes U+0008 and U+000C as \b and \f
// where the SDK writes \u0008 and \u000c. Property tests hold both writers
// to the SDK.

// The extensions toolexec writes, numbered in the order of their names: the
// order in which the SDK's writer puts them in the JSON event format.
const (
	extCallID = iota
	extIdempotencyKey
	extRunID
	extTenant
	extTraceParent
	extTraceState
	numExts
)

// extNames are the names of the extensions, by number.
var extNames = [numExts]string{
	ExtCallID, ExtIdempotencyKey, ExtRunID, ExtTenant, extensions.TraceParentExtension, extensions.TraceStateExtension,
}

// eventParts is a checked call's or answer's event, as its writers read it.
// Every attribute but the time is a string, and an empty one is absent, as
// is a zero time. The datacontenttype is application/json.
type eventParts struct {
	id, source, typ, subject string // source as the SDK writes it ([uriRef])
	time                     time.Time
	exts                     [numExts]string
	data                     []byte // JSON
}

// setTracing sets the distributed tracing extension as the SDK's tracing
// extension sets it: none without a traceparent, tracestate only when not
// empty.
func (p *eventParts) setTracing(parent, state string) {
	if parent != "" {
		p.exts[extTraceParent], p.exts[extTraceState] = parent, state
	}
}

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

// jsonSize is about the length of p's event in the JSON event format, when
// no string needs escaping.
func (p *eventParts) jsonSize() int {
	const fixed = 192 // member names, quotes and punctuation, a time
	n := fixed + len(p.id) + len(p.source) + len(p.typ) + len(p.subject) + len(p.data)
	for i, v := range p.exts {
		if v != "" {
			n += len(extNames[i]) + len(v) + 6
		}
	}
	return n
}

// appendJSON appends p's event in the JSON event format: the attributes in
// the SDK's order, the data, then the extensions in the order of their
// names.
func (p *eventParts) appendJSON(b []byte) []byte {
	b = append(b, `{"specversion":"1.0","id":`...)
	b = canonical.AppendQuoted(b, p.id)
	b = append(b, `,"source":`...)
	b = canonical.AppendQuoted(b, p.source)
	b = append(b, `,"type":`...)
	b = canonical.AppendQuoted(b, p.typ)
	if p.subject != "" {
		b = append(b, `,"subject":`...)
		b = canonical.AppendQuoted(b, p.subject)
	}
	b = append(b, `,"datacontenttype":"application/json"`...)
	if !p.time.IsZero() {
		b = append(b, `,"time":"`...)
		b = p.time.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = append(b, `,"data":`...)
	b = append(b, p.data...)
	for i, v := range p.exts {
		if v != "" {
			b = append(b, ',', '"')
			b = append(b, extNames[i]...)
			b = append(b, '"', ':')
			b = canonical.AppendQuoted(b, v)
		}
	}
	return append(b, '}')
}
