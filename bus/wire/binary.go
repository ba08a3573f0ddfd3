package wire

import (
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/extensions"
)

// The binary-mode headers of the attributes toolexec writes.
const (
	specVersionHeader = HeaderPrefix + "specversion"
	idHeader          = HeaderPrefix + "id"
	sourceHeader      = HeaderPrefix + "source"
	typeHeader        = HeaderPrefix + "type"
	subjectHeader     = HeaderPrefix + "subject"
	timeHeader        = HeaderPrefix + "time"
)

// extHeaders are the binary-mode headers of the extensions, by number.
var extHeaders = [numExts]string{
	HeaderPrefix + ExtCallID, HeaderPrefix + ExtIdempotencyKey, HeaderPrefix + ExtRunID, HeaderPrefix + ExtTenant,
	HeaderPrefix + extensions.TraceParentExtension, HeaderPrefix + extensions.TraceStateExtension,
}

// binaryFields counts the header fields writeBinary sets.
func (p *eventParts) binaryFields() int {
	n := 5 // specversion, id, source, type, Content-Type
	if p.subject != "" {
		n++
	}
	if !p.time.IsZero() {
		n++
	}
	for _, v := range p.exts {
		if v != "" {
			n++
		}
	}
	return n
}

// writeBinary sets in h the binary-mode header fields of p's event, and
// returns its payload, the data: a field ce-<name> for each attribute and
// extension present, its value percent-encoded ([PercentEncode]), and
// Content-Type, the datacontenttype.
func (p *eventParts) writeBinary(h *msgHeader) []byte {
	h.set(specVersionHeader, event.CloudEventsVersionV1)
	h.setEncoded(idHeader, p.id)
	h.setEncoded(sourceHeader, p.source)
	h.setEncoded(typeHeader, p.typ)
	h.setEncoded(subjectHeader, p.subject)
	if !p.time.IsZero() {
		h.setEncoded(timeHeader, p.time.UTC().Format(time.RFC3339Nano))
	}
	for i, v := range p.exts {
		h.setEncoded(extHeaders[i], v)
	}
	h.set(ContentType, event.ApplicationJSON)
	return p.data
}
