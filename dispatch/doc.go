// Package dispatch is the guarantee: it takes one tool call, decides from the tool's
// declaration and the idempotency record whether the body may run, runs it under
// its lease and retry policy, records what happened, and returns exactly one answer
// — completed, deduplicated, indeterminate, failed or rejected.
//
// It knows the store contract (package kvstore) and the vocabulary of calls and
// answers (package events: [events.Call], [events.Answer] and its kinds), but no
// wire and no particular backend: a test of dispatch needs no NATS.
//
// The rules, in the order [Dispatcher.Dispatch] applies them:
//
//  1. Validation: well-formed ids, a known tool that is not in conflict (looked
//     up for each call, so that tools registered later are served), arguments
//     that are a JSON object the canonical encoder accepts and that satisfy the
//     tool's schema. Anything else is rejected before a key is claimed or the
//     body entered.
//  2. Tools without a policy, and ReadOnly tools, run under their retry policy.
//  3. Idempotent and Effectful tools claim their key first. A completed record
//     answers the call (deduplicated); an indeterminate record answers it again; a
//     claim held by another caller is waited on; a claim whose holder's lease ran
//     out is taken over (Idempotent) or marked indeterminate, holder_lost
//     (Effectful).
//  4. A claimed call runs the body and renews its lease meanwhile. Success is
//     recorded; failure releases the claim and retries (Idempotent) or keeps it and
//     parks the key indeterminate (Effectful) — unless the tool said the failure
//     had no effect, which releases the claim and fails the call definitely.
//  5. An underivable key or an unreachable store lets Idempotent tools run
//     unguarded (counted in [Stats]) and stops Effectful ones: indeterminate,
//     body not entered. A store that is down never reads as permission.
//
// # Settling deliveries
//
// A queue delivers a call, and may deliver it again. [Settler] takes one
// delivery to its end by the rules its doc lists: it looks for an earlier
// answer to a call delivered again, runs the call through a [Runner] (the
// [Dispatcher]), stores the answer through [Answers], and only then
// acknowledges, terminates or hands back the [Delivery]. The adapter of a
// queue (package bus, for NATS JetStream) implements Delivery and Answers
// and carries out what the Settler decides; the Settler says how it settled
// each delivery ([Settlement]), for the adapter's counters.
//
// # Observing it
//
// [Config.Observer] hears of every call, body entry, unguarded run and wait for
// a holder, for metrics (package metrics implements it with Prometheus).
// [Config.TracerProvider] makes one OpenTelemetry span per call, continuing the
// caller's traceparent, with a child for each store operation and body entry;
// the tool receives the body span's traceparent, so an HTTP tool's downstream
// sees the body as its parent. Neither ever sees a call's arguments.
package dispatch
