package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/buildinfo"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
)

// runBare runs the emitter in-process with exactly args: no --server added.
func runBare(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(ctxT(t), args, strings.NewReader(stdin), &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// hintLine returns the stderr line that holds the suggested command sub
// ("inspect", "resolve", "attach"), as its words, without the program name.
func hintLine(t *testing.T, stderr, sub string) []string {
	t.Helper()
	for _, l := range strings.Split(stderr, "\n") {
		f := strings.Fields(l)
		if len(f) > 1 && f[0] == "emitter" {
			for _, w := range f {
				if w == sub {
					return f[1:]
				}
			}
		}
	}
	t.Fatalf("no suggested %s command in %q", sub, stderr)
	return nil
}

// expand replaces "$VAR" words as a shell would, from env.
func expand(words []string, env map[string]string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		if strings.HasPrefix(w, `"$`) && strings.HasSuffix(w, `"`) {
			w = env[strings.Trim(w, `"$`)]
		}
		out[i] = w
	}
	return out
}

// authEnv is an executor on a server that wants a user and password.
func authEnv(t *testing.T) *env {
	t.Helper()
	srv := natstest.Start(t, func(o *server.Options) { o.Username, o.Password = "agent", "hunter2" })
	e := newBareEnvOn(t, srv, true, nats.UserInfo("agent", "hunter2"))
	e.startExecutor(t)
	return e
}

// TestHintsRepeatTheConnection: after an indeterminate answer, the inspect
// and resolve commands the emitter suggests name the server and the user it
// used, never the password (a variable stands in), and work when pasted.
func TestHintsRepeatTheConnection(t *testing.T) {
	t.Parallel()
	e := authEnv(t)
	r := runBare(t, "", "-s", e.url, "--user", "agent", "--password", "hunter2",
		"call", "--tenant", tenant, "--run", "run_h", "--tool", "book", "--args", failArgs)
	mustExit(t, r, exitIndeterminate)
	if strings.Contains(r.stderr, "hunter2") {
		t.Fatalf("the password is shown: %q", r.stderr)
	}
	want := "emitter -s " + e.url + ` --user agent --password "$NATS_PASSWORD" inspect --tenant acme --key `
	if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "set NATS_PASSWORD first") {
		t.Fatalf("stderr %q lacks %q and the note on NATS_PASSWORD", r.stderr, want)
	}
	words := hintLine(t, r.stderr, "inspect")
	r = runBare(t, "", expand(words, map[string]string{"NATS_PASSWORD": "hunter2"})...)
	mustExit(t, r, exitOK)
	if !strings.Contains(r.stdout, "indeterminate") {
		t.Fatalf("pasted inspect: stdout %q", r.stdout)
	}
	// Without the password the server refuses: the hint did need it.
	r = runBare(t, "", expand(words, nil)...)
	if r.code == exitOK {
		t.Fatalf("inspect without the password worked: the server took no password?")
	}
}

