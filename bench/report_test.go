package main

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"
)

const goBenchOutput = `goos: linux
goarch: amd64
pkg: github.com/tesserix/toolexec/idemkey
cpu: AMD EPYC
BenchmarkKeyFiveArguments-2         	  452876	      2512 ns/op	  47.77 MB/s	    1680 B/op	      21 allocs/op
BenchmarkKeyFiveArgumentsParsed-2   	  900000	      1300 ns/op
BenchmarkKeyFiveArguments-2         	  452000	      2900 ns/op	  47.77 MB/s	    1680 B/op	      21 allocs/op
BenchmarkKeyFiveArguments-2         	  452100	      1900 ns/op	  47.77 MB/s	    1680 B/op	      21 allocs/op
PASS
ok  	github.com/tesserix/toolexec/idemkey	3.1s
pkg: github.com/tesserix/toolexec/bus/wire
BenchmarkDecodeCall/structured-2    	   19695	     59658 ns/op	   5.87 MB/s	   11896 B/op	     291 allocs/op
--- SKIP: BenchmarkSomething
`

func TestParseGoBench(t *testing.T) {
	bs, err := parseGoBench(strings.NewReader(goBenchOutput))
	if err != nil {
		t.Fatal(err)
	}
	want := []goBenchmark{
		// Three runs: the median one (2512 ns/op among 1900, 2512, 2900).
		{Pkg: "github.com/tesserix/toolexec/idemkey", Name: "BenchmarkKeyFiveArguments", Iterations: 452876, NsPerOp: 2512, BytesPerOp: 1680, AllocsPerOp: 21, MBPerSec: 47.77, Runs: 3},
		{Pkg: "github.com/tesserix/toolexec/idemkey", Name: "BenchmarkKeyFiveArgumentsParsed", Iterations: 900000, NsPerOp: 1300, BytesPerOp: -1, AllocsPerOp: -1, Runs: 1},
		{Pkg: "github.com/tesserix/toolexec/bus/wire", Name: "BenchmarkDecodeCall/structured", Iterations: 19695, NsPerOp: 59658, BytesPerOp: 11896, AllocsPerOp: 291, MBPerSec: 5.87, Runs: 1},
	}
	if len(bs) != len(want) {
		t.Fatalf("parsed %d benchmarks, want %d: %+v", len(bs), len(want), bs)
	}
	for i := range want {
		if bs[i] != want[i] {
			t.Errorf("benchmark %d = %+v, want %+v", i, bs[i], want[i])
		}
	}
	if _, ok := findGoBench(bs, "/idemkey", "BenchmarkKeyFiveArguments"); !ok {
		t.Error("findGoBench did not find the key derivation benchmark")
	}
}

const pprofOutput = `File: bench
Type: cpu
Duration: 15.02s, Total samples = 21.50s (143.14%)
Showing nodes accounting for 21.50s, 100% of 21.50s total
      flat  flat%   sum%        cum   cum%
     2.50s 11.63% 11.63%      2.50s 11.63%  internal/runtime/syscall/linux.Syscall6
    1500ms  6.98% 18.60%     1.60s  7.44%  runtime.mallocgc
     0.50s  2.33% 20.93%     9.00s 41.86%  github.com/tesserix/toolexec/bus.(*Worker).handle
     0.25s  1.16% 22.09%     0.30s  1.40%  github.com/nats-io/nats%2ego.(*Conn).processMsg
     0.10s  0.47% 22.56%     0.10s  0.47%  time.Now (inline)
         0     0% 22.56%     3.00s 13.95%  github.com/nats-io/nats-server/v2/server.(*client).readLoop
`

func TestParsePprofTop(t *testing.T) {
	lines, header, err := parsePprofTop(pprofOutput)
	if err != nil {
		t.Fatal(err)
	}
	if header != "Duration: 15.02s, Total samples = 21.50s (143.14%)" {
		t.Errorf("header %q", header)
	}
	if len(lines) != 6 {
		t.Fatalf("parsed %d lines, want 6: %+v", len(lines), lines)
	}
	if l := lines[1]; l.Func != "runtime.mallocgc" || l.Flat != 1.5 || l.Cum != 1.6 || l.FlatPC != 6.98 {
		t.Errorf("line 2 = %+v", l)
	}
	if l := lines[4]; l.Func != "time.Now (inline)" {
		t.Errorf("line 5 = %+v", l)
	}
	if l := lines[5]; l.Flat != 0 || l.Cum != 3 {
		t.Errorf("line 6 = %+v", l)
	}
}

