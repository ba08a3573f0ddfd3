package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
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

// serverStats reads INFO commandstats and cpu: how many times Redis ran each
// command (counting those that scripts call), and the CPU time its process has
// used, in seconds.
func serverStats(ctx context.Context, c *redis.Client) (map[string]int64, float64, error) {
	info, err := c.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return nil, 0, err
	}
	calls := map[string]int64{}
	var cpu float64
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, 0, fmt.Errorf("INFO line %q: %w", line, err)
			}
			cpu += f
			continue
		}
		// cmdstat_<name>:calls=<n>,usec=...
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("INFO line %q: %w", line, err)
		}
		calls[name] = v
	}
	return calls, cpu, nil
}

// processCPU is the CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCommands reads Redis's statistics now and, when the returned function
// is called at the end of the benchmark, reports per operation the commands
// Redis ran (rediscmds/op, and by name in the log), the CPU time Redis used
// (rediscpu-µs/op) and the CPU time this process used (cpu-µs/op). CPU time,
// unlike ns/op, barely moves when other work shares the machine. Redis counts
// every client's work: its figures are exact only on a Redis the benchmark has
// to itself (TEST_REDIS_URL pointing at a private server).
func reportCommands(b *testing.B, c *redis.Client) func() {
	b.Helper()
	before, cpu0, err := serverStats(context.Background(), c)
	if err != nil {
		b.Fatalf("INFO: %v", err)
	}
	self0 := processCPU(b)
	return func() {
		self := processCPU(b) - self0
		after, cpu, err := serverStats(context.Background(), c)
		if err != nil {
			b.Fatalf("INFO: %v", err)
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
		b.ReportMetric((cpu-cpu0)*1e6/float64(b.N), "rediscpu-µs/op")
		b.ReportMetric(float64(self.Microseconds())/float64(b.N), "cpu-µs/op")
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
// CPU on two CPUs). It also reports the Redis commands one cycle costs.
// It also reports how many script runs a pipeline carried, and what share of
// the runs went in pipelines.
func BenchmarkClaimRecordParallel(b *testing.B) {
	s, c := benchStore(b)
	defer reportCommands(b, c)()
	defer reportPipelines(b, s)()
	kvstoretest.BenchClaimCyclesParallel(b, s)
}

// reportPipelines reads the store's pipeline counts now and, when the returned
// function is called at the end of the benchmark, reports the script runs a
// pipeline carried (runs/pipeline) and the share of the benchmark's runs (two
// a cycle) that went in pipelines (piped-%).
func reportPipelines(b *testing.B, s *redisstore.Store) func() {
	before := s.PipelineStats()
	return func() {
		st := s.PipelineStats()
		pipes, runs := st.Pipelines-before.Pipelines, st.Runs-before.Runs
		b.ReportMetric(float64(runs)/float64(max(pipes, 1)), "runs/pipeline")
		b.ReportMetric(100*float64(runs)/float64(2*b.N), "piped-%")
	}
}

// BenchmarkClaimDuplicate measures the claim of a key already completed: the
// refused claim that returns the record. It also reports the Redis commands
// one refused claim costs.
func BenchmarkClaimDuplicate(b *testing.B) {
	s, c := benchStore(b)
	defer reportCommands(b, c)()
	kvstoretest.BenchClaimDuplicate(b, s)
}
