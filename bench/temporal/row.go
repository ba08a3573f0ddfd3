package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/common/dynamicconfig"
)

// rowConfig is what the flags say.
type rowConfig struct {
	id, dir, synchronous, cpuProfile, pgURL   string
	concurrency, shards, partitions           int
	wfPollers, actPollers, execSize, sqlConns int
	rps                                       int
	duplicates                                float64
	eager, separateVisibility                 bool
}

// result is the row, in the JSON fields of the bench program's Result.
type result struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Durability  string  `json:"durability"`
	Ops         int     `json:"ops"`
	Concurrency int     `json:"concurrency"`
	Duplicates  float64 `json:"duplicates"`
	Seconds     float64 `json:"seconds"`
	PerSec      float64 `json:"per_sec"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	Max         float64 `json:"max_ms"`
	Check       string  `json:"check"`
	CheckOK     bool    `json:"check_ok"`
	Err         string  `json:"error,omitempty"`
	CPUPerOp    float64 `json:"cpu_us_per_op,omitempty"`
}

// dynamic is the server's dynamic configuration for c.
func (c rowConfig) dynamic() dynamicconfig.StaticClient {
	d := dynamicconfig.StaticClient{
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  []dynamicconfig.ConstrainedValue{{Value: c.partitions}},
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): []dynamicconfig.ConstrainedValue{{Value: c.partitions}},
		dynamicconfig.EnableActivityEagerExecution.Key():        []dynamicconfig.ConstrainedValue{{Value: c.eager}},
		dynamicconfig.EnableEagerWorkflowStart.Key():            []dynamicconfig.ConstrainedValue{{Value: c.eager}},
	}
	if c.rps > 0 {
		for _, k := range []dynamicconfig.Key{
			dynamicconfig.FrontendRPS.Key(), dynamicconfig.FrontendMaxNamespaceRPSPerInstance.Key(),
			dynamicconfig.HistoryRPS.Key(), dynamicconfig.MatchingRPS.Key(),
		} {
			d[k] = []dynamicconfig.ConstrainedValue{{Value: c.rps}}
		}
	}
	return d
}

// describe says how the row was configured, for its name.
func (c rowConfig) describe() string {
	rps := "default request limits"
	if c.rps > 0 {
		rps = fmt.Sprintf("request limits %d/s", c.rps)
	}
	return fmt.Sprintf("Temporal v1.32.1 embedded, workflow id = key, reject duplicate; %d shards, %d task queue partitions, %d+%d pollers, %d task slots, eager %t, %s",
		c.shards, c.partitions, c.wfPollers, c.actPollers, c.execSize, c.eager, rps)
}

// runRow measures the row: warm-up, then the measured closed-loop run.
func runRow(ctx context.Context, c rowConfig, p plan) result {
	r := result{ID: c.id, Name: c.describe(), Concurrency: c.concurrency, Duplicates: c.duplicates,
		Durability: fmt.Sprintf("SQLite file, WAL, synchronous=%s, %d connection(s)", c.synchronous, c.sqlConns)}
	switch {
	case c.pgURL != "":
		r.Durability = fmt.Sprintf("PostgreSQL, executions and visibility databases, %d connection(s) each", c.sqlConns)
	case c.separateVisibility:
		r.Durability += ", visibility in a second file"
	}
	fail := func(err error) result { r.Err = err.Error(); return r }
	dir := c.dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "temporal-bench-")
		if err != nil {
			return fail(err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	visPath := ""
	if c.separateVisibility {
		visPath = filepath.Join(dir, "visibility.db")
	}
	srv, err := startServer(serverConfig{
		dbPath: filepath.Join(dir, "temporal.db"), visPath: visPath, pgURL: c.pgURL, namespace: "bench", shards: c.shards,
		synchronous: c.synchronous, sqlConns: c.sqlConns, dynamic: c.dynamic(),
	})
	if err != nil {
		return fail(err)
	}
	defer srv.server.Stop()
	quiet := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	cl, err := client.Dial(client.Options{HostPort: srv.frontend, Namespace: "bench", Logger: quiet})
	if err != nil {
		return fail(fmt.Errorf("connecting to the embedded server: %w", err))
	}
	defer cl.Close()
	eff := &effects{entered: map[string]int{}}
	w := worker.New(cl, taskQueue, worker.Options{
		MaxConcurrentWorkflowTaskPollers:       c.wfPollers,
		MaxConcurrentActivityTaskPollers:       c.actPollers,
		MaxConcurrentWorkflowTaskExecutionSize: c.execSize,
		MaxConcurrentActivityExecutionSize:     c.execSize,
		DisableEagerActivities:                 !c.eager,
	})
	w.RegisterWorkflow(CallWorkflow)
	w.RegisterActivityWithOptions(eff.Effect, activity.RegisterOptions{Name: activityName})
	if err := w.Start(); err != nil {
		return fail(fmt.Errorf("starting the worker: %w", err))
	}
	defer w.Stop()

	call := &caller{c: cl, eagerStart: c.eager}
	if _, err := call.drive(ctx, "warm", p.Warmup, c.concurrency); err != nil {
		return fail(fmt.Errorf("warm-up: %w", err))
	}
	eff.reset()
	call.refused.Store(0)
	stopProfile, err := startProfile(c.cpuProfile)
	if err != nil {
		return fail(err)
	}
	cpu0 := ownCPU()
	o, err := call.drive(ctx, "run", p.Run, c.concurrency)
	cpu := ownCPU() - cpu0
	stopProfile()
	if err != nil {
		return fail(err)
	}
	fill(&r, o, cpu)
	distinct := countDistinct(p.Run)
	effects, twice := int(eff.total.Load()), eff.twice()
	r.CheckOK = o.answered == len(p.Run) && o.wrong == 0 && effects == distinct && twice == 0
	r.Check = fmt.Sprintf("%d of %d calls answered (%d wrong answers); effects %d, distinct keys %d, keys entered twice %d; %d duplicates refused as finished and answered from the first run",
		o.answered, len(p.Run), o.wrong, effects, distinct, twice, call.refused.Load())
	return r
}

// fill sets r's rate, latency percentiles and CPU per call from o.
func fill(r *result, o outcome, cpu time.Duration) {
	r.Ops, r.Seconds = o.answered, o.elapsed.Seconds()
	if o.elapsed > 0 {
		r.PerSec = float64(o.answered) / o.elapsed.Seconds()
	}
	if o.answered > 0 {
		r.CPUPerOp = float64(cpu.Microseconds()) / float64(o.answered)
	}
	slices.Sort(o.lat)
	r.P50, r.P99, r.Max = quantile(o.lat, 0.5), quantile(o.lat, 0.99), quantile(o.lat, 1)
}

// quantile is the nearest-rank q-quantile of sorted d in milliseconds, as the
// bench program computes its rows'.
func quantile(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	i := min(max(int(math.Ceil(q*float64(len(d))))-1, 0), len(d)-1)
	return float64(d[i]) / float64(time.Millisecond)
}

// countDistinct is the number of different keys in a plan.
func countDistinct(keys []int) int {
	seen := map[int]bool{}
	for _, k := range keys {
		seen[k] = true
	}
	return len(seen)
}

// ownCPU is the CPU time (user and system) this process has used.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startProfile starts a CPU profile into path (none when path is empty) and
// returns the function that stops it.
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("CPU profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
