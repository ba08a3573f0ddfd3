package dispatch

import "errors"

// ErrHandBack is returned by Dispatch when its context ended before the call
// could be answered and nothing irreversible had happened: no body entered
// under a claim of this call. The caller hands the call back (for the bus:
// leaves the message to be redelivered).
var ErrHandBack = errors.New("dispatch: context ended before the call was answered; hand it back")
