package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/wait"
)

// TestWatchLive watches from now on, in text, and sees each answer as it is
// published; an interrupt ends it with exit 0.
func TestWatchLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.emitBackground(t, "watch", "--tenant", tenant)
	wait.Eventually(t, waitLimit, "the watch to start", func() bool { return strings.Contains(w.stderr.String(), "watching toolexec.event.acme.*.*.>") })

	mustExit(t, e.emit(t, "", "call", "--tenant", tenant, "--run", "run_w", "--call-id", "c1", "--tool", "book", "--args", bookArgs1), exitOK)
	mustExit(t, e.emit(t, "", "call", "--tenant", tenant, "--run", "run_w", "--call-id", "c2", "--tool", "book", "--args", bookArgs2), exitOK)
	mustExit(t, e.emit(t, "", "call", "--tenant", tenant, "--run", "run_w", "--call-id", "c3", "--tool", "book", "--args", failArgs), exitIndeterminate)
	mustExit(t, e.emit(t, "", "call", "--tenant", "other", "--run", "run_w", "--call-id", "c4", "--tool", "nope"), exitFailed)
	mustExit(t, e.emit(t, "", "call", "--tenant", tenant, "--run", "run_w", "--call-id", "c5", "--tool", "nope"), exitFailed)

	w.waitLines(t, 4)
	if code := w.stop(t); code != exitOK {
		t.Fatalf("watch exit %d after the interrupt, want 0 (stderr %q)", code, w.stderr.String())
	}
	lines := w.stdout.lines()
	key := bookKey(t, tenant, "run_w", bookArgs1)[:watchKeyLen]
	want := []string{
		"  acme  completed      book  run=run_w call=c1 key=" + key + "  outcome=\"",
		"  acme  deduplicated   book  run=run_w call=c2 key=" + key + "  outcome=\"",
		"  acme  indeterminate  book  run=run_w call=c3 key=",
		"  acme  rejected       nope  run=run_w call=c5  code=unknown_tool error=\"no tool named \\\"nope\\\"\"",
	}
	if len(lines) != len(want) {
		t.Fatalf("watch printed %d lines, want %d (the other tenant's event left out):\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i, l := range lines {
		if !strings.Contains(l, want[i]) || !strings.HasPrefix(l, "20") {
			t.Errorf("line %d: %q does not contain %q", i, l, want[i])
		}
	}
	if !strings.HasSuffix(lines[2], "reason=body_failed body_entered=true") {
		t.Errorf("indeterminate line %q", lines[2])
	}
}

// TestWatchFiltersJSON watches stored events as JSON lines, filtered by kind
// (one kind on the server, several on the client), tool and tenant.
func TestWatchFiltersJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	calls := [][]string{
		{"--tenant", tenant, "--call-id", "c1", "--tool", "book", "--args", bookArgs1},
		{"--tenant", tenant, "--call-id", "c2", "--tool", "book", "--args", bookArgs2},
		{"--tenant", tenant, "--call-id", "c3", "--tool", "book", "--args", failArgs},
		{"--tenant", tenant, "--call-id", "c4", "--tool", "lookup_fare", "--args", fareArgs},
		{"--tenant", "other", "--call-id", "c5", "--tool", "lookup_fare", "--args", fareArgs},
	}
	for _, c := range calls {
		e.emit(t, "", append([]string{"call", "--run", "run_1"}, c...)...)
	}
	for _, tt := range []struct {
		name  string
		args  []string
		calls []string // call ids expected, in order
	}{
		{"everything", nil, []string{"c1", "c2", "c3", "c4", "c5"}},
		{"one tenant", []string{"--tenant", "other"}, []string{"c5"}},
		{"one kind", []string{"--kind", "completed"}, []string{"c1", "c4", "c5"}},
		{"two kinds", []string{"--kind", "indeterminate,deduplicated"}, []string{"c2", "c3"}},
		{"repeated kinds", []string{"--kind", "indeterminate", "--kind", "deduplicated"}, []string{"c2", "c3"}},
		{"kind and tool", []string{"--kind", "completed", "--tool", "lookup_fare", "--tenant", tenant}, []string{"c4"}},
		{"since", []string{"--since", "1h", "--tool", "lookup_fare"}, []string{"c4", "c5"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"watch", "--json"}
			if !strings.Contains(strings.Join(tt.args, " "), "--since") {
				args = append(args, "--from-start")
			}
			w := e.emitBackground(t, append(args, tt.args...)...)
			// Events arrive in stream order, so a filter that let through too much
			// would show up among the first lines.
			w.waitLines(t, len(tt.calls))
			if code := w.stop(t); code != exitOK {
				t.Fatalf("exit %d, stderr %q", code, w.stderr.String())
			}
			var got []string
			for _, l := range w.stdout.lines()[:len(tt.calls)] {
				var a answerJSON
				if err := json.Unmarshal([]byte(l), &a); err != nil {
					t.Fatalf("line %q is not JSON: %v", l, err)
				}
				if !a.Kind.Valid() || a.Subject == "" || a.ID == "" {
					t.Fatalf("line %q is not an answer", l)
				}
				got = append(got, a.CallID)
			}
			if strings.Join(got, ",") != strings.Join(tt.calls, ",") {
				t.Fatalf("watched calls %v, want %v", got, tt.calls)
			}
		})
	}
}

