// Command bench is `make bench`: it measures, back to back on one machine,
// the raw JetStream work-queue ceiling, a hand-rolled JetStream KV loop, the
// raw claim cycle of each store, toolexec with each store (driven by emitter
// bench against an executor wired as cmd/executor wires it), River's unique
// jobs on the same PostgreSQL and Temporal workflows (an embedded server on a
// SQLite file, run by the program in ./temporal, a module of its own),
// toolexec's KV store and the hand-rolled loop on a three-node cluster with the
// failover pause when the KV stream's leader stops or crashes, then the executor
// binary's scale-out with 1, 2 and 4 processes, a Python caller and a Python
// worker through it (python_row.py), and its memory over a long run, and writes
// docs/BENCHMARKS.md with a table, the targets, a chart, the Go
// benchmarks and a CPU profile summary.
//
// It lives in a module of its own so that toolexec does not depend on River.
// Its NATS servers listen on a port range of their own (from -port, default
// 14222) with store directories under -work: it never touches a NATS server
// already running on the machine.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// config is what the flags say.
type config struct {
	out, chart, work, emitter, executor, goBench string
	portBase                                     int
	pgURL, redisURL                              string
	pgConns                                      int

	calls, syncCalls, latencyCalls, warmup, concurrency int
	duplicates                                          float64
	ceiling, ceilingSync                                int
	kvLazy, kvSync, rawPG, rawRedis                     int
	rawCap                                              time.Duration
	riverJobs, temporalCalls                            int
	rssCalls, rounds                                    int
	only                                                string
	profile                                             string // toolexec rows to profile besides kv-lazy
	waitLoad                                            float64
	waitMax                                             time.Duration
	// The Python rows: the venv's interpreter, python_row.py, and the calls
	// of the run with -concurrency in flight.
	python, pythonScript string
	pythonCalls          int
}

// Groups of rows, in the order the table shows them.
const (
	groupCeiling  = "(a) ceiling"
	groupBaseline = "(b) hand-rolled"
	groupRawStore = "raw store cycle"
	groupToolexec = "(c) toolexec"
	groupPeer     = "(d) peer"
	// Rows with a table of their own, neither in the comparison nor the chart.
	groupScale   = "scale-out"
	groupMemory  = "memory"
	groupCluster = "three-node cluster"
	groupPython  = "python"
)

// harness runs the benchmarks and keeps what they measured.
type harness struct {
	cfg      config
	port     int
	results  []Result
	profiles []profileRun
	storeTmp string
	dirs     map[string]int // store directories handed out, by configuration
	// round is the round of the step running (0 or 1: the first); only the
	// first round's rows are profiled.
	round int
	// temporalBin is the Temporal row's program, once built.
	temporalBin string
}

func (h *harness) nextPort() int { h.port++; return h.port - 1 }

// storeDir is a new NATS store directory for one configuration: each round of
// a configuration starts from an empty store.
func (h *harness) storeDir(name string) string {
	if h.dirs == nil {
		h.dirs = map[string]int{}
	}
	h.dirs[name]++
	if n := h.dirs[name]; n > 1 {
		name += "-" + strconv.Itoa(n)
	}
	return filepath.Join(h.storeTmp, name)
}