// TestContexts: the emitter reads the nats CLI's saved contexts (named, or the
// selected one), flags override their values, and the hints name the context.
// It sets HOME, so it does not run in parallel.
func TestContexts(t *testing.T) {
	e := authEnv(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	for _, v := range []string{"NATS_URL", "NATS_USER", "NATS_PASSWORD", "NATS_CONTEXT", "NATS_CREDS"} {
		t.Setenv(v, "")
	}
	dir := filepath.Join(home, ".config", "nats", "context")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("staging", `{"description":"test","url":"`+e.url+`","user":"agent","password":"hunter2"}`)
	write("wrongpw", `{"url":"`+e.url+`","user":"agent","password":"guess"}`)

	call := func(args ...string) result {
		return runBare(t, "", append(args, "call", "--tenant", tenant, "--run", "run_c", "--tool", "lookup_fare", "--args", fareArgs)...)
	}
	// Named: connects with the context's URL and credentials.
	mustExit(t, call("--context", "staging"), exitOK)
	// The context's wrong password fails; explicit credentials set it aside.
	if r := call("--context", "wrongpw", "--timeout", "5s"); r.code != exitFailure || !strings.Contains(r.stderr, "Authorization Violation") {
		t.Fatalf("wrong context password: exit %d, stderr %q", r.code, r.stderr)
	}
	mustExit(t, call("--context", "wrongpw", "--user", "agent", "--password", "hunter2"), exitOK)
	// NATS_CONTEXT names it too.
	t.Setenv("NATS_CONTEXT", "staging")
	mustExit(t, call(), exitOK)
	t.Setenv("NATS_CONTEXT", "")
	// Unknown: bad input, before anything is sent.
	if r := call("--context", "nope"); r.code != exitUsage || !strings.Contains(r.stderr, `unknown context "nope"`) {
		t.Fatalf("unknown context: exit %d, stderr %q", r.code, r.stderr)
	}
	// The selected context applies with no flag at all, unless --no-context.
	if err := os.WriteFile(filepath.Join(home, ".config", "nats", "context.txt"), []byte("staging"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runBare(t, "", "call", "--tenant", tenant, "--run", "run_c", "--tool", "book", "--args", failArgs)
	mustExit(t, r, exitIndeterminate)
	want := "emitter --context staging resolve --tenant acme --key "
	if !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "hunter2") {
		t.Fatalf("stderr %q lacks %q (or shows the password)", r.stderr, want)
	}
	mustExit(t, runBare(t, "", hintLine(t, r.stderr, "inspect")...), exitOK)
	if r := call("--no-context", "-s", e.url, "--timeout", "5s"); r.code != exitFailure || !strings.Contains(r.stderr, "Authorization Violation") {
		t.Fatalf("--no-context used the selected context: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestStoreAway: with the store unreachable, an effectful call that entered no
// body says that nothing ran and that retrying is safe, and suggests no
// resolve; once the store is back, the retry books.
func TestStoreAway(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := e.store.Close(); err != nil { // every store operation now fails unavailable
		t.Fatal(err)
	}
	r := e.emit(t, "", "call", "--tenant", tenant, "--run", "run_s", "--tool", "book", "--args", bookArgs1)
	mustExit(t, r, exitIndeterminate)
	if !strings.Contains(r.stdout, "reason=store_unavailable body_entered=false") {
		t.Fatalf("stdout %q", r.stdout)
	}
	for _, want := range []string{"nothing ran", "Retrying is safe"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q does not say %q", r.stderr, want)
		}
	}
	for _, never := range []string{"resolve", "inspect", "may or may not"} {
		if strings.Contains(r.stderr, never) {
			t.Errorf("stderr %q says %q", r.stderr, never)
		}
	}
	if n := e.airline.Bookings("BA117"); n != 0 {
		t.Fatalf("BA117 booked %d times with the store away", n)
	}
}

// TestStoreAwayAfterABody: store_unavailable on a redelivery (a body may have
// run in an earlier delivery) stays unknown, with the commands that settle it.
func TestStoreAwayAfterABody(t *testing.T) {
	g := &globalOptions{}
	a := events.Answer{Kind: events.KindIndeterminate, Tenant: tenant, Tool: "book", RunID: "r", CallID: "c",
		Key: strings.Repeat("ab", 32), Reason: events.ReasonStoreUnavailable, BodyEntered: true}
	err := answerStatus(g, a)
	if err == nil || !strings.Contains(err.Error(), "may or may not have landed") || !strings.Contains(err.Error(), "emitter resolve --tenant acme --key "+a.Key) ||
		strings.Contains(err.Error(), "nothing ran") {
		t.Fatalf("answerStatus = %v", err)
	}
	a.BodyEntered = false
	if err := answerStatus(g, a); err == nil || !strings.Contains(err.Error(), "nothing ran") || strings.Contains(err.Error(), "resolve") {
		t.Fatalf("answerStatus, no body = %v", err)
	}
}

// TestBadArgsOffset: JSON that does not parse is refused naming the byte
// where the parser stopped and what it wanted there.
func TestBadArgsOffset(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ args, want string }{
		{`{"flight":BA117}`, "--args: not valid JSON at byte 10: unexpected character 'B', want a value (invalid_json)"},
		{`{"flight":"BA117",}`, "--args: not valid JSON at byte 18: unexpected character '}'"},
		{``, "--args: not valid JSON at byte 0"},
	} {
		r := runBare(t, "", "-s", "nats://127.0.0.1:1", "call", "--tenant", tenant, "--tool", "book", "--args", c.args)
		mustExit(t, r, exitUsage)
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("--args %q: stderr %q, want %q", c.args, r.stderr, c.want)
		}
	}
}

// TestVersion: --version names the build, as package buildinfo says it.
func TestVersion(t *testing.T) {
	t.Parallel()
	r := runBare(t, "", "--version")
	mustExit(t, r, exitOK)
	if want := "emitter version " + buildinfo.Get().String() + "\n"; r.stdout != want {
		t.Fatalf("--version printed %q, want %q", r.stdout, want)
	}
}

// TestOldFlagNames: the executor's spellings of the connection flags work in
// the emitter too, hidden from its help.
func TestOldFlagNames(t *testing.T) {
	t.Parallel()
	e := authEnv(t)
	r := runBare(t, "", "--nats-url", e.url, "--nats-user", "agent", "--nats-password", "hunter2",
		"call", "--tenant", tenant, "--tool", "lookup_fare", "--args", fareArgs)
	mustExit(t, r, exitOK)
	for _, c := range []struct{ old, value, want string }{
		{"--nats-creds", "/nonexistent/x.creds", "x.creds"},
		{"--nats-nkey", "/nonexistent/x.nk", "x.nk"},
		{"--tls-cert", "/nonexistent/c.pem", "c.pem"},
		{"--tls-ca", "/nonexistent/ca.pem", "ca.pem"},
	} {
		args := []string{"--nats-url", e.url, c.old, c.value}
		if c.old == "--tls-cert" {
			args = append(args, "--tls-key", "/nonexistent/k.pem")
		}
		r := runBare(t, "", append(args, "call", "--tenant", tenant, "--tool", "lookup_fare", "--args", fareArgs)...)
		if r.code == exitOK || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q: the file was not used", c.old, r.code, r.stderr)
		}
	}
	r = runBare(t, "", "--help")
	for _, old := range []string{"--nats-url", "--nats-creds", "--tls-cert"} {
		if strings.Contains(r.stdout, old) {
			t.Errorf("--help shows %s", old)
		}
	}
}

// TestREADMEListsEveryCommand: the README's list of the emitter's commands
// ("Its other commands: …", beside call) names each command the emitter has,
// and no other.
func TestREADMEListsEveryCommand(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "Its other commands:")
	list, _, ok2 := strings.Cut(rest, ";")
	if !ok || !ok2 {
		t.Fatal(`README.md has no "Its other commands: …;" list`)
	}
	listed := map[string]bool{"call": true}
	for _, m := range regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(list, -1) {
		listed[m[1]] = true
	}
	have := map[string]bool{}
	for _, c := range newRootCmd().Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		have[c.Name()] = true
		if !listed[c.Name()] {
			t.Errorf("README.md does not list emitter %s", c.Name())
		}
	}
	for name := range listed {
		if !have[name] {
			t.Errorf("README.md lists emitter %s, which does not exist", name)
		}
	}
}
