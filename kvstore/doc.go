// Package kvstore defines the contract every idempotency store implements: the
// record of what already happened for an idempotency key, and the operations that
// move it from claimed to completed, indeterminate or gone.
//
// A store never sees a call's arguments. It is handed a tenant and a digest (the
// 64-hex key from package idemkey) and keeps a [Record] for them.
//
// Implementations live in sub-packages named for what they are: memstore (one
// process, tests), natsstore (JetStream KV, the default), pgstore (PostgreSQL) and
// redisstore (Redis). Package kvstoretest holds the conformance suite that every
// implementation, including one of your own, must pass.
package kvstore
