package kvstoretest

import (
	"context"
	"testing"
	"time"

	"github.com/tesserix/toolexec/kvstore"
)

// Harness is what a backend hands the suite.
type Harness struct {
	// Store is the store under test.
	Store kvstore.Store
	// Advance moves the store's clock forward by d. Nil for backends judged by a
	// real clock (a server's); the suite then sleeps instead.
	Advance func(d time.Duration)
	// Outages are the ways the backend's server can be out of reach, each a
	// store the suite's Outage check runs every operation on. Nil for a store
	// without a server (memstore): the check is then skipped with a log line.
	Outages []Outage
}

// Outage is one way a store's server can be out of reach: a closed pool or
// client, a dead address, a server shut down. See [Harness.Outages].
type Outage struct {
	// Name says how the server is out of reach ("closed pool", "dead address");
	// the suite's messages name it.
	Name string
	// Store returns a store configured as Harness.Store is (the same schema,
	// bucket or key prefix: the records and leases Harness.Store made would be
	// found there) whose server cannot be reached. The suite calls it at most
	// once per subtest, after it has written records through Harness.Store, and
	// never closes it: what Store opens, it closes with t.Cleanup.
	Store func() kvstore.Store
}

// Options configures a store instance for one subtest.
type Options struct {
	Retention time.Duration // how long records live; 0 = the backend's default
}

// RawDumper is an optional capability of a store: DumpRaw returns the bytes the
// backend keeps for each of the tenant's live records, exactly as stored (a KV
// value, a row rendered as text, a Redis hash), including the key when the digest
// lives there. The suite uses it to prove that a record never holds a call's
// arguments.
type RawDumper interface {
	DumpRaw(ctx context.Context, tenant string) ([][]byte, error)
}

// Run exercises a store implementation fully. newStore is called once per subtest
// (subtests run in parallel); it may share servers between calls but must return an
// independent store (own bucket/schema/prefix) or at least tolerate parallel use
// with the distinct tenants the suite uses.
func Run(t *testing.T, newStore func(t *testing.T, opts Options) Harness) {
	t.Helper()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newStore(t, c.opts)
			if h.Store == nil {
				t.Fatal("newStore returned a Harness without a Store")
			}
			c.run(newEnv(t, h))
		})
	}
}

// check is one subtest of the suite. Checks take the env rather than a
// *testing.T, so that the suite's own tests can run them against broken stores
// and see them fail.
type check struct {
	name string
	opts Options
	run  func(e *env)
}

// checks is the whole suite, in the order Run starts it.
var checks = []check{
	{name: "ClaimFresh", run: checkClaimFresh},
	{name: "ClaimExisting", run: checkClaimExisting},
	{name: "ConcurrentClaims", run: checkConcurrentClaims},
	{name: "ClaimNeverTakesOver", run: checkClaimNeverTakesOver},
	{name: "TenantIsolation", run: checkTenantIsolation},
	{name: "Record", run: checkRecord},
	{name: "OutcomeRoundTrip", run: checkOutcomeRoundTrip},
	{name: "Release", run: checkRelease},
	{name: "MarkIndeterminate", run: checkMarkIndeterminate},
	{name: "Renew", run: checkRenew},
	{name: "FencingAfterTakeOver", run: checkFencingAfterTakeOver},
	{name: "FencingAfterRecord", run: checkFencingAfterRecord},
	{name: "FencingAfterRelease", run: checkFencingAfterRelease},
	{name: "FencingAfterMarkIndeterminate", run: checkFencingAfterMark},
	{name: "TakeOverBeforeExpiry", run: checkTakeOverBeforeExpiry},
	{name: "TakeOverAfterExpiry", run: checkTakeOverAfterExpiry},
	{name: "TakeOverRace", run: checkTakeOverRace},
	{name: "TakeOverStaleSeen", run: checkTakeOverStaleSeen},
	{name: "TakeOverChangedRecord", run: checkTakeOverChanged},
	{name: "TakeOverGone", run: checkTakeOverGone},
	{name: "WithdrawOwnClaim", run: checkWithdrawOwnClaim},
	{name: "WithdrawChanged", run: checkWithdrawChanged},
	{name: "WithdrawRefused", run: checkWithdrawRefused},
	{name: "WaitRecord", run: checkWaitRecord},
	{name: "WaitRelease", run: checkWaitRelease},
	{name: "WaitMarkIndeterminate", run: checkWaitMark},
	{name: "WaitLeaseExpiry", run: checkWaitLeaseExpiry},
	{name: "WaitContext", run: checkWaitContext},
	{name: "WaitAlreadyChanged", run: checkWaitAlreadyChanged},
	{name: "Retention", opts: Options{Retention: shortRetention}, run: checkRetention},
	{name: "Forget", run: checkForget},
	{name: "ResolveComplete", run: checkResolveComplete},
	{name: "ResolveRelease", run: checkResolveRelease},
	{name: "ResolveWrongState", run: checkResolveWrongState},
	{name: "List", run: checkList},
	{name: "Count", run: checkCount},
	{name: "InvalidInput", run: checkInvalidInput},
	{name: "NoArguments", run: checkNoArguments},
	{name: "Outage", run: checkOutage},
}
