package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/mcpgate"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/mcptool"
)

// The schemas the conformance scenarios of elicitation look for: defaults
// of every primitive type (SEP-1034), and the five enum shapes (SEP-1330).
const (
	sep1034Schema = `{"type":"object","properties":{` +
		`"name":{"type":"string","default":"John Doe"},` +
		`"age":{"type":"integer","default":30},` +
		`"score":{"type":"number","default":95.5},` +
		`"status":{"type":"string","enum":["active","inactive","pending"],"default":"active"},` +
		`"verified":{"type":"boolean","default":true}}}`
	sep1330Schema = `{"type":"object","properties":{` +
		`"untitledSingle":{"type":"string","enum":["option1","option2","option3"]},` +
		`"titledSingle":{"type":"string","oneOf":[{"const":"value1","title":"First"},{"const":"value2","title":"Second"}]},` +
		`"legacyEnum":{"type":"string","enum":["opt1","opt2"],"enumNames":["Option One","Option Two"]},` +
		`"untitledMulti":{"type":"array","items":{"type":"string","enum":["option1","option2","option3"]}},` +
		`"titledMulti":{"type":"array","items":{"anyOf":[{"const":"value1","title":"First"},{"const":"value2","title":"Second"}]}}}}`
)

// newAskingServer returns an upstream MCP server, on the protocol of
// 2025-11-25 (where a server sends its client requests while it serves a
// call), with the tools the conformance scenarios of sampling, elicitation
// and logging call: each asks its client, or logs, mid-call.
func newAskingServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "asking-upstream", Version: "1"}, &sdk.ServerOptions{
		SupportedProtocolVersions: []string{"2025-11-25"},
	})
	text := func(format string, args ...any) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf(format, args...)}}}
	}
	failed := func(err error) *sdk.CallToolResult {
		r := text("the client did not answer: %v", err)
		r.IsError = true
		return r
	}
	elicit := func(name, schema string) {
		s.AddTool(&sdk.Tool{Name: name, Description: "Asks the client for input mid-call, and answers with what it said.", InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}}}`)},
			func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				var args struct{ Message string }
				_ = json.Unmarshal(req.Params.Arguments, &args)
				if args.Message == "" {
					args.Message = "Please answer"
				}
				r, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Message: args.Message, RequestedSchema: json.RawMessage(schema)})
				if err != nil {
					return failed(err), nil
				}
				b, _ := json.Marshal(r.Content)
				return text("%s %s", r.Action, b), nil
			})
	}
	elicit("test_elicitation", `{"type":"object","properties":{"username":{"type":"string"},"email":{"type":"string"}},"required":["username","email"]}`)
	elicit("test_elicitation_sep1034_defaults", sep1034Schema)
	elicit("test_elicitation_sep1330_enums", sep1330Schema)
	s.AddTool(&sdk.Tool{Name: "test_sampling", Description: "Asks the client for a sample mid-call, and answers with it.", InputSchema: json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string"}}}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var args struct{ Prompt string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			r, err := req.Session.CreateMessage(ctx, &sdk.CreateMessageParams{MaxTokens: 100,
				Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: args.Prompt}}}})
			if err != nil {
				return failed(err), nil
			}
			t, _ := r.Content.(*sdk.TextContent)
			if t == nil {
				return text("LLM response: (not text)"), nil
			}
			return text("LLM response: %s", t.Text), nil
		})
	s.AddTool(&sdk.Tool{Name: "test_tool_with_logging", Description: "Sends three log messages mid-call.", InputSchema: emptyObject},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			for _, m := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
				_ = req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Data: m})
				time.Sleep(50 * time.Millisecond)
			}
			return text("done"), nil
		})
	return s
}

// askingTools serves newAskingServer over Streamable HTTP and returns its
// tools imported through mcptool (every tool effectful, as imported): the
// tools the conformance scenarios of sampling, elicitation and logging call.
func askingTools(t *testing.T) []*tool.Tool {
	t.Helper()
	ctx := testenv.Context(t, clientWait)
	up := newAskingServer()
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up }, nil))
	t.Cleanup(hs.Close)
	u, err := mcptool.Open(ctx, mcptool.Config{Name: "asking", URL: hs.URL, Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	tools, err := u.Import(ctx, mcptool.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

// TestRelayThroughEmitterMCP: the Go SDK's client, spawning emitter mcp
// (stdio), answers the upstream's elicitation and sampling requests made
// mid-call and gets its log messages, on the old protocol (asked with
// requests) and the newest (asked in input-required results).
func TestRelayThroughEmitterMCP(t *testing.T) {
	f := startGatewayFleetWith(t, mcpgate.Config{}, askingTools(t)...)
	emitter := buildEmitter(t)
	for _, version := range []string{"2025-11-25", ""} {
		t.Run("protocol "+map[string]string{"": "newest"}[version]+version, func(t *testing.T) {
			ctx := testenv.Context(t, clientWait)
			var mu sync.Mutex
			var elicited, sampled, logs int
			c := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, &sdk.ClientOptions{
				ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
					mu.Lock()
					elicited++
					mu.Unlock()
					return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"username": "ada", "email": "ada@example.com"}}, nil
				},
				CreateMessageHandler: func(context.Context, *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
					mu.Lock()
					sampled++
					mu.Unlock()
					return &sdk.CreateMessageResult{Role: "assistant", Model: "m", Content: &sdk.TextContent{Text: "hi"}}, nil
				},
				LoggingMessageHandler: func(context.Context, *sdk.LoggingMessageRequest) {
					mu.Lock()
					logs++
					mu.Unlock()
				},
			})
			cmd := exec.Command(emitter, "mcp", "--tenant", "acme")
			cmd.Env = append(cmd.Environ(), "NATS_URL="+f.srv.ClientURL())
			cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if version != "" {
				if err := cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "debug"}); err != nil {
					t.Fatal(err)
				}
			}
			call := func(name string, args map[string]any) string {
				t.Helper()
				r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				tc, _ := r.Content[0].(*sdk.TextContent)
				if r.IsError || tc == nil {
					t.Fatalf("%s: %+v", name, r)
				}
				return tc.Text
			}
			if got := call("test_elicitation", map[string]any{"message": "Who are you?"}); got != `accept {"email":"ada@example.com","username":"ada"}` {
				t.Errorf("test_elicitation: %q", got)
			}
			if got := call("test_sampling", map[string]any{"prompt": "Say hi"}); got != "LLM response: hi" {
				t.Errorf("test_sampling: %q", got)
			}
			call("test_tool_with_logging", map[string]any{})
			time.Sleep(200 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			if elicited != 1 || sampled != 1 {
				t.Errorf("asked %d elicitations and %d samplings; want one each", elicited, sampled)
			}
			if version != "" && logs < 3 {
				t.Errorf("%d log messages relayed; want 3", logs)
			}
		})
	}
}