func (h *harness) profilePath(id string) string {
	return filepath.Join(h.cfg.work, "cpu-"+id+".pprof")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	var c config
	flag.StringVar(&c.out, "out", "../docs/BENCHMARKS.md", "report to write")
	flag.StringVar(&c.chart, "chart", "../docs/benchmarks.svg", "chart to write (SVG)")
	flag.StringVar(&c.work, "work", "../bin/bench", "directory for profiles and raw results")
	flag.StringVar(&c.emitter, "emitter", "../bin/bench/emitter", "the emitter binary (make bench builds it)")
	flag.StringVar(&c.executor, "executor", "../bin/bench/executor", "the executor binary, for the scale-out and RSS rows (make bench builds it)")
	flag.StringVar(&c.goBench, "gobench", "", "output of go test -bench to include (optional)")
	flag.IntVar(&c.portBase, "port", 14222, "first port of the range the NATS servers listen on")
	flag.StringVar(&c.pgURL, "postgres", envOr("TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "PostgreSQL URL")
	flag.StringVar(&c.redisURL, "redis", envOr("TEST_REDIS_URL", "redis://127.0.0.1:6379/0"), "Redis URL")
	flag.IntVar(&c.pgConns, "pg-conns", 32, "PostgreSQL pool size (raw cycle, toolexec and River alike)")
	flag.IntVar(&c.calls, "calls", 20000, "calls (jobs) per toolexec, hand-rolled and River run")
	flag.IntVar(&c.syncCalls, "sync-calls", 5000, "calls per run on a server that syncs every write")
	flag.IntVar(&c.latencyCalls, "latency-calls", 2000, "calls of the run at concurrency 1")
	flag.IntVar(&c.warmup, "warmup", 500, "warm-up calls before each closed-loop run")
	flag.IntVar(&c.concurrency, "concurrency", 64, "calls in flight, workers, goroutines")
	flag.Float64Var(&c.duplicates, "duplicates", 0.2, "share of calls repeating another call's key")
	flag.IntVar(&c.ceiling, "ceiling", 100000, "messages of the work-queue ceiling, lazy fsync")
	flag.IntVar(&c.ceilingSync, "ceiling-sync", 10000, "messages of the work-queue ceiling, fsync always")
	flag.IntVar(&c.kvLazy, "kv-lazy", 30000, "raw KV cycles, lazy fsync")
	flag.IntVar(&c.kvSync, "kv-sync", 6000, "raw KV cycles, fsync always")
	flag.IntVar(&c.rawPG, "raw-pg", 20000, "raw PostgreSQL cycles")
	flag.IntVar(&c.rawRedis, "raw-redis", 50000, "raw Redis cycles")
	flag.DurationVar(&c.rawCap, "raw-cap", 20*time.Second, "time cap of each raw store run")
	flag.IntVar(&c.riverJobs, "river-jobs", 20000, "River jobs")
	flag.IntVar(&c.temporalCalls, "temporal-calls", 20000, "Temporal calls (workflows started or refused as duplicates), as many as River's jobs by default")
	flag.IntVar(&c.rssCalls, "rss-calls", 1000000, "calls of the RSS run (the target compares the RSS after all of them with that after a tenth)")
	flag.Float64Var(&c.waitLoad, "wait-load", 1, "first wait (up to -wait-max) until the 1-minute load average is at most this (what ran before, the Go benchmarks included, has settled); 0: do not wait")
	flag.DurationVar(&c.waitMax, "wait-max", 5*time.Minute, "longest wait for -wait-load")
	flag.IntVar(&c.rounds, "rounds", 5, "rounds of the rows the ratio targets compare (the hand-rolled loop, the memory store and each toolexec store, the raw PostgreSQL cycle; the KV store and the loop under fsync always) and of the run at concurrency 1; the table shows each row's median round")
	flag.StringVar(&c.profile, "profile", "", "comma-separated toolexec row ids (mem, kv-sync, pg, redis, …) whose executor and emitter to profile too, as kv-lazy always is, and temporal (its program's process); the profiles are written to -work")
	flag.StringVar(&c.python, "python", "../bin/venv/bin/python", "the Python interpreter of the Python rows, with the toolexec package installed (make bench makes the venv)")
	flag.StringVar(&c.pythonScript, "python-script", "python_row.py", "the Python rows' program")
	flag.IntVar(&c.pythonCalls, "python-calls", 10000, "calls of the Python row with -concurrency in flight (its run at concurrency 1 makes -latency-calls)")
	flag.StringVar(&c.only, "only", "", "comma-separated row ids to run (default all; the report is then not written)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// step is one measurement of the sequence.
type step struct {
	ids []string // the rows it produces
	fn  func(ctx context.Context, h *harness) []Result
	// round numbers the later rounds of a pair a target compares (from 2);
	// 0 for every other step.
	round int
}

func one(f func(ctx context.Context, h *harness) Result) func(ctx context.Context, h *harness) []Result {
	return func(ctx context.Context, h *harness) []Result { return []Result{f(ctx, h)} }
}

// sequence is every measurement, in the order they run: the rows a target
// compares run next to each other, so that a machine whose load changes
// during the run (a shared one) skews a comparison as little as it can.
func sequence(c config) []step {
	tx := func(cfg toolexecConfig) func(ctx context.Context, h *harness) []Result {
		return func(ctx context.Context, h *harness) []Result { return h.runToolexec(ctx, cfg) }
	}
	steps := []step{
		{ids: []string{"a"}, fn: one(func(ctx context.Context, h *harness) Result { return h.runCeiling(ctx, "a", false, c.ceiling) })},
		// The first round of the lazy group (see roundGroups).
		{ids: []string{"b"}, fn: one(func(ctx context.Context, h *harness) Result { return h.runHandRolled(ctx, "b", false, false) })},
		{ids: []string{"kv-lazy", "kv-lazy-c1"}, fn: tx(toolexecConfig{id: "kv-lazy", name: "JetStream KV store", store: "jetstream", profile: true, latencyRun: true})},
		{ids: []string{"mem"}, fn: tx(toolexecConfig{id: "mem", name: "memory store", store: "memory"})},
		{ids: []string{"redis"}, fn: tx(toolexecConfig{id: "redis", name: "Redis store", store: "redis"})},
		{ids: []string{"pg"}, fn: tx(toolexecConfig{id: "pg", name: "PostgreSQL store", store: "postgres"})},
		{ids: []string{"raw-pg"}, fn: one(func(ctx context.Context, h *harness) Result { return h.runPGCycles(ctx, "raw-pg", false) })},
		// The first round of the sync group.
		{ids: []string{"kv-sync"}, fn: func(ctx context.Context, h *harness) []Result {
			return withCalls(h, c.syncCalls, func() []Result {
				return h.runToolexec(ctx, toolexecConfig{id: "kv-sync", name: "JetStream KV store", store: "jetstream", syncAlways: true})
			})
		}},
		{ids: []string{"b-sync"}, fn: one(func(ctx context.Context, h *harness) Result {
			return withCalls(h, c.syncCalls, func() Result { return h.runHandRolled(ctx, "b-sync", true, false) })
		})},
		{ids: []string{"mem-sync"}, fn: func(ctx context.Context, h *harness) []Result {
			return withCalls(h, c.syncCalls, func() []Result {
				return h.runToolexec(ctx, toolexecConfig{id: "mem-sync", name: "memory store", store: "memory", syncAlways: true})
			})
		}},
		{ids: []string{"a-sync"}, fn: one(func(ctx context.Context, h *harness) Result { return h.runCeiling(ctx, "a-sync", true, c.ceilingSync) })},
		{ids: []string{"raw-kv-lazy"}, fn: one(func(ctx context.Context, h *harness) Result {
			return h.runKVCycles(ctx, "raw-kv-lazy", false, c.kvLazy)
		})},
		{ids: []string{"raw-kv-sync"}, fn: one(func(ctx context.Context, h *harness) Result { return h.runKVCycles(ctx, "raw-kv-sync", true, c.kvSync) })},
		{ids: []string{"raw-kv-sync-gu"}, fn: one(func(ctx context.Context, h *harness) Result {
			return h.runKVCyclesGrouped(ctx, "raw-kv-sync-gu", false, c.kvSync)
		})},
		{ids: []string{"raw-kv-sync-g"}, fn: one(func(ctx context.Context, h *harness) Result {
			return h.runKVCyclesGrouped(ctx, "raw-kv-sync-g", true, c.kvSync)
		})},
		{ids: []string{"raw-pg-notify"}, fn: one(func(ctx context.Context, h *harness) Result { return h.runPGCycles(ctx, "raw-pg-notify", true) })},
		{ids: []string{"river"}, fn: one(func(ctx context.Context, h *harness) Result { return h.runRiver(ctx, "river", false) })},
		{ids: []string{"river-open"}, fn: one(func(ctx context.Context, h *harness) Result { return h.runRiver(ctx, "river-open", true) })},
		{ids: []string{"temporal"}, fn: one(func(ctx context.Context, h *harness) Result { return h.runTemporal(ctx, "temporal") })},
		{ids: []string{"raw-redis"}, fn: one(func(ctx context.Context, h *harness) Result { return h.runRedisCycles(ctx) })},
	}
	// The later rounds of the rows the ratio targets compare, group by group,
	// each group's order reversed every other round; the run at concurrency 1,
	// whose p99 a target reads, goes with toolexec's KV store.
	for round := 2; round <= c.rounds; round++ {
		for _, g := range roundGroups {
			group := make([]step, len(g))
			for i, id := range g {
				group[i] = stepOf(steps, id)
			}
			if round%2 == 0 {
				slices.Reverse(group)
			}
			for _, s := range group {
				s.round = round
				steps = append(steps, s)
			}
		}
	}
	steps = append(steps, clusterSteps(c)...)
	for _, n := range scaleExecutors {
		steps = append(steps, step{ids: []string{scaleID(n)}, fn: one(func(ctx context.Context, h *harness) Result { return h.runScale(ctx, n) })})
	}
	steps = append(steps, step{ids: []string{pythonID, pythonC1ID}, fn: func(ctx context.Context, h *harness) []Result { return h.runPython(ctx) }})
	return append(steps, step{ids: []string{"rss"}, fn: one(func(ctx context.Context, h *harness) Result { return h.runRSS(ctx) })})
}

// roundGroups are the rows the ratio targets compare, by the group whose
// rounds run back to back: the lazy-fsync rows (each store against the memory
// store, the KV store against the hand-rolled loop, the PostgreSQL store
// against its raw cycle) and the sync-always pair.
var roundGroups = [][]string{
	{"b", "kv-lazy", "mem", "redis", "pg", "raw-pg"},
	{"kv-sync", "b-sync"},
}

// stepOf returns the step that produces row id.
func stepOf(steps []step, id string) step {
	for _, s := range steps {
		if slices.Contains(s.ids, id) {
			return s
		}
	}
	panic("no step produces row " + id)
}

// withCalls runs f with the call count set to n.
func withCalls[T any](h *harness, n int, f func() T) T {
	saved := h.cfg.calls
	h.cfg.calls = n
	defer func() { h.cfg.calls = saved }()
	return f()
}

func run(ctx context.Context, c config) error {
	if _, err := os.Stat(c.emitter); err != nil {
		return fmt.Errorf("the emitter binary: %w (make bench builds it)", err)
	}
	abs, err := filepath.Abs(c.emitter)
	if err != nil {
		return err
	}
	c.emitter = abs
	if abs, err := filepath.Abs(c.executor); err == nil {
		c.executor = abs // its absence fails the rows that need it
	}
	if err := os.MkdirAll(c.work, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "toolexec-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	h := &harness{cfg: c, port: c.portBase, storeTmp: tmp}

	if c.waitLoad > 0 {
		waitForLoad(ctx, c.waitLoad, c.waitMax)
	}
	var only []string
	if c.only != "" {
		only = strings.Split(c.only, ",")
	}
	m := describeMachine(ctx, c)
	began := time.Now()
	extra := map[string][]Result{} // the later rounds, by row id
	for _, s := range sequence(c) {
		if only != nil && !slices.ContainsFunc(s.ids, func(id string) bool { return slices.Contains(only, id) }) {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t0 := time.Now()
		load := strings.Fields(loadAverage())[0]
		round := ""
		if s.round > 0 {
			round = fmt.Sprintf(", round %d of %d", s.round, c.rounds)
		}
		fmt.Fprintf(os.Stderr, "==> %s%s (load %s) ...\n", strings.Join(s.ids, ", "), round, load)
		h.round = s.round
		for _, r := range s.fn(ctx, h) {
			r.Load = load
			if s.round > 0 {
				extra[r.ID] = append(extra[r.ID], r)
			} else {
				h.results = append(h.results, r)
			}
			fmt.Fprintf(os.Stderr, "    %-12s %10.0f /s  p50 %7.2fms  p99 %7.2fms  CPU %s µs/op  %s%s\n", r.ID, r.PerSec, r.P50, r.P99, cpuCell(r), r.Check, errSuffix(r))
		}
		fmt.Fprintf(os.Stderr, "    (%.1fs)\n", time.Since(t0).Seconds())
	}
	m.Elapsed = time.Since(began)
	m.LoadAfter = loadAverage()
	mergeRounds(h.results, extra)

	raw, _ := json.MarshalIndent(h.results, "", "  ")
	if err := os.WriteFile(filepath.Join(c.work, "results.json"), raw, 0o644); err != nil {
		return err
	}
	if only != nil {
		fmt.Fprintln(os.Stderr, "-only given: the report is not written")
		return nil
	}
	var goBench []goBenchmark
	if c.goBench != "" {
		if goBench, err = parseGoBenchFile(c.goBench); err != nil {
			return err
		}
	}
	var profs []profileSummary
	for _, p := range h.profiles {
		s, err := summarizeProfile(ctx, p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "profile %s: %v\n", p.path, err)
			continue
		}
		// Shown relative to the repository (the report's parent directory).
		s.Path = relPath(filepath.Dir(filepath.Dir(c.out)), p.path)
		profs = append(profs, s)
	}
	sortForDisplay(h.results)
	svg := renderChart(h.results)
	if err := os.MkdirAll(filepath.Dir(c.chart), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(c.chart, []byte(svg), 0o644); err != nil {
		return err
	}
	old, _ := os.ReadFile(c.out)
	doc := renderReport(reportInput{
		machine: m, cfg: c, results: h.results, goBench: goBench, profiles: profs,
		chartPath: relPath(filepath.Dir(c.out), c.chart), notes: keptNotes(string(old)),
	})
	if err := os.WriteFile(c.out, []byte(doc), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s and %s in %s\n", c.out, c.chart, m.Elapsed.Round(time.Second))
	return nil
}

func errSuffix(r Result) string {
	if r.Err == "" {
		return ""
	}
	return "  ERROR: " + r.Err
}

// relPath is target relative to dir, or target itself when that fails.
func relPath(dir, target string) string {
	if rel, err := filepath.Rel(dir, target); err == nil {
		return filepath.ToSlash(rel)
	}
	return target
}

// waitForLoad waits until the 1-minute load average is at most limit, or max
// has passed: on a shared machine, measuring while others compile and test
// measures them.
func waitForLoad(ctx context.Context, limit float64, max time.Duration) {
	deadline := time.Now().Add(max)
	for {
		f := strings.Fields(loadAverage())
		var l float64
		if len(f) > 0 {
			fmt.Sscan(f[0], &l)
		}
		if l <= limit {
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "load average still %.2f after %v: measuring anyway\n", l, max)
			return
		}
		fmt.Fprintf(os.Stderr, "load average %.2f > %.2f: waiting\n", l, limit)
		select {
		case <-ctx.Done():
			return
		case <-time.After(15 * time.Second):
		}
	}
}
