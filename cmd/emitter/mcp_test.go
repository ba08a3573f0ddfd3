package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/mcpgate"
)

// testMCPProcess spawns `emitter mcp` as an MCP client spawns its tools
// server, and talks to it with the Go SDK's client over stdio: the demo
// tools are listed, a booking completes, its repeat is deduplicated, and a
// booking whose answer is lost is an error result that says the outcome is
// unknown.
func testMCPProcess(t *testing.T, bin string, e *env) {
	cmd := exec.Command(bin, "mcp", "--tenant", tenant)
	cmd.Env = append(os.Environ(), "NATS_URL="+e.url)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	ctx := ctxT(t)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr %q)", err, stderr.String())
	}
	defer func() {
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v (stderr %q)", err, stderr.String())
		}
	}()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "book,lookup_fare,update_profile" {
		t.Fatalf("tools/list = %v", names)
	}
	call := func(args string) *mcp.CallToolResult {
		t.Helper()
		var a map[string]any
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			t.Fatal(err)
		}
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "book", Arguments: a})
		if err != nil {
			t.Fatalf("book: %v", err)
		}
		return r
	}
	first, again := call(bookArgs1), call(bookArgs2)
	if first.Meta[mcpgate.MetaKind] != "completed" || again.Meta[mcpgate.MetaKind] != "deduplicated" {
		t.Fatalf("two bookings: %v then %v", first.Meta, again.Meta)
	}
	lost := call(failArgs)
	if txt := lost.Content[0].(*mcp.TextContent).Text; !lost.IsError || lost.Meta[mcpgate.MetaKind] != "indeterminate" || !strings.Contains(txt, "UNKNOWN") {
		t.Fatalf("lost booking: %v %q", lost.Meta, txt)
	}
}

// TestMCPToken: mcp-token draws a token and the tokens-file line that
// holds its digest, which the gateway's tokens file accepts; --tokens-file
// makes the file, and its folder, for its owner only.
func TestMCPToken(t *testing.T) {
	e := newBareEnv(t, false)
	r := e.emit(t, "", "mcp-token", "--tenant", tenant, "--json")
	mustExit(t, r, exitOK)
	var out struct {
		Tenant         string `json:"tenant"`
		Token          string `json:"token"`
		TokensFileLine string `json:"tokens_file_line"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("output %q: %v", r.stdout, err)
	}
	if out.Tenant != tenant || !regexp.MustCompile(`^mcp_[0-9a-f]{64}$`).MatchString(out.Token) || out.TokensFileLine != tenant+" "+mcpgate.HashToken(out.Token) {
		t.Fatalf("mcp-token printed %q", r.stdout)
	}
	tk, err := mcpgate.ParseTokens(strings.NewReader(out.TokensFileLine+"\n"), "tokens")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := tk.Tenant(out.Token); !ok || got != tenant {
		t.Fatalf("the tokens file maps the token to %q, %v", got, ok)
	}
	if strings.Contains(out.TokensFileLine, out.Token) {
		t.Fatal("the tokens-file line holds the token itself")
	}
	dir := filepath.Join(t.TempDir(), ".toolexec") // made by the first line
	file := filepath.Join(dir, "tokens")
	var tokens []string
	for _, tenant := range []string{"acme", "globex"} {
		r := e.emit(t, "", "mcp-token", "--tenant", tenant, "--tokens-file", file)
		mustExit(t, r, exitOK)
		tokens = append(tokens, strings.TrimSpace(r.stdout))
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("tokens file: %v, %v; want mode 0600", fi, err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the tokens file's folder: %v, %v; want mode 0700", fi, err)
	}
	tk, err = mcpgate.LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	for i, tenant := range []string{"acme", "globex"} {
		if got, ok := tk.Tenant(tokens[i]); !ok || got != tenant {
			t.Errorf("the file maps the printed token %q to %q, %v; want %s", tokens[i], got, ok, tenant)
		}
	}
	mustExit(t, e.emit(t, "", "mcp-token", "--tenant", "a.b"), exitUsage)
	mustExit(t, e.emit(t, "", "mcp", "--tenant", tenant, "--max-wait", "0s"), exitUsage)
}
