package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// reportInput is everything docs/BENCHMARKS.md is made of.
type reportInput struct {
	machine   machine
	cfg       config
	results   []Result
	goBench   []goBenchmark
	profiles  []profileSummary
	chartPath string
	notes     string
}

// The markers around the hand-written analysis, which regenerating keeps.
const (
	notesStart = "<!-- notes:start (kept when make bench regenerates this file) -->"
	notesEnd   = "<!-- notes:end -->"
)

// keptNotes returns the hand-written part of an earlier report, markers
// excluded, or a placeholder.
func keptNotes(old string) string {
	i := strings.Index(old, notesStart)
	j := strings.Index(old, notesEnd)
	if i < 0 || j < i {
		return "\n_No analysis written yet._\n"
	}
	return old[i+len(notesStart) : j]
}

// bestRiver names the faster of the two River rows, the one "× River" and the
// targets compare with: the comparison is then the hardest on toolexec.
const bestRiver = "river*"

// find returns the measured row with id (bestRiver: the faster River row).
func find(rs []Result, id string) (Result, bool) {
	if id == bestRiver {
		a, okA := find(rs, "river")
		b, okB := find(rs, "river-open")
		switch {
		case okA && okB && b.PerSec > a.PerSec, !okA && okB:
			return b, true
		default:
			return a, okA
		}
	}
	for _, r := range rs {
		if r.ID == id && r.Err == "" && r.PerSec > 0 {
			return r, true
		}
	}
	return Result{}, false
}

// target is one of the targets and what this run measured of it.
type target struct {
	What     string
	Measured string
	Verdict  string // "met", "not met", "not measured"
}

// cpuTarget holds row id's CPU a call in the harness process (the executor
// and the NATS server, without the emitter's) to at most limit µs.
func cpuTarget(rs []Result, id string, limit float64) target {
	t := target{What: fmt.Sprintf("CPU a call, executor and NATS server together, on the %s row: ≤ %.0f µs", id, limit)}
	r, ok := find(rs, id)
	if !ok || r.SelfCPUPerOp <= 0 {
		t.Measured, t.Verdict = "not measured", "not measured"
		return t
	}
	t.Measured = fmt.Sprintf("%s: **%.0f µs** (with emitter bench's: %.0f µs)", id, r.SelfCPUPerOp, r.CPUPerOp)
	if len(r.Rounds) > 1 {
		t.Measured += fmt.Sprintf(", in the median round by rate of %d", len(r.Rounds))
	}
	t.Verdict = verdictOf(r.SelfCPUPerOp <= limit)
	return t
}

// ratioTarget compares the rate of row a with that of row b.
func ratioTarget(rs []Result, what, a, b string, want float64) target {
	t := target{What: what}
	ra, ok1 := find(rs, a)
	rb, ok2 := find(rs, b)
	if !ok1 || !ok2 {
		t.Measured, t.Verdict = "a row is missing", "not measured"
		return t
	}
	ratio := ra.PerSec / rb.PerSec
	t.Measured = fmt.Sprintf("%s / %s = %.0f / %.0f = **%.2f×**", ra.ID, rb.ID, ra.PerSec, rb.PerSec, ratio)
	if lo, hi, n, ok := roundRatios(ra, rb); ok {
		t.Measured += fmt.Sprintf(" (medians of %d rounds; the rounds' own ratios %.2f–%.2f×)", n, lo, hi)
	}
	if ca, cb := ra.CPUPerOp+ra.ServerCPUPerOp, rb.CPUPerOp+rb.ServerCPUPerOp; ra.CPUPerOp > 0 && rb.CPUPerOp > 0 {
		t.Measured += fmt.Sprintf("; CPU per operation, databases included: %.0f against %.0f µs", ca, cb)
	}
	t.Verdict = verdictOf(ratio >= want)
	return t
}

// roundRatios returns the range of the ratios of a's rate to b's, round by
// round, when both rows ran the same number of rounds (more than one).
func roundRatios(a, b Result) (lo, hi float64, n int, ok bool) {
	if len(a.Rounds) < 2 || len(a.Rounds) != len(b.Rounds) {
		return 0, 0, 0, false
	}
	for k := range a.Rounds {
		if a.Rounds[k] <= 0 || b.Rounds[k] <= 0 {
			continue
		}
		x := a.Rounds[k] / b.Rounds[k]
		if n == 0 || x < lo {
			lo = x
		}
		hi = max(hi, x)
		n++
	}
	return lo, hi, len(a.Rounds), n > 0
}

