package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/kvstore/memstore"
	"github.com/tesserix/toolexec/tool"
)

// parseBench parses the one JSON object bench --json prints.
func parseBench(t *testing.T, out string) benchReport {
	t.Helper()
	var rep benchReport
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout %q is not a bench report: %v", out, err)
	}
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("stdout %q is not exactly one line", out)
	}
	return rep
}

// TestBenchBookCountsAgreeWithTheAirline runs bench against the demo airline and
// checks the report against what the airline itself saw: one booking per
// distinct flight, whatever the duplicates.
func TestBenchBookCountsAgreeWithTheAirline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.emit(t, "", "--json", "bench", "--calls", "200", "--duplicates", "0.25", "--concurrency", "16",
		"--warmup", "10", "--seed", "7")
	mustExit(t, r, exitOK)
	rep := parseBench(t, r.stdout)

	if rep.Calls != 200 || rep.Answered != 200 || rep.Unanswered != 0 || rep.PublishErrors != 0 {
		t.Fatalf("calls %d answered %d unanswered %d not published %d, want 200/200/0/0", rep.Calls, rep.Answered, rep.Unanswered, rep.PublishErrors)
	}
	if rep.Tool != "book" || rep.ToolKind != string(tool.Effectful) || rep.Concurrency != 16 || rep.Warmup != 10 {
		t.Errorf("report describes %s (%s), %d in flight, %d warm-up", rep.Tool, rep.ToolKind, rep.Concurrency, rep.Warmup)
	}
	if rep.DistinctKeys != 150 {
		t.Errorf("distinct keys %d, want 150 (200 calls, 25%% duplicates)", rep.DistinctKeys)
	}
	if got := rep.Answers; got["completed"] != 150 || got["deduplicated"] != 50 || len(got) != 2 {
		t.Errorf("answers %v, want 150 completed and 50 deduplicated", got)
	}
	c := rep.Check
	if !c.Applies || !c.OK || c.BodiesEntered != 150 || c.KeysEnteredTwice != 0 || c.KeyMismatches != 0 {
		t.Errorf("check %+v, want OK with 150 bodies entered", c)
	}
	if rep.CallsPerSecond <= 0 || rep.ElapsedSeconds <= 0 {
		t.Errorf("throughput %v over %vs", rep.CallsPerSecond, rep.ElapsedSeconds)
	}
	l := rep.Latency
	if !(0 < l.P50 && l.P50 <= l.P95 && l.P95 <= l.P99 && l.P99 <= l.Max) {
		t.Errorf("latency percentiles out of order: %+v", l)
	}

	// The airline's own count: the warm-up booked flights 0..9 under another run
	// (other keys), the measured run flights 0..149 once each.
	total := 0
	for k := range 150 {
		total += e.airline.Bookings(flightOf(k))
	}
	if total != 160 {
		t.Errorf("the airline took %d bookings on the bench's flights, want 160 (150 keys + 10 warm-up)", total)
	}
}

