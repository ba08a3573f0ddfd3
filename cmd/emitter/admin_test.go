package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/kvstore"
)

// TestInspectResolveForget takes two bookings to indeterminate, inspects them,
// completes one and releases the other, and forgets the tenant.
func TestInspectResolveForget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	call := func(args string) result {
		return e.emit(t, "", "call", "--tenant", tenant, "--run", "run_a", "--tool", "book", "--args", args)
	}
	mustExit(t, call(failArgs), exitIndeterminate)
	key := bookKey(t, tenant, "run_a", failArgs)
	release := `{"flight":"AF22","seats":1,"request_id":"r-9","fail_after_effect":true}`
	mustExit(t, call(release), exitIndeterminate)
	releaseKey := bookKey(t, tenant, "run_a", release)

	// inspect, in text: the record, never the arguments.
	r := e.emit(t, "", "inspect", "--tenant", tenant, "--key", key)
	mustExit(t, r, exitOK)
	for _, want := range []string{"tenant:", "key:           " + key, "state:         indeterminate", "tool:          book",
		"run:           run_a", "reason:        body_failed", "body entered:  true", "holder:", "revision:", "created:", "expires:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("inspect: stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, secret := range []string{"LH902", "r-3", "fail_after_effect"} {
		if strings.Contains(r.stdout, secret) {
			t.Errorf("inspect shows the argument %q:\n%s", secret, r.stdout)
		}
	}
	// inspect --json: the record as the admin reply has it.
	r = e.emit(t, "", "inspect", "--json", "--tenant", tenant, "--key", key)
	mustExit(t, r, exitOK)
	var rec admin.RecordInfo
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("inspect --json: %v: %q", err, r.stdout)
	}
	if rec.State != kvstore.StateIndeterminate || rec.Key != key || rec.Reason != "body_failed" || !rec.BodyEntered {
		t.Fatalf("inspect --json: %+v", rec)
	}

	// resolve --complete: the record now holds the outcome, and duplicates get it.
	r = e.emit(t, "", "resolve", "--tenant", tenant, "--key", key, "--complete", "--outcome", "PNR-MANUAL", "--operator", "alice")
	mustExit(t, r, exitOK)
	if !strings.HasPrefix(r.stdout, "resolved by alice: completed\n") || !strings.Contains(r.stdout, "state:         completed") ||
		!strings.Contains(r.stdout, "outcome:       PNR-MANUAL") {
		t.Fatalf("resolve --complete: stdout %q", r.stdout)
	}
	r = call(failArgs)
	mustExit(t, r, exitOK)
	if !strings.HasPrefix(r.stdout, "TOOL_DEDUPLICATED  book") || !strings.HasSuffix(r.stdout, "\n  outcome: PNR-MANUAL\n") {
		t.Fatalf("after resolve: stdout %q", r.stdout)
	}
	// Resolving it again: not indeterminate, exit 3.
	r = e.emit(t, "", "resolve", "--tenant", tenant, "--key", key, "--release")
	mustExit(t, r, exitFailed)
	if !strings.Contains(r.stderr, "is not indeterminate") {
		t.Fatalf("resolve a completed key: stderr %q", r.stderr)
	}

	// resolve --release: the key is gone, the next call books.
	r = e.emit(t, "", "resolve", "--json", "--tenant", tenant, "--key", releaseKey, "--release")
	mustExit(t, r, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil || rec.Key != releaseKey {
		t.Fatalf("resolve --release --json: %v: %q", err, r.stdout)
	}
	r = e.emit(t, "", "inspect", "--tenant", tenant, "--key", releaseKey)
	mustExit(t, r, exitFailed)
	if !strings.Contains(r.stderr, "has no record for key "+releaseKey) {
		t.Fatalf("inspect a released key: stderr %q", r.stderr)
	}
	mustExit(t, call(`{"flight":"AF22","seats":1,"request_id":"r-10"}`), exitOK)
	if n := e.airline.Bookings("AF22"); n != 2 {
		t.Fatalf("AF22 booked %d times, want twice (the lost answer, then the call after the release)", n)
	}

	// The resolutions are audit events.
	w := e.emitBackground(t, "watch", "--json", "--from-start", "--kind", "resolved")
	lines := w.waitLines(t, 2)
	w.stop(t)
	var audit []answerJSON
	for _, l := range lines[:2] {
		var a answerJSON
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatal(err)
		}
		audit = append(audit, a)
	}
	if audit[0].Kind != events.KindResolved || audit[0].Action != "complete" || audit[0].Operator != "alice" ||
		audit[0].Key != key || audit[0].Outcome == nil || *audit[0].Outcome != "PNR-MANUAL" ||
		audit[1].Action != "release" || audit[1].Key != releaseKey || audit[1].Outcome != nil {
		t.Fatalf("resolved events %+v", audit)
	}

	// forget: declined, then confirmed.
	r = e.emit(t, "n\n", "forget", "--tenant", tenant)
	mustExit(t, r, exitFailure)
	if !strings.Contains(r.stderr, "[y/N]") || !strings.Contains(r.stderr, "not confirmed") {
		t.Fatalf("forget declined: stderr %q", r.stderr)
	}
	mustExit(t, e.emit(t, "", "forget", "--tenant", tenant), exitFailure) // no answer at all
	mustExit(t, e.emit(t, "", "inspect", "--tenant", tenant, "--key", key), exitOK)

	r = e.emit(t, "yes\n", "forget", "--tenant", tenant)
	mustExit(t, r, exitOK)
	if r.stdout != "forgot tenant acme: 2 records erased; its calls and events were purged\n" {
		t.Fatalf("forget: stdout %q", r.stdout)
	}
	r = e.emit(t, "", "inspect", "--tenant", tenant, "--key", key)
	mustExit(t, r, exitFailed)
	r = e.emit(t, "", "forget", "--yes", "--json", "--tenant", tenant)
	mustExit(t, r, exitOK)
	if strings.TrimSpace(r.stdout) != `{"records":0,"tenant":"acme"}` {
		t.Fatalf("forget --json: stdout %q", r.stdout)
	}
	// Forgotten: the same booking runs again.
	mustExit(t, call(`{"flight":"LH902","seats":1,"request_id":"r-11"}`), exitOK)
	if n := e.airline.Bookings("LH902"); n != 2 {
		t.Fatalf("LH902 booked %d times after forget, want 2", n)
	}
}

