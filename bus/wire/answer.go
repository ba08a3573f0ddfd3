package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/extensions"
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/events"
)

// answerData is the data of every answer and audit event; each kind's schema says
// which members it has. Fields left empty are omitted, except where a pointer
// keeps an empty outcome or a false body_entered.
type answerData struct {
	Tool        string        `json:"tool,omitempty"`
	Key         string        `json:"key,omitempty"`
	Action      events.Action `json:"action,omitempty"`
	Outcome     *string       `json:"outcome,omitempty"`
	Error       string        `json:"error,omitempty"`
	Code        events.Code   `json:"code,omitempty"`
	Field       string        `json:"field,omitempty"`
	Reason      events.Reason `json:"reason,omitempty"`
	BodyEntered *bool         `json:"body_entered,omitempty"`
	Operator    string        `json:"operator,omitempty"`
}

// readAnswerData holds data to the kind's schema and returns what it says. The
// value the schema judged is read directly: every schema allows only the
// members of answerData, each with its type, so a second decoding of the
// bytes into the struct would find nothing more.
func readAnswerData(kind events.Kind, data []byte) (answerData, error) {
	v, err := parseData(string(kind), data)
	if err != nil {
		return answerData{}, err
	}
	if err := validateValue(string(kind), v); err != nil {
		return answerData{}, err
	}
	m, _ := v.(map[string]any) // every answer schema requires an object
	str := func(name string) string { s, _ := m[name].(string); return s }
	d := answerData{
		Tool: str("tool"), Key: str("key"), Action: events.Action(str("action")), Error: str("error"),
		Code: events.Code(str("code")), Field: str("field"), Reason: events.Reason(str("reason")), Operator: str("operator"),
	}
	if s, ok := m["outcome"].(string); ok {
		d.Outcome = &s
	}
	if b, ok := m["body_entered"].(bool); ok {
		d.BodyEntered = &b
	}
	return d, nil
}

// invalid returns an error matching events.ErrInvalidAnswer.
func invalid(a events.Answer, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", events.ErrInvalidAnswer, a.Kind, fmt.Sprintf(format, args...))
}

// tokenOr returns s when it is a valid token and [Placeholder] otherwise.
func tokenOr(s string) string {
	if events.ValidToken(s) {
		return s
	}
	return Placeholder
}

// AnswerSubject returns the subject a is published on,
// "toolexec.event.<tenant>.<kind>.<tool>.<run_id>.<call_id>". Each part that is not
// a valid token (the tool of a call rejected for naming none, the run of a record
// that does not say) is replaced by [Placeholder], so the result is always a
// literal subject of seven tokens.
func AnswerSubject(a events.Answer) string {
	return EventSubject(tokenOr(a.Tenant), events.Kind(tokenOr(string(a.Kind))), tokenOr(a.Tool), tokenOr(a.RunID), tokenOr(a.CallID))
}

