package dispatch

import (
	"errors"
	"fmt"

	"github.com/tesserix/toolexec/events"
)

// IndeterminateOutcomeError is the honest failure: the call's effect may or may not
// have landed, and the dispatcher will not find out by doing it again. A human or
// an approval path decides (see kvstore.Store.Resolve).
type IndeterminateOutcomeError struct {
	Tool        string
	Key         string        // the idempotency key, empty if it could not be derived
	Reason      events.Reason // why the outcome is unknown
	BodyEntered bool          // whether the tool's body was entered
	Err         error         // the body's error, when there was one
}

func (e *IndeterminateOutcomeError) Error() string {
	s := fmt.Sprintf("toolexec: outcome of tool %q is indeterminate (%s, body entered: %t)", e.Tool, e.Reason, e.BodyEntered)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the body's error, if any.
func (e *IndeterminateOutcomeError) Unwrap() error { return e.Err }

// RejectedError says the call was refused before anything happened: no claim, no
// record, no execution. Code is one of the events rejection codes.
type RejectedError struct {
	Tool    string
	Code    events.Code
	Message string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("toolexec: call to %q rejected (%s): %s", e.Tool, e.Code, e.Message)
}

// FailedError says the call failed definitely: the body failed without effect, or
// (for tools that may be retried) every attempt failed. Code is one of the events
// failure codes.
type FailedError struct {
	Tool    string
	Code    events.Code
	Message string
	Err     error // the body's last error, when known
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("toolexec: tool %q failed (%s): %s", e.Tool, e.Code, e.Message)
}

// Unwrap returns the body's error, if any.
func (e *FailedError) Unwrap() error { return e.Err }

// ErrNoAnswer is returned by Dispatch when its context ended before the call could
// be answered and nothing irreversible had happened: no body entered under a
// claim of this call. The caller should hand the call back (for the bus: leave
// the message to be redelivered).
var ErrNoAnswer = errors.New("dispatch: context ended before the call was answered")

// AnswerError turns an answer into the error a library caller branches on: nil for
// completed and deduplicated, *RejectedError, *FailedError or
// *IndeterminateOutcomeError otherwise.
func AnswerError(a events.Answer) error {
	switch a.Kind {
	case events.KindCompleted, events.KindDeduplicated:
		return nil
	case events.KindRejected:
		return &RejectedError{Tool: a.Tool, Code: a.Code, Message: a.Error}
	case events.KindFailed:
		return &FailedError{Tool: a.Tool, Code: a.Code, Message: a.Error}
	case events.KindIndeterminate:
		return &IndeterminateOutcomeError{Tool: a.Tool, Key: a.Key, Reason: a.Reason, BodyEntered: a.BodyEntered}
	}
	return fmt.Errorf("dispatch: answer of unknown kind %q", a.Kind)
}
