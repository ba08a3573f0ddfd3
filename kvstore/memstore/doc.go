// Package memstore is an in-memory [kvstore.Store]: one process, no persistence. It
// is the reference implementation of the contract, what unit tests of the dispatcher
// run against, and the store behind `store: memory`.
//
// Leases and retention are judged by an injected [Clock], so a test driving a
// fake clock sees leases run out and records expire without sleeping: a blocked
// [Store.Wait] arms a timer on that clock and wakes when it is advanced.
//
// Retention counts from a record's last write, as JetStream KV's MaxAge does: a
// claim that keeps being renewed does not expire. An expired record is absent
// everywhere (Get, Claim, Wait, Forget, Resolve, DumpRaw); it is removed lazily.
//
// Every write takes a new revision from one store-wide counter, so a key that is
// released and claimed again never repeats a revision. A lease's fencing token is
// the revision of the write that granted the claim (a Claim or a TakeOver); Renew
// keeps it. A holder whose lease has run out may still record, release, mark or
// renew until another worker takes the claim over: the take-over's compare-and-swap
// on the revision is what decides between them.
package memstore
