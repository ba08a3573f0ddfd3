package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tesserix/toolexec/events"
)

// benchReport is the result of emitter bench, as --json prints it.
type benchReport struct {
	Tenant      string  `json:"tenant"`
	Tool        string  `json:"tool"`
	ToolKind    string  `json:"tool_kind"` // read_only, idempotent, effectful, none, or unknown
	RunID       string  `json:"run_id"`
	Calls       int     `json:"calls"`
	Concurrency int     `json:"concurrency"`
	Duplicates  float64 `json:"duplicates"`
	// DistinctKeys is the number of distinct idempotency keys among the calls:
	// derived here when the tool's declaration is known, else the number of
	// distinct key numbers the plan used.
	DistinctKeys int     `json:"distinct_keys"`
	ArgBytes     float64 `json:"arg_bytes"` // mean size of the arguments sent
	Warmup       int     `json:"warmup"`

	Answered       int            `json:"answered"`
	Unanswered     int            `json:"unanswered"`
	PublishErrors  int            `json:"publish_errors"`
	LastError      string         `json:"last_error,omitempty"`
	Unmatched      int64          `json:"unmatched_answers"` // answers to calls already answered or given up on
	BadAnswers     int64          `json:"bad_answers"`       // messages on the answer subjects that were not answers
	Answers        map[string]int `json:"answers"`           // by kind
	ElapsedSeconds float64        `json:"elapsed_seconds"`
	CallsPerSecond float64        `json:"calls_per_second"`
	Latency        latencyMS      `json:"latency_ms"`
	Interrupted    bool           `json:"interrupted,omitempty"`
	Check          benchCheck     `json:"check"`
}

