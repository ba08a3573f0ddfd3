package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
)

const (
	tenant          = "acme"
	bookArgs1       = `{"flight":"BA117","seats":2,"request_id":"r-1"}`
	bookArgs2       = `{"flight":"BA117","seats":2,"request_id":"r-2"}`
	failArgs        = `{"flight":"LH902","seats":1,"request_id":"r-3","fail_after_effect":true}`
	fareArgs        = `{"flight":"BA117"}`
	testTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

var (
	pnrRE    = regexp.MustCompile(`\n  outcome: ([A-Z0-9]{6})\n$`)
	callIDRE = regexp.MustCompile(`^call_[0-9a-f]{32}$`)
)

// TestCallOutcomes runs one booking through each outcome and checks the text,
// the exit status and what the airline saw.
func TestCallOutcomes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	book := func(args string, extra ...string) result {
		return e.emit(t, "", append([]string{"call", "--tenant", tenant, "--run", "run_1", "--tool", "book", "--args", args}, extra...)...)
	}
	key := bookKey(t, tenant, "run_1", bookArgs1)

	r := book(bookArgs1)
	mustExit(t, r, exitOK)
	first := regexp.MustCompile(`^completed  book  run=run_1 call=(call_[0-9a-f]{32})  key=` + key + `\n  outcome: [A-Z0-9]{6}\n$`)
	if !first.MatchString(r.stdout) || r.stderr != "" {
		t.Fatalf("completed: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	pnr := pnrRE.FindStringSubmatch(r.stdout)[1]

	// The same booking with a fresh request id: answered from the record.
	r = book(bookArgs2)
	mustExit(t, r, exitOK)
	dedup := regexp.MustCompile(`^TOOL_DEDUPLICATED  book  run=run_1 call=call_[0-9a-f]{32}  key=` + key + `\n  outcome: ` + pnr + `\n$`)
	if !dedup.MatchString(r.stdout) || r.stderr != "" {
		t.Fatalf("deduplicated: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if n := e.airline.Bookings("BA117"); n != 1 {
		t.Fatalf("BA117 booked %d times, want once", n)
	}

	// Booked, then the answer lost: indeterminate, and so is the retry.
	failKey := bookKey(t, tenant, "run_1", failArgs)
	for i := 0; i < 2; i++ {
		r = book(failArgs)
		mustExit(t, r, exitIndeterminate)
		ind := regexp.MustCompile(`^TOOL_INDETERMINATE  book  run=run_1 call=call_[0-9a-f]{32}  key=` + failKey + `  reason=body_failed body_entered=true\n$`)
		if !ind.MatchString(r.stdout) {
			t.Fatalf("indeterminate: stdout %q", r.stdout)
		}
		for _, want := range []string{"indeterminate", "emitter -s " + e.url + " inspect --tenant acme --key " + failKey, "emitter -s " + e.url + " resolve --tenant acme --key " + failKey} {
			if !strings.Contains(r.stderr, want) {
				t.Fatalf("indeterminate: stderr %q does not say %q", r.stderr, want)
			}
		}
	}
	if n := e.airline.Bookings("LH902"); n != 1 {
		t.Fatalf("LH902 booked %d times, want once", n)
	}

	// A duplicate asking for other seats is refused: rejected, exit 3.
	r = book(`{"flight":"BA117","seats":3,"request_id":"r-4"}`)
	mustExit(t, r, exitFailed)
	if !strings.HasPrefix(r.stdout, "rejected  book  run=run_1 call=") || !strings.Contains(r.stdout, "code=arguments_mismatch") {
		t.Fatalf("mismatch: stdout %q", r.stdout)
	}

	// A cancelled flight is refused before acting: failed, exit 3.
	e.airline.Cancel("AF1")
	r = book(`{"flight":"AF1","seats":1,"request_id":"r-5"}`)
	mustExit(t, r, exitFailed)
	if !strings.HasPrefix(r.stdout, "failed  book  run=run_1 call=") || !strings.Contains(r.stdout, "code=no_effect") ||
		!strings.Contains(r.stdout, "\n  error: ") || !strings.Contains(r.stderr, "failed") {
		t.Fatalf("failed: stdout %q, stderr %q", r.stdout, r.stderr)
	}

	// An unknown tool: rejected, exit 3.
	r = e.emit(t, "", "call", "--tenant", tenant, "--tool", "nope", "--args", "{}")
	mustExit(t, r, exitFailed)
	if !regexp.MustCompile(`^rejected  nope  run=run_[0-9a-f]{32} call=call_[0-9a-f]{32}  code=unknown_tool\n  error: .*nope.*\n$`).MatchString(r.stdout) {
		t.Fatalf("unknown tool: stdout %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "unknown_tool") {
		t.Fatalf("unknown tool: stderr %q", r.stderr)
	}
}

// TestCallJSON checks --json: one object a line, with the fields of the kind.
func TestCallJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := bookKey(t, tenant, "run_j", bookArgs1)
	r := e.emit(t, "", "--json", "call", "--tenant", tenant, "--run", "run_j", "--call-id", "c-1", "--tool", "book",
		"--args", bookArgs1, "--traceparent", testTraceParent)
	mustExit(t, r, exitOK)
	a := parseAnswer(t, r.stdout)
	if a.Kind != events.KindCompleted || a.Type != "io.tesserix.toolexec.completed" || a.Tenant != tenant ||
		a.Tool != "book" || a.RunID != "run_j" || a.CallID != "c-1" || a.Key != key || a.Outcome == nil ||
		a.Subject != "toolexec.event.acme.completed.book.run_j.c-1" || a.Time == nil || a.TraceParent != testTraceParent ||
		a.BodyEntered != nil || a.Error != "" {
		t.Fatalf("completed answer %+v", a)
	}
	for _, b := range e.airline.BookingsOf("BA117") {
		if b.PNR != *a.Outcome {
			t.Fatalf("outcome %q is not the PNR booked (%q)", *a.Outcome, b.PNR)
		}
	}

	r = e.emit(t, "", "call", "--json", "--tenant", tenant, "--run", "run_j", "--tool", "book", "--args", failArgs)
	mustExit(t, r, exitIndeterminate)
	a = parseAnswer(t, r.stdout)
	if a.Kind != events.KindIndeterminate || a.Reason != "body_failed" || a.BodyEntered == nil || !*a.BodyEntered || a.Outcome != nil {
		t.Fatalf("indeterminate answer %+v", a)
	}

	r = e.emit(t, "", "call", "--json", "--tenant", tenant, "--tool", "nope")
	mustExit(t, r, exitFailed)
	a = parseAnswer(t, r.stdout)
	if a.Kind != events.KindRejected || a.Code != events.CodeUnknownTool || a.Error == "" || !callIDRE.MatchString(a.CallID) {
		t.Fatalf("rejected answer %+v", a)
	}
}

// TestCallArgumentSources reads --args from stdin and from a file, and
// publishes in binary mode.
func TestCallArgumentSources(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	file := filepath.Join(t.TempDir(), "args.json")
	if err := os.WriteFile(file, []byte(fareArgs), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		stdin string
		args  []string
	}{
		{"stdin", fareArgs + "\n", []string{"--args", "-"}},
		{"file", "", []string{"--args", "@" + file}},
		{"binary", "", []string{"--args", fareArgs, "--binary"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sub, err := e.nc.SubscribeSync(wire.CallSubject(tenant, "lookup_fare", "*"))
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			if err := e.nc.Flush(); err != nil { // the server knows the subscription before the call
				t.Fatal(err)
			}
			r := e.emit(t, tt.stdin, append([]string{"call", "--tenant", tenant, "--tool", "lookup_fare"}, tt.args...)...)
			mustExit(t, r, exitOK)
			if !strings.HasPrefix(r.stdout, "completed  lookup_fare  run=") || !strings.HasSuffix(r.stdout, "\n  outcome: GBP 612.40\n") {
				t.Fatalf("stdout %q", r.stdout)
			}
			m, err := sub.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("the call was not seen on its subject: %v", err)
			}
			binary := m.Header.Get("ce-specversion") == "1.0"
			if want := tt.name == "binary"; binary != want {
				t.Fatalf("binary mode %t, want %t (headers %v)", binary, want, m.Header)
			}
			if m.Header.Get(nats.MsgIdHdr) != "" || m.Header.Get("Nats-Expected-Stream") != wire.CallStream ||
				m.Header.Get(wire.RepeatHeader) != "" || !callIDRE.MatchString(strings.TrimPrefix(m.Subject, "toolexec.call.acme.lookup_fare.")) {
				t.Fatalf("a fresh call on %s with headers %v; want the call id last in the subject, no Nats-Msg-Id, "+
					"the stream expected, no repeat", m.Subject, m.Header)
			}
		})
	}
}

// TestCallBadInputPublishesNothing refuses bad input with exit 2 before
// anything reaches the calls stream.
func TestCallBadInputPublishesNothing(t *testing.T) {
	t.Parallel()
	e := newBareEnv(t, true)
	base := []string{"call", "--tenant", tenant, "--tool", "book"}
	with := func(args ...string) []string { return append(append([]string{}, base...), args...) }
	long := strings.Repeat("x", 129)
	for _, tt := range []struct {
		name   string
		args   []string
		stdin  string
		stderr string
	}{
		{"args an array", with("--args", `[1,2]`), "", "--args: arguments must be a JSON object"},
		{"args a string", with("--args", `"x"`), "", "arguments_not_object"},
		{"args not JSON", with("--args", `{"flight":`), "", "--args"},
		{"empty stdin", with("--args", "-"), "", "--args"},
		{"missing file", with("--args", "@/nonexistent/args.json"), "", "--args"},
		{"tenant with a dot", []string{"call", "--tenant", "ac.me", "--tool", "book"}, "", "--tenant"},
		{"tenant with a wildcard", []string{"call", "--tenant", "*", "--tool", "book"}, "", "--tenant"},
		{"tool with a space", []string{"call", "--tenant", tenant, "--tool", "bo ok"}, "", "--tool"},
		{"run too long", with("--run", long), "", "--run"},
		{"call id with >", with("--call-id", "c>"), "", "--call-id"},
		{"empty source", with("--source", ""), "", "--source"},
		{"bad traceparent", with("--traceparent", "00-xyz"), "", "--traceparent"},
		{"zero trace id", with("--traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"), "", "--traceparent"},
		{"negative timeout", with("--timeout", "-1s"), "", "--timeout"},
		{"missing tenant", []string{"call", "--tool", "book"}, "", `"tenant"`},
		{"stray argument", with("book"), "", `unexpected argument "book"`},
		{"two ways to authenticate", with("--user", "u", "--token", "t"), "", "one of"},
		{"creds and a password", with("--creds", "x.creds", "--user", "u", "--password", "p"), "", "one of"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.emit(t, tt.stdin, tt.args...)
			mustExit(t, r, exitUsage)
			if r.stdout != "" || !strings.Contains(r.stderr, tt.stderr) {
				t.Fatalf("stdout %q, stderr %q; want nothing on stdout and %q on stderr", r.stdout, r.stderr, tt.stderr)
			}
		})
	}
	if st := e.callsStored(t); st.Msgs != 0 || st.LastSeq != 0 {
		t.Fatalf("TOOLEXEC_CALLS holds %d messages (last sequence %d): bad input was published", st.Msgs, st.LastSeq)
	}
}

// TestCallTimeoutThenAttach: with no executor, call gives up after --timeout
// with exit 1 and the attach command; once an executor runs, that command
// prints the answer.
func TestCallTimeoutThenAttach(t *testing.T) {
	t.Parallel()
	e := newBareEnv(t, true)
	r := e.emit(t, "", "call", "--tenant", tenant, "--run", "run_t", "--call-id", "call_t", "--tool", "lookup_fare",
		"--args", fareArgs, "--timeout", "300ms")
	mustExit(t, r, exitFailure)
	attach := "emitter -s " + e.url + " attach --tenant acme --tool lookup_fare --run run_t --call-id call_t"
	if r.stdout != "" || !strings.Contains(r.stderr, "no answer within --timeout 300ms") ||
		!strings.Contains(r.stderr, "may still be answered") || !strings.Contains(r.stderr, attach) {
		t.Fatalf("stdout %q, stderr %q; want the attach hint", r.stdout, r.stderr)
	}
	if st := e.callsStored(t); st.Msgs != 1 {
		t.Fatalf("TOOLEXEC_CALLS holds %d messages, want the call", st.Msgs)
	}

	e.startExecutor(t)
	r = e.emit(t, "", strings.Fields(strings.TrimPrefix(attach, "emitter "))...)
	mustExit(t, r, exitOK)
	if r.stdout != "completed  lookup_fare  run=run_t call=call_t\n  outcome: GBP 612.40\n" {
		t.Fatalf("attach: stdout %q", r.stdout)
	}
	// Attaching again reads the stored answer.
	r = e.emit(t, "", "--json", "attach", "--tenant", tenant, "--tool", "lookup_fare", "--run", "run_t", "--call-id", "call_t")
	mustExit(t, r, exitOK)
	if a := parseAnswer(t, r.stdout); a.Kind != events.KindCompleted || *a.Outcome != "GBP 612.40" {
		t.Fatalf("attach --json: %+v", a)
	}
	// Calling again with the same call id reads the stored answer; the copy,
	// marked as a repeat, is not run again.
	r = e.emit(t, "", "call", "--tenant", tenant, "--run", "run_t", "--call-id", "call_t", "--tool", "lookup_fare", "--args", fareArgs)
	mustExit(t, r, exitOK)
	if r.stdout != "completed  lookup_fare  run=run_t call=call_t\n  outcome: GBP 612.40\n" {
		t.Fatalf("calling again: stdout %q", r.stdout)
	}
	// The copy was refused while the first waited for its acknowledgement,
	// or stored once the first had left and acknowledged unrun.
	wait.Eventually(t, waitLimit, "the calls stream to empty", func() bool { return e.callsStored(t).Msgs == 0 })
	if ran := e.worker.Stats().Received.Load() - e.worker.Stats().AlreadyAnswered.Load(); ran != 1 {
		t.Fatalf("the call ran %d times, want 1", ran)
	}
}

// TestCallIDPending: a --call-id that a waiting call of the same tenant and
// tool holds is refused at once with exit status 5 and the attach command,
// waiting or not; another tenant's call with the same id, in an account of
// its own, is its own, stored and answered.
func TestCallIDPending(t *testing.T) {
	t.Parallel()
	e := newAccountsEnv(t)
	publish := func(tn string, extra ...string) result {
		return e.emit(t, "", append([]string{"--user", tn, "--password", tn, "call", "--tenant", tn, "--run", "run_p",
			"--call-id", "held", "--tool", "lookup_fare", "--args", fareArgs}, extra...)...)
	}
	r := publish(tenant, "--no-wait")
	mustExit(t, r, exitOK)
	attach := "attach --tenant acme --tool lookup_fare --run run_p --call-id held"
	for _, extra := range [][]string{nil, {"--no-wait"}} {
		start := time.Now()
		r = publish(tenant, extra...)
		mustExit(t, r, exitTaken)
		if r.stdout != "" || !strings.Contains(r.stderr, "was not stored") || !strings.Contains(r.stderr, attach) {
			t.Fatalf("%v: stdout %q, stderr %q; want the refusal and the attach command", extra, r.stdout, r.stderr)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%v: refused after %v, not at once", extra, d)
		}
	}
	r = publish("globex", "--no-wait")
	mustExit(t, r, exitOK)
	if st := e.callsStored(t); st.Msgs != 2 {
		t.Fatalf("the calls stream holds %d calls, want acme's and globex's", st.Msgs)
	}
	e.startExecutor(t)
	for _, tn := range []string{tenant, "globex"} {
		r = e.emit(t, "", "--user", tn, "--password", tn, "attach", "--tenant", tn, "--tool", "lookup_fare", "--run", "run_p", "--call-id", "held")
		mustExit(t, r, exitOK)
	}
	r = publish("globex")
	mustExit(t, r, exitOK)
	if !strings.HasPrefix(r.stdout, "completed  lookup_fare  run=run_p call=held") {
		t.Fatalf("globex calling again: stdout %q", r.stdout)
	}
}

// TestNoWaitAndAttach publishes without waiting, then picks the answers up.
func TestNoWaitAndAttach(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.emit(t, "", "call", "--no-wait", "--tenant", tenant, "--run", "run_n", "--tool", "book", "--args", failArgs)
	mustExit(t, r, exitOK)
	callID := strings.TrimSuffix(r.stdout, "\n")
	if !callIDRE.MatchString(callID) || !strings.Contains(r.stderr, "emitter -s "+e.url+" attach --tenant acme --tool book --run run_n --call-id "+callID) {
		t.Fatalf("--no-wait: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	r = e.emit(t, "", "attach", "--tenant", tenant, "--tool", "book", "--run", "run_n", "--call-id", callID)
	mustExit(t, r, exitIndeterminate)
	if !strings.HasPrefix(r.stdout, "TOOL_INDETERMINATE  book  run=run_n call="+callID) || !strings.Contains(r.stderr, "emitter -s "+e.url+" resolve") {
		t.Fatalf("attach: stdout %q, stderr %q", r.stdout, r.stderr)
	}

	r = e.emit(t, "", "call", "--no-wait", "--json", "--tenant", tenant, "--run", "run_n", "--call-id", "c-2", "--tool", "nope")
	mustExit(t, r, exitOK)
	if !strings.Contains(r.stdout, `"call_id":"c-2"`) || !strings.Contains(r.stdout, `"duplicate":false`) {
		t.Fatalf("--no-wait --json: stdout %q", r.stdout)
	}
	r = e.emit(t, "", "attach", "--tenant", tenant, "--tool", "nope", "--run", "run_n", "--call-id", "c-2")
	mustExit(t, r, exitFailed)
	if !strings.HasPrefix(r.stdout, "rejected  nope  run=run_n call=c-2  code=unknown_tool\n") {
		t.Fatalf("attach: stdout %q", r.stdout)
	}

	for _, args := range [][]string{
		{"attach", "--tenant", "a.b", "--tool", "t", "--run", "r", "--call-id", "c"},
		{"attach", "--tenant", "a", "--tool", "t", "--run", "r"},
	} {
		mustExit(t, e.emit(t, "", args...), exitUsage)
	}
	r = e.emit(t, "", "attach", "--tenant", tenant, "--tool", "book", "--run", "run_n", "--call-id", "never", "--timeout", "200ms")
	mustExit(t, r, exitFailure)
	if !strings.Contains(r.stderr, "emitter -s "+e.url+" attach --tenant acme --tool book --run run_n --call-id never") {
		t.Fatalf("attach timeout: stderr %q", r.stderr)
	}
}

// TestConnectionErrors: no server, no streams.
func TestConnectionErrors(t *testing.T) {
	t.Parallel()
	e := newBareEnv(t, false)
	r := e.emit(t, "", "call", "--tenant", tenant, "--tool", "book", "--args", bookArgs1)
	mustExit(t, r, exitFailure)
	if !strings.Contains(r.stderr, "no toolexec stream") {
		t.Fatalf("no streams: stderr %q", r.stderr)
	}

	url := e.url
	natstest.Shutdown(e.srv)
	var stdout, stderr strings.Builder
	code := run(ctxT(t), []string{"call", "--server", url, "--tenant", tenant, "--tool", "book"}, strings.NewReader(""), &stdout, &stderr)
	if code != exitFailure || !strings.Contains(stderr.String(), "connecting to NATS at "+url) {
		t.Fatalf("no server: exit %d, stderr %q", code, stderr.String())
	}
}
