package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
)

// runHealthcheck runs `executor healthcheck args...` in process and returns
// its output and error.
func runHealthcheck(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"healthcheck"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// TestHealthcheck: `executor healthcheck` passes against a ready executor,
// found through TOOLEXEC_METRICS_ADDR as the executor finds it (a wildcard
// host asked on loopback), and fails against one still waiting for NATS, an
// address nobody serves, and without an address.
func TestHealthcheck(t *testing.T) {
	addr := testenv.FreeAddr(t)
	startExecutor(t, "--demo", "--metrics-addr", addr)
	_, port, _ := strings.Cut(addr, ":")

	t.Setenv("TOOLEXEC_METRICS_ADDR", "0.0.0.0:"+port)
	if out, err := runHealthcheck(t); err != nil || out != "ready\n" {
		t.Errorf("against a ready executor: %q, %v", out, err)
	}
	if out, err := runHealthcheck(t, "--path", "/healthz"); err != nil || out != "ok\n" {
		t.Errorf("/healthz: %q, %v", out, err)
	}

	waiting := testenv.FreeAddr(t)
	launchExecutor(t, nil, "--demo", "--metrics-addr", waiting, "--nats-url", "nats://"+testenv.FreeAddr(t))
	// The ops endpoint answers "not connected yet" until the first try to
	// reach NATS has failed and the wait begins.
	wait.Eventually(t, waitLimit, "the waiting executor's ops endpoint naming the wait", func() bool {
		_, body := tryGet("http://" + waiting + "/readyz")
		return strings.Contains(body, "nats: waiting")
	})
	out, err := runHealthcheck(t, "--addr", waiting)
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(out, "nats: waiting") {
		t.Errorf("against an executor waiting for NATS: %q, %v; want 503 naming the wait", out, err)
	}
	var ue usageError
	if errors.As(err, &ue) {
		t.Errorf("not ready is not a usage error (exit 1, not 2): %v", err)
	}

	if _, err := runHealthcheck(t, "--addr", testenv.FreeAddr(t)); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("against nobody: %v", err)
	}
	t.Setenv("TOOLEXEC_METRICS_ADDR", "")
	if _, err := runHealthcheck(t); !errors.As(err, &ue) || !strings.Contains(err.Error(), "TOOLEXEC_METRICS_ADDR") {
		t.Errorf("without an address: %v; want a usage error naming TOOLEXEC_METRICS_ADDR", err)
	}
	for _, bad := range []string{"8080", "host:0"} {
		if _, err := runHealthcheck(t, "--addr", bad); !errors.As(err, &ue) {
			t.Errorf("--addr %q: %v; want a usage error", bad, err)
		}
	}
}
