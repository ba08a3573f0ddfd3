package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/kvstore"
)

// TestIndeterminateList parks two bookings, lists them (text and JSON), and
// resolves one from the list: it leaves the list.
func TestIndeterminateList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var keys []string
	for i, flight := range []string{"LH902", "AF22"} {
		args := fmt.Sprintf(`{"flight":%q,"seats":1,"request_id":"r-%d","fail_after_effect":true}`, flight, i)
		mustExit(t, e.emit(t, "", "call", "--tenant", tenant, "--run", "run_a", "--tool", "book", "--call-id", fmt.Sprintf("call_%d", i), "--args", args), exitIndeterminate)
		keys = append(keys, bookKey(t, tenant, "run_a", args))
	}

	r := e.emit(t, "", "indeterminate", "list", "--tenant", tenant)
	mustExit(t, r, exitOK)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "AGE") || !strings.Contains(lines[0], "REASON") {
		t.Fatalf("list: stdout %q", r.stdout)
	}
	for i, k := range keys {
		row := lines[1+i]
		for _, want := range []string{"book", "run_a", fmt.Sprintf("call_%d", i), "body_failed", "true", k} {
			if !strings.Contains(row, want) {
				t.Errorf("row %d %q lacks %q", i, row, want)
			}
		}
	}
	for _, secret := range []string{"LH902", "r-0", "fail_after_effect"} {
		if strings.Contains(r.stdout, secret) {
			t.Errorf("list shows the argument %q", secret)
		}
	}
	if !strings.Contains(lines[3], "emitter -s "+e.url+" resolve --tenant "+tenant) {
		t.Errorf("no hint to resolve: %q", lines[3])
	}

	r = e.emit(t, "", "indeterminate", "list", "--json", "--tenant", tenant, "--limit", "1")
	mustExit(t, r, exitOK)
	var resp admin.ListResponse
	if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil {
		t.Fatalf("list --json: %v: %q", err, r.stdout)
	}
	if len(resp.Records) != 1 || !resp.More || resp.Records[0].Key != keys[0] || resp.Records[0].State != kvstore.StateIndeterminate || resp.Now.IsZero() {
		t.Fatalf("list --json --limit 1: %+v", resp)
	}

	mustExit(t, e.emit(t, "", "resolve", "--tenant", tenant, "--key", keys[0], "--complete", "--outcome", "PNR-1"), exitOK)
	r = e.emit(t, "", "indeterminate", "list", "--tenant", tenant)
	mustExit(t, r, exitOK)
	if strings.Contains(r.stdout, keys[0]) || !strings.Contains(r.stdout, keys[1]) {
		t.Fatalf("after resolving one: %q", r.stdout)
	}
	r = e.emit(t, "", "indeterminate", "list", "--tenant", tenant, "--state", "completed")
	mustExit(t, r, exitOK)
	if !strings.Contains(r.stdout, keys[0]) || !strings.Contains(r.stdout, "PNR-1") {
		t.Fatalf("completed list: %q", r.stdout)
	}
	r = e.emit(t, "", "indeterminate", "list", "--tenant", "nobody")
	mustExit(t, r, exitOK)
	if r.stdout != "tenant nobody has no indeterminate records\n" {
		t.Fatalf("empty list: %q", r.stdout)
	}
}

// TestIndeterminateListBadInput: bad flags are refused before anything is sent.
func TestIndeterminateListBadInput(t *testing.T) {
	t.Parallel()
	e := newBareEnv(t, true)
	for _, args := range [][]string{
		{"--tenant", "ac me"},
		{"--tenant", "acme", "--state", "released"},
		{"--tenant", "acme", "--limit", "0"},
		{"--tenant", "acme", "--limit", "5000"},
		{},
	} {
		r := e.emit(t, "", append([]string{"indeterminate", "list"}, args...)...)
		mustExit(t, r, exitUsage)
	}
	// No executor answers: a clear message, exit 1.
	r := e.emit(t, "", "indeterminate", "list", "--tenant", "acme")
	mustExit(t, r, exitFailure)
	if !strings.Contains(r.stderr, "no executor answers admin requests") {
		t.Fatalf("stderr %q", r.stderr)
	}
}
