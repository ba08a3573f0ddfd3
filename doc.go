// Package toolexec runs AI agents' tool calls over NATS JetStream with at most
// one side effect per idempotency key.
//
// A tool call that times out has not necessarily failed: the seat may be
// booked. Each tool declares what repeating it does (package tool), and the
// executors keep a record of what already happened, so that a retry is answered
// from the record instead of booking twice, and a call whose outcome nobody can
// know is reported as such instead of being guessed at.
//
// This package is what a Go program touches:
//
//   - [Client] calls tools: [Client.Call] publishes a call and waits for its
//     answer, [Client.Attach] finds the answer to an earlier call, and
//     [Client.Watch] follows the answers and audit events. Attach and Watch read
//     the events stream through JetStream, or, for a tenant whose NATS account
//     has none, through the executors' history service
//     (toolexec.history.<tenant>), which answers each tenant about its own
//     events only, or, for the operators' account, toolexec.admin.history,
//     which answers about every tenant's. A call that ran, or
//     that was answered from an earlier call's record, returns a [Result]; the
//     others return an error to branch on with errors.As:
//     [*IndeterminateOutcomeError], [*FailedError], [*RejectedError],
//     [*CallIDTakenError] or [*NoAnswerError].
//   - [Executor] serves tools: it takes calls from the stream all executors
//     share, claims each key in a store (the JetStream KV bucket by default),
//     runs the tool and publishes the answer. It also serves the admin and the
//     history subjects, and the catalog of its tools
//     (toolexec.tools.<tenant>), which [Client.Tools] reads and MCP gateways
//     list (package mcpgate).
//
// Importing it does not link a NATS server. To run one inside the process,
// see package bus/embedded. The machinery lives below: tool (declaring tools),
// dispatch (one call to exactly one answer), kvstore (the stores), bus (NATS),
// events (the vocabulary), idemkey (the key).
package toolexec
