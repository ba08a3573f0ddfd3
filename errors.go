package toolexec

import (
	"errors"

	"github.com/tesserix/toolexec/bus"
)

// Sentinel errors of this package. The errors a call ends in are the
// vocabulary's (package events): *events.IndeterminateOutcomeError,
// *events.FailedError, *events.RejectedError, *events.CallIDTakenError and
// *events.NoAnswerError. Match these with errors.Is.
var (
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
