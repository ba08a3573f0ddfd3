package deploy_test

import (
	"io"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/mcpgate"
)

// TestTenantOverMCP: an MCP gateway connected as tenant acme — in acme's
// account, with its four imports and no JetStream, as `emitter mcp` runs on
// an agent's machine — lists the executors' tools, books once (its repeat
// deduplicated), finds a call's answer again by call_id through the history
// service, and cannot act for globex: acme's account imports no subject of
// globex's, so a gateway on it told to serve globex finds no tools to list.
func TestTenantOverMCP(t *testing.T) {
	e := newEnv(t, accountsLayout)
	acme := e.as(t, "acme")
	gw, err := mcpgate.New(acme.nc, mcpgate.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	session := func(tenant string) *mcp.ClientSession {
		toServer, fromClient := io.Pipe()
		toClient, fromServer := io.Pipe()
		done := make(chan error, 1)
		go func() { done <- gw.ServeStdio(ctxT(t, waitLong), tenant, toServer, fromServer) }()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).
			Connect(ctxT(t, waitLong), &mcp.IOTransport{Reader: toClient, Writer: fromClient}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { _ = cs.Close(); <-done })
		return cs
	}
	cs := session("acme")
	ctx := ctxT(t, waitLong)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 2 {
		t.Fatalf("acme: tools/list = %+v, %v; want book and echo", tools, err)
	}
	args := map[string]any{"flight": "MCP1"}
	ids := mcp.Meta{mcpgate.MetaCallID: "acme-mcp-1"}
	first, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "book", Arguments: args, Meta: ids})
	if err != nil || first.Meta[mcpgate.MetaKind] != "completed" {
		t.Fatalf("acme: book = %+v, %v", first, err)
	}
	again, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "book", Arguments: args})
	if err != nil || again.Meta[mcpgate.MetaKind] != "deduplicated" {
		t.Fatalf("acme: book again = %+v, %v; want deduplicated", again, err)
	}
	found, err := session("acme").CallTool(ctx, &mcp.CallToolParams{Name: "book", Arguments: args, Meta: ids})
	if err != nil || found.Meta[mcpgate.MetaKind] != "completed" || found.Meta[mcpgate.MetaCallID] != "acme-mcp-1" {
		t.Fatalf("acme: book by call_id from a new session = %+v, %v; want the first call's answer", found, err)
	}
	if n := e.down.count("book/" + first.Meta[mcpgate.MetaKey].(string)); n != 1 {
		t.Fatalf("%d bookings reached the airline, want 1", n)
	}

	// A gateway in acme's account told to serve globex reaches no catalog.
	if _, err := session("globex").ListTools(ctx, nil); err == nil {
		t.Fatal("acme's connection listed tools for globex")
	}
}
