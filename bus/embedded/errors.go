package embedded

import (
	"errors"
	"fmt"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrPortInUse is matched by the [*PortInUseError] Start returns when the
	// server's port is taken.
	ErrPortInUse = errors.New("embedded NATS: port already in use")

	// ErrInvalidConfig is returned by Start for a configuration it cannot work
	// with; the message names the field.
	ErrInvalidConfig = errors.New("embedded NATS: invalid configuration")
)

// PortInUseError says the embedded server cannot listen because another process
// (most often another NATS server) holds its address. It matches [ErrPortInUse].
type PortInUseError struct {
	// Addr is the host:port that is taken.
	Addr string
	// Err is the error from the operating system.
	Err error
}

// Error explains the conflict and the two ways out.
func (e *PortInUseError) Error() string {
	return fmt.Sprintf("embedded NATS: %s is already in use (another NATS server?): "+
		"choose another port with --nats-port / TOOLEXEC_NATS_PORT, "+
		"or use the running server with --server nats://%s", e.Addr, e.Addr)
}

// Is reports whether target is ErrPortInUse.
func (e *PortInUseError) Is(target error) bool { return target == ErrPortInUse }

// Unwrap returns the operating system's error.
func (e *PortInUseError) Unwrap() error { return e.Err }

func invalidConfig(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}
