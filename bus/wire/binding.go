package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/events"
)

// Header names and media types of the NATS binding.
const (
	// HeaderPrefix starts the name of every binary-mode attribute header: ce-id,
	// ce-source, ce-tenant, ...
	HeaderPrefix = "ce-"
	// ContentType names the header that holds, in structured mode, the event
	// format and, in binary mode, the event's datacontenttype.
	ContentType = "Content-Type"
	// StructuredJSON is the media type of a structured-mode message: the JSON
	// event format.
	StructuredJSON = "application/cloudevents+json"

	structuredPrefix = "application/cloudevents"
)

// Mode is how an event is laid out in a NATS message.
type Mode uint8

const (
	// Structured puts the whole event, in the JSON event format, in the payload.
	Structured Mode = iota
	// Binary puts the attributes in ce- headers and the data in the payload.
	Binary
)

// String returns "structured" or "binary".
func (m Mode) String() string {
	if m == Binary {
		return "binary"
	}
	return "structured"
}

// Values returns every value of the headers called name, matched without regard
// to case (a message may carry "Content-Type" and "content-type" both).
func Values(h nats.Header, name string) []string {
	var out []string
	for k, vs := range h {
		if strings.EqualFold(k, name) {
			out = append(out, vs...)
		}
	}
	return out
}

// Get returns the value of the header called name, matched without regard to
// case, and whether the message has exactly one such value.
func Get(h nats.Header, name string) (string, bool) {
	vs := Values(h, name)
	if len(vs) != 1 {
		return "", false
	}
	return vs[0], true
}

// ModeOf returns the mode a message is read in: Structured when a Content-Type
// header's media type starts with application/cloudevents (case-insensitively),
// and also when the message has neither a Content-Type header nor any ce-
// header: the released NATS binding (1.0.2) predates headers, so its messages
// carry the JSON event format alone. Binary otherwise.
func ModeOf(h nats.Header) Mode {
	cts := Values(h, ContentType)
	for _, ct := range cts {
		if hasPrefixFold(strings.TrimSpace(ct), structuredPrefix) {
			return Structured
		}
	}
	if len(cts) == 0 && !hasAttributeHeader(h) {
		return Structured
	}
	return Binary
}

