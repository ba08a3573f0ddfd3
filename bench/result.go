package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// Result is one measured configuration: a row of the table.
type Result struct {
	// ID names the row for the targets ("a", "b", "kv-lazy", "river", ...).
	ID string `json:"id"`
	// Group is the row's part of the comparison: (a) ceiling, (b) hand-rolled,
	// raw store cycle, (c) toolexec, (d) peer; scale-out and memory rows have
	// tables of their own.
	Group string `json:"group"`
	Name  string `json:"name"`
	// Durability says how writes reach the disk: NATS fsync, synchronous_commit,
	// Redis persistence.
	Durability  string  `json:"durability"`
	Ops         int     `json:"ops"` // calls, jobs, messages or cycles measured
	Concurrency int     `json:"concurrency"`
	Duplicates  float64 `json:"duplicates"`
	Seconds     float64 `json:"seconds"`
	PerSec      float64 `json:"per_sec"`
	// Latency percentiles in milliseconds; zero when the row measures none
	// (open-loop rows).
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
	// Check is the row's correctness check, in words; CheckOK whether it held.
	Check   string `json:"check"`
	CheckOK bool   `json:"check_ok"`
	// Err is set when the row could not be measured.
	Err string `json:"error,omitempty"`
	// Load is the machine's 1-minute load average when the row started.
	Load string `json:"load"`
	// RSS is the RSS run's configuration and samples (row "rss" only).
	RSS *rssRun `json:"rss,omitempty"`
	// Failover is the failover measurement's kills and calls (row
	// cluster-failover only).
	Failover *failoverRun `json:"failover,omitempty"`
	// Rounds is the rate of every round of a row measured more than once
	// (-rounds), in the order they ran (0 for a round that failed); the other
	// fields are the median round's.
	Rounds []float64 `json:"rounds,omitempty"`
	// RoundsP99 is every round's p99 latency, in the same order.
	RoundsP99 []float64 `json:"rounds_p99_ms,omitempty"`
	// CPUPerOp is the CPU time, in microseconds per operation, that the
	// harness process (the embedded NATS server and whatever runs in it) and
	// the emitter used during the measured part; ServerCPUPerOp is the same for
	// the PostgreSQL and Redis servers. Zero where not measured.
	CPUPerOp       float64 `json:"cpu_us_per_op,omitempty"`
	ServerCPUPerOp float64 `json:"server_cpu_us_per_op,omitempty"`
	// SelfCPUPerOp is the harness process's part of CPUPerOp alone: for a
	// toolexec row, the executor and the NATS server together, without the
	// emitter's.
	SelfCPUPerOp float64 `json:"self_cpu_us_per_op,omitempty"`
	// dbServer says that the row uses PostgreSQL or Redis, whose servers' CPU
	// it counts; other rows would only count their background work.
	dbServer bool
}

// mergeRounds folds the later rounds of each row (extra, by row id) into its
// first: the row becomes its median round (by rate, among the rounds that
// were measured), its check holds only if every round's held, and Rounds
// lists every round's rate.
func mergeRounds(rs []Result, extra map[string][]Result) {
	for i, first := range rs {
		later := extra[first.ID]
		if len(later) == 0 {
			continue
		}
		all := append([]Result{first}, later...)
		var measured []Result
		rounds, p99s := make([]float64, len(all)), make([]float64, len(all))
		checkOK := true
		var failures []string
		for k, r := range all {
			if r.Err == "" {
				measured = append(measured, r)
				rounds[k], p99s[k] = r.PerSec, r.P99
			}
			if r.Err != "" || !r.CheckOK {
				checkOK = false
				why := r.Err
				if why == "" {
					why = r.Check
				}
				failures = append(failures, fmt.Sprintf("round %d: %s", k+1, why))
			}
		}
		if len(measured) == 0 {
			continue
		}
		slices.SortStableFunc(measured, func(a, b Result) int { return cmp.Compare(a.PerSec, b.PerSec) })
		m := measured[len(measured)/2]
		m.Rounds = rounds
		if slices.ContainsFunc(p99s, func(x float64) bool { return x > 0 }) {
			m.RoundsP99 = p99s
		}
		m.CheckOK = m.CheckOK && checkOK
		if len(failures) > 0 {
			m.Check += "; " + strings.Join(failures, "; ")
		}
		rs[i] = m
	}
}

// displayOrder is the order of the rows in the table and the chart: ceiling,
// hand-rolled loop, raw store cycles, toolexec, River, Temporal.
var displayOrder = []string{
	"a", "a-sync", "b", "b-sync", "raw-kv-lazy", "raw-kv-sync", "raw-pg", "raw-pg-notify", "raw-redis",
	"mem", "mem-sync", "kv-sync", "kv-lazy", "kv-lazy-c1", "pg", "redis", "river", "river-open", "temporal",
	"scale-1", "scale-2", "scale-4", pythonID, pythonC1ID,
	clusterLoopLazy, clusterKVLazy, clusterLoopSync, clusterKVSync, clusterFailover, clusterCrash, "rss",
}

// sortForDisplay puts rs in display order; rows it does not know go last, in
// the order they came.
func sortForDisplay(rs []Result) {
	rank := func(id string) int {
		if i := slices.Index(displayOrder, id); i >= 0 {
			return i
		}
		return len(displayOrder)
	}
	slices.SortStableFunc(rs, func(a, b Result) int { return rank(a.ID) - rank(b.ID) })
}

// latencies collects durations from many goroutines.
type latencies struct {
	mu sync.Mutex // protects d
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// fill sets r's percentiles from l.
func (l *latencies) fill(r *Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.P50, r.P99, r.Max = percentile(l.d, 0.50), percentile(l.d, 0.99), percentile(l.d, 1)
}

// percentile returns the nearest-rank q-quantile of d in milliseconds (0 for
// no data). It sorts d.
func percentile(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	if !slices.IsSorted(d) {
		slices.Sort(d)
	}
	i := int(math.Ceil(q*float64(len(d)))) - 1
	i = min(max(i, 0), len(d)-1)
	return float64(d[i]) / float64(time.Millisecond)
}

// rate fills r's count, duration and rate.
func (r *Result) rate(ops int, elapsed time.Duration) {
	r.Ops, r.Seconds = ops, elapsed.Seconds()
	if elapsed > 0 {
		r.PerSec = float64(ops) / elapsed.Seconds()
	}
}
