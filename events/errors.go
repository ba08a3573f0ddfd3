package events

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrInvalidToken is matched by every [*TokenError]: a tenant, tool, run id or
	// call id that is not 1 to 128 characters of A-Z a-z 0-9 _ -.
	ErrInvalidToken = errors.New("events: invalid token")

	// ErrUnknownKind is returned for an event kind or type that toolexec does not
	// publish.
	ErrUnknownKind = errors.New("events: unknown kind")

	// ErrInvalidAnswer is returned by [Answer.Check] for an answer that cannot be
	// published as it stands (a field its kind needs is missing or malformed), and
	// by the wire's readers and writers of answer events for an answer or an event
	// that is not a well-formed toolexec answer.
	ErrInvalidAnswer = errors.New("events: invalid answer")

	// ErrRejected is matched by every [*RejectError].
	ErrRejected = errors.New("events: call rejected")
)

// TokenError reports a token that does not match [A-Za-z0-9_-]{1,128}. It matches
// [ErrInvalidToken] with errors.Is; errors.As recovers the field.
type TokenError struct {
	// Field names what the token was meant to be: "tenant", "tool", "runid",
	// "callid", "id", ...
	Field string
	// Value is the offending value as given.
	Value string
}

// maxQuoted bounds how much of a caller's value an error message repeats.
const maxQuoted = 64

// Error says which field is wrong and what a token must look like. Long values are
// cut short so that a hostile value cannot bloat logs or answers.
func (e *TokenError) Error() string {
	return fmt.Sprintf("events: %s %s: must be 1 to %d characters of A-Z a-z 0-9 _ -",
		e.Field, quote(e.Value), MaxTokenLen)
}

// Is reports whether target is [ErrInvalidToken].
func (e *TokenError) Is(target error) bool { return target == ErrInvalidToken }

// RejectError is a call refused for bad input. Code is what a rejected answer
// carries; Field, when set, names the attribute, extension or member at fault. It
// matches [ErrRejected] with errors.Is and unwraps to its cause, if any.
type RejectError struct {
	Code  Code
	Field string
	Msg   string
	// Err is the underlying error (a *TokenError, a schema validation error), or nil.
	Err error
}

// Reject returns a *RejectError with the given code and field and a message
// formatted from format and args.
func Reject(code Code, field, format string, args ...any) *RejectError {
	return &RejectError{Code: code, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Error returns "<code>: <field>: <msg>", without the field when there is none.
func (e *RejectError) Error() string {
	var b strings.Builder
	b.WriteString(string(e.Code))
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	if e.Msg != "" {
		b.WriteString(": ")
		b.WriteString(e.Msg)
	}
	return b.String()
}

// Is reports whether target is [ErrRejected].
func (e *RejectError) Is(target error) bool { return target == ErrRejected }

// Unwrap returns the cause, if any.
func (e *RejectError) Unwrap() error { return e.Err }

// quote returns v quoted, cut to maxQuoted bytes (on a rune boundary) with an
// ellipsis when longer.
func quote(v string) string {
	if len(v) <= maxQuoted {
		return fmt.Sprintf("%q", v)
	}
	cut := maxQuoted
	for cut > 0 && !isRuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%q...(%d bytes)", v[:cut], len(v))
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// Compile-time checks that the error types are errors.
var (
	_ error = (*TokenError)(nil)
	_ error = (*RejectError)(nil)
)
