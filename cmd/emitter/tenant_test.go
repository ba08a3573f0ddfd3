package main

import (
	"strings"
	"testing"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
)

// newAccountsEnv starts a server with the tenants' account layout
// (natstest.StartAccounts: tenants acme and globex, without JetStream) and
// the streams in the executors' account, but no executor.
func newAccountsEnv(t *testing.T) *env {
	t.Helper()
	srv := natstest.StartAccounts(t, tenant, "globex")
	nc := natstest.Connect(t, srv) // the executors' account
	js := natstest.JetStream(t, nc)
	if err := bus.EnsureStreams(ctxT(t), js, bus.StreamsConfig{}); err != nil {
		t.Fatalf("EnsureStreams: %v", err)
	}
	return &env{srv: srv, url: srv.ClientURL(), nc: nc, js: js}
}

// TestTenantAccountAttachWatch runs the emitter as a tenant whose account has
// no JetStream: its call times out, attach finds the answer and watch shows
// its events, through the history service and with no flag saying so; watch
// without --tenant is refused with a hint, and another tenant cannot attach to
// its call.
func TestTenantAccountAttachWatch(t *testing.T) {
	t.Parallel()
	e := newAccountsEnv(t)
	as := func(user string, args ...string) []string {
		return append([]string{"--user", user, "--password", user}, args...)
	}
	r := e.emit(t, "", as(tenant, "call", "--tenant", tenant, "--run", "run_t", "--call-id", "call_t", "--tool", "lookup_fare",
		"--args", fareArgs, "--timeout", "300ms")...)
	mustExit(t, r, exitFailure)

	e.startExecutor(t)
	attach := as(tenant, "--json", "attach", "--tenant", tenant, "--tool", "lookup_fare", "--run", "run_t", "--call-id", "call_t")
	r = e.emit(t, "", attach...)
	mustExit(t, r, exitOK)
	if a := parseAnswer(t, r.stdout); a.Kind != events.KindCompleted || *a.Outcome != "GBP 612.40" {
		t.Fatalf("attach --json: %+v", a)
	}

	w := e.emitBackground(t, as(tenant, "--json", "watch", "--tenant", tenant, "--from-start")...)
	w.waitLines(t, 1)
	r = e.emit(t, "", as(tenant, "call", "--tenant", tenant, "--run", "run_t", "--call-id", "call_live", "--tool", "lookup_fare", "--args", fareArgs)...)
	mustExit(t, r, exitOK)
	lines := w.waitLines(t, 2)
	if code := w.stop(t); code != exitOK {
		t.Fatalf("watch exit %d (stderr %q)", code, w.stderr.String())
	}
	if len(lines) != 2 || !strings.Contains(lines[0], `"call_id":"call_t"`) || !strings.Contains(lines[1], `"call_id":"call_live"`) {
		t.Fatalf("watch printed:\n%s", strings.Join(lines, "\n"))
	}

	r = e.emit(t, "", as(tenant, "watch", "--from-start")...)
	mustExit(t, r, exitUsage)
	if !strings.Contains(r.stderr, "give --tenant") {
		t.Errorf("watch without --tenant: stderr %q, want the hint", r.stderr)
	}

	attach[1] = "globex"
	attach[3] = "globex"
	r = e.emit(t, "", attach...)
	mustExit(t, r, exitFailure)
	if r.stdout != "" || !strings.Contains(r.stderr, toolexec.ErrNoHistoryService.Error()) {
		t.Errorf("globex attaching to acme's call: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

// TestAdminAccountAttachWatch runs the emitter as the operators (account
// ADMIN: every tenant's events imported, no JetStream, no tenant's history
// subject): attach to a tenant's call and watch every tenant's completed
// answers from the start both read through toolexec.admin.history, with no
// flag saying so.
func TestAdminAccountAttachWatch(t *testing.T) {
	t.Parallel()
	e := newAccountsEnv(t)
	e.startExecutor(t)
	r := e.emit(t, "", "--user", tenant, "--password", tenant, "call", "--tenant", tenant, "--run", "run_a", "--call-id", "call_a",
		"--tool", "lookup_fare", "--args", fareArgs)
	mustExit(t, r, exitOK)

	admin := []string{"--user", "admin", "--password", "admin", "--json"}
	r = e.emit(t, "", append(admin, "attach", "--tenant", tenant, "--tool", "lookup_fare", "--run", "run_a", "--call-id", "call_a")...)
	mustExit(t, r, exitOK)
	if a := parseAnswer(t, r.stdout); a.Kind != events.KindCompleted || a.Tenant != tenant || *a.Outcome != "GBP 612.40" {
		t.Fatalf("admin's attach --json: %+v", a)
	}

	w := e.emitBackground(t, append(admin, "watch", "--kind", "completed", "--from-start")...)
	lines := w.waitLines(t, 1)
	if code := w.stop(t); code != exitOK {
		t.Fatalf("watch exit %d (stderr %q)", code, w.stderr.String())
	}
	if !strings.Contains(lines[0], `"call_id":"call_a"`) || !strings.Contains(lines[0], `"tenant":"`+tenant+`"`) {
		t.Fatalf("admin's watch printed:\n%s", strings.Join(lines, "\n"))
	}
}