func TestArea(t *testing.T) {
	for fn, want := range map[string]string{
		"internal/runtime/syscall/linux.Syscall6":                  "system calls (network, disk, fsync)",
		"syscall.Syscall":                                          "system calls (network, disk, fsync)",
		"runtime.mallocgc":                                         "Go runtime: allocation and GC",
		"internal/runtime/gc/scan.scanSpanPackedAVX512":            "Go runtime: allocation and GC",
		"runtime.memmove":                                          "Go runtime: copying and zeroing memory",
		"runtime.futex":                                            "Go runtime: scheduling, channels, locks",
		"aeshashbody":                                              "Go runtime: maps and hashing",
		"runtime.(*unwinder).resolveInternal":                      "Go runtime: stack growth and unwinding",
		"runtime.scanObjectsSmall":                                 "Go runtime: allocation and GC",
		"runtime.asyncPreempt":                                     "Go runtime: other",
		"github.com/nats-io/nats%2ego.(*Conn).processMsg":          "nats.go client",
		"github.com/nats-io/nats-server/v2/server.(*client).parse": "nats-server (embedded)",
		"github.com/tesserix/toolexec/bus.(*Worker).handle":        "toolexec",
		"encoding/json.(*decodeState).object":                      "encoding/json",
		"time.Now (inline)":                                        "Go standard library (time, context, sync, strings, …)",
		"context.(*cancelCtx).cancel":                              "Go standard library (time, context, sync, strings, …)",
		"github.com/google/uuid.New":                               "other",
	} {
		if got := area(fn); got != want {
			t.Errorf("area(%s) = %q, want %q", fn, got, want)
		}
	}
}

func TestShortenGeneric(t *testing.T) {
	in := `github.com/nats-io/nats-server/v2/server/stree.(*SubjectTree[go.shape.struct { Msgs uint64 "json:\"messages\""; x [2]int }]).Find`
	if got, want := shortenGeneric(in), "github.com/nats-io/nats-server/v2/server/stree.(*SubjectTree[…]).Find"; got != want {
		t.Errorf("shortenGeneric = %q, want %q", got, want)
	}
}

func TestSeconds(t *testing.T) {
	for s, want := range map[string]float64{"0": 0, "1.25s": 1.25, "350ms": 0.35, "20us": 20e-6, "2mins": 120} {
		if got, ok := seconds(s); !ok || abs(got-want) > 1e-12 {
			t.Errorf("seconds(%q) = %v, %v; want %v", s, got, ok, want)
		}
	}
	if _, ok := seconds("fast"); ok {
		t.Error(`seconds("fast") parsed`)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1000; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Microsecond)
	}
	if got := percentile(d, 0.99); got != 0.99 {
		t.Errorf("p99 = %v ms, want 0.99", got)
	}
	if got := percentile(d, 0.5); got != 0.5 {
		t.Errorf("p50 = %v ms, want 0.5", got)
	}
	if got := percentile(d, 1); got != 1 {
		t.Errorf("max = %v ms, want 1", got)
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
}

func TestPlanKeys(t *testing.T) {
	plan, distinct := planKeys(20000, 0.2, 1)
	if len(plan) != 20000 || distinct != 16000 {
		t.Fatalf("planKeys: %d calls, %d distinct", len(plan), distinct)
	}
	seen := map[int]bool{}
	for _, k := range plan {
		if k < 0 || k >= distinct {
			t.Fatalf("key %d out of range", k)
		}
		seen[k] = true
	}
	if len(seen) != distinct {
		t.Errorf("%d keys used, want %d", len(seen), distinct)
	}
}

// sampleResults is a run in which some targets are met and others not.
func sampleResults() []Result {
	return []Result{
		{ID: "a", Group: groupCeiling, PerSec: 50000, CheckOK: true},
		{ID: "b", Group: groupBaseline, PerSec: 10000, P50: 5, P99: 9, CheckOK: true},
		{ID: "raw-kv-sync", Group: groupRawStore, PerSec: 1000, P50: 50, P99: 90, CheckOK: true},
		{ID: "raw-pg", Group: groupRawStore, PerSec: 3000, P50: 20, P99: 40, CheckOK: true},
		{ID: "kv-sync", Group: groupToolexec, PerSec: 900, P50: 60, P99: 100, CheckOK: true},
		{ID: "kv-lazy", Group: groupToolexec, PerSec: 7000, P50: 8, P99: 20, CheckOK: true, CPUPerOp: 250, SelfCPUPerOp: 210},
		{ID: "mem", Group: groupToolexec, PerSec: 9000, P50: 6, P99: 15, CheckOK: true},
		{ID: "b-sync", Group: groupBaseline, PerSec: 900, P50: 60, P99: 100, CheckOK: true},
		{ID: "kv-lazy-c1", Group: groupToolexec, PerSec: 700, P50: 1.2, P99: 2.5, CheckOK: true},
		{ID: "pg", Group: groupToolexec, PerSec: 1000, P50: 50, P99: 120, CheckOK: false, Check: "1 | 2", CPUPerOp: 300, ServerCPUPerOp: 150.4},
		{ID: "redis", Group: groupToolexec, Err: "Redis at x: refused"},
		{ID: "river", Group: groupPeer, PerSec: 250, P50: 250, P99: 500, CheckOK: true},
		{ID: "river-open", Group: groupPeer, PerSec: 600, P50: 100, P99: 300, CheckOK: true},
		{ID: "temporal", Group: groupPeer, PerSec: 500, P50: 120, P99: 400, CheckOK: true, CPUPerOp: 4000},
		{ID: "scale-1", Group: groupScale, PerSec: 2000, P50: 20, P99: 60, CheckOK: true, Check: "one"},
		{ID: "scale-2", Group: groupScale, PerSec: 1500, P50: 30, P99: 90, CheckOK: true, Check: "two"},
		{ID: "scale-4", Group: groupScale, Err: "executor 3: exited"},
		{ID: "rss", Group: groupMemory, PerSec: 1800, CheckOK: true, Check: "all answered", RSS: sampleRSS(1000000, 200*1024, 212*1024)},
	}
}