// latencyMS holds latency percentiles in milliseconds.
type latencyMS struct {
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// benchCheck is the benchmark's own correctness check: each distinct key's body
// entered once, no key's body entered twice, and every answer carrying the key
// derived for its call.
type benchCheck struct {
	// Applies is false for tools without deduplication (read-only, no policy),
	// whose every call enters the body.
	Applies bool `json:"applies"`
	// BodiesEntered counts, from the answers, the times the tool's body was
	// entered: each completed answer, and each indeterminate answer that says
	// body_entered. Deduplicated answers entered nothing.
	BodiesEntered int `json:"bodies_entered"`
	DistinctKeys  int `json:"distinct_keys"`
	// KeysEnteredTwice counts keys with more than one entry: a second effect.
	KeysEnteredTwice int `json:"keys_entered_twice"`
	// KeyMismatches counts answers whose key differs from the key derived here
	// for their call (only when the declaration is known).
	KeyMismatches int    `json:"key_mismatches"`
	OK            bool   `json:"ok"`
	Verdict       string `json:"verdict"`
}

// summarize turns the records of a finished run into a report.
func summarize(r *benchRun, elapsed time.Duration, distinctPlan int) benchReport {
	s := r.spec
	rep := benchReport{
		Tenant: s.tenant, Tool: s.tool, RunID: s.runID, Calls: len(s.plan), Concurrency: s.concurrency,
		DistinctKeys: distinctPlan, Answers: map[string]int{},
		ElapsedSeconds: elapsed.Seconds(), Unmatched: r.repeated.Load(), BadAnswers: r.strays.Load(),
		ToolKind: "unknown",
	}
	if s.decl != nil {
		rep.ToolKind = "none"
		if p := s.decl.Policy(); p != nil {
			rep.ToolKind = string(p.Kind)
		}
	}
	if e, ok := r.lastError.Load().(string); ok {
		rep.LastError = e
	}
	lat := make([]time.Duration, 0, len(r.recs))
	var argBytes int
	entries := map[string]int{} // entries by key
	wantKeys := map[string]struct{}{}
	answerKeys := map[string]struct{}{}
	knownKeys := false
	for _, rec := range r.recs {
		argBytes += rec.argBytes
		if rec.want != "" {
			knownKeys = true
			wantKeys[rec.want] = struct{}{}
		}
		switch {
		case rec.failedSend:
			rep.PublishErrors++
			continue
		case !rec.answered:
			rep.Unanswered++
			continue
		}
		rep.Answered++
		lat = append(lat, rec.latency)
		rep.Answers[string(rec.kind)]++
		if rec.key != "" {
			answerKeys[rec.key] = struct{}{}
			if rec.want != "" && rec.key != rec.want {
				rep.Check.KeyMismatches++
			}
		}
		if rec.kind == events.KindCompleted || (rec.kind == events.KindIndeterminate && rec.bodyEntered) {
			rep.Check.BodiesEntered++
			k := rec.key
			if k == "" {
				k = rec.want
			}
			entries[k]++
		}
	}
	if n := len(r.recs); n > 0 {
		rep.ArgBytes = float64(argBytes) / float64(n)
	}
	if rep.Answered > 0 && elapsed > 0 {
		rep.CallsPerSecond = float64(rep.Answered) / elapsed.Seconds()
	}
	rep.Latency = percentiles(lat)

	// Which keys the check counts: derived here when the declaration is known,
	// else those the answers carry.
	switch {
	case knownKeys:
		rep.DistinctKeys = len(wantKeys)
		rep.Check.Applies = true
	case s.decl != nil && s.decl.Policy() != nil && s.decl.Policy().Kind.Deduplicated():
		rep.DistinctKeys = 0 // no call's key could be derived
		rep.Check.Applies = true
	case s.decl == nil && len(answerKeys) > 0:
		rep.DistinctKeys = len(answerKeys)
		rep.Check.Applies = true
	}
	rep.Check.DistinctKeys = rep.DistinctKeys
	for k, n := range entries {
		if k != "" && n > 1 {
			rep.Check.KeysEnteredTwice++
		}
	}
	rep.Check.OK, rep.Check.Verdict = verdict(rep)
	return rep
}

// verdict judges a report: every call answered, and, for deduplicated tools,
// each key entered exactly once with the key derived for it.
func verdict(rep benchReport) (bool, string) {
	var problems []string
	if rep.Interrupted {
		problems = append(problems, "interrupted")
	}
	if rep.PublishErrors > 0 {
		problems = append(problems, fmt.Sprintf("%d calls not published", rep.PublishErrors))
	}
	if rep.Unanswered > 0 {
		problems = append(problems, fmt.Sprintf("%d calls unanswered", rep.Unanswered))
	}
	c := rep.Check
	if !c.Applies {
		if len(problems) > 0 {
			return false, strings.Join(problems, "; ")
		}
		return true, "the tool does not deduplicate: every call enters its body"
	}
	if c.KeysEnteredTwice > 0 {
		problems = append(problems, fmt.Sprintf("%d keys entered more than once: a second effect", c.KeysEnteredTwice))
	}
	if c.KeyMismatches > 0 {
		problems = append(problems, fmt.Sprintf("%d answers carry another key than the one derived for their call", c.KeyMismatches))
	}
	switch {
	case c.BodiesEntered > c.DistinctKeys:
		problems = append(problems, fmt.Sprintf("bodies entered %d > distinct keys %d", c.BodiesEntered, c.DistinctKeys))
	case c.BodiesEntered < c.DistinctKeys:
		problems = append(problems,
			fmt.Sprintf("bodies entered %d < distinct keys %d (see the failed, rejected and indeterminate answers)", c.BodiesEntered,
				c.DistinctKeys))
	}
	if len(problems) > 0 {
		return false, strings.Join(problems, "; ")
	}
	return true, fmt.Sprintf("bodies entered %d = distinct keys %d, no key entered twice", c.BodiesEntered, c.DistinctKeys)
}

// percentiles returns the nearest-rank percentiles of d, in milliseconds. It
// sorts d.
func percentiles(d []time.Duration) latencyMS {
	if len(d) == 0 {
		return latencyMS{}
	}
	slices.Sort(d)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(d)))) - 1
		return ms(d[min(max(i, 0), len(d)-1)])
	}
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return latencyMS{P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: ms(d[len(d)-1]), Mean: ms(sum / time.Duration(len(d)))}
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// writeBenchText prints a report for people.
func writeBenchText(w io.Writer, rep benchReport, toolDesc string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d calls of %s (%s), tenant %s, run %s\n", rep.Calls, rep.Tool, toolDesc, rep.Tenant, rep.RunID)
	fmt.Fprintf(&b, "  %.0f%% duplicates, %d distinct keys, %d in flight, arguments %.0f bytes", rep.Duplicates*100, rep.DistinctKeys,
		rep.Concurrency, rep.ArgBytes)
	if rep.Warmup > 0 {
		fmt.Fprintf(&b, ", after %d warm-up calls", rep.Warmup)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "throughput  %.0f calls/s (%d answered in %.2fs)\n", rep.CallsPerSecond, rep.Answered, rep.ElapsedSeconds)
	l := rep.Latency
	fmt.Fprintf(&b, "latency     p50 %s  p95 %s  p99 %s  max %s  (publish → answer received)\n",
		fmtMS(l.P50), fmtMS(l.P95), fmtMS(l.P99), fmtMS(l.Max))
	b.WriteString("answers    ")
	for _, k := range events.AnswerKinds() {
		if n := rep.Answers[string(k)]; n > 0 {
			fmt.Fprintf(&b, " %s %d", k, n)
		}
	}
	if rep.Unanswered > 0 {
		fmt.Fprintf(&b, " unanswered %d", rep.Unanswered)
	}
	if rep.PublishErrors > 0 {
		fmt.Fprintf(&b, " not-published %d", rep.PublishErrors)
	}
	b.WriteString("\n")
	if rep.Unmatched > 0 || rep.BadAnswers > 0 {
		fmt.Fprintf(&b, "also        %d answers to calls already answered or given up on, %d unreadable\n", rep.Unmatched, rep.BadAnswers)
	}
	if rep.LastError != "" {
		fmt.Fprintf(&b, "last error  %s\n", rep.LastError)
	}
	status := "OK"
	if !rep.Check.OK {
		status = "FAILED"
	}
	fmt.Fprintf(&b, "check       %s: %s\n", status, rep.Check.Verdict)
	_, err := io.WriteString(w, b.String())
	return err
}

