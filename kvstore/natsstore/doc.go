// Package natsstore keeps idempotency records in a NATS JetStream key-value
// bucket: the default [kvstore.Store] of toolexec.
//
// # Layout
//
// One bucket (default "toolexec_idempotency", history 1) holds every tenant's
// records under the key <tenant>.<digest>. A value is a compact JSON document
// with the record's fields (state, holder, claim id, lease duration, outcome or
// reason, the check digest, tool, run and call ids); never the call's arguments.
// The server's times are not in the value: they are the entry's timestamp,
// stamped by the stream's leader on every write. The one time the value holds
// is CreatedAt, the claiming worker's note of when it claimed the key: shown to
// operators, never compared with anything. Records returned straight from a
// write (a won Claim, Resolve) carry the writer's estimates of the server's
// times; records read (Get, Wait, a refused Claim) carry the server's.
//
// # Operations
//
// Claim is a write the server applies only if the key has no live value: it
// expects the key's last revision to be 0 or, after a release, the delete
// marker's (what kv.Create does, without kv.Create's extra read when it is
// refused). Reads go to the stream's leader (the message-get API), not to
// kv.Get's direct get, which any replica may answer: a follower can miss an
// acknowledged write, and replicas expire old records each by its own timer.
// Every conflict shape counts as "someone else holds it": ErrKeyExists,
// ErrKeyRevisionMismatch and the raw API errors 10071 and 10164 that
// replicated buckets return. The loser reads the winner's record: a duplicate
// claim costs two round trips. A claim whose answer was lost is recognised on
// the read by its random claim id.
//
// Every transition is a compare-and-set on the entry's revision: kv.Update for
// Record, MarkIndeterminate, Renew, TakeOver and Resolve, kv.Delete with
// LastRevision for Release (a delete marker: watchers see it, and a later claim
// writes over it). The Lease's token carries the revision and what the holder's
// next write keeps of the claim (its id, holder, lease, creation time and the
// call's identifiers), so that write needs no read first. Fencing is by claim:
// if the revision moved on and the record is still the same claim (the holder
// renewed), the write is retried at the current revision; a take-over, a
// release, a new claim of the key or any other transition ends the claim and
// every copy of its lease. Each write carries a random write id, so that a
// write whose answer was lost is recognised rather than reported as a conflict
// with itself.
//
// # Time
//
// Leases are judged by the server's clock only: a lease runs until the server's
// timestamp of the claim's last write plus its duration. To learn the server's
// time now, the store writes a probe to a key no tenant can produce ("=clock")
// and reads its timestamp back; it does so only where a judgement is needed
// (TakeOver, and Wait's deadlines), never on Claim. So Claim and Get never set
// Record.LeaseExpired; Wait does. Records are kept for the retention after their
// last write by the bucket's TTL (the stream's MaxAge); ExpiresAt is the last
// write's server time plus the retention.
//
// # Forgetting
//
// Forget is one stream purge filtered on $KV.<bucket>.<tenant>.>. It leaves no
// markers and wakes no watchers; see [Store.Forget] and [Store.Wait].
//
// # Permissions
//
// A user running the store publishes to $KV.<bucket>.> and to the JetStream API
// ($JS.API.>, or narrower: the stream requests on KV_<bucket> — create, update,
// info, message get, purge — and the consumer requests Wait's watch makes), and
// subscribes to its inboxes (_INBOX.>).
//
// # Durability
//
// A claim acknowledged by a server that has not synced it to disk can be lost
// with that server (JetStream syncs lazily by default). Run the servers with
// sync_interval: always, and use Replicas: 3 on a cluster.
package natsstore
