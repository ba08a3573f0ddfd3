package toolexec

import (
	"errors"
	"fmt"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/dispatch"
)

// The errors a call ends in, for errors.As. They are the dispatcher's own types,
// so an executor's Go tools, a dispatcher run in process and a client over NATS
// report the same values.
type (
	// IndeterminateOutcomeError says the call's effect may or may not have landed
	// and will not be found out by running the tool again: its Key, Reason and
	// BodyEntered say what is known. An operator settles the key (AdminClient.Resolve).
	IndeterminateOutcomeError = dispatch.IndeterminateOutcomeError
	// FailedError says the call failed definitely, with nothing left in doubt:
	// the body failed without effect, or every attempt of a retried tool failed.
	FailedError = dispatch.FailedError
	// RejectedError says the call was refused before anything happened: no
	// claim, no record, no execution. Its Code names the problem.
	RejectedError = dispatch.RejectedError
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrCallIDTaken is matched by the *CallIDTakenError of a call whose
	// tenant, tool and id a call that this client did not publish holds.
	ErrCallIDTaken = errors.New("toolexec: call id already taken")
	// ErrNoAnswer is matched by the *NoAnswerError of a call whose answer did not
	// come before the context ended.
	ErrNoAnswer = errors.New("toolexec: no answer yet")
	// ErrInvalidOption is returned for an option a constructor or call cannot
	// work with; the message names it.
	ErrInvalidOption = errors.New("toolexec: invalid option")
	// ErrNoHistoryService is matched by the error of Attach and Watch when the
	// client's account has no JetStream and nothing answers its history
	// requests (toolexec.history.<tenant>, then the
	// operators' toolexec.admin.history): no executor runs, or the account
	// imports neither (a tenant reading another tenant's, or every tenant's,
	// history).
	ErrNoHistoryService = bus.ErrNoHistoryService
	// ErrOldCallStream is matched by the error of a call refused at once
	// because the executors speak wire version 1: their calls stream takes
	// the call's subject instead of TOOLEXEC_CALLS_V2. Nothing was stored;
	// upgrade the executors before their callers (docs/PROTOCOL.md §11).
	ErrOldCallStream = bus.ErrOldCallStream
)

// CallIDTakenError says a call was not stored because a call of the same
// tenant, tool and call id, which this client did not publish, waits in the
// calls stream to be answered: another process of the same tenant chose the
// same id, or this program did before a restart. No other tenant's call is
// ever in the way. The answer to that call is not this caller's to take for
// its own: call again with a fresh id (the default), or Attach to wait for
// that call's answer if it was this program's.
type CallIDTakenError struct {
	Tenant, Tool, CallID string
}

// Error names the call.
func (e *CallIDTakenError) Error() string {
	return fmt.Sprintf("toolexec: call id %q of tenant %s and tool %s is held by a call not yet answered that this client did not publish: "+
		"the call was not stored (use a fresh call id, or Attach to that call if it was yours)", e.CallID, e.Tenant, e.Tool)
}

// Is reports whether target is ErrCallIDTaken.
func (e *CallIDTakenError) Is(target error) bool { return target == ErrCallIDTaken }

// NoAnswerError says the context ended before the call's answer arrived. The call
// may have been published and may still run and be answered: Attach with the
// ids here finds the answer later. It matches ErrNoAnswer and wraps the
// context's error.
type NoAnswerError struct {
	Tenant, Tool, RunID, CallID string
	Err                         error
}

// Error names the call and why the wait ended.
func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("toolexec: no answer to call %s (tenant %s, tool %s, run %s): %v", e.CallID, e.Tenant, e.Tool, e.RunID, e.Err)
}

// Is reports whether target is ErrNoAnswer.
func (e *NoAnswerError) Is(target error) bool { return target == ErrNoAnswer }

// Unwrap returns the context's error.
func (e *NoAnswerError) Unwrap() error { return e.Err }
