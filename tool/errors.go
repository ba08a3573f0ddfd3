package tool

import (
	"errors"
	"fmt"
)

// Errors returned when declaring tools.
var (
	// ErrInvalidSpec is matched by every error that refuses a declaration.
	ErrInvalidSpec = errors.New("tool: invalid declaration")
	// ErrUnknownArgument is matched when a key or check argument is not a parameter.
	ErrUnknownArgument = errors.New("tool: argument is not a parameter")
	// ErrDuplicateTool is returned when a registry already holds a tool of that name.
	ErrDuplicateTool = errors.New("tool: duplicate tool name")
	// ErrUnknownTool is matched when a registry holds no tool of that name.
	ErrUnknownTool = errors.New("tool: no tool of that name")
	// ErrToolConflict is matched by a [*ConflictError]: the tool's declarations
	// conflict, and it is not served until they agree.
	ErrToolConflict = errors.New("tool: declarations conflict")
	// ErrUnavailable is matched by an [*UnavailableError], and by a body's
	// error that says the server it calls cannot be reached now (wrapped with
	// [NoEffect]: nothing ran).
	ErrUnavailable = errors.New("tool: unavailable")
)

// UnavailableError says that a tool is listed but not run now, because the
// server its body calls cannot be reached (an MCP upstream that is down). It
// matches [ErrUnavailable].
type UnavailableError struct {
	Tool string // the tool's name
	Msg  string // why, for operators and callers
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("tool %q is unavailable: %s", e.Tool, e.Msg)
}

// Is matches ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// ConflictError says that a tool is not served because what declares it
// disagrees (two workers declaring one name differently, say). It matches
// [ErrToolConflict].
type ConflictError struct {
	Tool string // the tool's name
	Msg  string // what conflicts, for operators
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("tool %q is not served while its declarations conflict: %s", e.Tool, e.Msg)
}

// Is matches ErrToolConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrToolConflict }

// SpecError refuses a tool declaration. It matches [ErrInvalidSpec], and
// [ErrUnknownArgument] when Argument is set.
type SpecError struct {
	Tool     string // the tool's name as declared
	Field    string // the part of the declaration at fault, e.g. "key_arguments"
	Argument string // the offending argument name, if any
	Msg      string
}

func (e *SpecError) Error() string {
	if e.Argument != "" {
		return fmt.Sprintf("tool %q: %s: %q %s", e.Tool, e.Field, e.Argument, e.Msg)
	}
	return fmt.Sprintf("tool %q: %s: %s", e.Tool, e.Field, e.Msg)
}

// Is matches ErrInvalidSpec always and ErrUnknownArgument for argument errors.
func (e *SpecError) Is(target error) bool {
	return target == ErrInvalidSpec || (target == ErrUnknownArgument && e.Argument != "")
}

// ErrNoEffect is matched by errors wrapped with [NoEffect].
var ErrNoEffect = errors.New("tool: failed without effect")

// noEffectError marks a failure whose effect is known not to have landed.
type noEffectError struct{ err error }

func (e *noEffectError) Error() string        { return "no effect: " + e.err.Error() }
func (e *noEffectError) Unwrap() error        { return e.err }
func (e *noEffectError) Is(target error) bool { return target == ErrNoEffect }

// NoEffect wraps err to say the effect did not land: the downstream refused the
// request before acting (connection refused, a 4xx refusal). The dispatcher then
// releases the claim and the call fails definitely, even for Effectful tools,
// instead of becoming indeterminate. NoEffect(nil) is nil.
func NoEffect(err error) error {
	if err == nil {
		return nil
	}
	return &noEffectError{err: err}
}

// IsNoEffect reports whether err says the effect did not land.
func IsNoEffect(err error) bool { return errors.Is(err, ErrNoEffect) }
