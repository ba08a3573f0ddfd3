// Package bus puts toolexec on the wire: it turns NATS JetStream messages into
// calls for package dispatch, the dispatcher's answers back into messages, and
// carries out how dispatch.Settler settles each message.
//
// # Pieces
//
//   - [Connect] dials NATS with the choices of the nats CLI (URL, credentials,
//     nkey, user and password, token, TLS) and reconnects for ever;
//     [ConnectWait] also waits for a first connection while no server can be
//     reached ([Unreachable]).
//   - [EnsureStreams] creates TOOLEXEC_CALLS_V2 (work queue) and TOOLEXEC_EVENTS
//     (limits); [EnsureConsumer] the one durable pull consumer all executors share.
//   - [Worker] takes calls from that consumer and answers them. A
//     [WorkerObserver] hears what a worker does, for metrics. The client that
//     publishes calls and reads answers is the root package's toolexec.Client.
//   - [HistoryService] answers the tenants' requests for their stored events
//     on toolexec.history.<tenant>, for clients that have no JetStream (see
//     below); [CatalogService] answers toolexec.tools.<tenant> with the
//     declarations of the tools ([ToolDecl]).
//   - Package wire (bus/wire) is what travels: the subjects, the CloudEvents of
//     calls and answers in structured and binary mode, and their schema checks.
//   - Package embedded (bus/embedded) runs a NATS server with JetStream inside
//     the process; bus itself does not link the server.
//   - The admin request-reply subjects (forget, inspect, resolve, list) are
//     package admin's.
//
// # One call on the wire
//
// A caller subscribes to the call's answer subject
// (toolexec.event.<tenant>.*.<tool>.<run_id>.<call_id>), then publishes the call
// to toolexec.call.<tenant>.<tool>.<call_id>, where the calls stream keeps one
// call at most: a call published twice while it waits is stored once, and no
// tenant's call id touches another's. A worker fetches
// it (never more calls than it has free slots, so no call waits in a buffer
// while its ack timer runs; and it listens to each pull until JetStream ends
// it, so no call delivered into a pull is dropped on its way), decodes and
// checks it, and hands it to dispatch.Settler, telling JetStream it is in
// progress meanwhile. The answer goes to
// toolexec.event.<tenant>.<kind>.<tool>.<run_id>.<call_id> with Nats-Msg-Id =
// wire.MsgID (derived from the tenant, tool and call id: one stored answer per
// call, whoever publishes it), and only after its PubAck is the call
// acknowledged. A call marked as a repeat (wire.RepeatHeader), and one
// delivered again, is first looked for among the stored answers, and
// acknowledged unrun when it was answered before.
//
// A message that is not a well-formed call — not JSON, not a CloudEvent, a
// specversion other than 1.0, a missing attribute, a bad token, a tenant
// extension that disagrees with the subject, more than WorkerConfig.MaxMessageBytes
// — is answered rejected with its events code and terminated, never
// redelivered; nothing is claimed and no body entered. The rejection is
// addressed to the subject's tenant and call id and, when neither the subject
// nor the message carries a usable call id, to a stand-in made from its stream
// sequence ([StandInCallID]).
//
// A worker that dies mid-call leaves its message unacknowledged: JetStream
// redelivers it after the ack wait, and the next worker finds the idempotency
// record and answers from it (an Effectful call whose holder's lease ran out is
// answered indeterminate, holder_lost; an Idempotent one is taken over and run).
//
// # Tenants without JetStream
//
// Where tenants are isolated by NATS accounts, the executors, both streams and
// the KV bucket live in the executors' account, which exports to each tenant
// account the service toolexec.call.<tenant>.> (its calls in, and their
// PubAcks back), the stream toolexec.event.<tenant>.> (its answers, live), the
// service toolexec.history.<tenant> and the service toolexec.tools.<tenant>
// (the [CatalogService]: which tools there are), each with account_token_position 3 so
// that the server puts the importing account's name in the tenant's place. A
// tenant has no JetStream API: Call and Publish work as before, but Attach and
// Watch cannot create consumers on TOOLEXEC_EVENTS. Every executor therefore
// runs a [HistoryService] (a queue group on toolexec.history.*), which reads
// the stream for the tenant named by the subject, and for no other: a request
// is a [HistoryRequest] (a filter within toolexec.event.<tenant>., a start, a
// limit) answered by a [HistoryResponse] (a page of stored events with their
// sequences, subjects, headers and payloads) or a [HistoryError] whose code
// is bad_request, forbidden or unavailable.
//
// A toolexec.Client reads stored events through JetStream or through that
// service as its toolexec.HistoryPath says. By default it tries JetStream and
// turns to the service for good the first time the JetStream API answers that
// the account has none, so that a client in the executors' account (the
// console's) keeps reading through JetStream and a tenant needs no setting.
// Through the service, Attach subscribes to the answer subject, then asks for
// the stored answer once; Watch subscribes to its filter, pages through the
// history, then delivers what it heard live, leaving out what it already
// delivered. Its live part is a plain subscription and can lose what an
// ordered consumer would not (see toolexec.Client.Watch).
//
// # Durability
//
// The embedded server (package bus/embedded) syncs before acknowledging
// (sync_interval: always) unless its Config.SyncInterval says otherwise, because a claim acknowledged and
// lost to a power failure is a second booking. For a cluster, set
// sync_interval: always in each server's configuration and use three replicas
// (StreamsConfig.Replicas, natsstore.Config.Replicas).
package bus
