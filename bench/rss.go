package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/kvstore/natsstore"
)

// The executor's configuration in the RSS run. Every window in which it keeps
// data on purpose — idempotency records (--retention), answers
// (--event-max-age), the answers' message ids the events stream deduplicates
// by (its window is capped to --event-max-age) — lasts
// rssWindow, so that the data kept stops growing long before the first
// reference point (a tenth of the calls) and what grows after it grows per
// call. The window must be short against the time the reference point takes:
// with 15 s the kept data peaked at about 70,000 calls and the RSS was still
// climbing into its working set at 100,000 (a run of 2026-12-03 at about 6,000
// calls/s); with 10 s at about 7,900 calls/s the 100,000th call came 13 s in,
// its median RSS 382 MiB against 424–434 MiB from 250,000 calls to the end
// (a line fitted from 100,000 on rose by 0.03 MiB per 100,000 calls). 5 s
// leaves the reference point more than two windows in at up to 10,000 calls/s.
// The lease must be shorter than the retention.
const (
	rssWindow = 5 * time.Second
	rssLease  = 2 * time.Second
	// rssTool is the demo tool the run calls: update_profile is Idempotent and
	// keyed by the passenger, so the demo airline keeps one profile per key
	// number (as many as one emitter run has), not one booking per call as book
	// does, which would be the demo's data growing, not the executor's.
	rssTool = "update_profile"
	// rssMaxChunk bounds the calls of one emitter run: each run lasts well
	// under rssWindow even on a busy machine, so that no duplicate finds its
	// key's record expired and runs the body again.
	rssMaxChunk = 5000
)

// rssChunk is the calls of each emitter run for a run of calls in all: twenty
// runs at least, so that the curve has points, and none longer than
// rssMaxChunk.
func rssChunk(calls int) int {
	return max(1, min(rssMaxChunk, calls/20))
}

// rssSample is the executor's memory after some calls.
type rssSample struct {
	Calls       int     `json:"calls"`
	Seconds     float64 `json:"seconds"` // since the executor was ready
	RSSKiB      int64   `json:"rss_kib"` // VmRSS
	HWMKiB      int64   `json:"hwm_kib"` // VmHWM, the peak RSS so far
	HeapInuse   float64 `json:"heap_inuse_bytes"`
	HeapGoal    float64 `json:"heap_goal_bytes"` // the heap size at which the next GC starts
	HeapObjects float64 `json:"heap_objects"`
	Goroutines  float64 `json:"goroutines"`
	KVRecords   uint64  `json:"kv_records"` // messages in the KV bucket's stream
	Events      uint64  `json:"events"`     // messages in TOOLEXEC_EVENTS
	Load        string  `json:"load"`
}

// rssRun is the RSS run: how the executor was configured and its samples.
type rssRun struct {
	Command string      `json:"command"` // the executor's command line
	Tool    string      `json:"tool"`
	Calls   int         `json:"calls"`
	Chunk   int         `json:"chunk"` // calls per emitter run
	Window  string      `json:"window"`
	Samples []rssSample `json:"samples"`
}

// rssFractions are the shares of the calls the report shows a sample at; the
// first is the reference the target compares with.
var rssFractions = []float64{0.1, 0.25, 0.5, 0.75, 1}

// at returns the first sample taken after at least share of the calls.
func (run *rssRun) at(share float64) (rssSample, bool) {
	want := int(share*float64(run.Calls) + 0.5)
	for _, s := range run.Samples {
		if s.Calls >= want && s.Calls > 0 {
			return s, true
		}
	}
	return rssSample{}, false
}

// rssPointSamples is how many samples the RSS at a point of the run is the
// median of: the samples (one after each emitter run) that end with the first
// taken after the point. One sample lands anywhere on the garbage collector's
// sawtooth, so two single samples can differ by a third with nothing leaking.
const rssPointSamples = 5

// rssPoint is the RSS at a share of the calls.
type rssPoint struct {
	At        rssSample // the first sample taken after the share
	MedianKiB int64     // the median RSS of the samples ending with At
	Samples   int       // how many samples the median is of
}

