package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/mcptest"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/mcpgate"
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

// TestUpstreamMCPServerThatCannotStart: a stdio server whose command cannot be
// run at all (no such program) is a configuration error: the executor refuses
// to start, naming the server and the file's line. (A server that can be run
// but does not answer, or a URL that refuses connections, is down, not an
// error: see TestProcessUpstreamsComeAndGo.)
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

// TestOnlyImportsOfAServerDown: a tools file whose every tool would be
// imported from a server that cannot be reached leaves an executor without
// --workers nothing to serve: it refuses to start, saying why.
func TestOnlyImportsOfAServerDown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tools.yaml")
	src := "mcp_servers:\n  - name: web\n    url: http://" + testenv.FreeAddr(t) + "/mcp\n    import: {}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newCommand()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--tools-file", path, "--workers=false", "--data-dir", t.TempDir(), "--nats-port", "-1"})
	err := cmd.ExecuteContext(context.Background())
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "cannot be reached yet") {
		t.Fatalf("err = %v; want a usage error saying the only tools wait for a server", err)
	}
}

// TestProcessUpstreamsComeAndGo runs the built executor with two MCP servers:
// one over HTTP that is not listening when the executor starts, and one over
// stdio that later exits and cannot start for a while. The executor starts
// anyway; each server's tools are listed as unavailable and answered
// rejected upstream_unavailable (nothing runs) while it is down; /readyz and
// toolexec_mcp_server_state name each server's state; MCP clients are told
// the list changed when a server comes back; and every call that completed
// ran once.
func TestProcessUpstreamsComeAndGo(t *testing.T) {
	bin := buildExecutor(t)
	srv := natstest.Start(t)
	dir := t.TempDir()
	webAddr, metricsAddr, mcpAddr := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	webEffects, localEffects := filepath.Join(dir, "web-effects"), filepath.Join(dir, "local-effects")
	failFile := filepath.Join(dir, "fail")

	argv, env := mcptest.Command(mcptest.Options{EffectsFile: localEffects, FailFile: failFile})
	var b strings.Builder
	fmt.Fprintf(&b, "mcp_servers:\n  - name: web\n    url: http://%s/mcp\n    restart_delay: {min: 100ms, max: 1s}\n", webAddr)
	b.WriteString("    import: {prefix: web_, exclude: [hang, needs_input]}\n")
	fmt.Fprintf(&b, "  - name: local\n    command: [%q]\n    restart_delay: {min: 100ms, max: 1s}\n    env:\n", argv[0])
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "      %s: %q\n", k, env[k])
	}
	b.WriteString(`tools:
  - name: fetch
    idempotency: {kind: effectful, key_arguments: [entity]}
    mcp: {server: web, tool: effect}
  - name: book
    idempotency: {kind: effectful, key_arguments: [entity]}
    mcp: {server: local, tool: effect}
`)
	toolsFile := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(toolsFile, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "--nats-url", srv.ClientURL(), "--tools-file", toolsFile, "--workers=false",
		"--metrics-addr", metricsAddr, "--mcp-addr", mcpAddr, "--mcp-tenant", "acme")
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	wait.Eventually(t, waitLimit, "the executor to be ready with the web server down", func() bool {
		return strings.Contains(stdout.String(), "toolexec executor ready:")
	})

	c := client(t, srv.ClientURL())
	n := 0
	callTool := func(name, entity string) events.Answer {
		t.Helper()
		n++
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		a, err := c.Call(ctx, "acme", name, json.RawMessage(fmt.Sprintf(`{"entity":%q}`, entity)), toolexec.WithFreshCallID(fmt.Sprintf("c%d", n)))
		if a == nil {
			t.Fatalf("call of %s: %v", name, err)
		}
		return *a
	}
	readyz := func() string {
		t.Helper()
		code, body := httpGet(t, "http://"+metricsAddr+"/readyz")
		if code != http.StatusOK {
			t.Fatalf("/readyz %d, want 200 (a server down does not make the executor unready):\n%s", code, body)
		}
		return body
	}
	state := func(server, state string) bool {
		_, body := httpGet(t, "http://"+metricsAddr+"/metrics")
		return strings.Contains(body, fmt.Sprintf("toolexec_mcp_server_state{server=%q,state=%q} 1", server, state))
	}

	// The web server is down: its tool is rejected, the other runs.
	if a := callTool("fetch", "w1"); a.Kind != events.KindRejected || a.Code != events.CodeUpstreamUnavailable {
		t.Fatalf("fetch with its server down: %+v", a)
	}
	if a := callTool("book", "l1"); a.Kind != events.KindCompleted || a.Outcome != "done" {
		t.Fatalf("book, its server up: %+v", a)
	}
	body := readyz()
	for _, want := range []string{"mcp server web: down since", "upstream_unavailable", "its imported tools are not listed yet", "mcp server local: connected since"} {
		if !strings.Contains(body, want) {
			t.Errorf("/readyz lacks %q:\n%s", want, body)
		}
	}
	if !state("web", "down") || !state("local", "connected") {
		_, m := httpGet(t, "http://"+metricsAddr+"/metrics")
		t.Errorf("toolexec_mcp_server_state does not say web down, local connected:\n%s", grepLines(m, "mcp_server_state"))
	}

	ctx := testenv.Context(t, 2*time.Minute)
	changed := make(chan struct{}, 64)
	mc := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + mcpAddr + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	listed := func() map[string]*mcp.Tool {
		t.Helper()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*mcp.Tool{}
		for _, tl := range res.Tools {
			out[tl.Name] = tl
		}
		return out
	}
	tools := listed()
	if len(tools) != 2 || tools["fetch"] == nil || tools["fetch"].Meta[mcpgate.MetaUnavailable] != true || tools["book"].Meta[mcpgate.MetaUnavailable] != nil {
		t.Fatalf("tools/list with web down: %v", tools)
	}
	for len(changed) > 0 {
		<-changed
	}

	// The web server comes up: the executor reaches it by itself, its
	// imports are listed, and the MCP client is told.
	ws := mcptest.NewServer(mcptest.Options{EffectsFile: webEffects})
	ln, err := net.Listen("tcp", webAddr)
	if err != nil {
		t.Skipf("the web server's port was taken meanwhile: %v", err)
	}
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ws }, nil), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/tools/list_changed after the web server came up")
	}
	wait.Eventually(t, waitLimit, "the web server to be connected", func() bool { return state("web", "connected") })
	wait.Eventually(t, waitLimit, "the imported tools to be listed", func() bool {
		tl := listed()
		return tl["web_effect"] != nil && tl["fetch"] != nil && tl["fetch"].Meta[mcpgate.MetaUnavailable] == nil
	})
	if a := callTool("fetch", "w2"); a.Kind != events.KindCompleted || a.Outcome != "done" {
		t.Fatalf("fetch once its server is up: %+v", a)
	}
	if body := readyz(); !strings.Contains(body, "mcp server web: connected since") || strings.Contains(body, "not listed yet") {
		t.Errorf("/readyz once web is up:\n%s", body)
	}

	// The stdio server exits between calls and cannot start for a while.
	first := mcptest.Effects(t, localEffects)
	if err := os.WriteFile(failFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(first[0].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, waitLimit, "the stdio server to be down", func() bool { return state("local", "down") })
	if a := callTool("book", "l2"); a.Kind != events.KindRejected || a.Code != events.CodeUpstreamUnavailable {
		t.Fatalf("book while its server cannot start: %+v", a)
	}
	time.Sleep(2 * time.Second) // several attempts, 100ms doubling to 1s
	if err := os.Remove(failFile); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, waitLimit, "the stdio server to be connected again", func() bool { return state("local", "connected") })
	if a := callTool("book", "l2"); a.Kind != events.KindCompleted {
		t.Fatalf("book once its server is back: %+v", a)
	}

	// Every completed call ran once; rejected ones never ran.
	for _, tc := range []struct {
		file string
		want []string
	}{
		{webEffects, []string{`{"entity":"w2"}`}},
		{localEffects, []string{`{"entity":"l1"}`, `{"entity":"l2"}`}},
	} {
		var got []string
		for _, e := range mcptest.Effects(t, tc.file) {
			got = append(got, e.Arguments)
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: effects %v, want %v", filepath.Base(tc.file), got, tc.want)
		}
	}
	// Failed attempts are not logged one by one.
	if n := strings.Count(stderr.String(), "failed to start; its tools are unavailable"); n > 4 {
		t.Errorf("%d failed starts logged at warn level; want a few:\n%s", n, grepLines(stderr.String(), "failed to start"))
	}

	_ = hs.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exited(t, cmd); code != 0 {
		t.Errorf("exit status %d, want 0:\n%s", code, stderr.String())
	}
}
