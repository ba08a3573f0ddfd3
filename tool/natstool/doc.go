// Package natstool builds tools whose body is a NATS request to a worker: a
// process, in any language with a NATS client, that serves the tool's body
// with the NATS service API (docs/PROTOCOL.md §12; package worker serves them
// from Go). The executor keeps everything else — the claim, the lease, the
// record, the answer — and the worker only runs the body and replies.
//
// # The request
//
// [New] returns a [tool.Tool] whose body publishes the call's arguments, byte
// for byte as received, as a request on toolexec.body.<tool> (or the
// [Endpoint]'s subject), which the workers of the tool share as the queue
// group toolexec.body, with these headers:
//
//	Idempotency-Key    the call's idempotency key, only when there is one:
//	                   tools without a policy, ReadOnly tools and calls whose
//	                   key could not be derived send none
//	Toolexec-Tenant    the tenant
//	Toolexec-Run-Id    the agent run
//	Toolexec-Call-Id   the call id (differs between duplicates; the key does not)
//	Toolexec-Tool      the tool's name
//	Toolexec-Attempt   the attempt number, from 1
//	traceparent        the W3C trace context, when the call carried one
//
// the names and values an HTTP tool sends (package httptool), spelled as
// they are here: NATS header names are case-sensitive.
//
// # The answer
//
// The body returns the outcome or an error the dispatcher can act on:
//
//   - A reply without the service API's error headers: the outcome is its
//     payload as is, at most [Endpoint.MaxReplyBytes] (default 512 KiB). A
//     longer one is an error matching [ErrReplyTooLarge]; it is not "no
//     effect", since the worker acted.
//   - An error reply, with the headers Nats-Service-Error-Code and
//     Nats-Service-Error: a [*BodyError]. Its code no_effect ([CodeNoEffect])
//     says the body made no effect, and the error is wrapped with
//     [tool.NoEffect]; any other code is a failure whose effect is unknown.
//   - The request was never sent — the connection was not up, or refused it
//     before writing a byte (too large for the server, closed, draining) —
//     the error matches [ErrNotSent] and is wrapped with [tool.NoEffect].
//   - No worker was there: the server answers a request that matched no
//     subscription with a no-responders status (503) while it processes the
//     publication, before it handles anything the client sends after it. The
//     body sends a PING right behind the request; a no-responders status in
//     hand when the PONG comes back is that answer, and nothing was
//     delivered to anyone: the error matches [ErrNoWorker] and
//     nats.ErrNoResponders, wrapped with [tool.NoEffect].
//   - Everything else after the request went out is a plain failure, which
//     the dispatcher turns into an indeterminate outcome for Effectful tools:
//     no reply within the tool's timeout (the error then matches the context's
//     error), the connection lost or closed while the request was out (a reply
//     sent meanwhile is lost for good: core NATS does not redeliver), a
//     no-responders status that came only after the PONG (the server never
//     sends one then, so it is not the server's word), and the PING's round
//     trip failing.
//
// The request of a tool is never sent twice by the body: retrying is the
// dispatcher's decision, and it never retries an Effectful tool.
//
// # Replies
//
// The requests sent on one connection share one reply subscription, a
// wildcard under an inbox of their own, each request with a reply subject
// under it (as nats.go's own request multiplexer does, though written here so
// that a no-responders status can be told from a worker's reply, and a second
// reply heard). A request answered by more than one worker — two groups serve
// its subject: a worker in the executors' account besides the workers', or one
// subscribed outside the queue group — has run its body more than once; with
// [Endpoint.OnExtraReply] set, its reply subject is kept [ExtraReplyWindow]
// after the first reply, and a second is reported.
//
// # Timeouts
//
// A worker that dies while it holds a request never replies, and the server
// does not tell the requester, so a body served over NATS is always bounded:
// a tool declared without a timeout gets [DefaultTimeout]. The dispatcher
// applies it like any tool's timeout.
package natstool
