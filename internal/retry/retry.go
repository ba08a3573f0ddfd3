// Package retry holds what the worker's and the admin service's retries share:
// which publish failures are not worth another try, and the wait between tries.
package retry

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
)

// Permanent reports whether publishing err's message again cannot help: it is
// too large, its subject or headers are refused, or the connection is closed.
func Permanent(err error) bool {
	return errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrConnectionClosed) ||
		errors.Is(err, nats.ErrBadSubject) || errors.Is(err, nats.ErrHeadersNotSupported)
}

// Pause waits d before a publication is tried again, or until ctx ends; it
// reports whether it waited the whole time.
func Pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