func verdictOf(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// targets judges this run against the issues' targets: issue 21's first (each
// store against the executor's own bound, the hand-rolled loop, CPU a call,
// the peers), then those of issue 6 it left standing.
func targets(rs []Result, gb []goBenchmark) []target {
	ts := []target{
		ratioTarget(rs, "JetStream KV store, lazy fsync: ≥ 0.75× the memory store", "kv-lazy", "mem", 0.75),
		ratioTarget(rs, "PostgreSQL store: ≥ 0.75× the memory store", "pg", "mem", 0.75),
		ratioTarget(rs, "Redis store: ≥ 0.75× the memory store", "redis", "mem", 0.75),
		ratioTarget(rs, "JetStream KV store, lazy fsync: ≥ 0.8× the hand-rolled loop", "kv-lazy", "b", 0.8),
		ratioTarget(rs, "JetStream KV store, fsync always: ≥ 1.0× the hand-rolled loop under the same fsync", "kv-sync", "b-sync", 1.0),
		cpuTarget(rs, "kv-lazy", 200),
		ratioTarget(rs, "JetStream KV store, lazy fsync: ≥ 10× River", "kv-lazy", bestRiver, 10),
		ratioTarget(rs, "JetStream KV store, lazy fsync: ≥ 10× Temporal", "kv-lazy", "temporal", 10),
		ratioTarget(rs, "PostgreSQL store: ≥ 0.8× the raw PostgreSQL claim cycle", "pg", "raw-pg", 0.8),
		ratioTarget(rs, "PostgreSQL store: ≥ 2× River on the same server", "pg", bestRiver, 2),
	}
	kd := target{What: "Key derivation for a five-argument call: ≤ 2 µs and ≤ 10 allocations"}
	if b, ok := findGoBench(gb, "/idemkey", "BenchmarkKeyFiveArguments"); ok {
		kd.Measured = fmt.Sprintf("BenchmarkKeyFiveArguments: %s µs, %.0f allocs/op", trimFloat(b.NsPerOp/1000), b.AllocsPerOp)
		if b.Runs > 1 {
			kd.Measured += fmt.Sprintf(" (the median of %d runs)", b.Runs)
		}
		kd.Verdict = verdictOf(b.NsPerOp <= 2000 && b.AllocsPerOp >= 0 && b.AllocsPerOp <= 10)
	} else {
		kd.Measured, kd.Verdict = "Go benchmarks not run", "not measured"
	}
	lat := target{What: "End-to-end latency at concurrency 1, lazy fsync: p99 ≤ 3 ms"}
	if r, ok := find(rs, "kv-lazy-c1"); ok {
		lat.Measured = fmt.Sprintf("kv-lazy-c1: p50 %s ms, p99 **%s ms**", trimFloat(r.P50), trimFloat(r.P99))
		if len(r.RoundsP99) > 1 {
			lat.Measured += fmt.Sprintf(" (the median round by rate of %d; every round's p99: %s ms)", len(r.RoundsP99), roundsList(r.RoundsP99, "%.3g"))
		}
		lat.Verdict = verdictOf(r.P99 <= 3)
	} else {
		lat.Measured, lat.Verdict = "row missing", "not measured"
	}
	return append(ts, kd, lat, rssTarget(rs))
}

// rssTargetCalls is the length of the run the RSS target speaks of.
const rssTargetCalls = 1000000

// rssTarget judges the RSS run: the RSS after all its calls within 10 % of
// the RSS after a tenth of them, on a run of 1,000,000 calls.
func rssTarget(rs []Result) target {
	t := target{What: "RSS after 1,000,000 calls within 10 % of RSS after 100,000", Verdict: "not measured"}
	r, ok := findRow(rs, "rss")
	switch {
	case !ok:
		t.Measured = "row missing"
		return t
	case r.Err != "" && r.RSS == nil:
		t.Measured = "rss: " + escapeCell(r.Err)
		return t
	}
	first, last, ratio, ok := r.RSS.growth()
	if !ok || last.At.Calls < r.RSS.Calls {
		t.Measured = "rss: the run did not finish"
		if r.Err != "" {
			t.Measured += ": " + escapeCell(r.Err)
		}
		return t
	}
	t.Measured = fmt.Sprintf("rss (median of the %d samples up to each point): %s MiB after %s calls, %s MiB after %s = **%.2f×** (single samples: %s → %s MiB, %.2f×; peak RSS, VmHWM: %s → %s MiB)",
		rssPointSamples, kib(first.MedianKiB), thousands(first.At.Calls), kib(last.MedianKiB), thousands(last.At.Calls), ratio,
		kib(first.At.RSSKiB), kib(last.At.RSSKiB), float64(last.At.RSSKiB)/float64(max(first.At.RSSKiB, 1)), kib(first.At.HWMKiB), kib(last.At.HWMKiB))
	if r.RSS.Calls < rssTargetCalls {
		t.Measured += fmt.Sprintf("; a run of %s calls (-rss-calls), not 1,000,000", thousands(r.RSS.Calls))
		return t
	}
	t.Verdict = verdictOf(ratio >= 0.9 && ratio <= 1.1)
	return t
}

// findRow returns the row with id, measured or not.
func findRow(rs []Result, id string) (Result, bool) {
	for _, r := range rs {
		if r.ID == id {
			return r, true
		}
	}
	return Result{}, false
}

// thousands prints n (not negative) with commas between groups of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// inComparison reports whether r belongs in the main table and the chart:
// the scale-out, memory, cluster and Python rows have tables of their own.
func inComparison(r Result) bool {
	return r.Group != groupScale && r.Group != groupMemory && r.Group != groupCluster && r.Group != groupPython
}

// renderReport writes docs/BENCHMARKS.md.
func renderReport(in reportInput) string {
	var b strings.Builder
	m, c := in.machine, in.cfg
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	w("# Benchmarks\n\n")
	w("Generated by `make bench` on %s (the comparison took %s, after the Go benchmarks).\n", m.Date.Format("2006-01-02 15:04 MST"), m.Elapsed.Round(time.Second))
	w("Everything but the analysis at the end is rewritten by the next run: run it again rather\n")
	w("than editing the figures.\n\n")

	w("## Machine\n\n")
	w("| | |\n|---|---|\n")
	w("| CPUs | %d × %s |\n", m.CPUs, m.CPUModel)
	w("| memory | %s |\n", m.Memory)
	w("| kernel | Linux %s |\n", m.Kernel)
	w("| Go | %s |\n", m.Go)
	w("| nats-server | %s |\n", m.NATSServer)
	w("| PostgreSQL | %s |\n", m.Postgres)
	w("| Redis | %s |\n", m.Redis)
	w("| load average (1, 5, 15 min) | %s before, %s after |\n", m.LoadBefore, m.LoadAfter)
	w("\nEverything ran on this one machine, back to back: the NATS servers (embedded, one per\n")
	w("configuration, on ports from %d with a store directory each), the executor, the clients,\n", c.portBase)
	w("PostgreSQL and Redis share its %d CPUs. A load average well above the CPU count means other\n", m.CPUs)
	w("work was running too, and every figure is lower than on a quiet machine.\n\n")

	w("## Results\n\n")
	w("%d calls per closed-loop run (%d on servers that fsync every write), %d %% duplicate keys,\n",
		c.calls, c.syncCalls, int(c.duplicates*100+0.5))
	w("%d in flight, after %d warm-up calls; latency is from publishing a call (inserting a job)\n", c.concurrency, c.warmup)
	w("to receiving its answer (its completion). × (a) compares with the lazy-fsync work-queue\n")
	w("ceiling, × River with the faster of River's two rows on the same PostgreSQL. The rows a\n")
	w("target compares ran one after the other; *load* is the machine's 1-minute load average\n")
	w("when a row started (above %d, something else was competing for the CPUs).\n", m.CPUs)
	w("*CPU µs/op* is the CPU time (user and system) used during the measured part, per\n")
	w("operation, by the harness process (the NATS server, and the executor or the loop, run in\n")
	w("it) and by emitter bench; \"+ … db\" adds the PostgreSQL or Redis server processes' own.\n")
	w("With %d CPUs shared by all of them, a row that keeps the CPUs busy cannot exceed\n", m.CPUs)
	w("%d s / (CPU per op) operations per second.", m.CPUs)
	if c.rounds > 1 {
		w(" The rows a ratio target\n")
		w("compares ran %d rounds, in two groups run back to back, each group's order reversed\n", c.rounds)
		w("every other round: the hand-rolled loop, toolexec's KV store (with its run at\n")
		w("concurrency 1), the memory, Redis and PostgreSQL stores and the raw PostgreSQL cycle;\n")
		w("then toolexec's KV store and the hand-rolled loop under fsync always. Such a row shows\n")
		w("its median round by rate (rate, latency, load, CPU), its check holds only if every\n")
		w("round's did, and the check column lists every round's rate and p99.")
	}
	w("\n\n")
	a, hasA := find(in.results, "a")
	river, hasRiver := find(in.results, bestRiver)
	w("| configuration | durability | ops/s | p50 ms | p99 ms | CPU µs/op | × (a) | × River | load | check |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range in.results {
		if !inComparison(r) {
			continue
		}
		if r.Err != "" {
			w("| %s | %s | — | — | — | — | — | — | %s | not measured: %s |\n", label(r), r.Durability, r.Load, escapeCell(r.Err))
			continue
		}
		xa, xr := "—", "—"
		if hasA {
			xa = fmt.Sprintf("%.2f", r.PerSec/a.PerSec)
		}
		if hasRiver {
			xr = fmt.Sprintf("%.1f", r.PerSec/river.PerSec)
		}
		p50, p99 := "—", "—"
		if r.P99 > 0 {
			p50, p99 = trimFloat(r.P50), trimFloat(r.P99)
		}
		check := r.Check
		if len(r.Rounds) > 1 {
			check += fmt.Sprintf("; %d rounds, ops/s in the order run: %s", len(r.Rounds), roundsList(r.Rounds, "%.0f"))
			if len(r.RoundsP99) == len(r.Rounds) {
				check += fmt.Sprintf(", p99 ms: %s", roundsList(r.RoundsP99, "%.3g"))
			}
			check += " (the median round by ops/s shown)"
		}
		w("| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s: %s |\n", label(r), r.Durability, r.PerSec, p50, p99, cpuCell(r), xa, xr, r.Load, checkWord(r), escapeCell(check))
	}
	w("\n![Throughput and p99 latency by configuration](%s)\n\n", in.chartPath)
	renderScale(&b, in)
	renderPython(&b, in)
	renderCluster(&b, in)
	renderRSS(&b, in)

	w("## Targets (issues 21 and 6)\n\n")
	w("| target | measured | |\n|---|---|---|\n")
	for _, t := range targets(in.results, in.goBench) {
		w("| %s | %s | %s |\n", t.What, t.Measured, t.Verdict)
	}
	w("\n")

	w("## What each row measures\n\n")
	b.WriteString(strings.TrimLeft(rowsExplained, "\n"))
	w("\n")

	if len(in.goBench) > 0 {
		w("## Go benchmarks\n\n")
		runs := in.goBench[0].Runs
		w("`go test -run '^$' -bench . -benchmem -count %d ./...`, in the same run", runs)
		if runs > 1 {
			w(": each row is the benchmark's median run (by ns/op) of the %d", runs)
		}
		w(".\n\n")
		w("| package | benchmark | ns/op | B/op | allocs/op |\n|---|---|---:|---:|---:|\n")
		for _, g := range in.goBench {
			bop, aop := "—", "—"
			if g.BytesPerOp >= 0 {
				bop = fmt.Sprintf("%.0f", g.BytesPerOp)
			}
			if g.AllocsPerOp >= 0 {
				aop = fmt.Sprintf("%.0f", g.AllocsPerOp)
			}
			w("| %s | %s | %s | %s | %s |\n", strings.TrimPrefix(g.Pkg, "github.com/tesserix/toolexec/"), g.Name, trimFloat(g.NsPerOp), bop, aop)
		}
		w("\n")
	}

	for _, p := range in.profiles {
		if p.Client {
			w("## CPU profile: %s, emitter bench\n\n", label(Result{ID: p.ID}))
			w("The client's process (emitter bench: encoding and publishing calls, waiting for their\n")
			w("PubAcks, decoding answers) during the measured run of `%s`. %s.\n", p.ID, p.Header)
		} else {
			w("## CPU profile: %s\n\n", label(Result{ID: p.ID}))
			w("The executor's process (worker, dispatcher, store client and the embedded NATS server;\n")
			w("emitter bench ran as another process) during the measured run of `%s`. %s.\n", p.ID, p.Header)
		}
		w("The profile is kept at `%s`: `go tool pprof -http=: %s`.\n\n", p.Path, p.Path)
		w("Own (flat) time by area:\n\n| area | seconds | share |\n|---|---:|---:|\n")
		for _, a := range p.Areas {
			w("| %s | %.2f | %.1f %% |\n", a.Name, a.Seconds, a.Percent)
		}
		w("\nTop functions by own time:\n\n| function | flat s | flat %% | cum s | cum %% |\n|---|---:|---:|---:|---:|\n")
		for _, l := range p.Flat {
			w("| `%s` | %.2f | %.1f | %.2f | %.1f |\n", l.Func, l.Flat, l.FlatPC, l.Cum, l.CumPC)
		}
		w("\ntoolexec and nats-server functions by cumulative time (what each costs with everything it calls):\n\n")
		w("| function | cum s | cum %% |\n|---|---:|---:|\n")
		for _, l := range p.Entry {
			w("| `%s` | %.2f | %.1f |\n", l.Func, l.Cum, l.CumPC)
		}
		w("\n")
	}

	w("## Analysis\n\n")
	w("%s%s%s\n", notesStart, in.notes, notesEnd)
	return b.String()
}

// renderScale writes the scale-out table, when the run has its rows.
func renderScale(b *strings.Builder, in reportInput) {
	var rows []Result
	for _, n := range scaleExecutors {
		if r, ok := findRow(in.results, scaleID(n)); ok {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	c := in.cfg
	w("## Scale-out: 1, 2 and 4 executors\n\n")
	w("The executor binary (cmd/executor, JetStream KV store, %d calls at once each), started as\n", c.concurrency)
	w("1, 2 and 4 processes sharing one NATS server (embedded in the benchmark's process, lazy\n")
	w("fsync, a new one with its own store directory for each row) and its one durable consumer;\n")
	w("emitter bench calls book: %d calls, %d %% duplicate keys, %d in flight, after %d warm-up\ncalls. ",
		c.calls, int(c.duplicates*100+0.5), c.concurrency, c.warmup)
	w("The check adds up the executors' own counts of bodies entered (from their /metrics). With\n")
	w("one executor the row differs from (c)'s JetStream KV row in where things run: there the\n")
	w("executor shares the benchmark's process with the server, here it runs in its own.\n\n")
	w("**This machine has %d CPUs, shared by every process of the run** — the NATS server, each\n", in.machine.CPUs)
	w("executor, emitter bench. More executors bring no more CPUs here, so this curve shows what\n")
	w("coordination between executors costs (one consumer shared by more processes, claims on one\n")
	w("store from several holders, more connections for the server), not the capacity more\n")
	w("executors add on machines of their own.\n\n")
	one, hasOne := find(in.results, scaleID(1))
	w("| executors | calls/s | p50 ms | p99 ms | × 1 executor | load | check |\n|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		n := strings.TrimPrefix(r.ID, "scale-")
		if r.Err != "" {
			w("| %s | — | — | — | — | %s | not measured: %s |\n", n, r.Load, escapeCell(r.Err))
			continue
		}
		x := "—"
		if hasOne {
			x = fmt.Sprintf("%.2f", r.PerSec/one.PerSec)
		}
		w("| %s | %.0f | %s | %s | %s | %s | %s: %s |\n", n, r.PerSec, trimFloat(r.P50), trimFloat(r.P99), x, r.Load, checkWord(r), escapeCell(r.Check))
	}
	w("\n")
}

// renderPython writes the table of the Python rows, when the run has them.
func renderPython(b *strings.Builder, in reportInput) {
	var rows []Result
	for _, id := range []string{pythonID, pythonC1ID} {
		if r, ok := findRow(in.results, id); ok {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	c := in.cfg
	w("## From Python: a Python caller, the executor, a Python worker\n\n")
	w("bench/python_row.py, run with the venv's interpreter, in two processes: a caller\n")
	w("(toolexec.Client, one connection) calls an effectful tool (key [flight]) through the\n")
	w("executor binary (cmd/executor, JetStream KV store, a NATS server embedded in the\n")
	w("benchmark's process, lazy fsync), and a worker (toolexec.Worker) serves its body, which\n")
	w("only counts its entries: the executor learned the tool from the worker. %d %% duplicate\n", int(c.duplicates*100+0.5))
	w("keys; %d calls with %d in flight after %d warm-up calls, then %d one at a time after %d.\n",
		c.pythonCalls, c.concurrency, c.warmup, c.latencyCalls, pythonC1Warmup)
	w("Latency is the caller's, from Client.call's start to its return. The check compares each\n")
	w("run's answers with its distinct keys, and the bodies the worker entered, and the\n")
	w("executor's own count, with the distinct keys of both runs. Every process shares the\n")
	w("machine's %d CPUs; the Python caller and worker each run one event loop.\n\n", in.machine.CPUs)
	w("| in flight | calls/s | p50 ms | p99 ms | load | check |\n|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		if r.Err != "" {
			w("| %d | — | — | — | %s | not measured: %s |\n", r.Concurrency, r.Load, escapeCell(r.Err))
			continue
		}
		w("| %d | %.0f | %s | %s | %s | %s: %s |\n", r.Concurrency, r.PerSec, trimFloat(r.P50), trimFloat(r.P99), r.Load, checkWord(r), escapeCell(r.Check))
	}
	w("\n")
}

// renderRSS writes the memory table of the RSS run, when the run has it.
func renderRSS(b *strings.Builder, in reportInput) {
	r, ok := findRow(in.results, "rss")
	if !ok {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	c := in.cfg
	w("## Memory over a long run\n\n")
	if r.RSS == nil {
		w("Not measured: %s\n\n", r.Err)
		return
	}
	run := r.RSS
	w("The executor binary as a process of its own, with its embedded NATS server and the\n")
	w("JetStream KV store:\n\n    %s\n\n", run.Command)
	w("Lazy fsync (every %s): this measures memory, not the disk. emitter bench calls the demo\n", shortDuration(lazySync))
	w("tool %s %s times, in runs of %s calls (each run has a new run id, so new keys),\n", run.Tool, thousands(run.Calls), thousands(run.Chunk))
	w("%d %% duplicate keys, %d in flight. update_profile is Idempotent and keyed by the\n", int(c.duplicates*100+0.5), c.concurrency)
	w("passenger, so the demo airline keeps one profile per key number of a run; book would keep\n")
	w("every booking, and that would be the demo's data growing, not the executor's.\n\n")
	w("Everything the executor keeps on purpose is kept for %s: idempotency records\n", run.Window)
	w("(--retention), answers (--event-max-age), and the message ids JetStream deduplicates by\n")
	w("(the events stream's and the KV bucket's duplicate windows are capped at their age; the\n")
	w("calls stream's, two minutes, has no executor flag, so the benchmark sets it, as `nats\n")
	w("stream edit --dupe-window` would). With the defaults (records 24 h, answers 168 h,\n")
	w("two-minute windows) the embedded server's memory grows with what it was told to keep —\n")
	w("its index holds an entry for every answer kept, each on a subject of its own — which is\n")
	w("data kept on purpose, not a leak. With %s windows that data stops growing once the run\n", run.Window)
	w("has lasted %s (the kept columns below), so that what grows after it grows per call.", run.Window)
	first, hasFirst := run.at(rssFractions[0])
	if window, err := time.ParseDuration(run.Window); err == nil && hasFirst && first.Seconds < window.Seconds() {
		w(" **This run reached its\nreference point (%s calls) after %.0f s, before the windows had filled: its ratio counts\nthe kept data's growth too.**", thousands(first.Calls), first.Seconds)
	}
	w("\n\n")
	w("RSS is VmRSS from /proc/<pid>/status after each emitter run, peak RSS its VmHWM; the Go\n")
	w("figures come from the executor's /metrics. A Go process's RSS follows its garbage\n")
	w("collector (the heap grows to about twice the live data before each collection), so\n")
	w("neighbouring samples differ by several per cent, two of them by up to a third; the peak\n")
	w("does not go down. The target therefore compares, at each point, the median of the %d\n", rssPointSamples)
	w("samples that end there (the last %s calls up to it), not one sample.\n\n", thousands(rssPointSamples*run.Chunk))
	if r.Err != "" {
		w("The run stopped: %s\n\n", escapeCell(r.Err))
	}
	ref := "a tenth"
	if hasFirst {
		ref = thousands(first.Calls)
	}
	firstPoint, _ := run.point(rssFractions[0])
	w("| calls | s | RSS MiB | median of %d MiB | × median at %s | peak RSS MiB | Go heap in use MiB | GC heap goal MiB | goroutines | KV messages kept | events kept | load |\n", rssPointSamples, ref)
	w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	shown := []rssSample{}
	if len(run.Samples) > 0 {
		shown = append(shown, run.Samples[0])
	}
	for _, f := range rssFractions {
		if s, ok := run.at(f); ok && s.Calls != shown[len(shown)-1].Calls {
			shown = append(shown, s)
		}
	}
	for _, s := range shown {
		median, x := "—", "—"
		if s.Calls > 0 {
			p, _ := run.point(float64(s.Calls) / float64(run.Calls))
			median = kib(p.MedianKiB)
			if hasFirst && firstPoint.MedianKiB > 0 {
				x = fmt.Sprintf("%.2f", float64(p.MedianKiB)/float64(firstPoint.MedianKiB))
			}
		}
		w("| %s | %.0f | %s | %s | %s | %s | %s | %s | %.0f | %d | %d | %s |\n", thousands(s.Calls), s.Seconds, kib(s.RSSKiB), median, x, kib(s.HWMKiB),
			mib(s.HeapInuse), mib(s.HeapGoal), s.Goroutines, s.KVRecords, s.Events, s.Load)
	}
	w("\n")
	if slope, lo, hi, n, ok := run.trend(); ok {
		w("From %s calls on, the RSS of the %d samples ranged from %s to %s MiB; a straight line\n", thousands(first.Calls), n, kib(lo), kib(hi))
		w("fitted through them (least squares) rises by %s MiB per 100,000 calls.\n", signedMiB(slope*100000*1024))
	}
	w("Every sample (one after each emitter run) is in `results.json` in the work directory.\n")
	if r.Err == "" {
		w("%s: %s\n", checkWord(r), escapeCell(r.Check))
	}
	w("\n")
}

// roundsList prints the figures of the rounds with format, 0 (a round that
// failed) as "failed".
func roundsList(figures []float64, format string) string {
	parts := make([]string, len(figures))
	for i, x := range figures {
		parts[i] = "failed"
		if x > 0 {
			parts[i] = fmt.Sprintf(format, x)
		}
	}
	return strings.Join(parts, ", ")
}

// signedMiB prints bytes in MiB with its sign, two decimals.
func signedMiB(bytes float64) string { return fmt.Sprintf("%+.2f", bytes/(1<<20)) }

// checkWord is a row's check in one word.
func checkWord(r Result) string {
	if r.CheckOK {
		return "ok"
	}
	return "**FAILED**"
}

// escapeCell keeps text from breaking a Markdown table.
func escapeCell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}

const rowsExplained = `
- **(a) JetStream work queue**: one producer publishes messages the size of a call
  asynchronously (waiting out nats.go's stall instead of dropping messages), four consumers
  share one durable pull consumer and acknowledge each message. No idempotency, no answers, no
  client waiting: the ceiling of the server. Open loop, so no latency.
- **(b) hand-rolled KV loop**: what a Go team would write by hand on JetStream. 64 workers
  share a pull consumer; per call: decode the JSON, hash the key, KV Create, a no-op, KV Update
  with the outcome, an asynchronous publish of the result, and the ack once the result is
  stored. A duplicate (Create refused) reads the record and answers from it without waiting
  for a holder still running. A client keeps 64 calls in flight, as emitter bench does.
- **raw store cycles**: the claim cycle of each backend without toolexec around it, from 64
  goroutines, each cycle a new key: KV Create + Update; PostgreSQL INSERT … ON CONFLICT DO
  UPDATE … WHERE expired RETURNING, then UPDATE (each statement its own transaction); Redis
  SET NX PX, then SET XX PX. The PostgreSQL cycle runs a second time with pg_notify in both
  statements, as pgstore's writes had before schema version 3, to show what notifying costs.
- **group-committed KV cycles** (fsync always): the same KV cycle with writes queued by the
  64 goroutines and published, whatever is queued, as one atomic batch (Nats-Batch-Id, each
  write keeping its Nats-Expected-Last-Subject-Sequence), which a single nats-server commits
  under one fsync; one batch in flight at a time. "Updates" batches the second write only
  (a claim's Create is refused when the key is taken, and one refusal rejects a whole
  batch); "all writes" batches the Creates too, possible here because every key is new.
- **(c) toolexec**: the executor as cmd/executor wires it (embedded NATS server reached over
  TCP, the two streams, the store, the dispatcher serving the demo airline, a worker taking
  64 calls at once), in this program's process so that its CPU can be profiled and its own
  count of bodies entered (dispatch.Stats) read; emitter bench, a separate process, calls the
  demo tool book (effectful, key [flight]). The memory, PostgreSQL and Redis stores run on a
  NATS server with lazy fsync, so that the store is what differs between them; the memory
  store runs once more on a server that syncs every write, the bound of any store there
  (the call and its answer are synced writes of their own). The
  PostgreSQL store group-commits (pgstore's defaults: MaxBatch 64, a batch writer per two
  CPUs): claims and record writes that arrive while others are being written go in one
  transaction; its check says how many writes went together.
- **(d) River**: River v0.51.2 with riverpgxv5 on the same PostgreSQL, in its own schema, a
  no-op worker, ` + "`MaxWorkers: 64`" + `, River's defaults otherwise (FetchCooldown 100 ms); 64
  inserters, each ` + "`Insert`" + ` (one job at a time: batched unique inserts fail on duplicates
  within a batch and deadlock under overlap) with ` + "`UniqueOpts{ByArgs: true}`" + `. "64 in
  flight": each inserter waits for its job's completion event before the next insert, as
  toolexec's callers wait for answers. "inserted without waiting": the inserters do not wait,
  and the run lasts until every job has completed — River's own best case.
- **(d) Temporal**: a Temporal server v1.32.1 (Go SDK v1.44.0) embedded in a process of its
  own (the program in bench/temporal, a module of its own), frontend, history, matching and
  worker services, persisting to a SQLite file in WAL mode with ` + "`synchronous=NORMAL`" + `
  (a commit reaches the WAL file, which is fsynced at checkpoints: what it acknowledged
  survives the process, as with lazy fsync), visibility records in a second file (a
  connection of its own: 126-135 calls/s against 110-121 in one file, 2,000-call probes). One workflow per
  call, its id the key, ` + "`WorkflowIDReusePolicy` REJECT_DUPLICATE" + ` and conflict policy
  USE_EXISTING: a duplicate of a running workflow waits for it, a duplicate of a finished one
  is refused and reads the first run's result. The workflow runs one no-op activity, counted by
  key. Tuned: one task queue partition instead of four (with four, tasks wait in partitions no
  poller is on: about 0.6× the rate), eager workflow start and eager activity dispatch
  enabled, 4 history shards, 8 workflow and 8 activity pollers, 256 task slots each, sticky
  execution on (the SDK's default); shards, pollers and request limits changed nothing
  measurable (the process is CPU-bound, about 12 ms of CPU a call, half of it persistence and
  visibility writes), nor did PostgreSQL persistence (the program's -postgres flag). Its CPU
  µs/op is that process's. 64 callers, each waiting for its answer.
- **check**: every closed-loop row counts bodies entered (tool bodies, no-op bodies, River
  Work calls, Temporal activities) against distinct keys and looks for a key entered twice; a toolexec row passes
  only if emitter bench's count from the answers and the executor's own count agree.
`
