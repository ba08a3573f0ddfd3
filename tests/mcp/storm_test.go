package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/nodetest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/mcpgate"
	"github.com/tesserix/toolexec/tool/toolsfile"
)

// spyScript stands between an executor and server-memory, on stdio: it runs
// the server as its child, appends every request line to $SPY_LOG (so that a
// test counts the tools/call requests that reached the server, whichever
// process sent them), and, on a tools/call naming the entity "crash-here",
// kills the server and exits without answering — a crash after the request
// was sent.
const spyScript = `import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";
const [node, server] = process.argv.slice(2);
const child = spawn(node, [server], { stdio: ["pipe", "inherit", "inherit"] });
createInterface({ input: process.stdin }).on("line", (line) => {
  appendFileSync(process.env.SPY_LOG, line + "\n");
  if (line.includes('"tools/call"') && line.includes("crash-here")) {
    child.kill("SIGKILL");
    process.exit(137);
  }
  child.stdin.write(line + "\n");
});
process.stdin.on("end", () => child.stdin.end());
child.on("exit", (code) => process.exit(code ?? 1));
`

// TestStormOverServerMemory puts @modelcontextprotocol/server-memory (its
// create_entities writes a file: a real side effect) behind toolexec: two
// executors, each with its own server-memory process on one memory file,
// and two MCP gateways in front. 200 identical calls at once, half through
// each gateway, in one run: the entity is created once, one call reaches
// server-memory, one answer is completed and the rest deduplicated. Then a
// call whose server dies after the request was sent is indeterminate, and
// its retry is answered indeterminate without reaching the server again.
func TestStormOverServerMemory(t *testing.T) {
	mem := nodetest.Memory(t)
	dir := t.TempDir()
	spy, spyLog := filepath.Join(dir, "spy.mjs"), filepath.Join(dir, "requests.jsonl")
	if err := os.WriteFile(spy, []byte(spyScript), 0o600); err != nil {
		t.Fatal(err)
	}
	toolsFile := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(toolsFile, []byte(fmt.Sprintf(`mcp_servers:
  - name: memory
    command: [%q, %q, %q, %q]
    env: {MEMORY_FILE_PATH: %q, SPY_LOG: %q}
tools:
  - name: remember
    description: Record entities in the knowledge graph.
    idempotency: {kind: effectful}
    mcp: {server: memory, tool: create_entities}
`, mem.Argv[0], spy, mem.Argv[0], mem.Argv[1], mem.File, spyLog)), 0o600); err != nil {
		t.Fatal(err)
	}

	srv := natstest.Start(t)
	ctx := testenv.Context(t, 5*time.Minute)
	for i := range 2 {
		set, err := toolsfile.Load(ctx, toolsFile, toolsfile.Options{Logger: testenv.Logger()})
		if err != nil {
			t.Fatalf("executor %d: loading the tools file: %v", i, err)
		}
		ex, err := toolexec.NewExecutor(ctx, natstest.Connect(t, srv), toolexec.ExecutorConfig{Tools: set.Tools(), Logger: testenv.Logger()})
		if err != nil {
			t.Fatalf("executor %d: %v", i, err)
		}
		runCtx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ex.Run(runCtx) }()
		t.Cleanup(func() { stop(); <-done; ex.Close(); _ = set.Close() })
	}
	var urls []string
	for range 2 {
		gw, err := mcpgate.New(natstest.Connect(t, srv), mcpgate.Config{Logger: testenv.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		h, err := gw.Handler(mcpgate.HTTPConfig{Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(h)
		t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
		urls = append(urls, ts.URL)
	}

	// 20 sessions, ten on each gateway, each making 10 of the 200 calls at once.
	const sessions, perSession = 20, 10
	entity := map[string]any{"entities": []any{map[string]any{
		"name": "toolexec", "entityType": "project", "observations": []any{"runs each effect once"},
	}}}
	// A _meta of its own for each call: the SDK adds to it (at protocol
	// 2026-07-28, the version, client and capabilities of every request).
	run := func() sdk.Meta { return sdk.Meta{mcpgate.MetaRunID: "storm"} }
	var mu sync.Mutex
	kinds := map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for s := range sessions {
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "storm", Version: "1"}, nil).
			Connect(ctx, &sdk.StreamableClientTransport{Endpoint: urls[s%2]}, nil)
		if err != nil {
			t.Fatalf("session %d: %v", s, err)
		}
		defer cs.Close()
		for range perSession {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "remember", Arguments: entity, Meta: run()})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					kinds["error: "+err.Error()]++
				case r.IsError:
					kinds[fmt.Sprint(r.Meta[mcpgate.MetaKind], ": ", r.Content[0].(*sdk.TextContent).Text)]++
				default:
					kinds[fmt.Sprint(r.Meta[mcpgate.MetaKind])]++
				}
			}()
		}
	}
	began := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(began)
	entities, err := mem.Entities()
	if err != nil {
		t.Fatal(err)
	}
	reached := toolCalls(t, spyLog, "toolexec")
	t.Logf("STORM calls=%d gateways=2 executors=2 took=%v answers=%v upstream_calls=%d entities=%d",
		sessions*perSession, took.Round(time.Millisecond), kinds, reached, len(entities))
	if kinds["completed"] != 1 || kinds["deduplicated"] != sessions*perSession-1 {
		t.Errorf("answers %v, want 1 completed and %d deduplicated", kinds, sessions*perSession-1)
	}
	if reached != 1 || len(entities) != 1 || entities[0].Name != "toolexec" {
		t.Errorf("%d tools/call requests reached server-memory and the file holds %+v; want one, and the one entity", reached, entities)
	}

	// The server dies after the request was sent: nobody knows whether the
	// entity was written, so the answer is indeterminate, and so is its retry,
	// which does not reach the server.
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "crash", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: urls[0]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	crash := map[string]any{"entities": []any{map[string]any{"name": "crash-here", "entityType": "test", "observations": []any{}}}}
	for i := range 2 {
		r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "remember", Arguments: crash, Meta: run()})
		if err != nil {
			t.Fatalf("crash call %d: %v", i+1, err)
		}
		if !r.IsError || r.Meta[mcpgate.MetaKind] != "indeterminate" {
			t.Fatalf("crash call %d: %v %+v; want indeterminate", i+1, r.Meta, r.Content)
		}
		t.Logf("crash call %d: %v", i+1, r.Meta)
	}
	if n := toolCalls(t, spyLog, "crash-here"); n != 1 {
		t.Fatalf("%d tools/call requests for crash-here reached the server, want 1 (the retry must not)", n)
	}
}

// toolCalls counts the tools/call request lines of the spy's log that name
// what.
func toolCalls(t *testing.T, log, what string) int {
	t.Helper()
	data, err := os.ReadFile(log)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `"tools/call"`) && strings.Contains(line, what) {
			n++
		}
	}
	return n
}
