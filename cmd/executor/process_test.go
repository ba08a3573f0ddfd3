package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
)

// buildExecutor builds the executor binary into a temporary directory.
func buildExecutor(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "executor")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// exited waits for cmd, started, to end by itself and returns its exit status;
// the bound only fences a process that would run on.
func exited(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return exitErr.ExitCode()
		}
		if err != nil {
			t.Fatalf("executor: %v", err)
		}
		return 0
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("executor still running after 30s")
		return -1
	}
}

// TestProcessWaitingForNATS runs the built executor against a NATS server that
// is not there, and one that refuses it: the exit statuses are those of a real
// process, signals included.
func TestProcessWaitingForNATS(t *testing.T) {
	bin := buildExecutor(t)
	start := func(t *testing.T, args ...string) (*exec.Cmd, *syncBuffer) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--demo", "--data-dir", t.TempDir()}, args...)...)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return cmd, &stderr
	}

	t.Run("SIGTERM while waiting exits 0", func(t *testing.T) {
		cmd, stderr := start(t, "--nats-url", "nats://"+testenv.FreeAddr(t))
		wait.Eventually(t, waitLimit, "the wait to be logged", func() bool {
			return strings.Contains(stderr.String(), "NATS not reachable; waiting for it")
		})
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := exited(t, cmd); code != 0 {
			t.Errorf("exit status %d, want 0:\n%s", code, stderr)
		}
		if strings.Contains(stderr.String(), "executor:") || strings.Contains(stderr.String(), "panic") {
			t.Errorf("an error on the way out:\n%s", stderr)
		}
	})
	t.Run("--nats-wait gives up with exit 1", func(t *testing.T) {
		url := "nats://" + testenv.FreeAddr(t)
		cmd, stderr := start(t, "--nats-url", url, "--nats-wait", "300ms")
		if code := exited(t, cmd); code != 1 {
			t.Errorf("exit status %d, want 1:\n%s", code, stderr)
		}
		if want := "executor: NATS at " + url + " not reachable within --nats-wait 300ms"; !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	})
	t.Run("wrong password exits 1 at once", func(t *testing.T) {
		srv := natstest.Start(t, func(o *server.Options) { o.Username, o.Password = "exec", "pw" })
		cmd, stderr := start(t, "--nats-url", srv.ClientURL(), "--nats-user", "exec", "--nats-password", "guess")
		if code := exited(t, cmd); code != 1 {
			t.Errorf("exit status %d, want 1:\n%s", code, stderr)
		}
		if want := "executor: connecting to NATS at " + srv.ClientURL() + ": nats: Authorization Violation"; !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
		if strings.Contains(stderr.String(), "waiting") {
			t.Errorf("it waited:\n%s", stderr)
		}
	})
}