// hasAttributeHeader reports whether h has a header named ce-<something>.
func hasAttributeHeader(h nats.Header) bool {
	for k := range h {
		if len(k) > len(HeaderPrefix) && hasPrefixFold(k, HeaderPrefix) {
			return true
		}
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// Decode reads the CloudEvent carried by a message with headers h and payload
// data, in whichever mode the message is in (see [ModeOf]). It checks only what
// makes the message a CloudEvents 1.0 event; what makes the event a toolexec call
// is for [CallFromEvent].
//
// Every error is an [*events.RejectedError]:
//
//   - invalid_json: a structured payload that is empty or not JSON;
//   - not_cloudevent: JSON that is not an object, no specversion, an unknown
//     event format, a header given twice, a header value that is not correctly
//     percent-encoded, an attribute the SDK refuses (a time that is not RFC 3339,
//     an extension name that is not lower-case alphanumeric), or a binary-mode
//     message without ce- headers;
//   - bad_specversion: a specversion other than "1.0";
//   - duplicate_member: a structured event with the same member twice;
//   - invalid_unicode: a structured payload that is not valid UTF-8, or an
//     attribute of one that escapes a lone surrogate;
//   - too_deep: a structured payload nesting deeper than [MaxNesting].
//
// Of several ce- headers refused, the error names the one of the least name,
// the same one every time.
func Decode(h nats.Header, data []byte) (event.Event, error) {
	cts := Values(h, ContentType)
	if len(cts) > 1 {
		return event.Event{}, events.Reject(events.CodeNotCloudEvent, ContentType, "the header appears %d times", len(cts))
	}
	if ModeOf(h) == Structured {
		ct := StructuredJSON // a message of the released binding has no headers
		if len(cts) == 1 {
			ct = cts[0]
		}
		return decodeStructured(ct, data)
	}
	return decodeBinary(h, data)
}

// objects holds the buffers decodeStructured splits payloads into: the split
// is read before decodeStructured returns, and nothing it returns shares it.
var objects = sync.Pool{New: func() any {
	o := make(members, 0, 16)
	return &o
}}

// maxPooledObject is the capacity above which a buffer is not put back: one
// payload of many members should not keep its buffer alive for all later ones.
const maxPooledObject = 64

func putObject(o *members) {
	if cap(*o) > maxPooledObject {
		return
	}
	clear((*o)[:cap(*o)]) // keep no payload alive through the pool
	*o = (*o)[:0]
	objects.Put(o)
}

// jsonString decodes raw, a JSON value, when it is a string. (In a function of
// its own so that the caller's variable stays off the heap.)
func jsonString(raw []byte) (string, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

func decodeStructured(ct string, data []byte) (event.Event, error) {
	if ct != StructuredJSON { // the type as toolexec writes it needs no parsing
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil {
			return event.Event{}, events.Reject(events.CodeNotCloudEvent, ContentType, "%s is not a media type", short(ct))
		}
		if mt != StructuredJSON {
			return event.Event{},
				events.Reject(events.CodeNotCloudEvent, ContentType, "event format %s is not supported: send %s", short(mt), StructuredJSON)
		}
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			return event.Event{}, events.Reject(events.CodeNotCloudEvent, ContentType, "charset %s: only utf-8 is accepted", short(cs))
		}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return event.Event{}, events.Reject(events.CodeInvalidJSON, "", "the payload is empty; a structured event is a JSON object")
	}
	if !utf8.Valid(data) {
		// encoding/json would quietly turn the bad bytes into U+FFFD.
		return event.Event{}, events.Reject(events.CodeInvalidUnicode, "", "the payload is not valid UTF-8")
	}
	if !json.Valid(data) {
		if nestsDeeper(data, MaxNesting) {
			return event.Event{}, events.Reject(events.CodeTooDeep, "", "the payload nests arrays and objects more than %d deep", MaxNesting)
		}
		return event.Event{}, events.Reject(events.CodeInvalidJSON, "", "the payload is not valid JSON")
	}
	buf := objects.Get().(*members)
	defer putObject(buf)
	top, dup, err := readMembers(*buf, data)
	*buf = top // for putObject to reuse, grown or not
	switch {
	case err != nil: // the payload is valid JSON: it is not an object
		return event.Event{}, events.Reject(events.CodeNotCloudEvent, "", "the payload is JSON but not an object")
	case dup != "":
		return event.Event{}, events.Reject(events.CodeDuplicateMember, dup, "member %s appears twice in the event", short(dup))
	}
	if name := loneSurrogateIn(top); name != "" {
		return event.Event{}, events.Reject(events.CodeInvalidUnicode, name, "attribute %s holds a lone surrogate escape", short(name))
	}
	raw, ok := top.get("specversion")
	if !ok {
		return event.Event{}, events.Reject(events.CodeNotCloudEvent, "specversion", "the payload has no specversion: not a CloudEvent")
	}
	sv := event.CloudEventsVersionV1
	if string(raw) != `"`+event.CloudEventsVersionV1+`"` {
		if sv, ok = jsonString(raw); !ok {
			return event.Event{},
				events.Reject(events.CodeBadSpecVersion, "specversion", "specversion must be the string %q", event.CloudEventsVersionV1)
		}
	}
	if sv != event.CloudEventsVersionV1 {
		return event.Event{}, events.Reject(events.CodeBadSpecVersion, "specversion", "got %s, want %q", short(sv), event.CloudEventsVersionV1)
	}
	// The SDK's reader, without encoding/json's pass over the whole payload
	// before it (format.JSON.Unmarshal): the payload is known to be valid JSON.
	var e event.Event
	if err := e.UnmarshalJSON(data); err != nil {
		return event.Event{}, &events.RejectedError{Code: events.CodeNotCloudEvent, Message: oneLine(err.Error()), Err: err}
	}
	return e, nil
}

func decodeBinary(h nats.Header, data []byte) (event.Event, error) {
	attrs := make(map[string]string)
	// The headers come in no order: of the headers refused, the one of the
	// least name is reported, and a header given twice before one whose value
	// is refused, so that the same problem is reported every time.
	var refused *events.RejectedError
	for k, vs := range h {
		if len(k) <= len(HeaderPrefix) || !hasPrefixFold(k, HeaderPrefix) {
			continue
		}
		name := strings.ToLower(k[len(HeaderPrefix):])
		if refused != nil && name > refused.Field {
			continue
		}
		if _, seen := attrs[name]; seen || len(vs) != 1 {
			refused = events.Reject(events.CodeNotCloudEvent, name, "header %s%s is given more than once", HeaderPrefix, short(name))
			continue
		}
		v, err := headerValue(vs[0])
		if err != nil && (refused == nil || name < refused.Field) {
			refused = &events.RejectedError{Code: events.CodeNotCloudEvent, Field: name,
				Message: fmt.Sprintf("header %s%s: %v", HeaderPrefix, short(name), err), Err: err}
		}
		attrs[name] = v // seen, even when refused
	}
	if refused != nil {
		return event.Event{}, refused
	}
	if len(attrs) == 0 {
		return event.Event{}, events.Reject(events.CodeNotCloudEvent, "",
			"not a CloudEvent: the message has neither a %s: %s header (structured mode) nor %sspecversion and the other attribute headers "+
				"(binary mode)",
			ContentType, StructuredJSON, HeaderPrefix)
	}
	sv, ok := attrs["specversion"]
	if !ok {
		return event.Event{},
			events.Reject(events.CodeNotCloudEvent, "specversion", "binary-mode message without a %sspecversion header", HeaderPrefix)
	}
	if sv != event.CloudEventsVersionV1 {
		return event.Event{}, events.Reject(events.CodeBadSpecVersion, "specversion", "got %s, want %q", short(sv), event.CloudEventsVersionV1)
	}
	version := spec.VS.Version(sv)
	e := event.New(sv)
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		names = append(names, name)
	}
	sort.Strings(names) // report the same problem first every time
	for _, name := range names {
		v := attrs[name]
		var err error
		if a := version.Attribute(name); a != nil {
			if a.Kind() == spec.SpecVersion {
				continue
			}
			err = a.Set(e.Context, v)
		} else {
			err = e.Context.SetExtension(name, v)
		}
		if err != nil {
			return event.Event{}, &events.RejectedError{Code: events.CodeNotCloudEvent, Field: name,
				Message: fmt.Sprintf("header %s%s: %s", HeaderPrefix, short(name), oneLine(err.Error())), Err: err}
		}
	}
	if ct, ok := Get(h, ContentType); ok {
		if dct, set := attrs["datacontenttype"]; set && dct != ct {
			return event.Event{}, events.Reject(events.CodeNotCloudEvent, "datacontenttype",
				"%sdatacontenttype %s disagrees with %s %s", HeaderPrefix, short(dct), ContentType, short(ct))
		}
		e.SetDataContentType(ct)
	}
	if len(data) > 0 {
		e.DataEncoded = data
	}
	return e, nil
}

// CallAddress is what a message says about the call it carries, read without
// judging the rest: enough to address a rejection to the caller waiting for it.
type CallAddress struct {
	// ID is the event's id (the call id), empty when absent or not a string.
	ID string
	// RunID is the runid extension, empty when absent or not a string.
	RunID string
}

// Peek returns the id and runid a message claims, whatever else is wrong with it:
// from the ce-id and ce-runid headers of a binary-mode message, or from the
// top-level members of a structured payload that stand before its first mistake
// of JSON (a payload that is not a JSON object yields nothing). Values are
// returned as sent; whether they are valid tokens is for the caller to judge.
func Peek(h nats.Header, data []byte) CallAddress {
	if ModeOf(h) == Binary {
		var a CallAddress
		if v, ok := Get(h, HeaderPrefix+"id"); ok {
			a.ID, _ = headerValue(v)
		}
		if v, ok := Get(h, HeaderPrefix+ExtRunID); ok {
			a.RunID, _ = headerValue(v)
		}
		return a
	}
	top, _, _ := readMembers(nil, data) // what stands before a mistake is read
	var a CallAddress
	if id, ok := top.get("id"); ok {
		_ = json.Unmarshal(id, &a.ID)
	}
	if runID, ok := top.get(ExtRunID); ok {
		_ = json.Unmarshal(runID, &a.RunID)
	}
	return a
}

// Encode writes e in the given mode and returns the headers and payload of the
// NATS message that carries it. Structured mode marshals the JSON event format
// and sets Content-Type: application/cloudevents+json. Binary mode writes each
// attribute and extension to a header ce-<name> (lower-case), percent-encoded,
// the datacontenttype to Content-Type, and the data as the payload.
//
// Only CloudEvents 1.0 events are written; anything else, or an extension whose
// value has no string form, is an error matching [ErrUnsupported].
func Encode(e event.Event, mode Mode) (nats.Header, []byte, error) {
	if e.Context == nil || e.SpecVersion() != event.CloudEventsVersionV1 {
		return nil, nil, fmt.Errorf("%w: only CloudEvents %s events are written", ErrUnsupported, event.CloudEventsVersionV1)
	}
	h := nats.Header{}
	if mode == Structured {
		// event.WriteJson rather than format.JSON.Marshal: encoding/json would
		// compact and HTML-escape the data, and the arguments go out as sent.
		if err := e.Validate(); err != nil {
			return nil, nil, fmt.Errorf("%w: %s", ErrUnsupported, oneLine(err.Error()))
		}
		var buf bytes.Buffer
		if err := event.WriteJson(&e, &buf); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
		}
		h.Set(ContentType, StructuredJSON)
		return h, buf.Bytes(), nil
	}
	set := func(name, v string) {
		if v != "" {
			h.Set(HeaderPrefix+name, PercentEncode(v))
		}
	}
	set("specversion", e.SpecVersion())
	set("id", e.ID())
	set("source", e.Source())
	set("type", e.Type())
	set("subject", e.Subject())
	set("dataschema", e.DataSchema())
	if t := e.Time(); !t.IsZero() {
		set("time", t.UTC().Format(time.RFC3339Nano))
	}
	for name, v := range e.Extensions() {
		s, err := types.Format(v)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: extension %s: %w", ErrUnsupported, name, err)
		}
		set(name, s)
	}
	if ct := e.DataContentType(); ct != "" {
		h.Set(ContentType, ct)
	}
	return h, e.Data(), nil
}

