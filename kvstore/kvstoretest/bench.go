package kvstoretest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
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
		Tenant: tenant, Key: fmt.Sprintf("%064x", n), Holder: "bench-worker", Lease: 15 * time.Second,
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

// BenchClaimCycles measures ClaimCycle on s, one at a time.
func BenchClaimCycles(b *testing.B, s kvstore.Store) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := ClaimCycle(ctx, s, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchClaimCyclesParallel measures ClaimCycle on s from 32 goroutines per CPU
// (64 on two CPUs), as an executor with 64 calls in flight does.
func BenchClaimCyclesParallel(b *testing.B, s kvstore.Store) {
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := ClaimCycle(ctx, s, "bench"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchClaimDuplicate measures the claim of a key already completed on s: what
// every duplicate call costs the store.
func BenchClaimDuplicate(b *testing.B, s kvstore.Store) {
	ctx := context.Background()
	req := FreshClaim("bench")
	res, err := s.Claim(ctx, req)
	if err != nil || !res.Claimed {
		b.Fatalf("Claim: %v", err)
	}
	if err := s.Record(ctx, res.Lease, "K7Q2ZD"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := s.Claim(ctx, req)
		if err != nil || res.Claimed || res.Record.State != kvstore.StateCompleted {
			b.Fatalf("Claim of a completed key: %v, %+v", err, res)
		}
	}
}
