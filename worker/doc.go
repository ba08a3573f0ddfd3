// Package worker serves tool bodies over NATS from Go: the other end of
// package natstool, and what docs/PROTOCOL.md §12 asks of a worker in any
// language.
//
// [Serve] runs a service named toolexec-worker (the NATS service API) with an
// endpoint per tool: named as the tool, on toolexec.body.<tool> (or a subject
// of [Config.Subjects]), in the queue group toolexec.body, so that the
// workers of one tool share its calls, and with the tool's declaration as
// JSON in the endpoint's metadata toolexec.declaration, so that executors
// learn the tool without being told. The executor keeps the claim, the lease,
// the record and the answer; a worker only runs the body and replies.
//
// Each request runs the tool's body with a [tool.Context] read from the
// request's headers (its idempotency key, tenant, run, call, tool, attempt
// and trace parent) and the request's payload, the call's arguments, as the
// body's arguments. The body's outcome is the reply; an error is an error
// reply in the service API's form, code no_effect when the body wrapped it
// with [tool.NoEffect] (the executor then releases the claim) and tool_error
// otherwise (the effect is unknown to the executor: an Effectful tool's key
// becomes indeterminate). A body that panics is a tool_error. Each body is
// bounded by its tool's timeout, natstool.DefaultTimeout when it declares
// none, as the executor's wait is.
//
// The arguments were validated against the tool's schema by the executor
// before the request was sent; a worker does not check them again.
package worker