// point returns the RSS after share of the calls.
func (run *rssRun) point(share float64) (rssPoint, bool) {
	at, ok := run.at(share)
	if !ok {
		return rssPoint{}, false
	}
	var window []int64
	for _, s := range run.Samples {
		if s.Calls > 0 && s.Calls <= at.Calls {
			window = append(window, s.RSSKiB)
		}
	}
	window = window[max(0, len(window)-rssPointSamples):]
	slices.Sort(window)
	return rssPoint{At: at, MedianKiB: window[len(window)/2], Samples: len(window)}, true
}

// growth compares the RSS after all the calls with that after a tenth, each
// the median of the samples ending there.
func (run *rssRun) growth() (first, last rssPoint, ratio float64, ok bool) {
	first, ok1 := run.point(rssFractions[0])
	last, ok2 := run.point(1)
	if !ok1 || !ok2 || first.MedianKiB <= 0 {
		return first, last, 0, false
	}
	return first, last, float64(last.MedianKiB) / float64(first.MedianKiB), true
}

// trend fits a straight line (least squares) through the RSS of the samples
// taken from the reference point (a tenth of the calls) on. It returns the
// line's slope in KiB per call, the lowest and highest RSS of those samples,
// and how many there are; ok is false with fewer than two.
func (run *rssRun) trend() (kibPerCall float64, lo, hi int64, n int, ok bool) {
	first, found := run.at(rssFractions[0])
	if !found {
		return 0, 0, 0, 0, false
	}
	var xs, ys []float64
	for _, s := range run.Samples {
		if s.Calls < first.Calls {
			continue
		}
		if len(xs) == 0 || s.RSSKiB < lo {
			lo = s.RSSKiB
		}
		hi = max(hi, s.RSSKiB)
		xs, ys = append(xs, float64(s.Calls)), append(ys, float64(s.RSSKiB))
	}
	if len(xs) < 2 {
		return 0, 0, 0, len(xs), false
	}
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i], my+ys[i]
	}
	mx, my = mx/float64(len(xs)), my/float64(len(xs))
	var num, den float64
	for i := range xs {
		num += (xs[i] - mx) * (ys[i] - my)
		den += (xs[i] - mx) * (xs[i] - mx)
	}
	return num / den, lo, hi, len(xs), true
}

