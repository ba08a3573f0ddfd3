package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/internal/testenv"
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
	kvstoretest.BenchClaimCycles(b, benchStore(b))
}

// BenchmarkClaimRecordParallel runs claim cycles from 64 goroutines (32 per
// CPU on two CPUs).
func BenchmarkClaimRecordParallel(b *testing.B) {
	kvstoretest.BenchClaimCyclesParallel(b, benchStore(b))
}

// BenchmarkClaimDuplicate measures the claim of a key already completed: the
// refused SET NX that returns the record.
func BenchmarkClaimDuplicate(b *testing.B) {
	kvstoretest.BenchClaimDuplicate(b, benchStore(b))
}
