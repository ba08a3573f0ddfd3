package wire

import (
	"errors"
	"fmt"
)

// Errors returned by this package. Decode and CallFromEvent report bad input as
// an [*events.RejectedError] instead; these are for the helpers and for misuse.
var (
	// ErrBadEncoding is returned by [PercentDecode] for a value that is not
	// correctly percent-encoded UTF-8. (Its text, which a rejected call's answer
	// repeats, is the one this package had under its former name, binding.)
	ErrBadEncoding = errors.New("binding: bad percent-encoding")

	// ErrUnsupported is returned by [Encode] for an event it cannot write: not
	// CloudEvents 1.0, or an extension whose value has no string form.
	ErrUnsupported = errors.New("wire: event cannot be encoded")

	// ErrBadSubject is returned by the subject parsers for a subject that is not one
	// of toolexec's: wrong prefix, wrong number of tokens, or a token that is not
	// well formed.
	ErrBadSubject = errors.New("wire: malformed subject")

	// ErrInvalidData is returned when an event's data does not match its JSON Schema
	// (or is not JSON at all). The validator's own error is wrapped as well.
	ErrInvalidData = errors.New("wire: data does not match its schema")

	// ErrBadMessage is returned by the readers of interaction messages
	// ([CheckRespond]) for one that is not well formed.
	ErrBadMessage = errors.New("wire: malformed interaction message")
)

// maxQuoted bounds how much of a sender's value an error message of the
// event readers repeats.
const maxQuoted = 64

// quote returns v quoted, cut to maxQuoted bytes (on a rune boundary) with an
// ellipsis and the full length when longer. (The codec's messages use short,
// which leaves out the length.)
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

// Compile-time check that the schema violation is an error.
var _ error = (*dataError)(nil)
