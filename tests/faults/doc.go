// Package faults checks toolexec's guarantee the way Jepsen checks databases:
// run real executors against real servers, inject faults (a SIGKILLed executor,
// a restarted or partitioned NATS server, a killed cluster leader, a cluster
// node cut off from its peers, a node that lost its store, kill -9 of
// nats-server processes, executors started before their server, a store that
// stops answering, clocks that disagree), record what happened, and let one
// program judge the history afterwards.
//
// A [History] holds four things: the calls the load generator published (with
// the key each one derives), the answers stored in TOOLEXEC_EVENTS, the effects
// an external [Witness] saw (an HTTP downstream that logs every request with its
// Idempotency-Key and the executor that sent it), and the [Fault]s the scenario
// injected, each with its time window and what it may explain. [Check] judges a
// history and returns a [Report] whose Violations must be empty:
//
//   - at most one effect per key of an Effectful tool, and no repeat of an
//     Idempotent tool's effect that no fault explains;
//   - exactly one answer per published call, and no answer for a call that was
//     never published;
//   - every indeterminate answer explained by an injected fault: holder_lost only
//     for keys whose holder a fault took out (or while the store was away),
//     store_unavailable only while a store was away, and with the body not
//     entered — and none saying the body was not entered for a call the
//     witness saw;
//   - no Effectful effect while the store was away;
//   - every completed or deduplicated answer backed by an effect, and all of one
//     key's outcomes the same.
//
// The scenarios themselves are the package's tests. `go test ./tests/faults` runs a
// short version of each (part of `make test`); `make faults` runs the long one
// (build tag faults) and prints the figures that docs/RELIABILITY.md quotes.
package faults
