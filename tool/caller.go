package tool

import (
	"context"
	"encoding/json"
	"fmt"
)

// Caller is the way back to whoever made a call, for a body that needs its
// help while it runs: an upstream MCP server asking the user to confirm
// (elicitation/create) or the caller's model to write something
// (sampling/createMessage), and reporting progress and log lines on the way.
// The executor gives each call's body one, in its context ([CallerFrom]); a
// call whose caller cannot answer (a plain NATS caller, say) still has one,
// which refuses every request at once.
//
// Implementations are safe for concurrent use.
type Caller interface {
	// Ask sends the caller a request, an MCP method with its params as JSON,
	// and returns the result the caller sent back. It returns a
	// [*CallerError] when the caller refused the request or could not be
	// asked (it declared no such capability, no one took the request in time,
	// a bound was reached), and ctx's error when ctx ended first. It never
	// waits past ctx, which the executor bounds by the tool's timeout.
	Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// Notify passes a notification (notifications/progress, whose params
	// need no progressToken, or notifications/message) on to the caller and to
	// the call's audit trail. It never blocks: what a call sends beyond its
	// bounds is coalesced or dropped.
	Notify(method string, params json.RawMessage)
}

// The JSON-RPC error codes a [CallerError] uses for refusals of its own.
const (
	// CallerCodeMethodNotFound: the caller cannot answer this method (it
	// declared no such capability, or none can be asked at all).
	CallerCodeMethodNotFound = -32601
	// CallerCodeInvalidParams: the request exceeds a bound (its size, the
	// number of requests a call may make).
	CallerCodeInvalidParams = -32602
	// CallerCodeInternal: no one took the request in time, or the answer was
	// not usable.
	CallerCodeInternal = -32603
)

// CallerError is a request a [Caller] did not get an answer to: the
// caller's own JSON-RPC error, passed on as it came, or a refusal made on its
// behalf (the CallerCode constants). A body turns it into the JSON-RPC error
// it owes whoever asked.
type CallerError struct {
	Code    int
	Message string
	Data    json.RawMessage // as the caller sent it; nil when none
}

// Error says that the caller did not answer, with the code and the message.
func (e *CallerError) Error() string {
	return fmt.Sprintf("the caller did not answer (%d): %s", e.Code, e.Message)
}

// callerKey carries a Caller in a context.
type callerKey struct{}

// WithCaller returns ctx carrying c, for the body of the call c belongs to.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the Caller ctx carries, or one that refuses every
// request and drops every notification when it carries none (a body run
// outside an executor, in a test say).
func CallerFrom(ctx context.Context) Caller {
	if c, ok := ctx.Value(callerKey{}).(Caller); ok && c != nil {
		return c
	}
	return NoCaller{}
}

// NoCaller is the [Caller] of a call with no one to ask: Ask refuses at once
// with [CallerCodeMethodNotFound], Notify drops.
type NoCaller struct{}

// Ask returns a *CallerError at once.
func (NoCaller) Ask(_ context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
	return nil, &CallerError{Code: CallerCodeMethodNotFound, Message: "the caller of this call cannot answer " + method}
}

// Notify does nothing.
func (NoCaller) Notify(string, json.RawMessage) {}
