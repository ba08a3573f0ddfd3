// Package kvstoretest is the conformance suite for [kvstore.Store]
// implementations. Every store in this module passes it, and so must one of your
// own: a backend that passes it keeps the promises the dispatcher builds its
// at-most-once guarantee on.
//
// A backend's test calls [Run] once, with a function that makes a fresh store for
// each subtest:
//
//	func TestConformance(t *testing.T) {
//		kvstoretest.Run(t, func(t *testing.T, opts kvstoretest.Options) kvstoretest.Harness {
//			fc := clock.NewFake(time.Unix(1_700_000_000, 0))
//			s := mystore.New(mystore.Config{Clock: fc, Retention: opts.Retention})
//			t.Cleanup(func() { s.Close() })
//			return kvstoretest.Harness{Store: s, Advance: fc.Advance}
//		})
//	}
//
// The rules for that function:
//
//   - It is called once per subtest, and the subtests run in parallel. It may share
//     a server between calls (one embedded NATS server, one database), but it must
//     hand back a store that tolerates the other subtests' parallel use. Every
//     subtest works in tenants of its own (random tokens), so separate buckets,
//     schemas or key prefixes are welcome but not required.
//   - It honours [Options]: a non-zero Retention is how long records must live.
//     One subtest asks for a retention of two seconds; a backend whose server
//     cannot expire records that quickly must still make them read as gone.
//   - It closes what it opens, with t.Cleanup. The suite never calls Close.
//   - A backend whose leases and retention follow an injectable clock sets
//     [Harness.Advance], and the suite moves that clock instead of sleeping. A
//     backend judged by a server's clock leaves Advance nil: the suite then uses
//     leases of about a second and sleeps just past them, so a whole run takes
//     seconds, not minutes.
//   - A backend with a server lists in [Harness.Outages] the ways that server
//     can be out of reach — a closed pool, client or connection, an address
//     nothing listens on, a server shut down — each an [Outage] whose Store
//     function returns a store configured as Harness.Store is (same schema,
//     bucket or key prefix) that cannot reach it. The suite calls each at most
//     once, in the Outage subtest, after writing records through Harness.Store.
//     A store without a server (memstore) leaves Outages nil.
//
// What the suite checks: claims are granted once, also under 64 concurrent
// claimers; every transition (record, release, mark indeterminate, renew, take
// over, resolve) and its errors; fencing, that a lease is refused once its claim
// was taken over, recorded, released or marked, also when the same holder claims
// the key again; lease expiry and the take-over's compare-and-swap; Wait woken by
// every change, by lease expiry and by its context; retention counted from a
// record's last write; Forget confined to one tenant; input validation (the
// contract's checks: kvstore.ClaimRequest.Validate and the others); that no
// record holds a call's arguments; and, for a harness with Outages, that a
// store whose server is out of reach answers every operation (Claim, Get,
// Record, Release, MarkIndeterminate, Renew, TakeOver, Wait, Forget, Resolve,
// and List and DumpRaw where it has them) with an error matching
// kvstore.ErrUnavailable within 15 seconds — never a grant, a record
// or a lease, and without writing anything — and that a Claim whose context
// has ended answers an error matching both kvstore.ErrUnavailable and the
// context's error.
//
// Optional capabilities are probed by type assertion, as testing/fstest does. A
// store that implements [RawDumper] lets the suite look at the bytes it stores, to
// prove that the arguments behind a digest never reach them; without it that part
// of the check is skipped with a log line.
// A store that implements [kvstore.Lister] has its List checked: the
// records of one tenant in one state, oldest first, within the limit.
//
// Each misbehaviour is reported with the operation, what came back and what the
// contract wants; a subtest stops early only when what follows could not be
// judged.
package kvstoretest
