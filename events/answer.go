package events

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/extensions"
)

// Answer is what toolexec publishes about a call: one of the five answer kinds, or
// the audit event of an operator's resolution ([KindResolved]).
//
// Which fields a kind uses:
//
//	completed      Tool, Outcome; Key when the tool has a policy
//	deduplicated   Tool, Outcome, Key
//	indeterminate  Tool, Reason, BodyEntered; Key unless the reason is
//	               key_underivable; Error optionally, as detail for operators
//	failed         Tool, Error, Code (a failure code); Key optionally
//	rejected       Error, Code (a rejection code); Tool, RunID and Field when
//	               known; Key optionally (arguments_mismatch)
//	resolved       Key, Action; Outcome with ActionComplete only; Tool, RunID,
//	               CallID (the record's) and Operator when known
//
// Every kind needs a valid Tenant. The answer kinds but rejected need valid Tool,
// RunID and CallID tokens. A rejected answer needs a non-empty CallID (a stand-in
// chosen by the receiver when the call had none, such as one made from the
// stream sequence); its Tool, RunID and CallID may otherwise be anything the call
// sent, and those that are not valid tokens are left out of the event and replaced
// by [Placeholder] in its subject. [Answer.Event] refuses a field set that its kind
// does not use.
type Answer struct {
	Kind   Kind
	Tenant string
	RunID  string
	CallID string
	Tool   string
	// Key is the idempotency key (64 lower-case hex digits), empty when none was
	// derived.
	Key string

	Outcome     string
	Error       string
	Code        Code
	Field       string // rejected: the attribute or member at fault; cut to MaxFieldLen bytes
	Reason      Reason
	BodyEntered bool
	Action      Action // resolved only
	Operator    string // resolved only

	// TraceParent and TraceState are carried in the distributed tracing extension
	// when TraceParent is set.
	TraceParent string
	TraceState  string
	// Time is the event's time attribute, left out when zero. Set it: the event is
	// otherwise a pure function of the answer, so Event never reads a clock.
	Time time.Time
}

// answerData is the data of every answer and audit event; each kind's schema says
// which members it has. Fields left empty are omitted, except where a pointer
// keeps an empty outcome or a false body_entered.
type answerData struct {
	Tool        string  `json:"tool,omitempty"`
	Key         string  `json:"key,omitempty"`
	Action      Action  `json:"action,omitempty"`
	Outcome     *string `json:"outcome,omitempty"`
	Error       string  `json:"error,omitempty"`
	Code        Code    `json:"code,omitempty"`
	Field       string  `json:"field,omitempty"`
	Reason      Reason  `json:"reason,omitempty"`
	BodyEntered *bool   `json:"body_entered,omitempty"`
	Operator    string  `json:"operator,omitempty"`
}

// readAnswerData holds data to the kind's schema and returns what it says. The
// value the schema judged is read directly: every schema allows only the
// members of answerData, each with its type, so a second decoding of the
// bytes into the struct would find nothing more.
func readAnswerData(kind Kind, data []byte) (answerData, error) {
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
		Tool: str("tool"), Key: str("key"), Action: Action(str("action")), Error: str("error"),
		Code: Code(str("code")), Field: str("field"), Reason: Reason(str("reason")), Operator: str("operator"),
	}
	if s, ok := m["outcome"].(string); ok {
		d.Outcome = &s
	}
	if b, ok := m["body_entered"].(bool); ok {
		d.BodyEntered = &b
	}
	return d, nil
}

// fieldSet marks the optional fields of an Answer that are set.
type fieldSet uint8

const (
	fOutcome fieldSet = 1 << iota
	fError
	fCode
	fField
	fReason
	fBodyEntered
	fAction
	fOperator
)

var fieldNames = []string{"Outcome", "Error", "Code", "Field", "Reason", "BodyEntered", "Action", "Operator"}

// allowed lists, per kind, the fields it may set. Outcome of completed,
// deduplicated and resolved may be empty, so it is always allowed there.
var allowed = map[Kind]fieldSet{
	KindCompleted:     fOutcome,
	KindDeduplicated:  fOutcome,
	KindIndeterminate: fReason | fBodyEntered | fError,
	KindFailed:        fError | fCode,
	KindRejected:      fError | fCode | fField,
	KindResolved:      fOutcome | fAction | fOperator,
}

