// Package mcptool builds tools whose body is a tool on an upstream MCP server:
// each call is one tools/call request, and the upstream's answer decides the
// outcome.
//
// # The upstream
//
// An [Upstream] is one MCP server, reached either by running a command as a
// stdio server or at the URL of a Streamable HTTP endpoint ([Config]). All the
// tools of an upstream share one connection: one process, or one MCP session,
// at a time, safe for concurrent calls. [Open] connects at once — it starts the
// process (or opens the session) and completes the initialize handshake — so
// that a misconfigured upstream stops the executor at start, and so that its
// tools can be listed and imported. The client speaks the newest protocol the
// upstream accepts, falling back to the initialize handshake of 2025-11-25.
//
// A stdio server runs with its standard streams on pipes. Its environment holds
// only the variables [InheritedEnv] names (PATH, HOME and the like) plus
// [Config.Env]: the executor's credentials stay out of it unless the tools file
// passes them on. What it writes on its standard error is logged line by line
// (each line cut at 4 KiB, at most 20 lines a second in bursts of 100, the rest
// counted as dropped), and never blocks it.
//
// The connection is supervised. When it ends — the process exited or was
// killed, the HTTP session broke — the next call starts a new one; calls that
// arrive while a start is in progress wait for it. A start that fails (the
// command cannot be run, the process exits before answering, the connection is
// refused, initialize is refused or times out after [Config.StartTimeout]) is
// not tried again before a delay that doubles from [Config.MinRestartDelay] to
// [Config.MaxRestartDelay]; calls in that window fail at once, without effect.
// So a server that crashes on start costs one start per delay, not one per
// call, and nothing is started while no call asks for it. [Upstream.Close]
// closes a stdio server's standard input and gives it [Config.StopTimeout] to
// exit before SIGTERM, then SIGKILL.
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
//   - An input-required result (the upstream asks for elicitation, sampling or
//     roots before it proceeds): [ErrInputRequired], wrapped with
//     [tool.NoEffect]. A tool run by toolexec has no one to ask.
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
// # The outcome
//
// The outcome is a string, recorded and answered as is:
//
//   - structuredContent present (not null): its JSON, compacted, with numbers
//     and member order as the upstream sent them;
//   - else, content that is all text: the texts joined with newlines ("" for
//     no content at all);
//   - else (images, audio, resources): the JSON of the content list, compacted.
//
// So a gateway in front can show the outcome as text, and give it back as
// structured content when it is a JSON object.
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
