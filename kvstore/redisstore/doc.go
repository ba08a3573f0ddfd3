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
//	<prefix>:{<tenant>}:<digest>      the record (a string)
//	<prefix>:{<tenant>}:idx           the tenant's index (sorted set: digest → indexed-until ms)
//	<prefix>:{<tenant>}:rev           the tenant's revision counter
//	<prefix>:{<tenant>}:<digest>:chg  the record's Pub/Sub channel
//
// A record is one string value — a header of flags and numbers, then the claim's
// identity (holder, token, check digest, tool, run and call ids), then the outcome or
// reason — so that a script reads it with one GET and writes it, retention included,
// with one SET … PX. The index is what Forget and List walk, in batches, instead of
// scanning the keyspace. An entry's score is when it stops covering its record: a
// retention plus a slack (an hour, at most the retention) past the write that set it,
// so the write that completes a claim usually leaves the index alone. Entries whose
// score has passed are pruned as claims come in. The index's and the counter's TTLs
// reach a slack beyond every score, renewed once a slack.
//
// # Operations
//
// Every operation on a record is one Lua script (EVALSHA, falling back to EVAL
// when the script cache was flushed), so it is a single atomic server-side step;
// Forget reads the index and then runs one script per batch. Claim is a script
// rather than SET NX PX GET because the claim must stamp its lease deadline from
// Redis's own clock (TIME) and enter the tenant index in the same atomic step; it
// still answers in one round trip with either the new claim or the existing record.
// A new claim runs seven commands inside its script (TIME, GET, INCRBY, SET, ZADD,
// PTTL, ZREMRANGEBYSCORE), the record that completes it three (GET, TIME, SET), a
// refused claim two (GET, TIME).
//
// Concurrent operations share round trips. On a *redis.Client at most
// Config.Pipelines callers send scripts at a time; the scripts of callers that
// arrive meanwhile go out together with the next sender's, as one pipeline of up
// to Config.MaxBatch EVALSHA commands, so that 64 calls in flight cost a few
// system calls rather than one each. A caller that finds a sender free goes at
// once, alone. A pipeline is never sent twice: a script Redis refused with
// NOSCRIPT is loaded and sent again (it had not run), and one whose reply the
// connection lost goes back to its caller, who runs it alone with the client's
// retries.
//
// Leases are judged by Redis's clock alone: scripts read TIME to write a deadline
// and to decide whether it has passed; the worker's clock is never compared with
// it. Retention is the key's PX, set on every write, so it counts from the last
// write. Revisions come from a per-tenant counter, two at a time: a claim takes
// one and keeps the other for the record's next write. A counter that is gone
// restarts at Redis's time in milliseconds times 1000, so a key that is released
// (or expires, or is forgotten) and is claimed again never repeats a revision. A
// lease's fencing token is a random claim id written by Claim and TakeOver; Renew
// keeps it. A holder whose lease has run out may still record, release, mark or
// renew until another worker takes the claim over: TakeOver's compare-and-swap on
// revision and holder decides between them.
//
// Writes that a waiter cares about (record, release, mark, renew, take over,
// resolve) publish on the record's channel when a waiter has flagged the record;
// Forget always publishes. Wait subscribes, confirms the subscription, and only
// then re-reads the record in a script that also sets the flag while the record is
// as the waiter saw it. Redis runs scripts one at a time, so a write either comes
// before that read (which sees it) or after (and publishes); each write clears the
// flag, and every re-read sets it again. Wait also wakes at the lease deadline
// (confirmed with Redis's clock before it reports LeaseExpired) and re-reads
// periodically in case a message was lost to a reconnect.
//
// # Upgrading from the previous layout
//
// The previous version of this store kept each record as a hash. Every script
// still reads such a record (a GET answering WRONGTYPE sends it to HGETALL), so a
// deployment upgraded in place keeps answering from the records it already has:
// reads, refused claims, List and Forget leave them as they are, and the first
// write stores the new layout. Writes to an old record always publish, since its
// waiters could not flag it. The counter and index keep their names and meaning.
// Running both versions against one prefix at once is not supported: the previous
// version's scripts fail on records in the new layout, with errors that callers see
// as kvstore.ErrUnavailable (never a claim). Stop the old workers before starting
// new ones, or give the new ones a prefix of their own.
//
// Any failure to reach Redis, a closed client, a timeout or an unexpected server
// reply is returned wrapping [kvstore.ErrUnavailable]; it is never a claim.
//
// Tested against Redis 7.0. Scripts call TIME before writing, which needs script
// effects replication: the default since Redis 5.0 and the only mode since 7.0.
package redisstore