// TestAdminBadInput refuses malformed admin requests with exit 2 before sending
// them.
func TestAdminBadInput(t *testing.T) {
	t.Parallel()
	e := newBareEnv(t, true) // no executor: a request that got through would fail with exit 1
	key := strings.Repeat("a", 64)
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"inspect short key", []string{"inspect", "--tenant", tenant, "--key", "abc"}},
		{"inspect upper-case key", []string{"inspect", "--tenant", tenant, "--key", strings.Repeat("A", 64)}},
		{"inspect bad tenant", []string{"inspect", "--tenant", "a b", "--key", key}},
		{"inspect no key", []string{"inspect", "--tenant", tenant}},
		{"resolve neither", []string{"resolve", "--tenant", tenant, "--key", key}},
		{"resolve both", []string{"resolve", "--tenant", tenant, "--key", key, "--complete", "--outcome", "x", "--release"}},
		{"resolve complete without outcome", []string{"resolve", "--tenant", tenant, "--key", key, "--complete"}},
		{"resolve release with outcome", []string{"resolve", "--tenant", tenant, "--key", key, "--release", "--outcome", "x"}},
		{"resolve long operator", []string{"resolve", "--tenant", tenant, "--key", key, "--release", "--operator", strings.Repeat("o", 257)}},
		{"resolve bad key", []string{"resolve", "--tenant", tenant, "--key", "k", "--release"}},
		{"forget bad tenant", []string{"forget", "--yes", "--tenant", "a>"}},
		{"forget no tenant", []string{"forget", "--yes"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.emit(t, "", tt.args...)
			mustExit(t, r, exitUsage)
			if r.stdout != "" || r.stderr == "" {
				t.Fatalf("stdout %q, stderr %q", r.stdout, r.stderr)
			}
		})
	}
}

// TestAdminNoExecutor says so when nobody answers admin requests.
func TestAdminNoExecutor(t *testing.T) {
	t.Parallel()
	e := newBareEnv(t, true)
	key := strings.Repeat("a", 64)
	for _, args := range [][]string{
		{"inspect", "--tenant", tenant, "--key", key},
		{"resolve", "--tenant", tenant, "--key", key, "--release"},
		{"forget", "--tenant", tenant, "--yes"},
	} {
		r := e.emit(t, "", args...)
		mustExit(t, r, exitFailure)
		if r.stdout != "" || !strings.Contains(r.stderr, "no executor answers admin requests") {
			t.Fatalf("%v: stdout %q, stderr %q", args, r.stdout, r.stderr)
		}
	}
}