// sampleRSS is an RSS run of calls calls whose RSS goes from 30 MiB at the
// start to firstKiB after a tenth of the calls and lastKiB after all of them.
func sampleRSS(calls int, firstKiB, lastKiB int64) *rssRun {
	run := &rssRun{Command: "executor --retention 15s", Tool: rssTool, Calls: calls, Chunk: rssChunk(calls), Window: "15s"}
	for done := 0; done <= calls; done += run.Chunk {
		s := rssSample{Calls: done, Seconds: float64(done) / 1000, RSSKiB: 30 * 1024, HWMKiB: 30 * 1024, Load: "1.5"}
		if done > 0 {
			// From firstKiB at a tenth to lastKiB at the end, in a straight line.
			s.RSSKiB = firstKiB + (lastKiB-firstKiB)*int64(done-calls/10)/int64(calls-calls/10)
			s.HWMKiB = s.RSSKiB + 1024
		}
		run.Samples = append(run.Samples, s)
	}
	return run
}

func TestTargets(t *testing.T) {
	gb := []goBenchmark{{Pkg: "github.com/tesserix/toolexec/idemkey", Name: "BenchmarkKeyFiveArguments", NsPerOp: 1800, AllocsPerOp: 12}}
	got := map[string]string{}
	for _, tg := range targets(sampleResults(), gb) {
		got[tg.What] = tg.Verdict
	}
	for what, want := range map[string]string{
		"JetStream KV store, lazy fsync: ≥ 0.75× the memory store":                           "met",          // 0.78
		"PostgreSQL store: ≥ 0.75× the memory store":                                         "**not met**",  // 0.11
		"Redis store: ≥ 0.75× the memory store":                                              "not measured", // the row failed
		"JetStream KV store, lazy fsync: ≥ 0.8× the hand-rolled loop":                        "**not met**",  // 0.7
		"JetStream KV store, fsync always: ≥ 1.0× the hand-rolled loop under the same fsync": "met",          // 1.0
		"CPU a call, executor and NATS server together, on the kv-lazy row: ≤ 200 µs":        "**not met**",  // 210
		"JetStream KV store, lazy fsync: ≥ 10× River":                                        "met",          // 11.7
		"JetStream KV store, lazy fsync: ≥ 10× Temporal":                                     "met",          // 14
		"PostgreSQL store: ≥ 0.8× the raw PostgreSQL claim cycle":                            "**not met**",  // 0.33
		"PostgreSQL store: ≥ 2× River on the same server":                                    "**not met**",  // 1.67
		"Key derivation for a five-argument call: ≤ 2 µs and ≤ 10 allocations":               "**not met**",  // 12 allocs
		"End-to-end latency at concurrency 1, lazy fsync: p99 ≤ 3 ms":                        "met",
		"RSS after 1,000,000 calls within 10 % of RSS after 100,000":                         "met", // 1.06
	} {
		if got[what] != want {
			t.Errorf("%s: %q, want %q", what, got[what], want)
		}
	}
}

