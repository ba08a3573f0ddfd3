package bus

import (
	"errors"
	"fmt"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrInvalidConfig is returned by constructors for a configuration they cannot
	// work with; the message names the field.
	ErrInvalidConfig = errors.New("bus: invalid configuration")

	// ErrRunning is returned by Worker.Run when the worker is already running or has
	// run before: a Worker runs once.
	ErrRunning = errors.New("bus: worker already running")

	// ErrBadAnswer is returned by Client methods for a message on an answer subject
	// that is not a well-formed toolexec answer.
	ErrBadAnswer = errors.New("bus: malformed answer")

	// ErrBadFilter is returned by Client.Watch for a filter that is not an event
	// subject, or, when Watch reads through the history service, one whose
	// tenant token is neither a valid tenant nor a wildcard.
	ErrBadFilter = errors.New("bus: filter is not a toolexec event subject")

	// ErrNoHistoryService is returned by Client methods that read stored events
	// through the history service when nothing answers the history subject they
	// ask on (the tenant's toolexec.history.<tenant>, then the operators'
	// toolexec.admin.history; see HistoryViaService): no executor serves it, or
	// (across accounts) the connection's account does not import it.
	ErrNoHistoryService = errors.New("bus: no executor answers history requests")

	// ErrCallPending is returned by Client.Publish and Client.Call when the
	// calls stream refused the call because a call of the same tenant, tool and
	// call id is stored there and not yet answered: the call was not stored
	// again. Whose that call is, this client's own or another publisher's of
	// the same tenant, the client cannot tell; no other tenant's call is ever
	// in the way. Attach waits for its answer.
	ErrCallPending = errors.New("bus: a call with this tenant, tool and call id is stored and not yet answered")

	// ErrOldCallStream is returned by Client.Publish and Client.Call when the
	// call's subject is taken by a stream other than TOOLEXEC_CALLS_V2: the
	// executors speak wire version 1 (their TOOLEXEC_CALLS takes every call
	// subject), whose calls name no call id in their subject. Nothing was
	// stored; the executors must be upgraded before their callers.
	ErrOldCallStream = errors.New("bus: the executors' calls stream is of wire version 1")

	// ErrNoCatalogService is returned by Client.Tools when nothing answers the
	// tenant's catalog subject, toolexec.tools.<tenant>: no executor runs, or
	// (across accounts) the connection's account does not import it.
	ErrNoCatalogService = errors.New("bus: no executor answers catalog requests")

	// ErrTaken is returned by [Interactions.Take] and [Interactions.Answer]
	// when another caller of the same call took the request first.
	ErrTaken = errors.New("bus: another caller took the request")
)

func invalidConfig(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}
