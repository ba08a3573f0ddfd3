package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/testkit/wait"
)

// buildEmitter builds the emitter binary into a temporary directory.
func buildEmitter(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "emitter")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// exitCode returns the process's exit status from cmd.Run's error.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode()
	}
	if err != nil {
		t.Fatalf("run the emitter: %v", err)
	}
	return 0
}

// TestProcess runs the built emitter against a test server and executor: the
// exit statuses are those of a real process, and the output is what a user
// sees.
func TestProcess(t *testing.T) {
	t.Parallel()
	bin := buildEmitter(t)
	e := newEnv(t)
	exe := func(t *testing.T, args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "NATS_URL="+e.url) // the server comes from the environment
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := exitCode(t, cmd.Run())
		t.Logf("$ emitter %s\n%s%s(exit %d)", strings.Join(args, " "), stdout.String(), stderr.String(), code)
		return result{code, stdout.String(), stderr.String()}
	}
	book := []string{"call", "--tenant", tenant, "--run", "run_1", "--tool", "book", "--args"}
	key := bookKey(t, tenant, "run_1", bookArgs1)
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stdout string // regular expression
		stderr string // substring
	}{
		{"completed", append(book, bookArgs1), exitOK,
			`^completed  book  run=run_1 call=call_[0-9a-f]{32}  key=` + key + `\n  outcome: [A-Z0-9]{6}\n$`, ""},
		{"deduplicated", append(book, bookArgs2), exitOK,
			`^TOOL_DEDUPLICATED  book  run=run_1 call=call_[0-9a-f]{32}  key=` + key + `\n  outcome: [A-Z0-9]{6}\n$`, ""},
		{"indeterminate", append(book, failArgs), exitIndeterminate,
			`^TOOL_INDETERMINATE  book  run=run_1 call=call_[0-9a-f]{32}  key=[0-9a-f]{64}  reason=body_failed body_entered=true\n$`, "emitter -s " + e.url + " resolve --tenant acme --key "},
		{"rejected", []string{"call", "--tenant", tenant, "--run", "run_1", "--call-id", "call_x", "--tool", "nope"}, exitFailed,
			`^rejected  nope  run=run_1 call=call_x  code=unknown_tool\n  error: .+\n$`, "unknown_tool"},
		{"bad args", append(book, `["BA117"]`), exitUsage, `^$`, "--args: arguments must be a JSON object"},
		{"no answer in time", []string{"call", "--tenant", tenant, "--tool", "lookup_fare", "--args", fareArgs, "--timeout", "1ns"}, exitFailure, `^$`, "emitter -s " + e.url + " attach --tenant acme --tool lookup_fare"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := exe(t, tt.args...)
			if r.code != tt.code || !regexp.MustCompile(tt.stdout).MatchString(r.stdout) || !strings.Contains(r.stderr, tt.stderr) {
				t.Fatalf("exit %d, stdout %q (stderr %q); want exit %d, stdout matching %s, stderr with %q", r.code, r.stdout, r.stderr, tt.code, tt.stdout, tt.stderr)
			}
		})
	}

	t.Run("watch ends on SIGINT", func(t *testing.T) {
		cmd := exec.Command(bin, "watch", "--from-start", "--tenant", tenant, "--kind", "completed")
		cmd.Env = append(os.Environ(), "NATS_URL="+e.url)
		stdout, stderr := &syncBuffer{}, &syncBuffer{}
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wait.Eventually(t, waitLimit, "the stored completed event", func() bool { return len(stdout.lines()) >= 1 })
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if code := exitCode(t, err); code != exitOK {
				t.Fatalf("watch exit %d after SIGINT, want 0 (stderr %q)", code, stderr.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("watch did not end on SIGINT")
		}
		if l := stdout.lines(); len(l) != 1 || !strings.Contains(l[0], "  acme  completed      book  run=run_1") {
			t.Fatalf("watch printed %q", l)
		}
	})

	// After the watch, whose count of completed answers it would change.
	t.Run("mcp over stdio", func(t *testing.T) { testMCPProcess(t, bin, e) })
}
