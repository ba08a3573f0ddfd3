// Package resilience holds the tests that the shared stores keep toolexec's
// guarantee when their server does not: PostgreSQL (kvstore/pgstore), Redis
// with AOF (kvstore/redisstore) and JetStream KV (kvstore/natsstore), each run as
// a server of the test's own (internal/testkit/dbproc, internal/testkit/natstest) so that it can
// be stopped, crashed and restarted, and reached through a proxy
// (internal/testkit/tcpproxy) that can cut or black-hole the connection.
//
// What the tests hold the stores and the dispatcher to:
//   - records and claims survive a restart of the server, and a claim's lease is
//     still judged by the server's clock afterwards;
//   - while the store cannot be reached, an Effectful call answers indeterminate
//     (store_unavailable) without entering its body, promptly rather than
//     hanging, and a call whose body was running when the store went away is
//     never run a second time;
//   - once the store is back, calls work again.
//
// The package has no code of its own, only tests.
package resilience
