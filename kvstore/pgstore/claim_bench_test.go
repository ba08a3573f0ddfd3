package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/toolexec/internal/testenv"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/kvstoretest"
	"github.com/tesserix/toolexec/kvstore/pgstore"
)

// benchPoolConns is the size of the benchmarks' connection pool.
const benchPoolConns = 32

// benchStore returns a store in a schema of its own on the test database
// (TEST_POSTGRES_URL), dropped when the benchmark ends.
func benchStore(b *testing.B) *pgstore.Store {
	b.Helper()
	url := testenv.PostgresURL(b)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = benchPoolConns
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	schema := "pgstore_b_" + hex.EncodeToString(r[:])
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`); err != nil {
			b.Errorf("dropping %s: %v", schema, err)
		}
		pool.Close()
	})
	s, err := pgstore.New(ctx, pool, pgstore.Config{Schema: schema, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	if err := s.EnsureSchema(ctx); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkClaimRecord measures one claim cycle at a time: two statements,
// each committed (synchronous_commit as the server has it).
func BenchmarkClaimRecord(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := kvstoretest.ClaimCycle(ctx, s, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimRecordParallel runs claim cycles from 64 goroutines (32 per
// CPU on two CPUs) over a pool of 32 connections.
func BenchmarkClaimRecordParallel(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := kvstoretest.ClaimCycle(ctx, s, "bench"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkClaimDuplicate measures the claim of a key already completed: the
// statement that finds the key held, and the read of the record.
func BenchmarkClaimDuplicate(b *testing.B) {
	s := benchStore(b)
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
