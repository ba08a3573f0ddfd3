package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
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
	kvstoretest.BenchClaimCycles(b, benchStore(b))
}

// BenchmarkClaimRecordParallel runs claim cycles from 64 goroutines (32 per
// CPU on two CPUs) over a pool of 32 connections.
func BenchmarkClaimRecordParallel(b *testing.B) {
	kvstoretest.BenchClaimCyclesParallel(b, benchStore(b))
}

// BenchmarkClaimDuplicate measures the claim of a key already completed: the
// statement that finds the key held, and the read of the record.
func BenchmarkClaimDuplicate(b *testing.B) {
	kvstoretest.BenchClaimDuplicate(b, benchStore(b))
}
