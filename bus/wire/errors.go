package wire

import "errors"

// Errors returned by this package. Decode reports bad input as an
// [*events.RejectError] instead; these are for the helpers and for misuse.
var (
	// ErrBadEncoding is returned by [PercentDecode] for a value that is not
	// correctly percent-encoded UTF-8.
	ErrBadEncoding = errors.New("binding: bad percent-encoding")

	// ErrUnsupported is returned by [Encode] for an event it cannot write: not
	// CloudEvents 1.0, or an extension whose value has no string form.
	ErrUnsupported = errors.New("binding: event cannot be encoded")
)