// TestBenchText checks the report for people, and that no progress line is
// drawn when stdout is not a terminal.
func TestBenchText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.emit(t, "", "bench", "--tool", "update_profile", "--calls", "40", "--duplicates", "0.5", "--concurrency", "4", "--warmup", "0")
	mustExit(t, r, exitOK)
	for _, re := range []string{
		`^40 calls of update_profile \(idempotent, key \[passenger\]\), tenant bench, run bench_[0-9a-f]{32}\n`,
		`\n  50% duplicates, 20 distinct keys, 4 in flight, arguments \d+ bytes\n`,
		`\nthroughput  \d+ calls/s \(40 answered in \d+\.\d\ds\)\n`,
		`\nlatency     p50 [0-9.]+ms  p95 [0-9.]+ms  p99 [0-9.]+ms  max [0-9.]+ms  \(publish → answer received\)\n`,
		`\nanswers     completed 20 deduplicated 20\n`,
		`\ncheck       OK: bodies entered 20 = distinct keys 20, no key entered twice\n$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("stdout does not match %s:\n%s", re, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "\r") || r.stderr != "" {
		t.Errorf("progress or noise where no terminal is: stdout %q stderr %q", r.stdout, r.stderr)
	}
}

// TestBenchReadOnly: a tool that does not deduplicate runs every call, and the
// check says so instead of comparing keys.
func TestBenchReadOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.emit(t, "", "--json", "bench", "--tool", "lookup_fare", "--calls", "30", "--concurrency", "3", "--warmup", "0")
	mustExit(t, r, exitOK)
	rep := parseBench(t, r.stdout)
	if rep.ToolKind != string(tool.ReadOnly) || rep.Answers["completed"] != 30 || rep.Check.Applies || !rep.Check.OK {
		t.Errorf("read-only run: kind %s answers %v check %+v", rep.ToolKind, rep.Answers, rep.Check)
	}
}

// TestBenchUnanswered: with no executor, the calls go unanswered, the report
// says so and the exit status is 1.
func TestBenchUnanswered(t *testing.T) {
	t.Parallel()
	e := newBareEnv(t, true)
	r := e.emit(t, "", "--json", "--timeout", "300ms", "bench", "--calls", "5", "--concurrency", "5", "--warmup", "0")
	mustExit(t, r, exitFailure)
	rep := parseBench(t, r.stdout)
	if rep.Unanswered != 5 || rep.Answered != 0 || rep.Check.OK || !strings.Contains(rep.Check.Verdict, "5 calls unanswered") {
		t.Errorf("report %+v, want 5 unanswered and a failed check", rep)
	}
	if !strings.Contains(r.stderr, "benchmark check failed") {
		t.Errorf("stderr %q does not say the check failed", r.stderr)
	}

	// The warm-up finds out first, and says what to look at.
	r = e.emit(t, "", "--timeout", "300ms", "bench", "--calls", "5", "--warmup", "2")
	mustExit(t, r, exitFailure)
	if !strings.Contains(r.stderr, "warm-up: 0 of 2 calls answered") || !strings.Contains(r.stderr, "are executors running") {
		t.Errorf("stderr %q", r.stderr)
	}
}

// TestBenchBadInput: flags bench cannot work with are refused (exit 2) before
// anything is published.
func TestBenchBadInput(t *testing.T) {
	t.Parallel()
	e := newBareEnv(t, false)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no calls", []string{"--calls", "0"}, "--calls 0"},
		{"no concurrency", []string{"--concurrency", "0"}, "--concurrency 0"},
		{"all duplicates", []string{"--duplicates", "1"}, "--duplicates 1"},
		{"negative duplicates", []string{"--duplicates", "-0.1"}, "--duplicates -0.1"},
		{"NaN duplicates", []string{"--duplicates", "NaN"}, "--duplicates NaN"},
		{"negative warm-up", []string{"--warmup", "-1"}, "--warmup -1"},
		{"bad tenant", []string{"--tenant", "a.b"}, "--tenant"},
		{"unknown tool without args", []string{"--tool", "charge"}, "--args is required for charge"},
		{"unknown placeholder", []string{"--args", `{"flight":"{{flite}}"}`}, "unknown placeholder {{flite}}"},
		{"open placeholder", []string{"--args", `{"flight":"{{key"}`}, "does not close"},
		{"size without pad", []string{"--arg-bytes", "100"}, "needs a {{pad}}"},
		{"not an object", []string{"--tool", "charge", "--args", `[{{key}}]`}, "not a JSON object"},
		{"args the tool refuses", []string{"--args", `{"flight":"nope","seats":1,"request_id":"x"}`}, "do not suit book"},
		{"missing tools file", []string{"--tools-file", "/nonexistent/tools.yaml"}, "--tools-file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.emit(t, "", append([]string{"bench"}, tt.args...)...)
			mustExit(t, r, exitUsage)
			if !strings.Contains(r.stderr, tt.want) || r.stdout != "" {
				t.Errorf("stdout %q stderr %q, want an error naming %q", r.stdout, r.stderr, tt.want)
			}
		})
	}
}

// TestBenchToolsFile runs bench against a tool of a tools file, whatever its
// body (an HTTP request or a worker's over NATS): its declaration comes from the
// file, the arguments from --args, filled to --arg-bytes.
func TestBenchToolsFile(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`http: {url: "http://127.0.0.1:1/charge"}`, `nats: {}`} {
		t.Run(strings.TrimSuffix(strings.Fields(body)[0], ":"), func(t *testing.T) {
			t.Parallel()
			benchToolsFile(t, body)
		})
	}
}

func benchToolsFile(t *testing.T, body string) {
	const params = `{"type":"object","properties":{"order":{"type":"string"},"note":{"type":"string"}},"required":["order"],"additionalProperties":false}`
	file := filepath.Join(t.TempDir(), "tools.yaml")
	yaml := `tools:
  - name: charge
    idempotency: {kind: effectful, key_arguments: [order]}
    timeout: 5s
    parameters: ` + params + `
    ` + body + `
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}

	// The executor serves a Go tool of the same declaration, which counts its
	// entries by order.
	var mu sync.Mutex
	entered := map[string]int{}
	charge, err := tool.New(tool.Spec{
		Name: "charge", Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"order"}},
		Timeout: 5 * time.Second, Parameters: json.RawMessage(params),
	}, func(_ context.Context, _ tool.Context, args json.RawMessage) (string, error) {
		var a struct{ Order string }
		if err := json.Unmarshal(args, &a); err != nil {
			return "", err
		}
		mu.Lock()
		defer mu.Unlock()
		entered[a.Order]++
		return "ok", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e := newBareEnv(t, true)
	startToolExecutor(t, e, charge)

	r := e.emit(t, "", "--json", "bench", "--tools-file", file, "--tool", "charge",
		"--args", `{"order":"o{{key}}","note":"{{pad}}"}`, "--arg-bytes", "300",
		"--calls", "60", "--duplicates", "0.5", "--concurrency", "8", "--warmup", "0")
	mustExit(t, r, exitOK)
	rep := parseBench(t, r.stdout)
	if rep.ToolKind != string(tool.Effectful) || rep.DistinctKeys != 30 || !rep.Check.OK || rep.Check.BodiesEntered != 30 {
		t.Errorf("report %+v", rep)
	}
	if rep.ArgBytes != 300 {
		t.Errorf("mean argument size %v, want 300", rep.ArgBytes)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(entered) != 30 {
		t.Errorf("the tool saw %d orders, want 30", len(entered))
	}
	for o, n := range entered {
		if n != 1 {
			t.Errorf("order %s entered %d times", o, n)
		}
	}
}

// startToolExecutor runs a worker serving tools on e's server until the test
// ends.
func startToolExecutor(t *testing.T, e *env, tools ...*tool.Tool) {
	t.Helper()
	reg, err := tool.NewRegistry(tools...)
	if err != nil {
		t.Fatal(err)
	}
	js := natstest.JetStream(t, natstest.Connect(t, e.srv))
	store := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = store.Close() })
	d, err := dispatch.New(dispatch.Config{Tools: reg, Store: store, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	w, err := bus.NewWorker(js, d, bus.WorkerConfig{Logger: quiet, Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = w.Shutdown(ctx)
		<-done
	})
}

func TestPlanKeys(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		n            int
		dup          float64
		wantDistinct int
	}{
		{20000, 0.2, 16000}, {10, 0, 10}, {10, 0.95, 1}, {1, 0.5, 1}, {3, 0.5, 1}, {7, 0.3, 5},
	} {
		plan, distinct := planKeys(tt.n, tt.dup, 42)
		if distinct != tt.wantDistinct || len(plan) != tt.n {
			t.Errorf("planKeys(%d, %v): %d calls, %d distinct; want %d, %d", tt.n, tt.dup, len(plan), distinct, tt.n, tt.wantDistinct)
			continue
		}
		seen := map[int]int{}
		for _, k := range plan {
			if k < 0 || k >= distinct {
				t.Fatalf("planKeys(%d, %v): key %d outside [0,%d)", tt.n, tt.dup, k, distinct)
			}
			seen[k]++
		}
		if len(seen) != distinct {
			t.Errorf("planKeys(%d, %v): %d keys used, want every one of %d", tt.n, tt.dup, len(seen), distinct)
		}
		again, _ := planKeys(tt.n, tt.dup, 42)
		for i := range plan {
			if plan[i] != again[i] {
				t.Fatalf("planKeys(%d, %v) differs between two runs with one seed", tt.n, tt.dup)
			}
		}
	}
}

