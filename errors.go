package toolexec

import "errors"

// Sentinel errors of this package. Match them with errors.Is. The errors a
// call ends in are the vocabulary's (package events):
// *events.IndeterminateOutcomeError, *events.FailedError,
// *events.RejectedError, *events.CallIDTakenError and *events.NoAnswerError.
var (
	// ErrInvalidOption is returned for an option a constructor or call cannot
	// work with; the message names it.
	ErrInvalidOption = errors.New("toolexec: invalid option")

	// ErrNoHistoryService is matched by the error of Attach, Find, Watch,
	// History and AdminHistory when they read through the executors' history
	// service and nothing answers the history subject they ask on (the
	// tenant's toolexec.history.<tenant>, then the operators'
	// toolexec.admin.history; see HistoryViaService): no executor runs, or
	// the connection's account imports neither (a tenant reading another
	// tenant's, or every tenant's, history).
	ErrNoHistoryService = errors.New("toolexec: no executor answers history requests")

	// ErrOldCallStream is matched by the error of a call refused at once
	// because the executors speak wire version 1: their calls stream takes
	// the call's subject instead of TOOLEXEC_CALLS_V2, and their calls name
	// no call id in their subject. Nothing was stored; upgrade the executors
	// before their callers (docs/PROTOCOL.md §11).
	ErrOldCallStream = errors.New("toolexec: the executors' calls stream is of wire version 1")

	// ErrNoCatalogService is matched by the error of Tools when nothing
	// answers the tenant's catalog subject, toolexec.tools.<tenant>: no
	// executor runs, or (across accounts) the connection's account does not
	// import it.
	ErrNoCatalogService = errors.New("toolexec: no executor answers catalog requests")

	// ErrBadAnswer is matched by the error of the Client's methods for a
	// message on an answer subject that is not a well-formed toolexec answer.
	ErrBadAnswer = errors.New("toolexec: malformed answer")

	// ErrBadFilter is matched by the error of Watch for a filter that is not
	// within toolexec.event., not a well-formed subject filter, or one no
	// event subject can match.
	ErrBadFilter = errors.New("toolexec: filter is not a toolexec event subject")

	// ErrInteractionTaken is returned by [Interactions.Take] and
	// [Interactions.Answer] when another caller of the same call took the
	// request first.
	ErrInteractionTaken = errors.New("toolexec: another caller took the request")
)