func (a Answer) setFields() fieldSet {
	var s fieldSet
	for i, set := range []bool{a.Outcome != "", a.Error != "", a.Code != "", a.Field != "",
		a.Reason != "", a.BodyEntered, a.Action != "", a.Operator != ""} {
		if set {
			s |= 1 << i
		}
	}
	return s
}

// invalid returns an error matching ErrInvalidAnswer.
func invalid(a Answer, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidAnswer, a.Kind, fmt.Sprintf(format, args...))
}

// check reports whether a can be published as it stands; see [Answer].
func (a Answer) check() error {
	if !a.Kind.Valid() {
		return fmt.Errorf("%w: %w: %s", ErrInvalidAnswer, ErrUnknownKind, quote(string(a.Kind)))
	}
	if err := CheckToken("tenant", a.Tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidAnswer, err)
	}
	if a.Kind != KindRejected && a.Kind != KindResolved {
		for _, f := range []struct{ name, v string }{{"tool", a.Tool}, {"runid", a.RunID}, {"callid", a.CallID}} {
			if err := CheckToken(f.name, f.v); err != nil {
				return fmt.Errorf("%w: %s: %w", ErrInvalidAnswer, a.Kind, err)
			}
		}
	}
	if a.Key != "" && !validKey(a.Key) {
		return invalid(a, "key %s is not 64 lower-case hex digits", quote(a.Key))
	}
	if stray := a.setFields() &^ allowed[a.Kind]; stray != 0 {
		for i, name := range fieldNames {
			if stray&(1<<i) != 0 {
				return invalid(a, "%s is not part of this kind", name)
			}
		}
	}
	switch a.Kind {
	case KindDeduplicated:
		if a.Key == "" {
			return invalid(a, "no key: a deduplicated answer comes from a recorded key")
		}
	case KindIndeterminate:
		if !a.Reason.Valid() {
			return invalid(a, "reason %s is not one of %v", quote(string(a.Reason)), Reasons())
		}
		if a.Reason == ReasonKeyUnderivable && a.Key != "" {
			return invalid(a, "key set although the reason is %s", ReasonKeyUnderivable)
		}
	case KindFailed:
		if a.Error == "" {
			return invalid(a, "no error message")
		}
		if !a.Code.IsFailure() {
			return invalid(a, "code %s is not one of %v", quote(string(a.Code)), FailureCodes())
		}
	case KindRejected:
		if a.Error == "" {
			return invalid(a, "no error message")
		}
		if !a.Code.IsRejection() {
			return invalid(a, "code %s is not a rejection code", quote(string(a.Code)))
		}
	case KindResolved:
		if a.Key == "" {
			return invalid(a, "no key")
		}
		if !a.Action.Valid() {
			return invalid(a, "action %s is not %q or %q", quote(string(a.Action)), ActionComplete, ActionRelease)
		}
		if a.Action == ActionRelease && a.Outcome != "" {
			return invalid(a, "an outcome is recorded only by %q", ActionComplete)
		}
	}
	return nil
}

// tokenOr returns s when it is a valid token and [Placeholder] otherwise.
func tokenOr(s string) string {
	if ValidToken(s) {
		return s
	}
	return Placeholder
}

// Subject returns the subject a is published on,
// "toolexec.event.<tenant>.<kind>.<tool>.<run_id>.<call_id>". Each part that is not
// a valid token (the tool of a call rejected for naming none, the run of a record
// that does not say) is replaced by [Placeholder], so the result is always a
// literal subject of seven tokens.
func (a Answer) Subject() string {
	return EventSubject(tokenOr(a.Tenant), Kind(tokenOr(string(a.Kind))), tokenOr(a.Tool), tokenOr(a.RunID), tokenOr(a.CallID))
}

