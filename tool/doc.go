// Package tool declares tools: what they are called, what their arguments look like
// (a JSON Schema, or a Go struct for typed tools), what repeating them does (their
// idempotency [Policy]), how long they may run and how they are retried.
//
// A declaration is checked when the tool is built with [New] or [Typed]: a key or
// check argument that is not a parameter of the tool is refused there, with an
// error naming it, never at the call that matters.
//
// The body of a tool receives a [Context] carrying the idempotency key to pass
// downstream (empty where there is none), the tenant, run, call and attempt.
package tool
