// Package retry holds what the worker's and the admin service's retries share:
// which publish failures are not worth another try, and the bounded tries of
// the JetStream requests that set streams up. The pauses between tries are
// package backoff's.
package retry

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/internal/backoff"
)

// Permanent reports whether publishing err's message again cannot help: it is
// too large, its subject or headers are refused, or the connection is closed.
func Permanent(err error) bool {
	return errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrConnectionClosed) ||
		errors.Is(err, nats.ErrBadSubject) || errors.Is(err, nats.ErrHeadersNotSupported)
}

// SetupAttempt is the bound of one try of a setup request that the module's
// callers of [Setup] give: long enough for a loaded server, short enough that
// a lost reply costs a try and not a caller's deadline.
const SetupAttempt = 5 * time.Second

// Setup runs op, a JetStream API request that is safe to repeat (creating or
// updating a stream, a consumer or a bucket), giving each try at most attempt
// of ctx's time. It tries again, after a short pause, when a try ran out of its
// time while ctx had not, or JetStream answered that it is not available yet
// (a cluster still electing its meta leader). A cluster whose routes are still
// forming can drop a reply although the request took effect: without a bound
// on each try, one lost reply would cost the caller its whole deadline. Any
// other error, or ctx's end, is returned as it is.
func Setup(ctx context.Context, attempt time.Duration, op func(context.Context) error) error {
	for try := 1; ; try++ {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := op(actx)
		lost := errors.Is(actx.Err(), context.DeadlineExceeded)
		cancel()
		if err == nil || ctx.Err() != nil || !(lost || notReady(err)) {
			return err
		}
		if !backoff.Sleep(ctx, min(time.Duration(try)*100*time.Millisecond, time.Second)) {
			return err
		}
	}
}

// notReady reports whether JetStream answered that it cannot serve requests
// yet (error 10008, "JetStream system temporarily unavailable").
func notReady(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsTemporarilyUnavailable
}

// jsTemporarilyUnavailable is the code nats-server answers while its
// JetStream cluster has no meta leader; nats.go names no constant for it.
const jsTemporarilyUnavailable jetstream.ErrorCode = 10008
