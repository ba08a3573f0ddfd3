// Package conformance holds black-box tests of the wire: they build the real
// cmd/executor and cmd/emitter binaries, run the executor as a process against a
// NATS server and an HTTP downstream that the tests start, and drive it only with
// NATS messages written by hand from the contract (docs/PROTOCOL.md): structured and
// binary CloudEvents, duplicates, and a table of hostile input.
//
// The tests never import the packages that implement the wire (bus, bus/wire,
// events): the subjects, headers, attribute names and codes they use are spelled
// out as the contract states them, so that a deviation in those packages shows up
// here as a failure instead of being shared by the test.
//
// What they check, in short:
//
//   - every call gets exactly one answer, on
//     toolexec.event.<tenant>.<kind>.<tool>.<run_id>.<call_id>, as a structured
//     CloudEvent of type io.tesserix.toolexec.<kind> with the extensions tenant,
//     runid, callid and idempotencykey (when derived) and data matching the
//     published schema of its kind;
//   - the HTTP downstream receives the Idempotency-Key that `emitter key`
//     computes, and the caller's traceparent;
//   - a call is published on toolexec.call.<tenant>.<tool>.<call_id>: published
//     again while it waits it is refused, and once answered a copy marked
//     Toolexec-Repeat is acknowledged unrun; two tenants' calls with one call
//     id are two calls, each answered as its tenant's;
//   - every kind of bad input is answered rejected with its code (or refused
//     before it reaches the executor, or stops the executor at start-up with
//     exit status 2), leaving no claim, no record and no request downstream.
//
// The package has no code of its own; run it with go test ./conformance.
package conformance
