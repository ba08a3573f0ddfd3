package natsstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/kvstore"
)

// ErrCorrupt is returned when a value in the bucket is not a record this package
// wrote (another program wrote to the bucket, or a newer format). The store does
// not touch such a key.
var ErrCorrupt = errors.New("natsstore: value in bucket is not a record")

// The server's error codes for a write whose expected last sequence did not
// match: 10071 on single-replica streams, 10164 on replicated ones.
const (
	codeWrongLastSequence         = jetstream.JSErrCodeStreamWrongLastSequence
	codeWrongLastSequenceConstant = jetstream.JSErrCodeStreamWrongLastSequenceConstant
)

// isConflict reports whether a conditional write failed because the key was not
// at the expected revision: someone else wrote first. nats.go does not wrap
// every shape of this in ErrKeyExists (Create's retry after a delete marker
// returns the server's raw error, 10164 on replicated buckets), so the codes are
// checked as well.
func isConflict(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == codeWrongLastSequence || apiErr.ErrorCode == codeWrongLastSequenceConstant
	}
	return false
}

// isTooLarge reports whether a write was refused for its size, by the client
// (max_payload) or by the stream (the bucket's MaxValueSize).
func isTooLarge(err error) bool {
	return errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum)
}

// notWritten reports whether a failed write certainly did not reach the stream:
// nobody answered the publish (no stream, no responders) or the client refused
// it before sending.
func notWritten(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionClosed) ||
		errors.Is(err, jetstream.ErrInvalidKey) ||
		isTooLarge(err)
}

// unavailable wraps a failure to reach the backend so that it matches both
// kvstore.ErrUnavailable and the cause.
func unavailable(op string, err error) error {
	if errors.Is(err, kvstore.ErrUnavailable) {
		return fmt.Errorf("natsstore: %s: %w", op, err)
	}
	return fmt.Errorf("natsstore: %s: %w: %w", op, kvstore.ErrUnavailable, err)
}

// ctxOr returns ctx's error if ctx has ended, and err otherwise; used where a
// contract asks for ctx.Err() itself.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
