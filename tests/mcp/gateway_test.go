package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/internal/app/demo"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/nodetest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/mcpgate"
	"github.com/tesserix/toolexec/tool"
)

const gatewayToken = "acme-token-0123456789abcdef"

// gatewayFleet is an embedded NATS server, one executor serving the demo
// airline and the tools the conformance scenarios call (those answering with
// content that is not text from an upstream MCP server, contentUpstream), the
// tools of an upstream that asks and tells its caller mid-call (askUpstream),
// and an MCP gateway served over Streamable HTTP twice: for tenant acme without a
// token (what the conformance suite, which sends none, needs) and by bearer
// token.
type gatewayFleet struct {
	srv              *server.Server
	airline          *demo.Airline
	content          *contentUpstream
	ask              *askUpstream
	plainURL, tokURL string
}

// fixtureTools are the tools the applicable conformance scenarios call, as
// toolexec tools: their answers go through the executor like any other.
func fixtureTools(t *testing.T) []*tool.Tool {
	t.Helper()
	empty := json.RawMessage(`{"type":"object"}`)
	mk := func(spec tool.Spec, fn tool.Func) *tool.Tool {
		tl, err := tool.New(spec, fn)
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	return []*tool.Tool{
		mk(tool.Spec{Name: "test_simple_text", Description: "Answers with one text item.", Parameters: empty},
			func(context.Context, tool.Context, json.RawMessage) (string, error) {
				return "This is a simple text response for testing.", nil
			}),
		mk(tool.Spec{Name: "test_error_handling", Description: "Always fails, without effect.", Parameters: empty},
			func(context.Context, tool.Context, json.RawMessage) (string, error) {
				return "", tool.NoEffect(errors.New("the tool failed, as it always does"))
			}),
		mk(tool.Spec{Name: "test_tool_with_progress", Description: "Takes a while; the gateway reports progress meanwhile.", Parameters: empty},
			func(ctx context.Context, _ tool.Context, _ json.RawMessage) (string, error) {
				select {
				case <-time.After(600 * time.Millisecond):
					return "done", nil
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}),
		mk(tool.Spec{Name: "json_schema_2020_12_tool", Description: "Declares an input schema with 2020-12 keywords.",
			Parameters: json.RawMessage(`{
				"$schema": "https://json-schema.org/draft/2020-12/schema",
				"type": "object",
				"$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
				"properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
				"additionalProperties": false
			}`)},
			func(context.Context, tool.Context, json.RawMessage) (string, error) { return "ok", nil }),
	}
}

func startGatewayFleet(t *testing.T) *gatewayFleet {
	t.Helper()
	return startGatewayFleetWith(t, mcpgate.Config{ProgressEvery: 100 * time.Millisecond})
}

// startGatewayFleetWith starts a gateway fleet whose gateway has cfg (its
// logger set here) and whose executor serves extra besides the demo airline
// and the fixture tools (and the content and ask upstreams' tools).
func startGatewayFleetWith(t *testing.T, cfg mcpgate.Config, extra ...*tool.Tool) *gatewayFleet {
	t.Helper()
	f := &gatewayFleet{srv: natstest.Start(t), airline: demo.New(), content: startContentUpstream(t), ask: startAskUpstream(t)}
	ctx := testenv.Context(t, clientWait)
	tools := append(append(append(append(f.airline.Tools(), fixtureTools(t)...), f.content.tools...), f.ask.tools...), extra...)
	ex, err := toolexec.NewExecutor(ctx, natstest.Connect(t, f.srv), toolexec.ExecutorConfig{Tools: tools, Logger: testenv.Logger()})
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ex.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done; ex.Close() })

	cfg.Logger = testenv.Logger()
	gw, err := mcpgate.New(natstest.Connect(t, f.srv), cfg)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := mcpgate.ParseTokens(strings.NewReader("acme "+mcpgate.HashToken(gatewayToken)+"\n"), "tokens")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		url *string
		cfg mcpgate.HTTPConfig
	}{{&f.plainURL, mcpgate.HTTPConfig{Tenant: "acme"}}, {&f.tokURL, mcpgate.HTTPConfig{Tokens: tokens}}} {
		h, err := gw.Handler(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(h)
		t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
		*c.url = ts.URL + "/mcp"
	}
	return f
}