// AnswerID returns the CloudEvents id of a's event: 32 hex digits of a SHA-256 over the
// tenant, the tool and the call id, the three that name a call (for
// [events.KindResolved]: over the tenant, key, action, call id and time). It does
// not depend on the kind, outcome, run or time of an answer, so every answer to
// one call has the same id: publishing an answer again, by the same worker or by
// the one that took the call over, yields the same event, and JetStream stores
// only the first within its duplicate window (see [MsgID]). A call id used again
// for another tool is another call, whose answer has an id of its own.
func AnswerID(a events.Answer) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	put := func(s string) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	if a.Kind == events.KindResolved {
		put("toolexec/resolved")
		put(a.Tenant)
		put(a.Key)
		put(string(a.Action))
		put(a.CallID)
		var ts [8]byte
		if !a.Time.IsZero() {
			binary.BigEndian.PutUint64(ts[:], uint64(a.Time.UnixNano()))
		}
		h.Write(ts[:])
	} else {
		put("toolexec/answer/2")
		put(a.Tenant)
		put(tokenOr(a.Tool))
		put(a.CallID)
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// MsgID returns the Nats-Msg-Id to publish a's event with. It equals [AnswerID]:
// derived from the tenant, tool and call id only, not the kind, so that a second answer to
// one call (say, a redelivered call answered again after a worker died between
// publishing and acking) is dropped by JetStream's duplicate window and each call
// keeps exactly one answer event.
func MsgID(a events.Answer) string { return AnswerID(a) }

// AnswerEvent returns a as a CloudEvent from source (the publishing executor, a
// URI-reference): type [EventType] of its kind, id [AnswerID], subject the tool, extensions
// tenant, runid, callid and idempotencykey (each when known), time when set, the
// distributed tracing extension when TraceParent is set, and data as
// application/json in the shape of the kind's schema.
//
// The answer is checked first ([events.Answer.Check]) and the data validated
// against the kind's embedded schema before the event is returned: errors match
// [events.ErrInvalidAnswer] or [ErrInvalidData]. Either is a bug in the caller.
func AnswerEvent(a events.Answer, source string) (event.Event, error) {
	data, err := encodeAnswerData(a, source)
	if err != nil {
		return event.Event{}, err
	}
	e := event.New()
	e.SetType(EventType(a.Kind))
	e.SetID(AnswerID(a))
	e.SetSource(source)
	if events.ValidToken(a.Tool) {
		e.SetSubject(a.Tool)
	}
	e.SetExtension(ExtTenant, a.Tenant)
	if events.ValidToken(a.RunID) {
		e.SetExtension(ExtRunID, a.RunID)
	}
	if events.ValidToken(a.CallID) {
		e.SetExtension(ExtCallID, a.CallID)
	}
	if a.Key != "" {
		e.SetExtension(ExtIdempotencyKey, a.Key)
	}
	if !a.Time.IsZero() {
		e.SetTime(a.Time)
	}
	if a.TraceParent != "" {
		extensions.DistributedTracingExtension{TraceParent: a.TraceParent, TraceState: a.TraceState}.AddTracingAttributes(&e)
	}
	e.SetDataContentType(event.ApplicationJSON)
	e.DataEncoded = data
	if err := e.Validate(); err != nil {
		return event.Event{}, fmt.Errorf("%w: %s: %s", events.ErrInvalidAnswer, a.Kind, strings.TrimSpace(err.Error()))
	}
	return e, nil
}

// encodeAnswerData checks the answer and its source and returns the data of its
// event.
func encodeAnswerData(a events.Answer, source string) ([]byte, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	if a.Kind == events.KindRejected && a.CallID == "" {
		return nil, invalid(a, "no call id: choose a stand-in for a call that had none")
	}
	if source == "" {
		return nil, invalid(a, "no source")
	}
	// Pointers to copies, not into a: that would move all of a to the heap.
	d := answerData{Tool: a.Tool, Error: a.Error, Code: a.Code, Reason: a.Reason}
	switch a.Kind {
	case events.KindCompleted, events.KindDeduplicated:
		d.Outcome = ptrTo(a.Outcome)
	case events.KindIndeterminate:
		d.BodyEntered = ptrTo(a.BodyEntered)
	case events.KindRejected:
		d.Tool = validOrEmpty(a.Tool)
		d.Field = truncate(a.Field, events.MaxFieldLen)
	case events.KindResolved:
		d.Tool = validOrEmpty(a.Tool)
		d.Key, d.Action, d.Operator = a.Key, a.Action, a.Operator
		if a.Action == events.ActionComplete {
			d.Outcome = ptrTo(a.Outcome)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // outcomes are often HTML or JSON: keep them readable
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("%w: %s: encode data: %w", events.ErrInvalidAnswer, a.Kind, err)
	}
	data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if a.Kind == events.KindResolved {
		// The schema bounds a resolution's action and operator, which Check does
		// not. For every other kind check enforces all the schema says (a property
		// test holds it to that), so the answers of the hot path skip a second
		// reading of their own bytes.
		if err := Validate(a.Kind, data); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// ptrTo returns a pointer to a copy of v.
func ptrTo[T any](v T) *T { return &v }

// AnswerJSON returns a's event (see [AnswerEvent]) from source in the
// CloudEvents JSON event format: the payload of a's structured-mode message
// ([AnswerMsg]), the bytes the SDK writes for that event but for the escapes
// of U+0008 and U+000C. Its errors are AnswerEvent's.
func AnswerJSON(a events.Answer, source string) ([]byte, error) {
	p, err := answerParts(a, source)
	if err != nil {
		return nil, err
	}
	return p.appendJSON(make([]byte, 0, p.jsonSize())), nil
}

// answerParts checks a and source and returns the parts of a's event. It
// fails where AnswerEvent does: the SDK's check of the event finds nothing
// wrong with one built from a checked answer but a source that is not a URI
// reference, since every other attribute is a token or toolexec's own value.
func answerParts(a events.Answer, source string) (eventParts, error) {
	data, err := encodeAnswerData(a, source)
	if err != nil {
		return eventParts{}, err
	}
	src, ok := uriRef(source)
	if !ok {
		return eventParts{}, invalid(a, "source %s is not a URI reference", quote(source))
	}
	p := eventParts{id: AnswerID(a), source: src, typ: EventType(a.Kind), subject: validOrEmpty(a.Tool), time: a.Time, data: data}
	p.exts[extCallID] = validOrEmpty(a.CallID)
	p.exts[extIdempotencyKey] = a.Key
	p.exts[extRunID] = validOrEmpty(a.RunID)
	p.exts[extTenant] = a.Tenant
	p.setTracing(a.TraceParent, a.TraceState)
	return p, nil
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func validOrEmpty(s string) string {
	if events.ValidToken(s) {
		return s
	}
	return ""
}

// DecodeAnswer reads an answer (or a resolution) from the headers and payload of
// a NATS message in either mode: [Decode], then [AnswerFromEvent]. Errors are
// theirs: an [*events.RejectedError] for a message that is not a usable
// CloudEvent, one matching [events.ErrInvalidAnswer] for an event that is not a
// well-formed toolexec answer.
func DecodeAnswer(h nats.Header, data []byte) (events.Answer, error) {
	e, err := Decode(h, data)
	if err != nil {
		return events.Answer{}, err
	}
	return AnswerFromEvent(e)
}

// AnswerFromEvent reads an answer (or a resolution) from e, as a waiting caller or
// an auditor receives it. It checks specversion 1.0, a toolexec answer type, the
// extensions, a JSON datacontenttype, and the data against the kind's schema, then
// the answer as [AnswerEvent] would. Errors match [events.ErrInvalidAnswer], and
// [ErrInvalidData] as well when the data is at fault.
//
// Tokens that [AnswerEvent] left out (the tool, run or call of a rejected call
// that had none usable) come back empty; the event id is not returned, since
// [AnswerID] recomputes it.
func AnswerFromEvent(e event.Event) (events.Answer, error) {
	if e.Context == nil {
		return events.Answer{}, fmt.Errorf("%w: not a CloudEvent", events.ErrInvalidAnswer)
	}
	if v := e.SpecVersion(); v != event.CloudEventsVersionV1 {
		return events.Answer{}, fmt.Errorf("%w: specversion %s, want %q", events.ErrInvalidAnswer, quote(v), event.CloudEventsVersionV1)
	}
	kind, err := KindOfType(e.Type())
	if err != nil {
		return events.Answer{}, fmt.Errorf("%w: %w", events.ErrInvalidAnswer, err)
	}
	a := events.Answer{Kind: kind, Time: e.Time()}
	exts := Extensions(e)
	// Not a table of pointers into a: that would move a to the heap.
	for _, name := range [...]string{ExtTenant, ExtRunID, ExtCallID, ExtIdempotencyKey} {
		v, ok := exts[name]
		if !ok {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return events.Answer{}, invalid(a, "extension %s is %T, want a string", name, v)
		}
		switch name {
		case ExtTenant:
			a.Tenant = s
		case ExtRunID:
			a.RunID = s
		case ExtCallID:
			a.CallID = s
		default:
			a.Key = s
		}
	}
	for _, f := range []struct{ name, v string }{{ExtRunID, a.RunID}, {ExtCallID, a.CallID}} {
		if f.v != "" && !events.ValidToken(f.v) {
			return events.Answer{}, fmt.Errorf("%w: %s: %w", events.ErrInvalidAnswer, kind, events.CheckToken(f.name, f.v))
		}
	}
	if hasSubject(e) {
		a.Tool = e.Subject()
		if err := events.CheckToken("subject", a.Tool); err != nil {
			return events.Answer{}, fmt.Errorf("%w: %s: %w", events.ErrInvalidAnswer, kind, err)
		}
	}
	if tc, ok := tracing(exts); ok {
		a.TraceParent, a.TraceState = tc.TraceParent, tc.TraceState
	}
	if ct := e.DataContentType(); ct != "" && ct != event.ApplicationJSON {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != event.ApplicationJSON {
			return events.Answer{}, invalid(a, "datacontenttype %s, want %q", quote(ct), event.ApplicationJSON)
		}
	}
	d, err := readAnswerData(kind, e.Data())
	if err != nil {
		return events.Answer{}, fmt.Errorf("%w: %w", events.ErrInvalidAnswer, err)
	}
	if d.Tool != "" {
		if a.Tool != "" && a.Tool != d.Tool {
			return events.Answer{}, invalid(a, "subject %s names another tool than the data's %s", quote(a.Tool), quote(d.Tool))
		}
		a.Tool = d.Tool
	}
	if d.Key != "" {
		if a.Key != "" && a.Key != d.Key {
			return events.Answer{}, invalid(a, "extension %s disagrees with the data's key", ExtIdempotencyKey)
		}
		a.Key = d.Key
	}
	if d.Outcome != nil {
		a.Outcome = *d.Outcome
	}
	if d.BodyEntered != nil {
		a.BodyEntered = *d.BodyEntered
	}
	a.Error, a.Code, a.Field, a.Reason, a.Action, a.Operator = d.Error, d.Code, d.Field, d.Reason, d.Action, d.Operator
	if err := a.Check(); err != nil {
		return events.Answer{}, err
	}
	return a, nil
}
