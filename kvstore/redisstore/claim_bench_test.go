package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/internal/testenv"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/kvstoretest"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

// benchStore returns a store under a prefix of its own on the test Redis
// (TEST_REDIS_URL), with a pool of 64 connections; every key under the prefix is
// removed when the benchmark ends.
func benchStore(b *testing.B) *redisstore.Store {
	b.Helper()
	opt, err := redis.ParseURL(testenv.RedisURL(b))
	if err != nil {
		b.Fatal(err)
	}
	opt.PoolSize = 64
	c := redis.NewClient(opt)
	var r [6]byte
	_, _ = rand.Read(r[:])
	prefix := "toolexec-bench-" + hex.EncodeToString(r[:])
	s, err := redisstore.New(c, redisstore.Config{Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := c.Unlink(ctx, iter.Val()).Err(); err != nil {
				b.Errorf("cleaning up %s: %v", prefix, err)
				break
			}
		}
		if err := iter.Err(); err != nil {
			b.Errorf("cleaning up %s: %v", prefix, err)
		}
		_ = c.Close()
	})
	return s
}

// BenchmarkClaimRecord measures one claim cycle at a time.
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
// CPU on two CPUs).
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
// refused SET NX that returns the record.
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
