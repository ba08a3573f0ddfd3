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
//     answer, [Client.Publish] publishes one without waiting,
//     [Client.Attach] waits for the answer to an earlier call and
//     [Client.Find] looks for it once, and [Client.Watch] follows the answers
//     and audit events. A client is configured once, with [ClientOption]s
//     given to [NewClient]; each call takes [CallOption]s. The answer is the
//     vocabulary's *events.Answer, returned with the error events.Answer.Err
//     gives: nil for a call that ran or that was answered from an earlier
//     call's record, and otherwise an error to branch on with errors.As, all
//     of them package events' (*events.IndeterminateOutcomeError,
//     *events.FailedError, *events.RejectedError, *events.CallIDTakenError,
//     *events.NoAnswerError). Attach and Watch read the events stream through
//     JetStream, or, for a tenant whose NATS account has none, through the
//     executors' history service (toolexec.history.<tenant>), which answers
//     each tenant about its own events only, or, for the operators' account,
//     toolexec.admin.history, which answers about every tenant's (see
//     [HistoryPath]).
//   - [Executor] serves tools: it takes calls from the stream all executors
//     share, claims each key in a store (the JetStream KV bucket by default),
//     runs the tool and publishes the answer. It also serves the admin and the
//     history subjects, and the catalog of its tools
//     (toolexec.tools.<tenant>), which [Client.Tools] reads and MCP gateways
//     list (package mcpgate).
//   - [AdminClient] sends the operators' requests: list, inspect and resolve
//     the records, forget a tenant.
//
// Importing it does not link a NATS server. To run one inside the process,
// see package bus/embedded. The machinery lives below: tool (declaring tools),
// dispatch (one call to exactly one answer), kvstore (the stores), bus (NATS,
// the executors' side), events (the vocabulary), idemkey (the key).
package toolexec