// fmtMS prints milliseconds with three significant digits or so.
func fmtMS(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	case v >= 10:
		return fmt.Sprintf("%.1fms", v)
	default:
		return fmt.Sprintf("%.2fms", v)
	}
}

// writeBenchJSON prints a report as one line of JSON.
func writeBenchJSON(w io.Writer, rep benchReport) error {
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progress redraws one status line on a terminal until stopped.
type progress struct {
	w     io.Writer
	r     *benchRun
	what  string
	start time.Time
	stop  chan struct{}
	wg    sync.WaitGroup
}

// startProgress shows the progress of r on w every 200 ms.
func startProgress(w io.Writer, r *benchRun, what string) *progress {
	p := &progress{w: w, r: r, what: what, start: time.Now(), stop: make(chan struct{})}
	p.wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				fmt.Fprint(p.w, "\r\033[K")
				return
			case <-t.C:
				p.draw()
			}
		}
	})
	return p
}

func (p *progress) draw() {
	n := len(p.r.spec.plan)
	done := p.r.answered.Load()
	el := time.Since(p.start)
	rate := float64(done) / el.Seconds()
	line := fmt.Sprintf("%s %d/%d answered  %.0f calls/s  %d in flight  %s", p.what, done, n, rate, p.r.inFlight.Load(),
		el.Truncate(100*time.Millisecond))
	if rate > 0 && int(done) < n {
		eta := time.Duration(float64(n-int(done)) / rate * float64(time.Second))
		line += fmt.Sprintf("  ~%s left", eta.Truncate(time.Second))
	}
	fmt.Fprintf(p.w, "\r\033[K%s", line)
}

// Stop clears the status line.
func (p *progress) Stop() {
	close(p.stop)
	p.wg.Wait()
}
