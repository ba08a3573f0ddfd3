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
	// ErrCallIDTaken is matched by the *CallIDTakenError of a call whose id
	// someone else published first.
	ErrCallIDTaken = errors.New("toolexec: call id already taken")
	// ErrNoAnswer is matched by the *NoAnswerError of a call whose answer did not
	// come before the context ended.
	ErrNoAnswer = errors.New("toolexec: no answer yet")
	// ErrInvalidOption is returned for an option a constructor or call cannot
	// work with; the message names it.
	ErrInvalidOption = errors.New("toolexec: invalid option")
	// ErrNoHistoryService is matched by the error of Attach, Watch, and Call of a
	// call id published before, when the client's account has no JetStream and
	// nothing answers its history requests (toolexec.history.<tenant>, then the
	// operators' toolexec.admin.history): no executor runs, or the account
	// imports neither (a tenant reading another tenant's, or every tenant's,
	// history).
	ErrNoHistoryService = bus.ErrNoHistoryService
)

// CallIDTakenError says a call was not published because its call id had
// already been published by someone else — another process, or another tenant:
// the calls stream drops a message whose id it has seen within its duplicate
// window, whoever sent it. The answer under that id is not this caller's. Call
// again with a fresh id (the default); if the earlier call was this program's
// own, before a restart, Attach to it instead.
type CallIDTakenError struct {
	CallID string
}

// Error names the id.
func (e *CallIDTakenError) Error() string {
	return fmt.Sprintf("toolexec: call id %q was published before, not by this client: the call was not stored (use a fresh call id, or Attach if the earlier call was yours)", e.CallID)
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