// buildEmitter builds cmd/emitter, for an MCP client to spawn as
// `emitter mcp`.
func buildEmitter(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "emitter")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/tesserix/toolexec/cmd/emitter").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestGatewayTypeScriptClient: the TypeScript SDK's client, over Streamable
// HTTP with a bearer token and over stdio (spawning emitter mcp), lists the
// demo tools with the annotations of their kinds and books: completed, its
// repeat deduplicated, a lost answer indeterminate (twice, one seat taken),
// an unknown tool a JSON-RPC error, a slow call with progress.
func TestGatewayTypeScriptClient(t *testing.T) {
	client := nodetest.Client(t)
	f := startGatewayFleet(t)
	emitter := buildEmitter(t)
	for _, tc := range []struct {
		name, flight string
		target       nodetest.Target
	}{
		{"http", "BA117", nodetest.Target{URL: f.tokURL, Token: gatewayToken}},
		{"stdio", "LH400", nodetest.Target{Command: []string{emitter, "mcp", "--tenant", "acme", "--progress-every", "100ms"}, Env: map[string]string{"NATS_URL": f.srv.ClientURL()}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lost := tc.flight + "9"
			rep, err := client.Run(testenv.Context(t, clientWait), tc.target,
				nodetest.Call{Tool: "book", Arguments: map[string]any{"flight": tc.flight, "seats": 1, "request_id": "a"}},
				nodetest.Call{Tool: "book", Arguments: map[string]any{"flight": tc.flight, "seats": 1, "request_id": "b"}},
				nodetest.Call{Tool: "book", Arguments: map[string]any{"flight": lost, "seats": 1, "request_id": "c", "fail_after_effect": true}},
				nodetest.Call{Tool: "book", Arguments: map[string]any{"flight": lost, "seats": 1, "request_id": "d"}},
				nodetest.Call{Tool: "fly"},
				nodetest.Call{Tool: "test_tool_with_progress", Progress: true},
			)
			if err != nil {
				t.Fatalf("the TypeScript client: %v", err)
			}
			if len(rep.Errors) > 0 {
				t.Errorf("the SDK reported errors on the side: %v", rep.Errors)
			}
			for name, want := range map[string]map[string]any{
				"lookup_fare":    {"readOnlyHint": true},
				"update_profile": {"readOnlyHint": false, "idempotentHint": true, "destructiveHint": false},
				"book":           {"readOnlyHint": false, "idempotentHint": false},
			} {
				tl, ok := rep.Tool(name)
				if !ok {
					t.Errorf("%s not listed", name)
					continue
				}
				for k, v := range want {
					if tl.Annotations[k] != v {
						t.Errorf("%s: annotations %v, want %s=%v", name, tl.Annotations, k, v)
					}
				}
			}
			r := rep.Results
			kind := func(i int) any { return r[i].Meta[mcpgate.MetaKind] }
			if r[0].IsError || kind(0) != "completed" || r[1].IsError || kind(1) != "deduplicated" || r[0].Text() != r[1].Text() {
				t.Errorf("booking and its repeat: %+v / %+v", r[0], r[1])
			}
			for _, i := range []int{2, 3} {
				if !r[i].IsError || kind(i) != "indeterminate" || !strings.Contains(r[i].Text(), "will not run it again") {
					t.Errorf("lost booking, call %d: %+v", i, r[i])
				}
			}
			if n, m := f.airline.Bookings(tc.flight), f.airline.Bookings(lost); n != 1 || m != 1 {
				t.Errorf("bookings: %d of %s and %d of %s, want one each", n, tc.flight, m, lost)
			}
			if r[4].Error == nil || r[4].Error.Code != -32602 {
				t.Errorf("unknown tool: %+v, want JSON-RPC error -32602", r[4])
			}
			if r[5].IsError || kind(5) != "completed" || len(r[5].Progress) < 2 {
				t.Errorf("slow call: %d progress notifications, result %+v", len(r[5].Progress), r[5])
			}
		})
	}
}