func TestRenderReport(t *testing.T) {
	doc := renderReport(reportInput{
		machine: machine{Date: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), CPUs: 2, Elapsed: 5 * time.Minute},
		cfg:     config{calls: 20000, syncCalls: 5000, duplicates: 0.2, concurrency: 64, warmup: 500, portBase: 14222},
		results: sampleResults(), chartPath: "benchmarks.svg", notes: "\nmy analysis\n",
	})
	for _, want := range []string{
		"| (c) toolexec, JetStream KV, fsync lazy |  | 7000 | 8 | 20 | 250 | 0.14 | 11.7 |  | ok:  |",
		"| (c) toolexec, PostgreSQL store |  | 1000 | 50 | 120 | 300 + 150 db | 0.02 | 1.7 |  | **FAILED**: 1 \\| 2 |",
		"| (c) toolexec, Redis store |  | — | — | — | — | — | — |  | not measured: Redis at x: refused |",
		"| (a) JetStream work queue, fsync lazy |  | 50000 | — | — | — | 1.00 | 83.3 |  | ok:  |",
		"| (d) Temporal workflows, one activity, 64 in flight |  | 500 | 120 | 400 | 4000 | 0.01 | 0.8 |  | ok:  |",
		"| JetStream KV store, lazy fsync: ≥ 10× Temporal | kv-lazy / temporal = 7000 / 500 = **14.00×**; CPU per operation, databases included: 250 against 4000 µs | met |",
		"![Throughput and p99 latency by configuration](benchmarks.svg)",
		notesStart + "\nmy analysis\n" + notesEnd,
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The analysis survives the next run.
	if got := keptNotes(doc); got != "\nmy analysis\n" {
		t.Errorf("keptNotes = %q", got)
	}
	if got := keptNotes("no markers"); !strings.Contains(got, "No analysis") {
		t.Errorf("keptNotes without markers = %q", got)
	}
}

func TestRenderChartIsWellFormedSVG(t *testing.T) {
	svg := renderChart(sampleResults())
	dec := xml.NewDecoder(strings.NewReader(svg))
	rects := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			rects++
		}
	}
	// Background, 13 measured rows (one has no p99: a ceiling, open loop) and 5
	// legend swatches.
	if want := 1 + 13 + 12 + 5; rects != want {
		t.Errorf("%d rects, want %d", rects, want)
	}
	if !strings.Contains(svg, "(d) River unique jobs, inserted without waiting") || !strings.Contains(svg, "(d) Temporal workflows") || strings.Contains(svg, "Redis store") {
		t.Error("the chart should show measured rows only")
	}
}

func TestLogAxis(t *testing.T) {
	a := newLogAxis([]float64{150, 42000}, 300)
	if a.lo != 100 || a.hi != 100000 {
		t.Fatalf("axis %v..%v, want 100..100000", a.lo, a.hi)
	}
	if a.x(100) != 0 || a.x(100000) != 300 || a.x(1000) != 100 {
		t.Errorf("x(100), x(1000), x(100000) = %v %v %v", a.x(100), a.x(1000), a.x(100000))
	}
	if len(a.ticks()) != 4 {
		t.Errorf("ticks %v", a.ticks())
	}
}

func TestSortForDisplay(t *testing.T) {
	rs := []Result{{ID: "redis"}, {ID: "a"}, {ID: "unknown"}, {ID: "kv-lazy-c1"}, {ID: "b"}, {ID: "kv-lazy"}}
	sortForDisplay(rs)
	var got []string
	for _, r := range rs {
		got = append(got, r.ID)
	}
	if want := "a b kv-lazy kv-lazy-c1 redis unknown"; strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
}

func TestTemporalTarget(t *testing.T) {
	const what = "JetStream KV store, lazy fsync: ≥ 10× Temporal"
	verdict := func(rs []Result) target {
		for _, tg := range targets(rs, nil) {
			if tg.What == what {
				return tg
			}
		}
		t.Fatalf("no target %q", what)
		return target{}
	}
	kv := Result{ID: "kv-lazy", Group: groupToolexec, PerSec: 3000, CPUPerOp: 300}
	slow := Result{ID: "temporal", Group: groupPeer, PerSec: 400, CPUPerOp: 9000}
	if got := verdict([]Result{kv, slow}); got.Verdict != "**not met**" || !strings.Contains(got.Measured, "kv-lazy / temporal = 3000 / 400 = **7.50×**") {
		t.Errorf("7.5×: %+v", got)
	}
	slow.PerSec = 250
	if got := verdict([]Result{kv, slow}); got.Verdict != "met" {
		t.Errorf("12×: %+v", got)
	}
	slow.Err, slow.PerSec = "build failed", 0
	if got := verdict([]Result{kv, slow}); got.Verdict != "not measured" {
		t.Errorf("Temporal row failed: %+v", got)
	}
}

func TestSortTemporalAfterRiver(t *testing.T) {
	rs := []Result{{ID: "temporal"}, {ID: "river-open"}, {ID: "rss"}, {ID: "river"}, {ID: "kv-lazy"}}
	sortForDisplay(rs)
	var got []string
	for _, r := range rs {
		got = append(got, r.ID)
	}
	if want := "kv-lazy river river-open temporal rss"; strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
}