// runRSS runs the executor binary as a process of its own, with its embedded
// NATS server and the JetStream KV store, and drives -rss-calls calls through
// it with emitter bench, sampling its memory after each emitter run.
func (h *harness) runRSS(ctx context.Context) Result {
	c := h.cfg
	r := Result{ID: "rss", Group: groupMemory, Name: "toolexec executor process, memory over " + strconv.Itoa(c.rssCalls) + " calls",
		Durability: "NATS fsync lazy", Concurrency: c.concurrency, Duplicates: c.duplicates}
	if c.rssCalls < 1 {
		return failed(r, fmt.Errorf("-rss-calls %d: must be at least 1", c.rssCalls))
	}
	natsPort, err := h.freePort()
	if err != nil {
		return failed(r, err)
	}
	dir := h.storeDir("rss")
	args := []string{"--store", "jetstream", "--nats-host", "127.0.0.1", "--nats-port", strconv.Itoa(natsPort),
		"--data-dir", dir, "--sync-interval", shortDuration(lazySync),
		"--retention", shortDuration(rssWindow), "--event-max-age", shortDuration(rssWindow), "--lease", shortDuration(rssLease)}
	run := &rssRun{
		Command: "executor " + strings.ReplaceAll(strings.Join(args, " "), dir, "<temp dir>") + " --demo --metrics-addr <port> --log-level warn",
		Tool:    rssTool, Calls: c.rssCalls, Chunk: rssChunk(c.rssCalls), Window: shortDuration(rssWindow),
	}
	r.RSS = run
	p, err := h.startExecutorProc(ctx, "rss", args...)
	if err != nil {
		return failed(r, err)
	}
	defer p.stop()
	url := "nats://127.0.0.1:" + strconv.Itoa(natsPort)
	nc, js, err := (&natsEnv{url: url}).connect("toolexec-bench-rss")
	if err != nil {
		return failed(r, err)
	}
	defer nc.Close()

	began := time.Now()
	sample := func(calls int) error {
		s := rssSample{Calls: calls, Seconds: time.Since(began).Seconds(), Load: strings.Fields(loadAverage())[0]}
		if s.RSSKiB, s.HWMKiB, err = p.memory(); err != nil {
			return err
		}
		m, err := p.metrics(ctx)
		if err != nil {
			return err
		}
		s.HeapInuse, s.HeapGoal = m["go_memstats_heap_inuse_bytes"], m["go_memstats_next_gc_bytes"]
		s.HeapObjects, s.Goroutines = m["go_memstats_heap_objects"], m["go_goroutines"]
		if s.KVRecords, err = streamMsgs(ctx, js, "KV_"+natsstore.DefaultBucket); err != nil {
			return err
		}
		if s.Events, err = streamMsgs(ctx, js, wire.EventStream); err != nil {
			return err
		}
		run.Samples = append(run.Samples, s)
		return nil
	}
	if err := sample(0); err != nil {
		return failed(r, err)
	}
	var answered, distinct, bodies, runs int
	var measured time.Duration
	var firstBad string
	nextReport := 0.1
	for done := 0; done < c.rssCalls; {
		n := min(run.Chunk, c.rssCalls-done)
		rep, err := h.emit(ctx, url, rssTool, n, c.concurrency, c.duplicates)
		if err != nil {
			return failed(r, fmt.Errorf("after %d calls: %w", done, err))
		}
		done += n
		runs++
		answered, distinct, bodies = answered+rep.Answered, distinct+rep.DistinctKeys, bodies+rep.Check.BodiesEntered
		measured += time.Duration(rep.ElapsedSeconds * float64(time.Second))
		if !rep.Check.OK && firstBad == "" {
			firstBad = fmt.Sprintf("; emitter run %d: %s", runs, rep.Check.Verdict)
		}
		if err := sample(done); err != nil {
			return failed(r, fmt.Errorf("sampling after %d calls: %w", done, err))
		}
		if float64(done) >= nextReport*float64(c.rssCalls) {
			s := run.Samples[len(run.Samples)-1]
			fmt.Fprintf(os.Stderr, "    rss: %d calls, RSS %s MiB, VmHWM %s MiB, load %s\n", done, kib(s.RSSKiB), kib(s.HWMKiB), s.Load)
			nextReport += 0.1
		}
	}
	m, err := p.metrics(ctx)
	if err != nil {
		return failed(r, err)
	}
	own := m.bodiesEntered()
	r.rate(answered, measured)
	first, last, ratio, _ := run.growth()
	r.CheckOK = firstBad == "" && answered == c.rssCalls && bodies == distinct && own == int64(distinct)
	r.Check = fmt.Sprintf("%d of %d answered in %d emitter runs; emitter: bodies entered %d = distinct keys %d%s; executor's own count of bodies entered: %d; RSS (median of the last %d samples) %s MiB after %d calls, %s MiB after %d (%.2f×)",
		answered, c.rssCalls, runs, bodies, distinct, firstBad, own, rssPointSamples, kib(first.MedianKiB), first.At.Calls, kib(last.MedianKiB), last.At.Calls, ratio)
	return r
}

// streamMsgs is the number of messages stream holds.
func streamMsgs(ctx context.Context, js jetstream.JetStream, stream string) (uint64, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	return s.CachedInfo().State.Msgs, nil
}

// mib prints bytes in MiB, three significant digits.
func mib(bytes float64) string { return trimFloat(bytes / (1 << 20)) }

// shortDuration prints d without its zero trailing units: 2m, not 2m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// kib prints KiB in MiB.
func kib(k int64) string { return mib(float64(k) * 1024) }
