package events

import (
	"fmt"
	"time"
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
// sent, and those that are not valid tokens are left out of the answer's event
// and stood in for in its subject. [Answer.Check] refuses a field set that its
// kind does not use.
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
	// otherwise a pure function of the answer, so its writers never read a clock.
	Time time.Time
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

// Check reports whether a can be published as it stands (see [Answer]): nil, or
// an error matching [ErrInvalidAnswer] that names the first field at fault (and
// matches [ErrUnknownKind] or [ErrInvalidToken] as well where one of those is the
// fault). It checks what the fields say, not how they are written: bounds the
// JSON Schemas of the event data add are checked where the data is written.
func (a Answer) Check() error {
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

// MaxFieldLen bounds the field of a rejected answer, as its schema does. A longer
// one (a JSON pointer into deeply nested arguments) is cut short rather than
// leaving the call unanswered.
const MaxFieldLen = 512

// MaxOperatorLen is the most characters an operator's name may have in a resolved
// event (the schema's bound).
const MaxOperatorLen = 256
