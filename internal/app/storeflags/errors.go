package storeflags

// UsageError is a refusal caused by the flags themselves (a store that needs a
// URL without one, an unparsable URL, an invalid schema name): a program
// reports it as bad usage, not as a failure of the store. Match it with
// errors.As.
type UsageError struct {
	// Err says what is wrong, naming the flag.
	Err error
}

// Error returns the refusal's message.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the refusal.
func (e *UsageError) Unwrap() error { return e.Err }

func usage(err error) error { return &UsageError{Err: err} }
