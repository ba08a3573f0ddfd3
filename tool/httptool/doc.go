// Package httptool builds tools whose body is an HTTP request to a downstream
// service: the arguments go out as the JSON request body, and the response decides
// the outcome.
//
// # The request
//
// [New] returns a [tool.Tool] whose body sends the call's arguments, byte for byte
// as received, with Content-Type application/json (POST unless the [Endpoint] says
// PUT or PATCH). Besides the endpoint's own headers it sets:
//
//	Idempotency-Key    the call's idempotency key (IETF httpapi draft), only when
//	                   there is one: tools without a policy, ReadOnly tools and
//	                   calls whose key could not be derived send none
//	Toolexec-Tenant    the tenant
//	Toolexec-Run-Id    the agent run
//	Toolexec-Call-Id   the call id (differs between duplicates; the key does not)
//	Toolexec-Tool      the tool's name
//	Toolexec-Attempt   the attempt number, from 1
//	traceparent        the W3C trace context, when the call carried one
//
// These names are reserved: an endpoint may not set them, nor Content-Type,
// Content-Length, Transfer-Encoding or Connection. A Host header sets the
// request's Host.
//
// # The answer
//
// The body returns the outcome or an error the dispatcher can act on:
//
//   - 2xx: the outcome is the response body as is, at most
//     [Endpoint.MaxResponseBytes] (default 512 KiB). A longer body is an error
//     matching [ErrResponseTooLarge]; it is not "no effect", since the downstream
//     acted.
//   - The request was never sent — DNS failure, connection refused, TLS handshake
//     failure, the deadline passing while dialling — the error matches
//     [ErrNotSent] and is wrapped with [tool.NoEffect]: nothing reached the
//     downstream, so nothing can have happened there.
//   - The downstream refused the request before acting: the 4xx statuses for which
//     [RefusedStatus] reports true (400–405, 409–415, 417, 421–426, 428, 429, 431,
//     451) and the method-preserving redirects 307 and 308. The error is a
//     [*StatusError] wrapped with [tool.NoEffect].
//   - Everything else is a plain failure, which the dispatcher turns into an
//     indeterminate outcome for Effectful tools: 5xx, other 3xx (a 303, or a 302
//     answering a POST in the post-redirect-get pattern, usually follows an
//     action), the 4xx statuses not listed above, a reset or timeout after the
//     request was written, a response body cut short.
//
// Two choices deserve a word. 408 Request Timeout is not "no effect": by the time
// the body sees a response the whole request has been written, so a 408 comes
// from an intermediary that gave up somewhere we cannot see, or from a server
// using it for its own processing timeout, and neither says the effect did not
// land. 429 Too Many Requests is "no effect": rate limiting turns a request away
// before any work is done, and an Idempotent tool is retried after its backoff.
// 409 Conflict is "no effect" for this request, including the draft's meaning
// (another request with the same key is still in flight): that other request is
// the downstream's to deduplicate by the key.
//
// "Sent" is judged with [net/http/httptrace]: once the transport has begun
// writing the request (WroteRequest fired, whatever its error) the downstream may
// have received enough to act, so a later failure is never reported as no effect.
// The judgement errs on the side of indeterminate, never on the side of a second
// booking.
//
// # Connections
//
// Go's HTTP transport re-sends a request that carries an Idempotency-Key when a
// reused keep-alive connection fails, even after the whole request was written.
// Against a downstream that ignores the key, that is a second effect the
// dispatcher never decided on. So the request of an Effectful tool can never be
// replayed by the transport (it has no GetBody), whichever client sends it, and
// the default client sends each Effectful request on a connection of its own, so
// that a keep-alive connection the server closes at the wrong moment cannot turn
// into an indeterminate outcome. ReadOnly and Idempotent requests share pooled
// connections and may be replayed by the transport: repeating them is safe by
// their declaration.
//
// The request is bound to the body's context: the tool's timeout, applied by the
// dispatcher, cancels it, and the error then matches the context's error.
// Redirects are not followed by the default client (a POST silently re-sent
// elsewhere, or turned into a GET, would blur what happened); a caller-supplied
// [Endpoint.Client] is used as it is. Error messages name the method and the URL
// without its query or user information, since they travel in answer events.
package httptool
