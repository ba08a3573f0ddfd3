package mcpgate_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/mcpgate"
	"github.com/tesserix/toolexec/tool"
)

func echoTool(t *testing.T, name string) *tool.Tool {
	t.Helper()
	tl, err := tool.New(tool.Spec{Name: name, Description: "Say it back."}, func(_ context.Context, _ tool.Context, args json.RawMessage) (string, error) {
		return string(args), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// startExecutor runs an executor serving tools on nc until stop is called
// (or the test ends).
func startExecutor(t *testing.T, nc *nats.Conn, tools ...*tool.Tool) (stop func()) {
	t.Helper()
	ex, err := toolexec.NewExecutor(ctxT(t), nc, toolexec.ExecutorConfig{Tools: tools, Logger: testenv.Logger()})
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("executor: %v", err)
		}
		ex.Close()
	}
	t.Cleanup(stop)
	return stop
}

// TestCatalogFollowsTheFleet: when the executors' tools change, tools/list
// says so once the list is older than the TTL, clients are told the list
// changed, and a new tool can be called at once.
func TestCatalogFollowsTheFleet(t *testing.T) {
	srv := natstest.Start(t)
	stopOld := startExecutor(t, natstest.Connect(t, srv), echoTool(t, "one"))
	gw, err := mcpgate.New(natstest.Connect(t, srv), mcpgate.Config{CatalogTTL: 50 * time.Millisecond, Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	changed := make(chan struct{}, 16)
	cs := connectStdio(t, gw, "acme", &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	names := func() []string {
		res, err := cs.ListTools(ctxT(t), nil)
		if err != nil {
			t.Fatalf("ListTools: %v", err)
		}
		var n []string
		for _, tl := range res.Tools {
			n = append(n, tl.Name)
		}
		return n
	}
	if got := names(); len(got) != 1 || got[0] != "one" {
		t.Fatalf("tools/list = %v, want [one]", got)
	}

	// The fleet is replaced by executors that serve two, other, tools.
	startExecutor(t, natstest.Connect(t, srv), echoTool(t, "two"), echoTool(t, "three"))
	stopOld()
	time.Sleep(150 * time.Millisecond) // the list read at connect is older than a call of an unlisted tool lets it be
	r := callTool(t, cs, "two", map[string]any{"x": 1}, nil)
	if r.IsError || metaOf(r, "kind") != "completed" {
		t.Fatalf("a call of the new tool before any list: %v %q", r.Meta, text(r))
	}
	if got := names(); len(got) != 2 || got[0] != "three" || got[1] != "two" {
		t.Fatalf("tools/list = %v, want [three two]", got)
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/tools/list_changed")
	}
}

// TestCatalogUnavailable: a tool the catalog marks unavailable stays listed,
// saying so in its _meta and description, and its calls are rejected
// upstream_unavailable; when it is available again the client is told the
// list changed without asking for it, and the tool runs.
func TestCatalogUnavailable(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	ex, err := toolexec.NewExecutor(ctxT(t), nc, toolexec.ExecutorConfig{Tools: []*tool.Tool{echoTool(t, "far")}, Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; ex.Close() })
	ex.Registry().SetUnavailable("far", "mcp server \"x\" cannot be reached")

	gw, err := mcpgate.New(natstest.Connect(t, srv), mcpgate.Config{CatalogTTL: 50 * time.Millisecond, Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	changed := make(chan struct{}, 16)
	cs := connectStdio(t, gw, "acme", &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	listed := func() *mcp.Tool {
		t.Helper()
		res, err := cs.ListTools(ctxT(t), nil)
		if err != nil || len(res.Tools) != 1 {
			t.Fatalf("ListTools: %v, %v", res, err)
		}
		return res.Tools[0]
	}
	tl := listed()
	if tl.Meta[mcpgate.MetaUnavailable] != true || !strings.Contains(tl.Description, "Unavailable now") || !strings.HasPrefix(tl.Description, "Say it back.") {
		t.Errorf("an unavailable tool is listed as %q, _meta %v", tl.Description, tl.Meta)
	}
	r := callTool(t, cs, "far", map[string]any{"x": 1}, nil)
	if !r.IsError || metaOf(r, "kind") != "rejected" || metaOf(r, "code") != "upstream_unavailable" {
		t.Errorf("a call of an unavailable tool: %v %q", r.Meta, text(r))
	}
	for len(changed) > 0 {
		<-changed
	}

	ex.Registry().ClearUnavailable("far")
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/tools/list_changed once the tool is available again")
	}
	if tl := listed(); tl.Meta[mcpgate.MetaUnavailable] != nil || tl.Description != "Say it back." {
		t.Errorf("once available, listed as %q, _meta %v", tl.Description, tl.Meta)
	}
	if r := callTool(t, cs, "far", map[string]any{"x": 1}, nil); r.IsError || metaOf(r, "kind") != "completed" {
		t.Errorf("a call once available: %v %q", r.Meta, text(r))
	}
}

// TestCatalogOddDeclarations: a catalog reply with a declaration MCP cannot
// list (parameters that are not an object schema) costs that tool only; the
// gateway lists the rest and stays up.
func TestCatalogOddDeclarations(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	reply := bus.CatalogResponse{Tools: []bus.ToolDecl{
		{Name: "array", Parameters: []byte(`{"type":"array"}`)},
		{Name: "good", Parameters: []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`), Kind: tool.ReadOnly},
		{Name: "notjson", Parameters: []byte(`"x"`)},
		{Name: "untyped", Parameters: []byte(`{"properties":{"a":{}}}`)},
	}}
	data, err := json.Marshal(reply)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := nc.Subscribe(wire.CatalogSubjects, func(m *nats.Msg) { _ = m.Respond(data) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// The gateway asks on a connection of its own: the responder's interest
	// must have reached the server before it does.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	gw, err := mcpgate.New(natstest.Connect(t, srv), mcpgate.Config{Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := connectStdio(t, gw, "acme", nil).ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	if len(res.Tools) != 2 || res.Tools[0].Name != "good" || res.Tools[1].Name != "untyped" {
		var n []string
		for _, tl := range res.Tools {
			n = append(n, tl.Name)
		}
		t.Fatalf("tools/list = %v, want [good untyped]", n)
	}
}

// TestNoCatalog: with no executor to ask, tools/list is an error that says
// why, not an empty list that looks like a fleet without tools.
func TestNoCatalog(t *testing.T) {
	srv := natstest.Start(t)
	gw, err := mcpgate.New(natstest.Connect(t, srv), mcpgate.Config{Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := connectStdio(t, gw, "acme", nil).ListTools(ctxT(t), nil); err == nil {
		t.Fatal("ListTools with no executor returned no error")
	}
}
