// Package admin is toolexec's operator service: forget a tenant, inspect a
// key, resolve an indeterminate key, list a tenant's records — over NATS
// request-reply on the toolexec.admin.* subjects, against the executors'
// kvstore.Store.
//
// # Pieces
//
//   - [Serve] answers the admin subjects from a store; every executor runs one,
//     in one queue group ([DefaultQueue]), so that each request is answered once.
//     [Service.Resolve] publishes a resolved audit event to TOOLEXEC_EVENTS, and
//     [Service.Forget] purges the tenant's calls and events from both streams.
//   - [New] makes the same Service for callers in its own process that answer
//     nothing from the bus: the web console (Service.Resolve, Service.List) and
//     the emitter working on a store directly, where NATS may be out of reach
//     (then a resolution is applied and reported [ErrAuditNotPublished]).
//   - [Client] sends the requests: List, Forget, Inspect and Resolve.
//     [ErrNoResponder] says that no executor serves them.
//
// # The wire
//
// Requests and replies are JSON ([ForgetRequest], [ForgetResponse], ...). A
// failure travels as an [Error] with a code, which matches the kvstore error it
// stands for with errors.Is (kvstore.ErrNotFound, kvstore.ErrNotIndeterminate,
// ...), so that callers branch the same way whether the store was local or
// behind a request. Records are shown as [RecordInfo], never with the call's
// arguments (no record holds them).
//
// # Who may ask
//
// Two fences, the second for when the first is set up wrong:
//
//   - The server's: in deploy/accounts.conf the executors' account exports the
//     admin subjects to the admin account alone, so no tenant account can
//     publish on them, nor point a reply or a JetStream delivery at them (no
//     tenant reaches the executors' JetStream API).
//   - The service's: with [Config.Account] set, a request is served only if the
//     server's Nats-Request-Info header, which it writes where a request
//     crosses an import, names that account; otherwise it is answered
//     [CodeForbidden] and logged at WARN (one line a minute at most, with the
//     number refused meanwhile). Every request is parsed strictly: a member its
//     type lacks, or data after its JSON value, makes it [CodeInvalid], so an
//     event delivered to an admin subject is never read as a request.
//
// The executors' own account is trusted: a request published inside it carries
// whatever header its publisher wrote. Nothing but the executors belongs there;
// they hold the stores and the streams anyway.
package admin
