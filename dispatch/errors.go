package dispatch

import "errors"

// ErrHandBack is returned by Dispatch when its context ended before the call
// could be answered and nothing irreversible had happened: no body entered
// under a claim of this call. The caller hands the call back (for the bus:
// leaves the message to be redelivered).
var ErrHandBack = errors.New("dispatch: context ended before the call was answered; hand it back")

// ErrPermanent marks a failure of an adapter's operation that trying again
// cannot help: an answer larger than its store takes, a connection closed for
// good. An adapter wraps it in the errors of its [Answers] and [Delivery]; a
// [Settler] branches on it with errors.Is.
var ErrPermanent = errors.New("dispatch: trying again cannot help")
