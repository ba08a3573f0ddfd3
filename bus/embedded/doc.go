// Package embedded runs a NATS server with JetStream inside the process: what
// the executor starts when it is given no NATS URL, so that one command runs
// the whole thing, and what tests and benchmarks start instead of a server of
// their own.
//
// [Start] locks its store folder for the server's lifetime and refuses at once a
// folder another server holds ([ErrStoreInUse], naming that server's pid and
// URL): two servers on one JetStream store each book the same keys and lose
// each other's messages. It checks its port before the server meets it, and
// refuses clearly when it is taken ([ErrPortInUse], often a NATS server already
// running on 4222).
// It syncs every write to disk before acknowledging it (sync_interval: always)
// unless [Config].SyncInterval says otherwise, because a claim acknowledged and
// lost to a power failure is a second booking. With [Config].InProcess it
// listens on no port; clients reach it with nats.InProcessServer (see
// bus.ConnectConfig.InProcess).
//
// Package bus does not import this one, so that a program that only talks to
// NATS does not link the server.
package embedded