// ID returns the CloudEvents id of a's event: 32 hex digits of a SHA-256 over the
// tenant and the call id (for [KindResolved]: over the tenant, key, action, call id
// and time). It does not depend on the kind, outcome or time of an answer, so every
// answer to one call has the same id: publishing an answer again, by the same
// worker or by the one that took the call over, yields the same event, and JetStream
// stores only the first within its duplicate window (see [Answer.MsgID]).
func (a Answer) ID() string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	put := func(s string) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	if a.Kind == KindResolved {
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
		put("toolexec/answer")
		put(a.Tenant)
		put(a.CallID)
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// MsgID returns the Nats-Msg-Id to publish a's event with. It equals [Answer.ID]:
// derived from the tenant and call id only, not the kind, so that a second answer to
// one call (say, a redelivered call answered again after a worker died between
// publishing and acking) is dropped by JetStream's duplicate window and each call
// keeps exactly one answer event.
func (a Answer) MsgID() string { return a.ID() }

// Event returns a as a CloudEvent from source (the publishing executor, a
// URI-reference): type [Kind.Type], id [Answer.ID], subject the tool, extensions
// tenant, runid, callid and idempotencykey (each when known), time when set, the
// distributed tracing extension when TraceParent is set, and data as
// application/json in the shape of the kind's schema.
//
// The answer is checked first (see [Answer]) and the data validated against the
// kind's embedded schema before the event is returned: errors match
// [ErrInvalidAnswer] or [ErrInvalidData]. Either is a bug in the caller.
func (a Answer) Event(source string) (event.Event, error) {
	data, err := a.data(source)
	if err != nil {
		return event.Event{}, err
	}
	e := event.New()
	e.SetType(a.Kind.Type())
	e.SetID(a.ID())
	e.SetSource(source)
	if ValidToken(a.Tool) {
		e.SetSubject(a.Tool)
	}
	e.SetExtension(ExtTenant, a.Tenant)
	if ValidToken(a.RunID) {
		e.SetExtension(ExtRunID, a.RunID)
	}
	if ValidToken(a.CallID) {
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
		return event.Event{}, fmt.Errorf("%w: %s: %s", ErrInvalidAnswer, a.Kind, strings.TrimSpace(err.Error()))
	}
	return e, nil
}

// data checks the answer and its source and returns the data of its event.
func (a Answer) data(source string) ([]byte, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if a.Kind == KindRejected && a.CallID == "" {
		return nil, invalid(a, "no call id: choose a stand-in for a call that had none")
	}
	if source == "" {
		return nil, invalid(a, "no source")
	}
	// Pointers to copies, not into a: that would move all of a to the heap.
	d := answerData{Tool: a.Tool, Error: a.Error, Code: a.Code, Reason: a.Reason}
	switch a.Kind {
	case KindCompleted, KindDeduplicated:
		d.Outcome = ptrTo(a.Outcome)
	case KindIndeterminate:
		d.BodyEntered = ptrTo(a.BodyEntered)
	case KindRejected:
		d.Tool = validOrEmpty(a.Tool)
		d.Field = truncate(a.Field, MaxFieldLen)
	case KindResolved:
		d.Tool = validOrEmpty(a.Tool)
		d.Key, d.Action, d.Operator = a.Key, a.Action, a.Operator
		if a.Action == ActionComplete {
			d.Outcome = ptrTo(a.Outcome)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // outcomes are often HTML or JSON: keep them readable
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("%w: %s: encode data: %w", ErrInvalidAnswer, a.Kind, err)
	}
	data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if a.Kind == KindResolved {
		// The schema bounds a resolution's action and operator, which check does
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

// StructuredJSON returns a's event (see [Answer.Event]) in the CloudEvents
// JSON event format: the bytes the NATS binding's structured mode writes for
// that event, written directly instead of through the SDK's event, which a
// worker would build and check twice for every answer it publishes. Its
// errors are Event's.
func (a Answer) StructuredJSON(source string) ([]byte, error) {
	data, err := a.data(source)
	if err != nil {
		return nil, err
	}
	// The SDK's Validate finds nothing else wrong with the event Event builds
	// from a checked answer: its attributes are tokens or toolexec's own
	// values, but for the source, which must be a URI reference.
	src, ok := uriRef(source)
	if !ok {
		return nil, invalid(a, "source %s is not a URI reference", quote(source))
	}
	subject := ""
	if ValidToken(a.Tool) {
		subject = a.Tool
	}
	b := make([]byte, 0, 384+len(data)+len(a.TraceState))
	b = appendAttributes(b, a.ID(), src, a.Kind.Type(), subject, a.Time)
	b = append(b, data...)
	// The extensions follow in the order of their names, as the SDK writes
	// them.
	if ValidToken(a.CallID) {
		b = appendExtension(b, ExtCallID, a.CallID)
	}
	if a.Key != "" {
		b = appendExtension(b, ExtIdempotencyKey, a.Key)
	}
	if ValidToken(a.RunID) {
		b = appendExtension(b, ExtRunID, a.RunID)
	}
	b = appendExtension(b, ExtTenant, a.Tenant)
	b = appendTracing(b, a.TraceParent, a.TraceState)
	return append(b, '}'), nil
}

// MaxFieldLen bounds the field of a rejected answer, as its schema does. A longer
// one (a JSON pointer into deeply nested arguments) is cut short rather than
// leaving the call unanswered.
const MaxFieldLen = 512

// MaxOperatorLen is the most characters an operator's name may have in a resolved
// event (the schema's bound).
const MaxOperatorLen = 256

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
	if ValidToken(s) {
		return s
	}
	return ""
}

// AnswerFromEvent reads an answer (or a resolution) from e, as a waiting caller or
// an auditor receives it. It checks specversion 1.0, a toolexec answer type, the
// extensions, a JSON datacontenttype, and the data against the kind's schema, then
// the answer as [Answer.Event] would. Errors match [ErrInvalidAnswer], and
// [ErrInvalidData] as well when the data is at fault.
//
// Tokens that [Answer.Event] left out (the tool, run or call of a rejected call
// that had none usable) come back empty; the event id is not returned, since
// [Answer.ID] recomputes it.
func AnswerFromEvent(e event.Event) (Answer, error) {
	if e.Context == nil {
		return Answer{}, fmt.Errorf("%w: not a CloudEvent", ErrInvalidAnswer)
	}
	if v := e.SpecVersion(); v != event.CloudEventsVersionV1 {
		return Answer{}, fmt.Errorf("%w: specversion %s, want %q", ErrInvalidAnswer, quote(v), event.CloudEventsVersionV1)
	}
	kind, err := KindOfType(e.Type())
	if err != nil {
		return Answer{}, fmt.Errorf("%w: %w", ErrInvalidAnswer, err)
	}
	a := Answer{Kind: kind, Time: e.Time()}
	exts := Extensions(e)
	// Not a table of pointers into a: that would move a to the heap.
	for _, name := range [...]string{ExtTenant, ExtRunID, ExtCallID, ExtIdempotencyKey} {
		v, ok := exts[name]
		if !ok {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return Answer{}, invalid(a, "extension %s is %T, want a string", name, v)
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
		if f.v != "" && !ValidToken(f.v) {
			return Answer{}, fmt.Errorf("%w: %s: %w", ErrInvalidAnswer, kind, CheckToken(f.name, f.v))
		}
	}
	if hasSubject(e) {
		a.Tool = e.Subject()
		if err := CheckToken("subject", a.Tool); err != nil {
			return Answer{}, fmt.Errorf("%w: %s: %w", ErrInvalidAnswer, kind, err)
		}
	}
	if tc, ok := tracing(exts); ok {
		a.TraceParent, a.TraceState = tc.TraceParent, tc.TraceState
	}
	if ct := e.DataContentType(); ct != "" && ct != event.ApplicationJSON {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != event.ApplicationJSON {
			return Answer{}, invalid(a, "datacontenttype %s, want %q", quote(ct), event.ApplicationJSON)
		}
	}
	d, err := readAnswerData(kind, e.Data())
	if err != nil {
		return Answer{}, fmt.Errorf("%w: %w", ErrInvalidAnswer, err)
	}
	if d.Tool != "" {
		if a.Tool != "" && a.Tool != d.Tool {
			return Answer{}, invalid(a, "subject %s names another tool than the data's %s", quote(a.Tool), quote(d.Tool))
		}
		a.Tool = d.Tool
	}
	if d.Key != "" {
		if a.Key != "" && a.Key != d.Key {
			return Answer{}, invalid(a, "extension %s disagrees with the data's key", ExtIdempotencyKey)
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
	if err := a.check(); err != nil {
		return Answer{}, err
	}
	return a, nil
}
