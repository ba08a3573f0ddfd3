package events

import "fmt"

// IndeterminateOutcomeError says a call's effect may or may not have landed and
// will not be found out by running the tool again: Key, Reason and BodyEntered
// say what is known. An operator settles the key (admin resolve).
type IndeterminateOutcomeError struct {
	Tool        string
	Key         string // the idempotency key, empty if it could not be derived
	Reason      Reason // why the outcome is unknown
	BodyEntered bool   // whether the tool's body was entered
	Err         error  // the body's error, when there was one in hand
}

// Error names the tool, the reason and whether the body was entered.
func (e *IndeterminateOutcomeError) Error() string {
	s := fmt.Sprintf("toolexec: outcome of tool %q is indeterminate (%s, body entered: %t)", e.Tool, e.Reason, e.BodyEntered)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the body's error, if any.
func (e *IndeterminateOutcomeError) Unwrap() error { return e.Err }

// FailedError says a call failed definitely, with nothing left in doubt: the
// body failed without effect, or every attempt of a tool that may be retried
// failed. Code is one of the failure codes ([FailureCodes]).
type FailedError struct {
	Tool    string
	Code    Code
	Message string
	Err     error // the body's last error, when there was one in hand
}

// Error names the tool, the code and the message.
func (e *FailedError) Error() string {
	return fmt.Sprintf("toolexec: tool %q failed (%s): %s", e.Tool, e.Code, e.Message)
}

// Unwrap returns the body's error, if any.
func (e *FailedError) Unwrap() error { return e.Err }

// CallIDTakenError says a call was not stored because a call of the same
// tenant, tool and call id, which its client did not publish, waits in the
// calls stream to be answered: another process of the same tenant chose the
// same id, or this program did before a restart. No other tenant's call is
// ever in the way. The answer to that call is not this caller's to take for
// its own: call again with a fresh id, or attach to that call if it was this
// program's. It matches [ErrCallIDTaken].
type CallIDTakenError struct {
	Tenant, Tool, CallID string
}

// Error names the call.
func (e *CallIDTakenError) Error() string {
	return fmt.Sprintf("toolexec: call id %q of tenant %s and tool %s is held by a call not yet answered that this client did not "+
		"publish: the call was not stored (use a fresh call id, or attach to that call if it was yours)", e.CallID, e.Tenant, e.Tool)
}

// Is reports whether target is [ErrCallIDTaken].
func (e *CallIDTakenError) Is(target error) bool { return target == ErrCallIDTaken }

// NoAnswerError says the caller's context ended before the call's answer
// arrived. The call may have been published and may still run and be
// answered: attaching with the ids here finds the answer later. It matches
// [ErrNoAnswer] and wraps the context's error.
type NoAnswerError struct {
	Tenant, Tool, RunID, CallID string
	Err                         error
}

// Error names the call and why the wait ended.
func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("toolexec: no answer to call %s (tenant %s, tool %s, run %s): %v", e.CallID, e.Tenant, e.Tool, e.RunID, e.Err)
}

// Is reports whether target is [ErrNoAnswer].
func (e *NoAnswerError) Is(target error) bool { return target == ErrNoAnswer }

// Unwrap returns the context's error.
func (e *NoAnswerError) Unwrap() error { return e.Err }

// Err returns the error a caller branches on for the answer a: nil for
// completed and deduplicated answers, a [*RejectedError], [*FailedError] or
// [*IndeterminateOutcomeError] for the others, and an error matching
// [ErrUnknownKind] for a kind that is not an answer's.
func (a Answer) Err() error {
	switch a.Kind {
	case KindCompleted, KindDeduplicated:
		return nil
	case KindRejected:
		return &RejectedError{Tool: a.Tool, Code: a.Code, Field: a.Field, Message: a.Error}
	case KindFailed:
		return &FailedError{Tool: a.Tool, Code: a.Code, Message: a.Error}
	case KindIndeterminate:
		return &IndeterminateOutcomeError{Tool: a.Tool, Key: a.Key, Reason: a.Reason, BodyEntered: a.BodyEntered}
	}
	return fmt.Errorf("%w: %q is not an answer's kind", ErrUnknownKind, a.Kind)
}
