package memstore_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/kvstoretest"
	"github.com/tesserix/toolexec/kvstore/memstore"
)

// rotatingStore hands out a store and replaces it with a fresh one every
// rotateEvery cycles, so that a benchmark measures the claim cycle of a store
// holding at most that many records, whatever b.N is (a store that only grows
// would make the figure depend on how long the benchmark ran; see
// BenchmarkClaimRecordHolding100k for a large store).
type rotatingStore struct {
	cur atomic.Pointer[memstore.Store]
	n   atomic.Int64
}

const rotateEvery = 8192

func newRotatingStore() *rotatingStore {
	r := &rotatingStore{}
	r.cur.Store(memstore.New(memstore.Config{}))
	return r
}

// next returns the store for the next cycle.
func (r *rotatingStore) next() *memstore.Store {
	if r.n.Add(1)%rotateEvery == 0 {
		r.cur.Store(memstore.New(memstore.Config{})) // the old one has no goroutines to stop
	}
	return r.cur.Load()
}

// BenchmarkClaimRecord measures one claim cycle (Claim of a new key, then Record)
// at a time, on a store holding fewer than 8192 records.
func BenchmarkClaimRecord(b *testing.B) {
	r := newRotatingStore()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := kvstoretest.ClaimCycle(ctx, r.next(), "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimRecordParallel runs claim cycles from 64 goroutines (32 per
// CPU on two CPUs), as an executor with 64 calls in flight does, on a store
// holding fewer than 8192 records.
func BenchmarkClaimRecordParallel(b *testing.B) {
	r := newRotatingStore()
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := kvstoretest.ClaimCycle(ctx, r.next(), "bench"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkClaimRecordHolding100k measures the claim cycle of a store that
// already holds 100,000 live records (a day's retention of a busy executor
// holds many more). Expiry is incremental, so the figure should be close to
// BenchmarkClaimRecord's.
func BenchmarkClaimRecordHolding100k(b *testing.B) {
	s := memstore.New(memstore.Config{})
	defer s.Close()
	ctx := context.Background()
	for range 100000 {
		if err := kvstoretest.ClaimCycle(ctx, s, "bench"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := kvstoretest.ClaimCycle(ctx, s, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimDuplicate measures the claim of a key already completed: the
// store answers with the record, as for every duplicate call.
func BenchmarkClaimDuplicate(b *testing.B) {
	s := memstore.New(memstore.Config{})
	defer s.Close()
	ctx := context.Background()
	req := kvstoretest.FreshClaim("bench")
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
