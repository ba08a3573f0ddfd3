package admin

import (
	"errors"
	"fmt"

	"github.com/tesserix/toolexec/kvstore"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrInvalidConfig is returned by Serve, New and NewClient for a
	// configuration they cannot work with; the message names what is missing.
	ErrInvalidConfig = errors.New("admin: invalid configuration")

	// ErrNoResponder is returned by the Client's methods when no executor serves
	// admin requests (no responders on the subject).
	ErrNoResponder = errors.New("admin: no executor answers admin requests")

	// ErrAuditNotPublished is matched by the error of Resolve (the Client's and
	// the Service's) when the resolution was applied but its resolved event could
	// not be stored.
	ErrAuditNotPublished = errors.New("admin: resolution applied but its audit event was not published")

	// ErrForbidden is matched by the error of a request the executors refused
	// without acting on it, because it did not come from the admin account (see
	// Config.Account).
	ErrForbidden = errors.New("admin: request not from the admin account")
)

// Codes of an [Error], each matching a kvstore error (or ErrAuditNotPublished,
// ErrForbidden, or errors.ErrUnsupported) with errors.Is.
const (
	CodeInvalid          = "invalid"           // kvstore.ErrInvalid
	CodeNotFound         = "not_found"         // kvstore.ErrNotFound
	CodeNotIndeterminate = "not_indeterminate" // kvstore.ErrNotIndeterminate
	CodeTooLarge         = "too_large"         // kvstore.ErrTooLarge
	CodeUnavailable      = "unavailable"       // kvstore.ErrUnavailable
	CodeAuditFailed      = "audit_failed"      // ErrAuditNotPublished
	CodeUnsupported      = "unsupported"       // errors.ErrUnsupported
	CodeForbidden        = "forbidden"         // ErrForbidden
	CodeInternal         = "internal"
)

// Error is an admin request's failure as it travels in a reply.
type Error struct {
	// Code is one of the Code constants.
	Code string `json:"code"`
	// Message says what went wrong, for people.
	Message string `json:"message"`
}

// Error returns the message with its code.
func (e *Error) Error() string { return fmt.Sprintf("admin: %s: %s", e.Code, e.Message) }

// Is matches the kvstore error (or ErrAuditNotPublished, ErrForbidden, or
// errors.ErrUnsupported) that e's code stands for, so that callers branch on
// errors.Is(err, kvstore.ErrNotFound) whether the store was local or behind an
// admin request.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case CodeInvalid:
		return target == kvstore.ErrInvalid
	case CodeNotFound:
		return target == kvstore.ErrNotFound
	case CodeNotIndeterminate:
		return target == kvstore.ErrNotIndeterminate
	case CodeTooLarge:
		return target == kvstore.ErrTooLarge
	case CodeUnavailable:
		return target == kvstore.ErrUnavailable
	case CodeAuditFailed:
		return target == ErrAuditNotPublished
	case CodeUnsupported:
		return target == errors.ErrUnsupported
	case CodeForbidden:
		return target == ErrForbidden
	}
	return false
}

func invalidConfig(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}