func TestBestRiver(t *testing.T) {
	r, ok := find(sampleResults(), bestRiver)
	if !ok || r.ID != "river-open" {
		t.Errorf("best River row = %v, %v; want river-open", r.ID, ok)
	}
	only := []Result{{ID: "river", PerSec: 10}}
	if r, ok := find(only, bestRiver); !ok || r.ID != "river" {
		t.Errorf("with one River row: %v, %v", r.ID, ok)
	}
}

// sawtoothRSS is a run of 1,000,000 calls whose RSS alternates between low
// (every sample but each fifth) and high, with the reference sample (after
// 100,000 calls) low and the last one high.
func sawtoothRSS(low, high int64) *rssRun {
	run := sampleRSS(1000000, low, low)
	for i := range run.Samples {
		if c := run.Samples[i].Calls; c > 0 && c%(5*run.Chunk) == 0 {
			run.Samples[i].RSSKiB = high
		}
	}
	run.Samples[20].RSSKiB = low // after 100,000 calls
	return run
}

// lowLast sets the last sample of run to the first point's RSS.
func lowLast(run *rssRun) *rssRun {
	first, _ := run.at(rssFractions[0])
	run.Samples[len(run.Samples)-1].RSSKiB = first.RSSKiB
	return run
}

func TestRSSTarget(t *testing.T) {
	rss := func(r *rssRun, err string) []Result {
		return []Result{{ID: "rss", Group: groupMemory, RSS: r, Err: err}}
	}
	unfinished := sampleRSS(1000000, 200*1024, 210*1024)
	unfinished.Samples = unfinished.Samples[:50]
	for _, tc := range []struct {
		name     string
		rs       []Result
		verdict  string
		measured string
	}{
		{"no row", nil, "not measured", "row missing"},
		{"failed at the start", rss(nil, "executor exited"), "not measured", "rss: executor exited"},
		{"unfinished", rss(unfinished, "after 250000 calls: emitter bench: timeout"), "not measured", "the run did not finish: after 250000 calls"},
		{"met", rss(sampleRSS(1000000, 200*1024, 219*1024), ""), "met", "200 MiB after 100,000 calls, 219 MiB after 1,000,000 = **1.10×** (single samples: 200 → 219 MiB, 1.09×; peak RSS, VmHWM: 201 → 220 MiB)"},
		{"grown", rss(sampleRSS(1000000, 200*1024, 240*1024), ""), "**not met**", "= **1.20×**"},
		{"shrunk", rss(sampleRSS(1000000, 200*1024, 170*1024), ""), "**not met**", "= **0.85×**"},
		// A flat sawtooth whose last single sample is a third above the first:
		// the medians see no growth.
		{"sawtooth", rss(sawtoothRSS(200*1024, 260*1024), ""), "met", "200 MiB after 100,000 calls, 200 MiB after 1,000,000 = **1.00×** (single samples: 200 → 260 MiB, 1.30×"},
		// Steady growth hidden by a low last sample: the medians see it.
		{"growth under a low sample", rss(lowLast(sampleRSS(1000000, 200*1024, 240*1024)), ""), "**not met**", "= **1.20×** (single samples: 200 → 200 MiB, 1.00×"},
		{"short run", rss(sampleRSS(20000, 100*1024, 101*1024), ""), "not measured", "100 MiB after 2,000 calls, 101 MiB after 20,000 = **1.01×** (single samples: 100 → 101 MiB, 1.01×; peak RSS, VmHWM: 101 → 102 MiB); a run of 20,000 calls (-rss-calls), not 1,000,000"},
	} {
		got := rssTarget(tc.rs)
		if got.Verdict != tc.verdict || !strings.Contains(got.Measured, tc.measured) {
			t.Errorf("%s: %q, %q; want %q containing %q", tc.name, got.Verdict, got.Measured, tc.verdict, tc.measured)
		}
	}
}

func TestRSSChunkAndSamples(t *testing.T) {
	for calls, want := range map[int]int{1000000: 5000, 100000: 5000, 20000: 1000, 10: 1} {
		if got := rssChunk(calls); got != want {
			t.Errorf("rssChunk(%d) = %d, want %d", calls, got, want)
		}
	}
	run := &rssRun{Calls: 1000, Samples: []rssSample{{Calls: 0}, {Calls: 90}, {Calls: 120}, {Calls: 1000}}}
	if s, ok := run.at(0.1); !ok || s.Calls != 120 {
		t.Errorf("at(0.1) = %v, %v; want the sample after 120 calls", s.Calls, ok)
	}
	if s, ok := run.at(1); !ok || s.Calls != 1000 {
		t.Errorf("at(1) = %v, %v", s.Calls, ok)
	}
	if _, ok := (&rssRun{Calls: 1000, Samples: []rssSample{{Calls: 0}}}).at(0.1); ok {
		t.Error("at(0.1) found a sample in a run that made no calls")
	}
}

