package tool

// Context is what a tool body learns about the call it serves (the seed's
// ToolContext).
type Context struct {
	// IdempotencyKey is the key to pass downstream as its own Idempotency-Key. It is
	// empty where no key applies: the tool has no policy or is ReadOnly, or the key
	// could not be derived.
	IdempotencyKey string
	Tenant         string
	RunID          string
	CallID         string
	Tool           string
	// Attempt counts the times this call has entered the body, from 1.
	Attempt int
	// TraceParent is the W3C traceparent of the call, if it carried one.
	TraceParent string
}