// StructuredMsg returns a structured-mode NATS message for subject whose
// payload is data, an event already written in the JSON event format (as
// [CallJSON] and [AnswerJSON] write one).
func StructuredMsg(subject string, data []byte) *nats.Msg {
	return &nats.Msg{Subject: subject, Header: nats.Header{ContentType: {StructuredJSON}}, Data: data}
}

// NewMsg returns a NATS message for subject carrying e in the given mode; see
// [Encode].
func NewMsg(subject string, e event.Event, mode Mode) (*nats.Msg, error) {
	h, data, err := Encode(e, mode)
	if err != nil {
		return nil, err
	}
	return &nats.Msg{Subject: subject, Header: h, Data: data}, nil
}

// loneSurrogateIn returns the name of an attribute (any top-level member but
// the data) whose string value escapes half of a surrogate pair alone, or "";
// the first such name in byte order when there are several, so that the same
// problem is reported every time. encoding/json would quietly turn it into
// U+FFFD. (The data is judged later: the arguments' strings when the key is
// derived.)
func loneSurrogateIn(top members) string {
	found := ""
	for _, m := range top {
		name, v := m.name, m.value
		if name == "data" || name == "data_base64" || (found != "" && name >= found) {
			continue
		}
		if bytes.IndexByte(v, '\\') >= 0 && hasLoneSurrogate(v) {
			found = name
		}
	}
	return found
}

