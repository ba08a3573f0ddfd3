package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/wait"
)

// executorProcess is the built executor running as a process of its own.
type executorProcess struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	started        time.Time
}

// startProcess starts bin --demo on dataDir with an embedded server on a free
// port; the test's end kills it if it still runs.
func startProcess(t *testing.T, bin, dataDir string) *executorProcess {
	t.Helper()
	p := &executorProcess{stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	p.cmd = exec.Command(bin, "--demo", "--data-dir", dataDir, "--nats-port", "-1")
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// ready waits for p's ready line and returns its NATS URL and how long it took.
func (p *executorProcess) ready(t *testing.T) (string, time.Duration) {
	t.Helper()
	const prefix = "toolexec executor ready: nats="
	wait.Eventually(t, waitLimit, "the executor to be ready", func() bool { return strings.Contains(p.stdout.String(), prefix) })
	took := time.Since(p.started)
	out := p.stdout.String()
	return strings.Fields(out[strings.Index(out, prefix)+len(prefix):])[0], took
}

// TestProcessOneExecutorPerDataDir runs the built executor twice on one
// --data-dir: the second must refuse the folder before it starts a server (two
// servers on one JetStream store each book the same key, and lose each other's
// events at the next start), and a holder killed with SIGKILL must not keep
// the folder from the executor that replaces it.
func TestProcessOneExecutorPerDataDir(t *testing.T) {
	bin := buildExecutor(t)
	book := func(t *testing.T, url, callID, requestID string) events.Answer {
		t.Helper()
		return call(t, client(t, url), callID, fmt.Sprintf(`{"flight":"BA117","seats":1,"request_id":%q}`, requestID))
	}
	// refused checks that an executor started on dataDir while holder runs there
	// exits at once, naming the folder and the holder.
	refused := func(t *testing.T, dataDir string, holder *executorProcess, holderURL string) {
		t.Helper()
		second := startProcess(t, bin, dataDir)
		code := exited(t, second.cmd)
		took := time.Since(second.started)
		stderr := second.stderr.String()
		if code != 1 {
			t.Errorf("the second executor's exit status is %d, want 1:\n%s", code, stderr)
		}
		folder := filepath.Join(dataDir, "nats")
		for _, want := range []string{
			"executor: embedded NATS: store folder " + folder + " is in use by process " + fmt.Sprint(holder.cmd.Process.Pid),
			holderURL, "--data-dir",
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
		}
		if strings.Contains(stderr, "embedded NATS server started") {
			t.Errorf("the second executor started a server on the folder before giving up:\n%s", stderr)
		}
		if took > 5*time.Second {
			t.Errorf("the second executor took %v to give up", took)
		}
		t.Logf("refused after %v", took.Round(time.Millisecond))
	}

	t.Run("a second executor is refused at once", func(t *testing.T) {
		dataDir := t.TempDir()
		first := startProcess(t, bin, dataDir)
		url, took := first.ready(t)
		t.Logf("the first executor was ready after %v", took.Round(time.Millisecond))
		refused(t, dataDir, first, url)
		if a := book(t, url, "c1", "a"); a.Kind != events.KindCompleted {
			t.Fatalf("the first executor, after the second was refused: %+v", a)
		}
	})

	t.Run("a SIGKILLed holder does not block a restart", func(t *testing.T) {
		dataDir := t.TempDir()
		first := startProcess(t, bin, dataDir)
		url, _ := first.ready(t)
		booked := book(t, url, "c1", "a")
		if booked.Kind != events.KindCompleted {
			t.Fatalf("booking: %+v", booked)
		}
		if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = first.cmd.Wait()

		next := startProcess(t, bin, dataDir)
		url, took := next.ready(t)
		t.Logf("the executor after the SIGKILL was ready after %v", took.Round(time.Millisecond))
		if a := book(t, url, "c2", "b"); a.Kind != events.KindDeduplicated || a.Outcome != booked.Outcome {
			t.Fatalf("the retry through the new executor: %+v; want deduplicated with %q", a, booked.Outcome)
		}
		refused(t, dataDir, next, url)
	})
}