func TestArgsTemplate(t *testing.T) {
	t.Parallel()
	tmpl, err := parseArgsTemplate(`{"k":"{{key}}","f":"{{flight}}","c":{{call}},"pad":"{{pad}}"}`, 80)
	if err != nil {
		t.Fatal(err)
	}
	got := tmpl.render(123456, 7)
	if len(got) != 80 {
		t.Errorf("rendered %d bytes, want 80: %s", len(got), got)
	}
	if want := `{"k":"123456","f":"AM3456","c":7,"pad":"`; !strings.HasPrefix(string(got), want) {
		t.Errorf("rendered %s, want it to start %s", got, want)
	}
	// Already larger than --arg-bytes: the pad is empty, nothing is cut.
	small, _ := parseArgsTemplate(`{"k":"{{key}}","pad":"{{pad}}"}`, 5)
	if got := string(small.render(1, 1)); got != `{"k":"1","pad":""}` {
		t.Errorf("rendered %s", got)
	}

	flight := regexp.MustCompile(`^[A-Z0-9]{2}[0-9]{1,4}$`)
	seen := map[string]bool{}
	for _, k := range []int{0, 1, 9999, 10000, 359999, 360000, maxFlightKeys - 1} {
		f := flightOf(k)
		if !flight.MatchString(f) || seen[f] {
			t.Errorf("flightOf(%d) = %q: not a fresh flight number", k, f)
		}
		seen[f] = true
	}
}

