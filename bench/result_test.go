package main

import (
	"slices"
	"strings"
	"testing"
)

func TestMergeRounds(t *testing.T) {
	rs := []Result{
		{ID: "b", PerSec: 900, P99: 9, CheckOK: true, Check: "first", Load: "1.0"},
		{ID: "kv-lazy", PerSec: 500, CheckOK: true, Check: "ok"},
		{ID: "a", PerSec: 50000, CheckOK: true},
	}
	extra := map[string][]Result{
		"b": {
			{ID: "b", PerSec: 1000, P99: 10, CheckOK: true, Check: "second", Load: "2.0"},
			{ID: "b", PerSec: 800, P99: 8, CheckOK: true, Check: "third"},
		},
		"kv-lazy": {
			{ID: "kv-lazy", PerSec: 700, CheckOK: false, Check: "2 keys entered twice"},
			{ID: "kv-lazy", Err: "emitter bench: timeout"},
		},
	}
	mergeRounds(rs, extra)

	// b: the median round is the first (900 among 800, 900, 1000), every
	// round's rate listed in the order run.
	if b := rs[0]; b.PerSec != 900 || b.P99 != 9 || b.Check != "first" || b.Load != "1.0" || !b.CheckOK ||
		!slices.Equal(b.Rounds, []float64{900, 1000, 800}) || !slices.Equal(b.RoundsP99, []float64{9, 10, 8}) {
		t.Errorf("b merged to %+v", b)
	}
	// kv-lazy: the median of the two measured rounds (the higher of two), its
	// check failed by the round that failed it and the one not measured.
	kv := rs[1]
	if kv.PerSec != 700 || kv.CheckOK || !slices.Equal(kv.Rounds, []float64{500, 700, 0}) || kv.RoundsP99 != nil {
		t.Errorf("kv-lazy merged to %+v", kv)
	}
	for _, want := range []string{"round 2: 2 keys entered twice", "round 3: emitter bench: timeout"} {
		if !strings.Contains(kv.Check, want) {
			t.Errorf("kv-lazy's check %q lacks %q", kv.Check, want)
		}
	}
	if a := rs[2]; a.Rounds != nil || a.PerSec != 50000 {
		t.Errorf("a row with one round changed: %+v", a)
	}
}

func TestRoundRatios(t *testing.T) {
	a := Result{ID: "kv-lazy", PerSec: 500, Rounds: []float64{500, 600, 0}}
	b := Result{ID: "b", PerSec: 1000, Rounds: []float64{1000, 800, 900}}
	lo, hi, n, ok := roundRatios(a, b)
	if !ok || n != 3 || lo != 0.5 || hi != 0.75 {
		t.Errorf("roundRatios = %v, %v, %d, %v; want 0.5, 0.75 over 3 rounds", lo, hi, n, ok)
	}
	if _, _, _, ok := roundRatios(Result{PerSec: 1}, b); ok {
		t.Error("a row of one round has round ratios")
	}
	got := ratioTarget([]Result{a, b}, "x", "kv-lazy", "b", 0.8)
	if want := "kv-lazy / b = 500 / 1000 = **0.50×** (medians of 3 rounds; the rounds' own ratios 0.50–0.75×)"; got.Measured != want {
		t.Errorf("ratioTarget measured %q, want %q", got.Measured, want)
	}
}

func TestSequenceRounds(t *testing.T) {
	ids := func(c config) (first, later []string) {
		for _, s := range sequence(c) {
			if s.round == 0 {
				first = append(first, s.ids...)
			} else {
				later = append(later, s.ids...)
			}
		}
		return first, later
	}
	first1, later1 := ids(config{rounds: 1})
	if len(later1) != 0 {
		t.Fatalf("one round: later rounds %v", later1)
	}
	first3, later3 := ids(config{rounds: 3})
	if !slices.Equal(first1, first3) {
		t.Fatalf("the first round changed with -rounds: %v vs %v", first1, first3)
	}
	// Rounds 2 and 3: each group, its order reversed in round 2; the run at
	// concurrency 1 goes with the KV store's.
	want := []string{
		"raw-pg", "pg", "redis", "mem", "kv-lazy", "kv-lazy-c1", "b", "b-sync", "kv-sync",
		"b", "kv-lazy", "kv-lazy-c1", "mem", "redis", "pg", "raw-pg", "kv-sync", "b-sync",
	}
	if !slices.Equal(later3, want) {
		t.Fatalf("later rounds run %v, want %v", later3, want)
	}
	// The later rounds run before the cluster, scale-out and memory rows.
	steps := sequence(config{rounds: 3})
	lastLater := slices.IndexFunc(steps, func(s step) bool { return slices.Contains(s.ids, clusterLoopLazy) }) - 1
	if lastLater < 0 || steps[lastLater].round != 3 {
		t.Fatalf("the step before %s is %v of round %d, want the last of round 3", clusterLoopLazy, steps[max(lastLater, 0)].ids, steps[max(lastLater, 0)].round)
	}
	if i := slices.IndexFunc(steps, func(s step) bool { return slices.Contains(s.ids, "scale-1") }); i < lastLater {
		t.Fatalf("scale-1 runs before the later rounds end")
	}
}

func TestStoreDirIsNewEachRound(t *testing.T) {
	h := &harness{storeTmp: "/tmp/x"}
	got := []string{h.storeDir("raw-kv-sync"), h.storeDir("raw-kv-sync"), h.storeDir("kv-sync")}
	want := []string{"/tmp/x/raw-kv-sync", "/tmp/x/raw-kv-sync-2", "/tmp/x/kv-sync"}
	if !slices.Equal(got, want) {
		t.Fatalf("store dirs %v, want %v", got, want)
	}
}

func TestLatencyTargetShowsEveryRound(t *testing.T) {
	c1 := Result{ID: "kv-lazy-c1", PerSec: 900, P50: 0.8, P99: 2.5, Rounds: []float64{900, 1000, 800}, RoundsP99: []float64{2.5, 1.75, 6.5}}
	var lat target
	for _, tg := range targets([]Result{c1}, nil) {
		if strings.HasPrefix(tg.What, "End-to-end latency") {
			lat = tg
		}
	}
	want := "kv-lazy-c1: p50 0.8 ms, p99 **2.5 ms** (the median round by rate of 3; every round's p99: 2.5, 1.75, 6.5 ms)"
	if lat.Measured != want || lat.Verdict != "met" {
		t.Fatalf("latency target %q, %q; want %q, met", lat.Measured, lat.Verdict, want)
	}
}
