package embedded

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tesserix/toolexec/internal/dirlock"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrPortInUse is matched by the [*PortInUseError] Start returns when the
	// server's port is taken.
	ErrPortInUse = errors.New("embedded NATS: port already in use")

	// ErrStoreInUse is matched by the [*StoreInUseError] Start returns when
	// another server holds the store folder.
	ErrStoreInUse = errors.New("embedded NATS: store folder already in use")

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

// StoreInUseError says the embedded server cannot start because another server,
// in this process or another, runs on its store folder: two servers on one
// JetStream store corrupt it (each books the same keys, and at the next start
// one finds the other's files and loses messages). It matches [ErrStoreInUse],
// and unwraps to a *dirlock.HeldError.
type StoreInUseError struct {
	// Dir is the store folder, as an absolute path.
	Dir string
	// PID is the holder's process id; 0 when its lock file does not say.
	PID int
	// URL is the holder's client URL; empty when it has none (an in-process
	// server) or has not recorded it yet.
	URL string
	// Err is the lock's refusal.
	Err error
}

// Error names the folder and its holder, and the ways out.
func (e *StoreInUseError) Error() string {
	var b strings.Builder
	held := dirlock.HeldError{Dir: e.Dir, PID: e.PID, Addr: e.URL}
	fmt.Fprintf(&b, "embedded NATS: store folder %s", held.Error())
	b.WriteString(": one store folder serves one server at a time; stop that one, " +
		"or give this one a folder of its own with --data-dir / TOOLEXEC_DATA_DIR")
	if e.URL != "" {
		fmt.Fprintf(&b, ", or use the running server with --server %s", e.URL)
	}
	return b.String()
}

// Is reports whether target is ErrStoreInUse.
func (e *StoreInUseError) Is(target error) bool { return target == ErrStoreInUse }

// Unwrap returns the lock's refusal.
func (e *StoreInUseError) Unwrap() error { return e.Err }

func invalidConfig(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}
