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
	// subject.
	ErrBadFilter = errors.New("bus: filter is not a toolexec event subject")
)

func invalidConfig(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}
