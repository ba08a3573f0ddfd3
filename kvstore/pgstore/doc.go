// Package pgstore keeps idempotency records in PostgreSQL (pgx v5). It implements
// [kvstore.Store].
//
// # Deployment
//
// The tables are the deployment's to create: call [Store.EnsureSchema] once per
// release (it is idempotent, versioned and safe to run from several processes at
// once). [New] never creates or alters tables; an operation on a schema without
// them fails with an error matching [ErrNoSchema] (and kvstore.ErrUnavailable).
//
// Records live in one table per schema ([Config.Schema], "toolexec" by default),
// keyed by (tenant, digest). A row holds the record's state and metadata, never a
// call's arguments.
//
// # One clock
//
// Every decision that depends on time — has the record expired, has the lease run
// out — is made by the database in the statement that acts on it, with now().
// Workers' clocks are never compared. A claim is one INSERT ... ON CONFLICT DO
// UPDATE statement that only overwrites a row whose retention has run out; a claim
// whose lease ran out is never taken by Claim, only by [Store.TakeOver], which
// compares the revision and checks the lease in the same UPDATE.
//
// # Group commit
//
// Claims and the holder's writes (record, renew, release, mark indeterminate)
// that arrive while others are being written share one transaction: up to
// [Config.MaxBatch] statements sent in one round trip and committed once, by one
// of [Config.BatchWriters] writers. Each statement is the one the write runs
// alone, so its answer is the same; a batch the server refuses (a broken
// deadlock, say) rolled back as a whole, and its writes run again one by one.
// Statements are sorted by key, so batches lock rows in one order. At low load
// a write goes alone, without waiting. [Store.BatchStats] counts the batches.
//
// # Waiting
//
// [Store.Wait] listens on the channel [Config.Channel] on a dedicated connection
// taken from the pool, and before it blocks it marks the record's row watched
// (a column of its own, set by an UPDATE that the row lock orders against every
// write). A write to a watched row calls pg_notify in the writing statement
// (delivered at commit; the payload is the digest only); a write to a row nobody
// watches does not. This matters for throughput: PostgreSQL serialises the
// commits of transactions that notify, so notifying on every write would stop
// concurrent commits from sharing a WAL flush. The mark stays until the row goes
// (or a claim replaces it after it expired).
//
// Because a notification can be lost (the listening connection can drop), a
// waiter also re-reads the record at the lease deadline the database reported, at
// the record's expiry, every [Config.RecheckInterval], and whenever the listener
// reconnects. LISTEN needs a session: behind PgBouncer in transaction mode, point
// the pool at PostgreSQL itself (or a session-mode pool), or waiters fall back on
// those re-reads alone.
//
// Schema version 3 added the mark. Waiters of a release older than that do not
// set it, so while such processes still run against a migrated schema, their
// waits rely on those re-reads; run [Store.EnsureSchema] before starting this
// release (its statements need the column).
//
// # Expiry
//
// Reads treat a row whose expires_at has passed as absent, whether or not it has
// been deleted yet. A background sweeper started by [New] deletes expired rows in
// batches (FOR UPDATE SKIP LOCKED); [Store.Sweep] runs one pass on demand.
package pgstore
