// Package redisstore is a [kvstore.Store] on Redis, through go-redis v9 (any
// [redis.UniversalClient]: a single node, Sentinel failover or Redis Cluster).
//
// # Durability: read this before offering Redis
//
// Redis keeps records in memory. Without the append-only file (appendonly yes, with
// appendfsync always or everysec) a restarted Redis has forgotten every record —
// every claim, every recorded outcome, every indeterminate key — and with them the
// guarantee: a redelivered call finds no record and runs its tool a second time.
// Even with AOF, appendfsync everysec can lose the last second of acknowledged
// writes on a crash, and replication is asynchronous, so a failover to a replica can
// lose claims the primary acknowledged. Run Redis with maxmemory-policy noeviction:
// every record carries a TTL, and the volatile-* and allkeys-* policies evict live
// claims under memory pressure. Prefer the JetStream or PostgreSQL stores where a
// lost record means a second booking.
//
// # Layout
//
// Every key of a tenant carries the tenant as a hash tag, so that all of them live in
// one Redis Cluster slot and every script touches a single slot:
//
//	<prefix>:{<tenant>}:<digest>      the record (a hash)
//	<prefix>:{<tenant>}:idx           the tenant's index (sorted set: digest → expiry ms)
//	<prefix>:{<tenant>}:rev           the tenant's revision counter
//	<prefix>:{<tenant>}:<digest>:chg  the record's Pub/Sub channel
//
// The index is what Forget walks, in batches, instead of scanning the keyspace;
// entries whose records have expired are pruned as claims come in.
//
// # Operations
//
// Every operation on a record is one Lua script (EVALSHA, falling back to EVAL
// when the script cache was flushed), so it is a single atomic server-side step;
// Forget reads the index and then runs one script per batch. Claim is a script
// rather than SET NX PX GET because the claim must stamp its lease deadline from
// Redis's own clock (TIME) and enter the tenant index in the same atomic step; it
// still answers in one round trip with either the new claim or the existing record.
//
// Leases are judged by Redis's clock alone: scripts read TIME to write a deadline
// and to decide whether it has passed; the worker's clock is never compared with
// it. Retention is the key's PX, set on every write, so it counts from the last
// write. Revisions come from a per-tenant counter that never falls below Redis's
// time in milliseconds times 1000, so a key that is released (or expires, or is
// forgotten) and is claimed again never repeats a revision. A lease's fencing token is a random claim
// id written by Claim and TakeOver; Renew keeps it. A holder whose lease has run out
// may still record, release, mark or renew until another worker takes the claim
// over: TakeOver's compare-and-swap on revision and holder decides between them.
//
// Every write that a waiter cares about (record, release, mark, renew, take over,
// resolve, forget) publishes on the record's channel. Wait subscribes, confirms the
// subscription, and only then re-reads the record, so no change falls between the
// two; it also wakes at the lease deadline (confirmed with Redis's clock before it
// reports LeaseExpired) and re-reads periodically in case a message was lost to a
// reconnect.
//
// Any failure to reach Redis, a closed client, a timeout or an unexpected server
// reply is returned wrapping [kvstore.ErrUnavailable]; it is never a claim.
//
// Tested against Redis 7.0. Scripts call TIME before writing, which needs script
// effects replication: the default since Redis 5.0 and the only mode since 7.0.
package redisstore
