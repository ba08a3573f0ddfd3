package wire_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// TestEmitterExitGoldens runs the built `emitter call` against a NATS server
// where a stand-in executor answers each call with a golden answer, in each
// mode, and checks the exit status of each kind, of a call refused because
// its call id waits in the stream, of bad input and of a call nobody answers.
// So the statuses are the program's, and the answers it reads are the
// goldens.
func TestEmitterExitGoldens(t *testing.T) {
	bin := buildEmitter(t)
	var mu sync.Mutex // protects statuses
	statuses := map[string]int{}
	record := func(t *testing.T, name string, code int) {
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := statuses[name]; ok && prev != code {
			t.Errorf("emitter call exits %d on a %s answer in one mode and %d in the other", prev, name, code)
		}
		statuses[name] = code
	}

	t.Run("runs", func(t *testing.T) { // returns once every parallel run has ended
		runEmitterCases(t, bin, record)
	})
	if t.Failed() {
		return
	}
	checkJSON(t, "emitter-exit.json", marshalJSON(t, statuses))
}

// runEmitterCases runs `emitter call` once for each case, and records its
// exit status under the case's name.
func runEmitterCases(t *testing.T, bin string, record func(t *testing.T, name string, code int)) {
	callArgs := []string{"call", "--tenant", tenant, "--tool", toolName, "--run", runID, "--call-id", callID, "--args", arguments}
	t.Run("answers", func(t *testing.T) {
		for _, ac := range goldenAnswers(t) {
			if !ac.answer.Kind.IsAnswer() {
				continue // an audit event answers no call
			}
			for _, mode := range modes {
				name := msgName("answers", ac.name, mode)
				answer := goldenOr(t, name, func() (*nats.Msg, error) { return wire.AnswerMsg(ac.answer, ac.source, mode) })
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					url := answeringServer(t, answer)
					code, stderr := runEmitter(t, bin, url, append(callArgs, "--timeout", "30s")...)
					if code == 1 {
						t.Fatalf("emitter call failed on golden %s (exit 1): %s", name, stderr)
					}
					record(t, ac.name, code)
				})
			}
		}
	})
	t.Run("call id waits in the stream", func(t *testing.T) {
		t.Parallel()
		url := answeringServer(t, nil)
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		m, err := wire.CallMsg(goldenCall(), wire.Structured)
		if err != nil {
			t.Fatal(err)
		}
		js := natstest.JetStream(t, nc)
		if _, err := js.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		code, _ := runEmitter(t, bin, url, append(callArgs, "--timeout", "30s")...)
		record(t, "call_id_waiting", code)
	})
	t.Run("bad input", func(t *testing.T) {
		t.Parallel()
		code, _ := runEmitter(t, bin, answeringServer(t, nil), "call", "--tenant", "acme.corp", "--tool", toolName)
		record(t, "bad_input", code)
	})
	t.Run("no answer in time", func(t *testing.T) {
		t.Parallel()
		code, _ := runEmitter(t, bin, answeringServer(t, nil), append(callArgs, "--timeout", "1s")...)
		record(t, "no_answer", code)
	})
}

// goldenOr returns the golden message called name, or, with -update, the
// message build writes.
func goldenOr(t *testing.T, name string, build func() (*nats.Msg, error)) *nats.Msg {
	t.Helper()
	if !*update {
		return readMsg(t, name)
	}
	m, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// answeringServer starts a NATS server with the executors' streams where a
// stand-in executor publishes answer, when it is not nil, for every call, and
// returns its URL.
func answeringServer(t *testing.T, answer *nats.Msg) string {
	t.Helper()
	s := natstest.Start(t)
	nc := natstest.Connect(t, s)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	if answer == nil {
		return s.ClientURL()
	}
	_, err := nc.Subscribe(wire.CallPrefix+">", func(*nats.Msg) {
		m := &nats.Msg{Subject: answer.Subject, Header: answer.Header, Data: answer.Data}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Errorf("the stand-in executor could not publish its answer: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s.ClientURL()
}

// runEmitter runs the emitter with args against the server at url, with no
// connection settings of the environment's, and returns its exit status and
// what it wrote on stderr.
func runEmitter(t *testing.T, bin, url string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--server", url, "--no-context"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, "TOOLEXEC_") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("run the emitter: %v", err)
	}
	t.Logf("$ emitter %s\n%s%s(exit %d)", strings.Join(args, " "), stdout.String(), stderr.String(), code)
	return code, stderr.String()
}

// buildEmitter builds cmd/emitter, with the race detector when the test
// binary has it, and returns its path.
func buildEmitter(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "emitter")
	args := []string{"build", "-o", bin}
	if testenv.Race {
		args = append(args, "-race")
	}
	goTool := "go"
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			goTool = p
		}
	}
	out, err := exec.Command(goTool, append(args, "github.com/tesserix/toolexec/cmd/emitter")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build the emitter: %v\n%s", err, out)
	}
	return bin
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
