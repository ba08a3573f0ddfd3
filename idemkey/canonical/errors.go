package canonical

import (
	"errors"
	"fmt"
)

// Codes carried by [Error.Code]. They are stable strings, safe to show to clients and
// to compare across languages.
const (
	// CodeInvalidJSON: the input is not one well-formed JSON value.
	CodeInvalidJSON = "invalid_json"
	// CodeDuplicateMember: an object names the same member twice.
	CodeDuplicateMember = "duplicate_member"
	// CodeNFCCollision: two member names of one object are equal after NFC.
	CodeNFCCollision = "nfc_collision"
	// CodeNumberOutOfRange: a number does not fit a finite, non-zero double.
	CodeNumberOutOfRange = "number_out_of_range"
	// CodeInvalidUnicode: invalid UTF-8, or a lone surrogate escape.
	CodeInvalidUnicode = "invalid_unicode"
	// CodeTooDeep: containers nest deeper than allowed.
	CodeTooDeep = "too_deep"
	// CodeTooManyValues: an object has more members, an array more elements, or
	// the document more values than the [Limits] allow.
	CodeTooManyValues = "too_many_values"
)

// Sentinel errors, one per code. An [*Error] matches the sentinel of its code under
// errors.Is; the sentinels themselves are never returned bare.
var (
	// ErrSyntax matches errors with code [CodeInvalidJSON].
	ErrSyntax = errors.New("canonical: invalid JSON")
	// ErrDuplicateMember matches errors with code [CodeDuplicateMember].
	ErrDuplicateMember = errors.New("canonical: duplicate member name")
	// ErrNFCCollision matches errors with code [CodeNFCCollision].
	ErrNFCCollision = errors.New("canonical: member names equal after NFC")
	// ErrNumberOutOfRange matches errors with code [CodeNumberOutOfRange].
	ErrNumberOutOfRange = errors.New("canonical: number out of range")
	// ErrInvalidUnicode matches errors with code [CodeInvalidUnicode].
	ErrInvalidUnicode = errors.New("canonical: invalid Unicode")
	// ErrTooDeep matches errors with code [CodeTooDeep].
	ErrTooDeep = errors.New("canonical: nesting too deep")
	// ErrTooManyValues matches errors with code [CodeTooManyValues].
	ErrTooManyValues = errors.New("canonical: too many values")
)

// ErrNotObject is returned by [ParseObject] for a well-formed document whose value is
// not an object. It is not an [*Error]: the text is valid, only its shape is wrong.
var ErrNotObject = errors.New("canonical: not a JSON object")

// Error describes why a document has no canonical form.
type Error struct {
	// Code is one of the Code constants.
	Code string
	// Offset is the byte offset in the input where the problem was found. For
	// [AppendString] it is the offset within the string.
	Offset int
	// Msg says what is wrong, for people.
	Msg string
}

var _ error = (*Error)(nil)

// Error formats the code, the offset and the message.
func (e *Error) Error() string {
	return fmt.Sprintf("canonical: %s at byte %d: %s", e.Code, e.Offset, e.Msg)
}

// Is reports whether target is the sentinel of e's code.
func (e *Error) Is(target error) bool {
	return target != nil && sentinel(e.Code) == target
}

func sentinel(code string) error {
	switch code {
	case CodeInvalidJSON:
		return ErrSyntax
	case CodeDuplicateMember:
		return ErrDuplicateMember
	case CodeNFCCollision:
		return ErrNFCCollision
	case CodeNumberOutOfRange:
		return ErrNumberOutOfRange
	case CodeInvalidUnicode:
		return ErrInvalidUnicode
	case CodeTooDeep:
		return ErrTooDeep
	case CodeTooManyValues:
		return ErrTooManyValues
	}
	return nil
}

func newError(code string, offset int, format string, args ...any) *Error {
	return &Error{Code: code, Offset: offset, Msg: fmt.Sprintf(format, args...)}
}
