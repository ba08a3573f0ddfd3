package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/internal/app/storeflags"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/mcpgate"
)

// TestMCPFlags: the MCP gateway's settings that cannot work, or would let
// anyone on the network act as a tenant, are refused with the fix.
func TestMCPFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    mcpFlags
		want string // "" for accepted
	}{
		{"off", mcpFlags{}, ""},
		{"one tenant on loopback", mcpFlags{addr: "127.0.0.1:8090", tenant: "acme"}, ""},
		{"one tenant on localhost", mcpFlags{addr: "localhost:8090", tenant: "acme"}, ""},
		{"one tenant on ::1", mcpFlags{addr: "[::1]:8090", tenant: "acme"}, ""},
		{"tokens anywhere", mcpFlags{addr: ":8090", tokensFile: "tokens"}, ""},
		{"no identity", mcpFlags{addr: "127.0.0.1:8090"}, "needs --mcp-tenant"},
		{"both identities", mcpFlags{addr: "127.0.0.1:8090", tenant: "acme", tokensFile: "tokens"}, "give one"},
		{"one tenant on every interface", mcpFlags{addr: ":8090", tenant: "acme"}, "not a loopback address"},
		{"one tenant on 0.0.0.0", mcpFlags{addr: "0.0.0.0:8090", tenant: "acme"}, "not a loopback address"},
		{"one tenant on a host name", mcpFlags{addr: "gateway.internal:8090", tenant: "acme"}, "not a loopback address"},
		{"a tenant that is not a token", mcpFlags{addr: "127.0.0.1:8090", tenant: "acme.globex"}, "--mcp-tenant"},
		{"a tenant without an address", mcpFlags{tenant: "acme"}, "need --mcp-addr"},
		{"a negative session bound", mcpFlags{addr: "127.0.0.1:8090", tenant: "acme", maxSessions: -1}, "--mcp-max-sessions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f.check()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("check = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestMCPServer: --mcp-addr serves the MCP gateway at /mcp; a client with a
// token from --mcp-tokens-file lists the demo tools and books once, its
// repeat deduplicated; a client without one is refused.
func TestMCPServer(t *testing.T) {
	const token = "acme-token-0123456789abcdef"
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("acme "+mcpgate.HashToken(token)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeAddr(t)
	startExecutor(t, "--demo", "--store", string(storeflags.Memory), "--mcp-addr", addr, "--mcp-tokens-file", file)
	url := "http://" + addr + "/mcp"

	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a request without a token: %d, want 401", resp.StatusCode)
	}

	ctx := testenv.Context(t, time.Minute)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "book,lookup_fare,update_profile" {
		t.Fatalf("tools/list = %v, want the demo tools", names)
	}
	args := map[string]any{"flight": "BA117", "seats": 1, "request_id": "r1"}
	// The client speaks 2026-07-28, which has no sessions: the calls share a
	// run because they name it.
	run := mcp.Meta{mcpgate.MetaRunID: "trip-1"}
	var kinds []any
	for range 2 {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "book", Arguments: args, Meta: run})
		if err != nil || r.IsError {
			t.Fatalf("book: %+v, %v", r, err)
		}
		kinds = append(kinds, r.Meta[mcpgate.MetaKind])
	}
	if kinds[0] != "completed" || kinds[1] != "deduplicated" {
		t.Fatalf("two bookings answered %v, want completed then deduplicated", kinds)
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
