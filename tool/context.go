package tool

import (
	"strconv"
	"strings"
)

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

// The headers under which a body that runs elsewhere (an HTTP tool's
// request, a NATS tool's) receives its Context.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderTenant         = "Toolexec-Tenant"
	HeaderRunID          = "Toolexec-Run-Id"
	HeaderCallID         = "Toolexec-Call-Id"
	HeaderTool           = "Toolexec-Tool"
	HeaderAttempt        = "Toolexec-Attempt"
	HeaderTraceParent    = "traceparent"
)

// Headers returns c as the headers a remote body receives, as name and value
// pairs in a fixed order, each only when it has a value: the key only where
// one applies, the attempt from 1, the traceparent only when it holds no
// control characters (it could not travel as a header value).
func (c Context) Headers() [][2]string {
	h := make([][2]string, 0, 7)
	for _, kv := range [...][2]string{
		{HeaderIdempotencyKey, c.IdempotencyKey}, {HeaderTenant, c.Tenant}, {HeaderRunID, c.RunID},
		{HeaderCallID, c.CallID}, {HeaderTool, c.Tool},
	} {
		if kv[1] != "" {
			h = append(h, kv)
		}
	}
	if c.Attempt > 0 {
		h = append(h, [2]string{HeaderAttempt, strconv.Itoa(c.Attempt)})
	}
	if c.TraceParent != "" && !strings.ContainsFunc(c.TraceParent, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		h = append(h, [2]string{HeaderTraceParent, c.TraceParent})
	}
	return h
}

// ContextFromHeaders reads a Context from the headers [Context.Headers]
// writes, get returning a header's value ("" when absent); an attempt that is
// not a number is 0, unknown.
func ContextFromHeaders(get func(name string) string) Context {
	c := Context{
		IdempotencyKey: get(HeaderIdempotencyKey),
		Tenant:         get(HeaderTenant),
		RunID:          get(HeaderRunID),
		CallID:         get(HeaderCallID),
		Tool:           get(HeaderTool),
		TraceParent:    get(HeaderTraceParent),
	}
	c.Attempt, _ = strconv.Atoi(get(HeaderAttempt))
	return c
}