func TestRSSTrend(t *testing.T) {
	run := &rssRun{Calls: 100, Samples: []rssSample{
		{Calls: 0, RSSKiB: 10}, {Calls: 5, RSSKiB: 500}, // before the reference point: left out
		{Calls: 10, RSSKiB: 100}, {Calls: 40, RSSKiB: 130}, {Calls: 70, RSSKiB: 90}, {Calls: 100, RSSKiB: 120},
	}}
	slope, lo, hi, n, ok := run.trend()
	// x: 10 40 70 100 (mean 55), y: 100 130 90 120 (mean 110):
	// slope = (-45*-10 + -15*20 + 15*-20 + 45*10) / (2*45² + 2*15²) = 300/4500.
	if !ok || n != 4 || lo != 90 || hi != 130 || abs(slope-300.0/4500) > 1e-12 {
		t.Errorf("trend = %v, %d, %d, %d, %v", slope, lo, hi, n, ok)
	}
	run.Samples = run.Samples[:3]
	if _, _, _, _, ok := run.trend(); ok {
		t.Error("a trend through one sample")
	}
	if got := signedMiB(-1.5 * (1 << 20)); got != "-1.50" {
		t.Errorf("signedMiB = %q", got)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 20000: "20,000", 1000000: "1,000,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestRenderScaleAndRSS(t *testing.T) {
	doc := renderReport(reportInput{
		machine: machine{Date: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), CPUs: 2},
		cfg:     config{calls: 20000, duplicates: 0.2, concurrency: 64, warmup: 500},
		results: sampleResults(), chartPath: "benchmarks.svg",
	})
	for _, want := range []string{
		"## Scale-out: 1, 2 and 4 executors",
		"**This machine has 2 CPUs, shared by every process of the run**",
		"| 1 | 2000 | 20 | 60 | 1.00 |  | ok: one |",
		"| 2 | 1500 | 30 | 90 | 0.75 |  | ok: two |",
		"| 4 | — | — | — | — |  | not measured: executor 3: exited |",
		"## Memory over a long run",
		"    executor --retention 15s\n",
		"update_profile 1,000,000 times, in runs of 5,000 calls",
		"| calls | s | RSS MiB | median of 5 MiB | × median at 100,000 |",
		"| 0 | 0 | 30 | — | — | 30 |",
		"| 100,000 | 100 | 200 | 200 | 1.00 | 201 |",
		"| 1,000,000 | 1000 | 212 | 212 | 1.06 | 213 |",
		"the median of the 5\nsamples that end there (the last 25,000 calls up to it)",
		"ok: all answered",
		"From 100,000 calls on, the RSS of the 181 samples ranged from 200 to 212 MiB; a straight line\nfitted through them (least squares) rises by +1.33 MiB per 100,000 calls.",
		"| RSS after 1,000,000 calls within 10 % of RSS after 100,000 | rss (median of the 5 samples up to each point): 200 MiB after 100,000 calls, 212 MiB after 1,000,000 = **1.06×**",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The scale-out and memory rows stay out of the comparison table.
	if strings.Contains(doc, "| toolexec, 2 executor processes |") || strings.Contains(doc, "| toolexec executor process, memory |") {
		t.Error("the comparison table shows scale-out or memory rows")
	}
	if strings.Contains(doc, "before the windows had filled") {
		t.Error("a run whose reference point came after the windows filled is flagged")
	}
	// A short run reaches its reference point before the windows fill.
	short := sampleResults()
	short[len(short)-1].RSS = sampleRSS(20000, 100*1024, 101*1024)
	doc = renderReport(reportInput{machine: machine{CPUs: 2}, cfg: config{duplicates: 0.2, concurrency: 64}, results: short})
	if !strings.Contains(doc, "reference point (2,000 calls) after 2 s, before the windows had filled") {
		t.Error("a run whose reference point came before the windows filled is not flagged")
	}
	// Without the rows, neither section.
	doc = renderReport(reportInput{machine: machine{CPUs: 2}, results: sampleResults()[:11]})
	if strings.Contains(doc, "## Scale-out") || strings.Contains(doc, "## Memory over") {
		t.Error("sections for rows the run did not have")
	}
}

func TestParseProcStatus(t *testing.T) {
	const status = "Name:\texecutor\nVmPeak:\t 1500000 kB\nVmHWM:\t  216012 kB\nVmRSS:\t  183100 kB\nThreads:\t11\n"
	rss, hwm, err := parseProcStatus(status)
	if err != nil || rss != 183100 || hwm != 216012 {
		t.Errorf("parseProcStatus = %d, %d, %v; want 183100, 216012", rss, hwm, err)
	}
	if _, _, err := parseProcStatus("Name:\texecutor\nVmRSS:\t 1 kB\n"); err == nil {
		t.Error("a status without VmHWM parsed")
	}
	if _, _, err := parseProcStatus("VmRSS:\t 1 MB\nVmHWM:\t 1 kB\n"); err == nil {
		t.Error("a size in MB parsed")
	}
}

func TestParsePromText(t *testing.T) {
	const text = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 47
go_memstats_next_gc_bytes 6.59515874e+08
toolexec_bodies_entered_total{tool="book"} 80000
toolexec_bodies_entered_total{tool="update_profile"} 3
toolexec_bodies_entered_totally 5
not a sample
`
	m, err := parsePromText(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if m["go_goroutines"] != 47 || m["go_memstats_next_gc_bytes"] != 659515874 {
		t.Errorf("samples %v", m)
	}
	if got := m.bodiesEntered(); got != 80003 {
		t.Errorf("bodiesEntered = %d, want 80003", got)
	}
}

func TestExecutorEnv(t *testing.T) {
	got := executorEnv([]string{"PATH=/bin", "TOOLEXEC_STORE=redis", "NATS_URL=nats://x", "HOME=/root", "NATS_URLS=y"})
	if want := "PATH=/bin HOME=/root NATS_URLS=y"; strings.Join(got, " ") != want {
		t.Errorf("executorEnv = %v, want %s", got, want)
	}
}

// TestRatioTargetCPU: a ratio target quotes both rows' CPU per operation,
// databases included, when both were measured, and nothing about CPU otherwise.
func TestRatioTargetCPU(t *testing.T) {
	rs := []Result{
		{ID: "pg", PerSec: 5000, CPUPerOp: 200, ServerCPUPerOp: 90},
		{ID: "raw-pg", PerSec: 8000, CPUPerOp: 50, ServerCPUPerOp: 130},
		{ID: "redis", PerSec: 8000},
		{ID: "raw-redis", PerSec: 50000, CPUPerOp: 20},
	}
	got := ratioTarget(rs, "pg", "pg", "raw-pg", 0.8)
	if want := "pg / raw-pg = 5000 / 8000 = **0.62×**; CPU per operation, databases included: 290 against 180 µs"; got.Measured != want || got.Verdict != "**not met**" {
		t.Errorf("got %q, %q; want %q", got.Measured, got.Verdict, want)
	}
	if got := ratioTarget(rs, "redis", "redis", "raw-redis", 0.5); strings.Contains(got.Measured, "CPU") {
		t.Errorf("a row without CPU figures: %q", got.Measured)
	}
}

func TestRenderCluster(t *testing.T) {
	rs := append(sampleResults(),
		Result{ID: clusterLoopLazy, Group: groupCluster, Name: "hand-rolled loop", Durability: "NATS fsync lazy, 3 nodes, 3 replicas", PerSec: 4000, P50: 12, P99: 50, CheckOK: true, Check: "loop ok"},
		Result{ID: clusterKVLazy, Group: groupCluster, Name: "toolexec, JetStream KV store", PerSec: 3000, P50: 20, P99: 80, CPUPerOp: 380, CheckOK: true, Check: "kv ok"},
		Result{ID: clusterKVSync, Group: groupCluster, Name: "toolexec, JetStream KV store", Err: "no quorum"},
		Result{ID: clusterFailover, Group: groupCluster, Name: "failover", P50: 60, Max: 5035.7, CheckOK: true, Check: "5 kills",
			Failover: &failoverRun{
				Kills: []failoverKill{
					{Node: "n3", AlsoHeld: []string{"TOOLEXEC_EVENTS", "executor's connection"}, PauseMs: 42.65, CompletedMs: 43.4, KVLeaderMs: 39.2, LedAgainMs: 41, CatchUpMs: 720,
						Outcomes: map[string]int{"completed": 1895, "deduplicated": 477}, Warnings: map[string]int{"a": 1, "b": 3}},
					{Node: "n1", PauseMs: 5035.7, CompletedMs: 5037, KVLeaderMs: 66.6, ConsumerLeaderMs: 58.5, LedAgainMs: 66.6, CatchUpMs: 1966,
						Outcomes: map[string]int{"completed": 3182, "indeterminate": 5}},
					{Node: "n2", Err: "no answer within 1m0s of killing n2"},
				},
				Outcomes: map[string]int{"completed": 5077, "deduplicated": 477, "indeterminate": 5, "no answer": 2},
				Errors:   map[string]string{"no answer": "publishing call c1: context deadline exceeded"},
			}},
		Result{ID: clusterCrash, Group: groupCluster, Name: "failover after a crash", P50: 5210, Max: 7020, CheckOK: true, Check: "5 crashes",
			Failover: &failoverRun{
				Kills:    []failoverKill{{Node: "n2", PauseMs: 5210, CompletedMs: 5230, KVLeaderMs: 5100, LedAgainMs: 5150, CatchUpMs: 1500, Outcomes: map[string]int{"completed": 900}}},
				Outcomes: map[string]int{"completed": 900},
			}},
	)
	sortForDisplay(rs)
	doc := renderReport(reportInput{
		machine: machine{CPUs: 2},
		cfg:     config{calls: 20000, syncCalls: 5000, duplicates: 0.2, concurrency: 64, warmup: 500},
		results: rs,
	})
	// The graceful stops come first, then the crashes.
	if g, c := strings.Index(doc, "### Failover pause\n"), strings.Index(doc, "### Failover pause after a crash"); g < 0 || c < g {
		t.Errorf("failover sections at %d (stops) and %d (crashes)", g, c)
	}
	for _, want := range []string{
		"## Production shape: three-node cluster",
		"**Pause over 1 kills: p50 5210 ms, max 7020 ms.**",
		"| 1 | n2 |  | 5210 | 5230 | 5100 | — | 5150 | 1.5 | 900 completed |  |",
		"ok: 5 crashes",
		"| hand-rolled loop | NATS fsync lazy, 3 nodes, 3 replicas | 4000 | 12 | 50 | — | 0.40 | — |  | ok: loop ok |",
		"| toolexec, JetStream KV store |  | 3000 | 20 | 80 | 380 | 0.43 | 0.75 |  | ok: kv ok |",
		"| toolexec, JetStream KV store |  | — | — | — | — | — | — |  | not measured: no quorum |",
		"### Failover pause",
		"**Pause over 2 kills: p50 60 ms, max 5036 ms.**",
		"| 1 | n3 | TOOLEXEC_EVENTS, executor's connection | 42.6 | 43.4 | 39.2 | — | 41 | 0.7 | 1895 completed, 477 deduplicated | 3 × b; 1 × a |",
		"| 2 | n1 |  | 5036 | 5037 | 66.6 | 58.5 | 66.6 | 2.0 | 3182 completed, 5 indeterminate |  |",
		"| 3 | n2 |  — no answer within 1m0s of killing n2 | — | — | — | — | — | 0.0 |  |  |",
		"5077 completed, 477 deduplicated, 5 indeterminate, 2 no answer; the first without an answer: no answer: `publishing call c1: context deadline exceeded`.",
		"ok: 5 kills",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The cluster's rows stay out of the comparison table.
	results := doc[strings.Index(doc, "## Results"):strings.Index(doc, "## Production shape")]
	if strings.Contains(results, "3 nodes") || strings.Contains(results, "kv ok") {
		t.Error("the comparison table shows cluster rows")
	}
	// Without the rows, no section.
	if doc := renderReport(reportInput{machine: machine{CPUs: 2}, results: sampleResults()}); strings.Contains(doc, "## Production shape") {
		t.Error("a cluster section for a run without cluster rows")
	}
}

func TestRenderPython(t *testing.T) {
	rows := append(sampleResults(),
		Result{ID: pythonID, Group: groupPython, Name: "Python caller and worker, 64 in flight", Concurrency: 64, PerSec: 1480, P50: 44, P99: 71, CheckOK: true, Check: "all answered", Load: "1.5"},
		Result{ID: pythonC1ID, Group: groupPython, Name: "Python caller and worker, 1 in flight", Concurrency: 1, Err: "the worker exited", Load: "1.2"},
	)
	doc := renderReport(reportInput{
		machine: machine{CPUs: 2},
		cfg:     config{duplicates: 0.2, concurrency: 64, warmup: 500, pythonCalls: 5000, latencyCalls: 2000},
		results: rows,
	})
	for _, want := range []string{
		"## From Python: a Python caller, the executor, a Python worker",
		"5000 calls with 64 in flight after 500 warm-up calls, then 2000 one at a time after 20.",
		"| 64 | 1480 | 44 | 71 | 1.5 | ok: all answered |",
		"| 1 | — | — | — | 1.2 | not measured: the worker exited |",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(doc, "| Python caller and worker, 64 in flight |") {
		t.Error("the comparison table shows a Python row")
	}
	if doc := renderReport(reportInput{machine: machine{CPUs: 2}, results: sampleResults()}); strings.Contains(doc, "## From Python") {
		t.Error("a section for rows the run did not have")
	}
}