// hasLoneSurrogate reports whether the JSON value v, when it is a string,
// holds a \u escape of a surrogate that is not half of a high-low pair.
func hasLoneSurrogate(v []byte) bool {
	if len(v) == 0 || v[0] != '"' {
		return false
	}
	for i := 1; i < len(v); i++ {
		if v[i] != '\\' {
			continue
		}
		if i+1 >= len(v) || v[i+1] != 'u' {
			i++ // an escape of one character, perhaps a backslash
			continue
		}
		r, ok := hex4(v, i+2)
		if !ok {
			return false // not JSON; the caller has checked that it is
		}
		switch {
		case 0xD800 <= r && r <= 0xDBFF:
			if lo, ok := hex4(v, i+8); ok && i+7 < len(v) && v[i+6] == '\\' && v[i+7] == 'u' && 0xDC00 <= lo && lo <= 0xDFFF {
				i += 11
				continue
			}
			return true
		case 0xDC00 <= r && r <= 0xDFFF:
			return true
		}
		i += 5
	}
	return false
}

// hex4 reads the four hex digits of v at i.
func hex4(v []byte, i int) (rune, bool) {
	if i+4 > len(v) {
		return 0, false
	}
	var r rune
	for _, c := range v[i : i+4] {
		d, ok := unhex(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// maxShown bounds how much of a sender's value an error message repeats.
const maxShown = 64

// short quotes s for an error message, cut to maxShown bytes.
func short(s string) string {
	if len(s) <= maxShown {
		return fmt.Sprintf("%q", s)
	}
	cut := maxShown
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return fmt.Sprintf("%q...", s[:cut])
}

// oneLine trims an SDK error message to one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
