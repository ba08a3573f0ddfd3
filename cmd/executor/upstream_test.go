package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/mcptest"
)

// TestMain turns the test binary into the test MCP server when a test starts
// it as a stdio upstream.
func TestMain(m *testing.M) { mcptest.Main(m) }

// mcpToolsFile writes a tools file whose tool "book" is the test server's
// "effect", the server run over stdio with o.
func mcpToolsFile(t *testing.T, o mcptest.Options) string {
	t.Helper()
	argv, env := mcptest.Command(o)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "mcp_servers:\n  - name: up\n    command: [%q]\n    env:\n", argv[0])
	for _, k := range keys {
		fmt.Fprintf(&b, "      %s: %q\n", k, env[k])
	}
	b.WriteString("tools:\n  - name: book\n    idempotency: {kind: effectful, key_arguments: [entity]}\n    mcp: {server: up, tool: effect}\n")
	path := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunWithUpstreamMCPServer: --tools-file with an MCP server; its tool runs once for
// two identical calls, and the server's process is stopped with the executor.
func TestRunWithUpstreamMCPServer(t *testing.T) {
	effects := filepath.Join(t.TempDir(), "effects")
	url, stop := startExecutor(t, "--tools-file", mcpToolsFile(t, mcptest.Options{EffectsFile: effects}))
	c := client(t, url)
	if a := call(t, c, "c1", `{"entity":"alice","note":"first"}`); a.Kind != events.KindCompleted || a.Outcome != "done" {
		t.Fatalf("first call: %+v", a)
	}
	if a := call(t, c, "c2", `{"entity":"alice","note":"again"}`); a.Kind != events.KindDeduplicated {
		t.Fatalf("identical call: %+v", a)
	}
	ran := mcptest.Effects(t, effects)
	if len(ran) != 1 {
		t.Fatalf("the upstream ran %d times; want 1", len(ran))
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if err := syscall.Kill(ran[0].PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the MCP server (pid %d) outlived the executor (kill 0: %v)", ran[0].PID, err)
	}
}

// TestUpstreamMCPServerThatCannotStart: the executor refuses to start, naming the
// server and the file's line.
func TestUpstreamMCPServerThatCannotStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tools.yaml")
	src := "mcp_servers:\n  - name: up\n    command: [/nonexistent/mcp-server]\n    import: {}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newCommand()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--tools-file", path, "--data-dir", t.TempDir(), "--nats-port", "-1"})
	err := cmd.ExecuteContext(context.Background())
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), path+":2") || !strings.Contains(err.Error(), `mcp server "up"`) {
		t.Fatalf("err = %v; want a usage error at %s:2 naming the server", err, path)
	}
}
