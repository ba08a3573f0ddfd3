package kvstore

import "errors"

// Errors a [Store] returns. Backends translate their own client errors into these at
// the boundary, so callers branch with errors.Is and never on a backend's codes.
var (
	// ErrNotFound is returned when no live record exists for the key: it was never
	// claimed, was released, expired or was forgotten.
	ErrNotFound = errors.New("kvstore: record not found")

	// ErrNotHolder is returned to a caller whose lease no longer matches the record:
	// the claim was taken over, released, recorded, marked or expired since the lease
	// was granted. It is the fencing error; the caller must not act as the holder.
	ErrNotHolder = errors.New("kvstore: lease is not the current holder")

	// ErrLeaseHeld is returned by TakeOver when the claim cannot be taken: its lease
	// has not run out by the backend's clock, or the record changed since it was seen.
	ErrLeaseHeld = errors.New("kvstore: claim is still held")

	// ErrNotIndeterminate is returned by Resolve for a record that is not
	// indeterminate: only an indeterminate record can be resolved.
	ErrNotIndeterminate = errors.New("kvstore: record is not indeterminate")

	// ErrTooLarge is returned when an outcome or reason exceeds what the backend can
	// store. Nothing is written.
	ErrTooLarge = errors.New("kvstore: value too large to record")

	// ErrUnavailable wraps failures to reach the backend (connection refused, timeouts,
	// a closed client). A store that cannot be reached never reads as permission:
	// callers treat any error from Claim other than the ones above as this one.
	ErrUnavailable = errors.New("kvstore: store unavailable")

	// ErrInvalid is returned for a request the store refuses before touching the
	// backend: an empty or malformed tenant or key, an empty holder or lease
	// token, a non-positive lease, a take-over request for another key than the
	// record seen. The contract's checks ([ClaimRequest.Validate],
	// [Lease.Validate], [CheckKey], ...) say which.
	ErrInvalid = errors.New("kvstore: invalid request")
)
