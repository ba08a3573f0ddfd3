package kvstoretest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tesserix/toolexec/kvstore"
)

// benchSeq numbers the keys FreshClaim hands out.
var benchSeq atomic.Int64

// FreshClaim returns a claim request for a key of tenant that no earlier call of
// FreshClaim in this process returned: for benchmarks of a store's claim cycle.
func FreshClaim(tenant string) kvstore.ClaimRequest {
	n := benchSeq.Add(1)
	return kvstore.ClaimRequest{
		Tenant: tenant, Digest: fmt.Sprintf("%064x", n), Holder: "bench-worker", Lease: 15 * time.Second,
		Tool: "book", RunID: "run_1", CallID: fmt.Sprintf("call-%d", n),
	}
}

// ClaimCycle does with s what the dispatcher does for a call whose key is new:
// claims a fresh key of tenant, then records an outcome. Benchmarks of every
// backend measure it, so that their figures compare.
func ClaimCycle(ctx context.Context, s kvstore.Store, tenant string) error {
	res, err := s.Claim(ctx, FreshClaim(tenant))
	if err != nil {
		return fmt.Errorf("Claim: %w", err)
	}
	if !res.Claimed {
		return fmt.Errorf("Claim of a new key: not claimed, record %+v", res.Record)
	}
	if err := s.Record(ctx, res.Lease, "K7Q2ZD"); err != nil {
		return fmt.Errorf("Record: %w", err)
	}
	return nil
}
