// Package mcpgate is toolexec's MCP server: it lets any agent that speaks the
// Model Context Protocol call toolexec's tools, and get the answers toolexec
// gives — including "the outcome is unknown, and retrying will not run it
// again", which MCP has no word for.
//
// A gateway needs only a NATS connection. It lists the tools the executors
// declare (toolexec.Client.Tools, on toolexec.tools.<tenant>) and turns each
// tools/call into an ordinary call on toolexec.call.<tenant>.<tool>.<call_id>, which any
// executor of the fleet runs; it waits for the answer on the call's answer
// subject like any other caller, so watchers and auditors see MCP calls as
// they see every call. Nothing about the key or the state machine changes.
//
// # Transports and identity
//
// [Gateway.Handler] serves Streamable HTTP; [Gateway.ServeStdio] serves one
// session over a pair of streams (emitter mcp, spawned by a desktop agent).
// The tenant is fixed per gateway, or, over HTTP, taken from the bearer token
// a client presents ([Tokens]: a file of tenant and token, compared in
// constant time); a session stays with the tenant that opened it. There is no
// anonymous mode in which a client names its own tenant.
//
// Both transports offer the same protocol versions, every one the MCP SDK
// speaks, newest first (2026-07-28, then the versions of the initialize
// handshake), in server/discover and initialize alike. Version 2026-07-28 has
// no sessions: over HTTP, a request whose MCP-Protocol-Version header names it
// (or a later version) is served on its own, and a client of an earlier
// version opens a session with initialize.
//
// # Tools
//
// Annotations follow the declared kind: read-only tools are readOnlyHint;
// idempotent ones idempotentHint and not destructiveHint; effectful ones are
// neither read-only nor idempotent. A tool's _meta carries its kind and key
// arguments under the io.tesserix.toolexec/ prefix. The list is read again
// from the executors when it is older than [Config.CatalogTTL], and every
// CatalogTTL while a client has a session open, and clients are told when it
// changed (notifications/tools/list_changed). A tool the catalog marks
// unavailable (the MCP server behind it cannot be reached) stays listed, with
// [MetaUnavailable] true in its _meta and a description that says so; its
// calls are answered rejected upstream_unavailable, and nothing runs. When it
// is back the list changes again, and clients are told.
//
// # Calls
//
// A request's _meta may carry (names under the io.tesserix.toolexec/
// prefix, see the Meta constants):
//
//   - run_id: the run the call belongs to, part of its idempotency key.
//     Default: the MCP session (over stdio, the gateway process's session;
//     over HTTP without a session, as every request of version 2026-07-28
//     is, a fresh run for each call, so that calls of unrelated clients are
//     never taken for one effect). A client that reconnects, or speaks
//     2026-07-28 over HTTP, sets it to keep its run, and so its keys.
//   - call_id: the call's id. A request naming the id of an earlier call of
//     the same tool is answered with that call's answer if it is stored, and
//     otherwise waits for it, whatever run the retry names: the calls stream
//     refuses a second call of one tenant, tool and id while the first waits,
//     and an executor answers a repeat of an answered call from its stored
//     answer without running it. Call ids are the tenant's own: another
//     tenant's use of the same id changes nothing.
//
// The answer becomes the result: completed and deduplicated ones a normal
// result (the outcome as text, and as structuredContent when it is a JSON
// object; an outcome that carries MCP content — an upstream tool's images,
// audio or resources, see package tool/mcptool — as that content, so that a
// deduplicated answer gives the same content as the first); failed, rejected
// and indeterminate ones isError, with a text meant for a model (an
// indeterminate one says that the outcome is unknown, that retrying will not
// run the tool again, and that an operator must settle the key). A call of a tool the executors do not know is a JSON-RPC "invalid
// params" error, as the MCP specification asks. Every result's _meta carries
// the answer's kind, idempotency_key, call_id and run_id, and where they apply
// code, reason and body_entered.
//
// While a call waits, a client that sent a progressToken gets a progress
// notification every [Config.ProgressEvery], until the call's own progress
// comes (an upstream MCP tool's): that is relayed from then on, counted on
// from the last value sent, so that progress never goes back. The call's log
// messages are relayed as notifications/message (the gateway declares the
// logging capability; the SDK sends them at the level the client set). A
// cancelled request stops waiting; the call goes on, and its answer can be
// found with call_id.
//
// # Requests from a call's body
//
// An upstream MCP tool may ask, mid-call, for elicitation or sampling. The
// gateway declares in each call (docs/PROTOCOL.md §13) what its client
// declared it can answer, listens to the call's interaction subject before it
// publishes the call, and relays each request to the client
// (ServerSession.Elicit, CreateMessageWithTools), the schema of an
// elicitation as the upstream wrote it, and the answer back; a request the
// client cannot answer is refused at once. A client on protocol 2026-07-28 or
// later, where a server may not send requests while it serves one, is asked
// in an input-required result instead (multi round-trip requests): its
// request state names the call, and the call sent again with the answers
// passes them to the executor and waits for the call by its id, as a retry
// with call_id does.
//
// # Resumable streams
//
// Over Streamable HTTP, the response stream of a request in a session at
// protocol 2025-11-25 or later opens with a priming event (an event id, no
// data), and every event has an id, so that a client whose stream ended
// before the answer — the connection broke, or the gateway closed it — can
// ask for the rest with a GET carrying Last-Event-ID (SEP-1699). A request
// whose Mcp-Protocol-Version header names an older version than its session
// negotiated is served at the session's. With [Config.PollAfter] the gateway
// closes the stream of a call that has waited that long, with a retry field
// of [Config.PollRetry], so that a long call holds no connection while it
// waits; the call goes on, and its answer waits on the resumed stream.
//
// The events are kept in memory, within three bounds: [Config.StreamBytes]
// of event data in all (16 MiB by default; when full, the streams whose last
// event is oldest go first, then the oldest events of the stream written),
// the 64 newest streams of a session (one per request that waited for an
// answer), and [Config.StreamRetention] after a stream's last event (10
// minutes by default; a session's standalone GET stream is bounded by bytes
// only). A session's events go when it closes or times out. A resumption that
// asks for events no longer kept is refused (400), never answered with a gap.
// A gateway's events stay in its process: a client must resume on the
// gateway that served the stream.
//
// # HTTP security
//
// As the MCP specification asks of Streamable HTTP servers: a request whose
// Origin header is present and not allowed is refused 403; requests that
// reach a loopback address under another Host name are refused (DNS
// rebinding); bearer tokens are compared in constant time; request bodies are
// bounded; each tenant may hold at most [HTTPConfig.MaxSessions] sessions open
// (a further initialize is refused 429), and a session idle for
// [HTTPConfig.SessionTimeout] is closed. cmd/executor listens on loopback unless told otherwise, and will
// not listen elsewhere without a tokens file.
package mcpgate
