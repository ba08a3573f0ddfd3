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

	// ErrRejected is matched by every [*RejectedError].
	ErrRejected = errors.New("events: call rejected")

	// ErrCallIDTaken is matched by the [*CallIDTakenError] of a call whose
	// tenant, tool and id a call that its client did not publish holds.
	ErrCallIDTaken = errors.New("toolexec: call id already taken")

	// ErrNoAnswer is matched by the [*NoAnswerError] of a call whose answer did
	// not come before the caller's context ended.
	ErrNoAnswer = errors.New("toolexec: no answer yet")
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

// RejectedError says a call was refused before anything happened: no claim,
// no record, no execution. Code is one of the rejection codes
// ([RejectionCodes]); Field, when set, names the attribute, extension or
// member at fault. It matches [ErrRejected] with errors.Is and unwraps to its
// cause, if any.
type RejectedError struct {
	// Tool is the tool called, when the call named one that could be read.
	Tool    string
	Code    Code
	Field   string
	Message string
	// Err is the underlying error (a *TokenError, a schema validation error), or nil.
	Err error
}

// Reject returns a *RejectedError with the given code and field and a message
// formatted from format and args.
func Reject(code Code, field, format string, args ...any) *RejectedError {
	return &RejectedError{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Error returns "<code>: <field>: <message>", without the field when there is
// none, after "toolexec: call to <tool> rejected: " when the tool is known.
func (e *RejectedError) Error() string {
	var b strings.Builder
	if e.Tool != "" {
		fmt.Fprintf(&b, "toolexec: call to %q rejected: ", e.Tool)
	}
	b.WriteString(string(e.Code))
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Is reports whether target is [ErrRejected].
func (e *RejectedError) Is(target error) bool { return target == ErrRejected }

// Unwrap returns the cause, if any.
func (e *RejectedError) Unwrap() error { return e.Err }

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
	_ error = (*RejectedError)(nil)
)
