// Package tcpproxy is a TCP proxy for tests that break the network between a
// client and its server on command.
//
// A [Proxy] listens on a free port of 127.0.0.1 and forwards every connection to
// one target address. Three calls change how it behaves, for connections already
// open and for those still to come:
//
//   - [Proxy.Cut] closes every connection with a reset and resets each new one
//     as soon as it is accepted: the client sees its server crash.
//   - [Proxy.Blackhole] keeps accepting and reading but forwards nothing, in
//     either direction: requests vanish and no reply ever comes, the way a
//     partitioned network or a hung server behaves. Only a client that bounds its
//     waits with timeouts notices.
//   - [Proxy.Restore] forwards again. Connections that lost bytes in the black
//     hole are closed (their streams can no longer be trusted), so the client
//     reconnects.
//
// A fourth, [Proxy.Delay], slows the link instead of breaking it: what the
// target sends reaches the client late, in order, as over a far network or
// from a server whose answers lag behind its work.
//
// It is a test helper: simple, not fast.
package tcpproxy