// TestWatchBadInput refuses filters it cannot build, with exit 2.
func TestWatchBadInput(t *testing.T) {
	t.Parallel()
	e := newBareEnv(t, true)
	for _, args := range [][]string{
		{"watch", "--kind", "bogus"},
		{"watch", "--tenant", "a.b"},
		{"watch", "--tool", ">"},
		{"watch", "--from-start", "--since", "1h"},
		{"watch", "--since", "-1h"},
		{"watch", "extra"},
	} {
		r := e.emit(t, "", args...)
		mustExit(t, r, exitUsage)
		if r.stdout != "" || r.stderr == "" {
			t.Fatalf("%v: stdout %q, stderr %q", args, r.stdout, r.stderr)
		}
	}
}

func TestWatchFilter(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		give       watchOptions
		wantFilter string
		wantKeep   []events.Kind
	}{
		{"all", watchOptions{}, "toolexec.event.*.*.*.>", nil},
		{"tenant", watchOptions{tenant: "acme"}, "toolexec.event.acme.*.*.>", nil},
		{"one kind", watchOptions{kinds: []string{"indeterminate"}}, "toolexec.event.*.indeterminate.*.>", nil},
		{"same kind twice", watchOptions{kinds: []string{"failed", "failed"}}, "toolexec.event.*.failed.*.>", nil},
		{"two kinds", watchOptions{tool: "book", kinds: []string{"failed", "resolved"}}, "toolexec.event.*.*.book.>",
			[]events.Kind{events.KindFailed, events.KindResolved}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			filter, keep, err := watchFilter(&tt.give)
			if err != nil {
				t.Fatal(err)
			}
			if filter != tt.wantFilter || len(keep) != len(tt.wantKeep) {
				t.Fatalf("filter %q keep %v, want %q %v", filter, keep, tt.wantFilter, tt.wantKeep)
			}
			for _, k := range tt.wantKeep {
				if !keep[k] {
					t.Fatalf("keep %v lacks %s", keep, k)
				}
			}
		})
	}
}

// TestWatchNotes shows a call's notes (the progress and log records of its
// body) in their place among the answers, as lines and as JSON, and keeps
// them with --kind progress,log.
func TestWatchNotes(t *testing.T) {
	t.Parallel()
	e := newBareEnv(t, true)
	for i, n := range []wire.Note{
		{Kind: wire.NoteProgress, Progress: 1, Total: 2, Message: "half way"},
		{Kind: wire.NoteLog, Level: "info", Logger: "up", Data: json.RawMessage(`"hello"`)},
	} {
		n.Tenant, n.Tool, n.RunID, n.CallID, n.Seq, n.Source = tenant, "book", "run_n", "c1", i+1, "/test"
		n.ID = wire.NoteID(tenant, "book", "c1", "r", n.Seq)
		b, err := wire.NoteJSON(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.js.Publish(t.Context(), wire.NoteSubject(n.Kind, tenant, "book", "run_n", "c1", n.Seq), b); err != nil {
			t.Fatal(err)
		}
	}
	w := e.emitBackground(t, "watch", "--tenant", tenant, "--from-start")
	w.waitLines(t, 2)
	if code := w.stop(t); code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, w.stderr.String())
	}
	lines := w.stdout.lines()
	for i, want := range []string{
		"  acme  progress       book  run=run_n call=c1 seq=1  progress=1/2 message=\"half way\"",
		"  acme  log            book  run=run_n call=c1 seq=2  level=info logger=\"up\" data=\"\\\"hello\\\"\"",
	} {
		if !strings.HasSuffix(lines[i], want) {
			t.Errorf("line %d: %q, want it to end %q", i, lines[i], want)
		}
	}
	w = e.emitBackground(t, "watch", "--json", "--tenant", tenant, "--from-start", "--kind", "log,completed")
	w.waitLines(t, 1)
	if code := w.stop(t); code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, w.stderr.String())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(w.stdout.lines()[0]), &got); err != nil || got["kind"] != "log" || got["data"] != "hello" || got["seq"] != float64(2) {
		t.Errorf("--json --kind log: %v, %v", got, err)
	}
}
