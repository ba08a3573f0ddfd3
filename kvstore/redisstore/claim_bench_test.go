package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/internal/testenv"
	"github.com/tesserix/toolexec/kvstore/kvstoretest"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

// benchStore returns a store under a prefix of its own on the test Redis
// (TEST_REDIS_URL), with a pool of 64 connections; every key under the prefix is
// removed when the benchmark ends. It returns the store's client too.
func benchStore(b *testing.B) (*redisstore.Store, *redis.Client) {
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
	return s, c
}

// commandStats reads INFO commandstats: how many times Redis ran each command,
// counting those that scripts call.
func commandStats(ctx context.Context, c *redis.Client) (map[string]int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	calls := map[string]int64{}
	for line := range strings.Lines(info) {
		// cmdstat_<name>:calls=<n>,usec=...
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("commandstats line %q: %w", line, err)
		}
		calls[name] = v
	}
	return calls, nil
}

// reportCommands reads INFO commandstats now and, when the returned function is
// called at the end of the benchmark, reports the commands Redis ran per
// operation (metric rediscmds/op) and logs them by name. Redis counts every
// client's commands: the figures are exact only on a Redis the benchmark has to
// itself (TEST_REDIS_URL pointing at a private server).
func reportCommands(b *testing.B, c *redis.Client) func() {
	b.Helper()
	before, err := commandStats(context.Background(), c)
	if err != nil {
		b.Fatalf("INFO commandstats: %v", err)
	}
	return func() {
		after, err := commandStats(context.Background(), c)
		if err != nil {
			b.Fatalf("INFO commandstats: %v", err)
		}
		var (
			total float64
			parts []string
		)
		for name, n := range after {
			d := n - before[name]
			if name == "info" || d == 0 {
				continue
			}
			per := float64(d) / float64(b.N)
			total += per
			parts = append(parts, fmt.Sprintf("%s %.2f", name, per))
		}
		slices.Sort(parts)
		b.ReportMetric(total, "rediscmds/op")
		b.Logf("Redis commands per op over %d ops: %s", b.N, strings.Join(parts, ", "))
	}
}

// BenchmarkClaimRecord measures one claim cycle at a time.
// It also reports the Redis commands one cycle costs (see reportCommands).
func BenchmarkClaimRecord(b *testing.B) {
	s, c := benchStore(b)
	defer reportCommands(b, c)()
	kvstoretest.BenchClaimCycles(b, s)
}

// BenchmarkClaimRecordParallel runs claim cycles from 64 goroutines (32 per
// CPU on two CPUs).
func BenchmarkClaimRecordParallel(b *testing.B) {
	s, _ := benchStore(b)
	kvstoretest.BenchClaimCyclesParallel(b, s)
}

// BenchmarkClaimDuplicate measures the claim of a key already completed: the
// refused claim that returns the record. It also reports the Redis commands
// one refused claim costs.
func BenchmarkClaimDuplicate(b *testing.B) {
	s, c := benchStore(b)
	defer reportCommands(b, c)()
	kvstoretest.BenchClaimDuplicate(b, s)
}
