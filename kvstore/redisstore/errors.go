package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/tesserix/toolexec/kvstore"
)

// ErrClosed is returned, wrapped together with [kvstore.ErrUnavailable], by every
// operation on a Store after Close.
var ErrClosed = errors.New("redisstore: store is closed")

// errf builds an error for operation op that matches sentinel with errors.Is.
func errf(op string, sentinel error, format string, args ...any) error {
	return fmt.Errorf("redisstore: %s: %w: %s", op, sentinel, fmt.Sprintf(format, args...))
}

// invalid names the operation in an error from one of the contract's request
// checks (kvstore.CheckKey, kvstore.ClaimRequest.Validate, ...), which wraps
// kvstore.ErrInvalid; nil stays nil.
func invalid(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("redisstore: %s: %w", op, err)
}

// unavailable translates a failure to talk to Redis (refused connection, closed
// client, timeout, cancelled context, unexpected reply) into an error that wraps
// both kvstore.ErrUnavailable and the cause.
func unavailable(op string, err error) error {
	return fmt.Errorf("redisstore: %s: %w: %w", op, kvstore.ErrUnavailable, err)
}

// statusErr translates a script's status word into the contract's errors.
func statusErr(op, status string) error {
	switch status {
	case statusGone:
		return fmt.Errorf("redisstore: %s: %w", op, kvstore.ErrNotFound)
	case statusNotHolder:
		return fmt.Errorf("redisstore: %s: %w", op, kvstore.ErrNotHolder)
	case statusChanged:
		return fmt.Errorf("redisstore: %s: record changed since it was seen: %w", op, kvstore.ErrLeaseHeld)
	case statusHeld:
		return fmt.Errorf("redisstore: %s: lease has not run out: %w", op, kvstore.ErrLeaseHeld)
	case statusNotIndet:
		return fmt.Errorf("redisstore: %s: %w", op, kvstore.ErrNotIndeterminate)
	default:
		return unavailable(op, fmt.Errorf("unexpected script status %q", status))
	}
}

// holderGone is the error of a holder-only operation on a record that no longer
// exists: the lease is not current (ErrNotHolder) because the record is gone
// (ErrNotFound). It matches both.
func holderGone(op string) error {
	return fmt.Errorf("redisstore: %s: %w: %w", op, kvstore.ErrNotHolder, kvstore.ErrNotFound)
}

// ctxOr returns ctx's error if ctx has ended, and err otherwise.
func ctxOr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}