func TestPercentiles(t *testing.T) {
	t.Parallel()
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	got := percentiles(d)
	want := latencyMS{P50: 50, P95: 95, P99: 99, Max: 100, Mean: 50.5}
	if got != want {
		t.Errorf("percentiles = %+v, want %+v", got, want)
	}
	if got := percentiles(nil); got != (latencyMS{}) {
		t.Errorf("percentiles(nil) = %+v", got)
	}
}

// TestSummarizeCatchesSecondEffects feeds the summary records no honest
// executor produces: a key entered twice, and an answer with another key.
func TestSummarizeCatchesSecondEffects(t *testing.T) {
	t.Parallel()
	decl := bookDecl(t)
	rec := func(kind events.Kind, key, want string) callRecord {
		return callRecord{answered: true, kind: kind, key: key, want: want, latency: time.Millisecond}
	}
	for _, tt := range []struct {
		name    string
		recs    []callRecord
		ok      bool
		verdict string
	}{
		{"clean", []callRecord{rec(events.KindCompleted, "a", "a"), rec(events.KindDeduplicated, "a", "a"), rec(events.KindCompleted, "b", "b")},
			true, "bodies entered 2 = distinct keys 2"},
		{"entered twice", []callRecord{rec(events.KindCompleted, "a", "a"), rec(events.KindCompleted, "a", "a"), rec(events.KindCompleted, "b", "b")},
			false, "1 keys entered more than once"},
		{"indeterminate entered counts", []callRecord{rec(events.KindCompleted, "a", "a"), {answered: true, kind: events.KindIndeterminate, key: "a", want: "a", bodyEntered: true}},
			false, "1 keys entered more than once"},
		{"wrong key", []callRecord{rec(events.KindCompleted, "x", "a")},
			false, "1 answers carry another key"},
		{"failed leaves a key without entry", []callRecord{rec(events.KindCompleted, "a", "a"), rec(events.KindFailed, "", "b")},
			false, "bodies entered 1 < distinct keys 2"},
		{"unanswered", []callRecord{rec(events.KindCompleted, "a", "a"), {want: "a"}},
			false, "1 calls unanswered"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &benchRun{spec: benchSpec{tool: "book", decl: decl, plan: make([]int, len(tt.recs))}, recs: tt.recs}
			rep := summarize(r, time.Second, 0)
			if rep.Check.OK != tt.ok || !strings.Contains(rep.Check.Verdict, tt.verdict) {
				t.Errorf("check %+v, want ok=%v and a verdict naming %q", rep.Check, tt.ok, tt.verdict)
			}
		})
	}
}

func bookDecl(t *testing.T) *tool.Tool {
	t.Helper()
	decl, err := benchTool("book", "")
	if err != nil || decl == nil {
		t.Fatalf("benchTool(book) = %v, %v", decl, err)
	}
	return decl
}
