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
)

func invalidConfig(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}
