// Package mcptool builds tools whose body is a tool on an upstream MCP server:
// each call is one tools/call request, and the upstream's answer decides the
// outcome.
//
// # The upstream
//
// An [Upstream] is one MCP server, reached either by running a command as a
// stdio server or at the URL of a Streamable HTTP endpoint ([Config]). All the
// tools of an upstream share one connection: one process, or one MCP session,
// at a time, safe for concurrent calls. [New] returns at once and connects in
// the background — it starts the process (or opens the session) and
// completes the initialize handshake; [Open] also waits for that first start,
// and fails if it does, for programs that want a misconfigured upstream to
// stop them. The client speaks the newest protocol the upstream accepts,
// falling back to the initialize handshake of 2025-11-25.
//
// A stdio server runs with its standard streams on pipes. Its environment holds
// only the variables [InheritedEnv] names (PATH, HOME and the like) plus
// [Config.Env]: the executor's credentials stay out of it unless the tools file
// passes them on. What it writes on its standard error is logged line by line
// (each line cut at 4 KiB, at most 20 lines a second in bursts of 100, the rest
// counted as dropped), and never blocks it.
//
// The connection is supervised, in the background, whether or not calls are
// made. An upstream is in one of the states [Upstream.Status] reports (and
// [Config.OnState] is told of as they change):
//
//   - connecting: the first start, or the start after a session that had
//     lasted ended (the process exited or was killed, the HTTP session broke),
//     is in progress. Calls wait for it.
//   - connected: calls are sent on the session.
//   - down: the last start failed (the command cannot be run, the process
//     exits before answering, the connection is refused, initialize is
//     refused or times out after [Config.StartTimeout]), or the session ended
//     again soon after it was made. Calls fail at once, without effect
//     ([ErrUnavailable], which matches tool.ErrUnavailable: the dispatcher
//     answers them rejected upstream_unavailable). The next start is tried
//     after a delay that doubles from [Config.MinRestartDelay] to
//     [Config.MaxRestartDelay], and the upstream is connected again as soon
//     as one succeeds.
//   - closed: [Upstream.Close] was called.
//
// A server that crashes on start, or soon after each start, thus costs one
// start per delay, not one per call or a busy loop: a session that ends
// within MaxRestartDelay of its start having answered no call counts as a
// failed start (the first of a streak excepted, which is replaced at once).
// A failed start is logged at warn level when it is the first in a row or
// fails differently from the last one logged, at debug level otherwise; the
// start that ends a streak is logged at info level. [Upstream.Close]
// closes a stdio server's standard input and gives it [Config.StopTimeout] to
// exit before SIGTERM, then SIGKILL.
//
// A Streamable HTTP session is pinged every MaxRestartDelay: a server gone
// away while no call is made is noticed, and the upstream found down, without
// a call finding out. A call whose connection is refused ends the session
// too.
//
// A Streamable HTTP session with a session id, on a protocol before 2026-07-28
// (which has none, SEP-2575), also holds the session's standalone stream open:
// the GET on which the server sends what it relates to no request (see
// "Requests and notifications from the upstream"). It is toolexec's, not the
// SDK's, whose transport would not open it on the connection toolexec wraps,
// and would end the whole session, leaving the calls in flight with an unknown
// outcome, when the GET fails or the stream keeps ending. A start waits up to 5
// seconds for the first GET's answer, so that a call made at once finds the
// stream open. A server that answers the GET with 405, or any status but 2xx,
// 408, 409, 429 and 5xx, or with no event stream, has none; a GET that fails
// (one of those, the connection refused or reset) is tried again after a delay
// doubling from half a second, and the session does without the stream after
// five failures in a row; a stream that ends is opened again, with
// Last-Event-ID when it gave event ids, after the delay its retry field names
// (half a second otherwise), an empty stream that ended within 5 seconds
// counting as a failure. None of this ends the session or touches a call: the
// calls' answers come on their own streams.
//
// A call races a reconnection safely: it is sent once on the session it got,
// or not at all. When it finds its session broken before anything of it was
// written, it waits for the next session (while the upstream is connecting)
// and is sent there once, or fails without effect (while it is down).
//
// Over HTTP, [Config.Headers] go with every request; the default client follows
// no redirects, and sends the tools/call of an Effectful tool on a connection of
// its own (a pooled connection the server closed at the wrong moment would make
// the outcome unknown). The request of a tools/call is never replayed by the
// HTTP transport: Go's re-sends a request that carries an Idempotency-Key when
// a reused connection fails after it was written, and repeating a call is the
// dispatcher's decision. Error messages never hold the URL's query or user
// information.
//
// # The request
//
// [Upstream.Tool] returns a tool whose body sends
//
//	tools/call {"name": <the upstream's tool>, "arguments": <the call's, as received>,
//	            "_meta": {"io.tesserix.toolexec/idempotency_key": <key>,
//	                      "io.tesserix.toolexec/tenant": <tenant>,
//	                      "io.tesserix.toolexec/run_id": <run>,
//	                      "io.tesserix.toolexec/call_id": <call id>}}
//
// each _meta member only when it is not empty: the key is empty for tools
// without a policy, ReadOnly tools and calls whose key could not be derived
// (see [tool.Context]). Over HTTP the POST that carries it also has the header
// Idempotency-Key: <key>, under the same condition. The call id differs between
// duplicates; the key does not.
//
// # The answer
//
// The body returns the outcome, or an error the dispatcher acts on (a plain
// error is an unknown outcome: indeterminate for an Effectful tool, retried for
// an Idempotent one):
//
//   - A result: the outcome (below). The upstream answered, so whatever the
//     SDK makes of the answer, the bytes it sent decide.
//   - A result with isError: true: a [*ToolError] carrying its text, wrapped
//     with [tool.NoEffect]. The upstream answered that the call failed; the
//     MCP specification has tools report their own failures this way.
//   - An input-required result (the upstream asks for elicitation or sampling
//     before it proceeds, multi round-trip requests): each request is asked
//     of the call's caller ([tool.CallerFrom]), and the tools/call is sent
//     again with the answers and the upstream's request state, as the
//     upstream asked, at most 8 rounds. A request the caller does not answer
//     (it cannot, refuses, or does not in time), one for roots, or a ninth
//     round: [ErrInputRequired], wrapped with [tool.NoEffect], since the
//     upstream has not proceeded.
//   - Nothing of the request was written — the upstream could not be started or
//     connected, the session had ended, the process's pipe was closed, the HTTP
//     request never reached the wire, the context ended first: [ErrNotSent],
//     wrapped with [tool.NoEffect]. When the session turned out to be broken
//     (a stdio server whose pipe closed, a process that died between calls, a
//     connection the SDK closed) and the context has not ended, the session is
//     ended and the call tried once more on a new one first.
//   - An HTTP status that is not 2xx answering the POST: an
//     [*httptool.StatusError]; wrapped with [tool.NoEffect] when
//     [httptool.RefusedStatus] says the status refuses a request before acting
//     (a 404 to a request in an MCP session also ends the session: it is how a
//     server says it forgot it, and the call is tried once on a new one). 5xx
//     and the rest are unknown outcomes.
//   - A JSON-RPC error response: an [*RPCError]. Parse error, invalid request,
//     method not found and invalid params (also what servers answer for an
//     unknown tool) refuse the request before it runs, so they are wrapped with
//     [tool.NoEffect] ([RefusedCode]). Internal error and every server-defined
//     code may come from a tool that failed after it acted: unknown outcomes.
//   - Anything after the request was written and before its answer — the
//     process died, the connection was reset, the stream ended, the context's
//     deadline passed: a plain error, an unknown outcome. A stdio request counts
//     as written once a byte of it entered the pipe; an HTTP one once the
//     transport began writing it. The judgement errs on the side of unknown,
//     never on the side of a second effect.
//
// Over HTTP the answer may come late. An upstream may close the stream of a
// tools/call before the result (SEP-1699: a server that frees its
// connections during a long call); if the stream gave event ids, the client
// asks for the rest of it with a GET carrying Last-Event-ID, after the delay
// the upstream's retry field names, again while the upstream makes progress
// (at most five times in a row without), all within the call's context (the
// tool's timeout). The request is never sent again: the answer that arrives
// on a resumed stream decides as any other. Only a stream that cannot be
// resumed — it gave no event id, the upstream refused the GET, the context
// ended first — leaves the outcome unknown; an upstream that refuses a
// resumption also ends the session, and the next call starts a new one.
// Every request after the handshake carries Mcp-Protocol-Version, the version
// negotiated: without it a server takes a session for 2025-03-26 and sends
// no event ids.
//
// # Requests and notifications from the upstream
//
// The client declares the elicitation (form and url) and sampling
// capabilities for every call, since the connection is shared: a request
// the upstream sends while it serves a call (elicitation/create,
// sampling/createMessage) is relayed to that call's caller through
// [tool.Caller], and its answer, or the caller's JSON-RPC error, returned to
// the upstream. A caller that declared nothing refuses at once (-32601), so
// the upstream is never left waiting. Over HTTP a request belongs to the call
// on whose response stream it came. One that came on no call's stream — on
// the session's standalone stream, where a server sends what it did not
// relate to a request (the TypeScript SDK's server.request without
// relatedRequestId, a Go SDK ServerSession's request under a context that is
// not a handler's) — belongs, as every request over stdio, which has no
// streams, to the call in flight when it is the only one — unless a call of
// another tenant ended on the session without its answer (its context ended,
// its stream broke) within the last 10 minutes: the upstream may still be
// running that call, and the request may be its. A request that cannot be
// told to belong to one call (two calls in flight, none, or such an orphan of
// another tenant), and any other request (roots/list), is refused at once: no
// request of one tenant's call ever reaches another's caller. A ping on the
// standalone stream is answered.
//
// Each tools/call carries the progressToken "toolexec-<call id>" and asks
// for log messages from level info (logging/setLevel once per session on
// protocols before 2026-07-28, the request's _meta after). The upstream's
// progress notifications for the token (wherever they came), and its log
// messages (on the call's stream over HTTP; on the standalone stream, and
// over stdio, to the call a request there would go to), are passed to the
// caller as notes, which the executor bounds. Other notifications on the
// standalone stream are dropped.
//
// # The outcome
//
// The outcome is a string, recorded and answered as is:
//
//   - content that is not all text (images, audio, embedded resources,
//     resource links, mixed with text or not): MCP content, the JSON object
//     {"io.tesserix.toolexec/mcp_result": {"content": [...], "structuredContent": ...}}
//     ([ContentOutcome], [OutcomeResult]) holding the items as the upstream
//     sent them (compacted), and its structuredContent when it sent some;
//   - else, structuredContent present (not null): its JSON, compacted, with
//     numbers and member order as the upstream sent them;
//   - else, the texts joined with newlines ("" for no content at all).
//
// So a gateway in front gives MCP content back as that content
// ([ParseContentOutcome]), shows any other outcome as text, and gives it back
// as structured content when it is a JSON object.
//
// A record holds an outcome, not a payload: content items are kept while the
// outcome stays within [Config.MaxContentBytes] (default
// [DefaultMaxContentBytes], 64 KiB: half the executor's default bound on an
// outcome, so that a large image never turns a call that took effect into one
// whose outcome cannot be recorded). Each item that does not fit is replaced
// by a text item saying what it was, with its type, MIME type, size and
// SHA-256 in its _meta under io.tesserix.toolexec/omitted ([MetaOmitted]).
// The first answer and every deduplicated one carry the same outcome, so the
// same content: a duplicate of a call whose image was over the bound gets
// that text item, as the first caller did.
//
// # Import
//
// [Upstream.Import] lists every tool of the upstream, following pagination,
// and declares each: named with an optional prefix, described as the upstream
// describes it, with the upstream's input schema as parameters (the executor
// validates calls against it), and a policy from [AnnotationPolicy]. The MCP
// specification calls annotations untrusted hints, so by default every imported
// tool is Effectful, on every argument; [ImportOptions.TrustAnnotations] lets
// readOnlyHint: true make it ReadOnly, and idempotentHint: true with
// destructiveHint explicitly false make it Idempotent. An override per tool
// replaces any of this, and an upstream tool whose name is not a toolexec name
// must be excluded.
package mcptool
