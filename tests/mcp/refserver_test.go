package mcp

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// refServerEnv, set to "stdio" in the environment of this test binary, makes
// it serve the reference server on its standard input and output instead of
// running tests: the stdio transport's server is this binary run again.
const refServerEnv = "TOOLEXEC_MCP_REFSERVER"

func TestMain(m *testing.M) {
	if os.Getenv(refServerEnv) == "stdio" {
		if err := newRefServer().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "reference server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The emitter mcp the clients spawn would read the developer's NATS_*
	// variables and selected nats CLI context.
	os.Exit(testenv.RunIsolated(m))
}

// refServerName is the name the reference server gives in its initialize
// answer.
const refServerName = "toolexec-reference"

// emptyObject is the input schema of a tool without arguments.
var emptyObject = json.RawMessage(`{"type":"object"}`)

// newRefServer returns a tools-only MCP server (it declares no other
// capability, not even the logging the Go SDK declares by default) with two
// tools of its own and the fixtures the applicable conformance scenarios call:
//
//   - add (read-only): the sum of a and b, as structured content;
//   - book (effectful and destructive): echoes the request's _meta in the
//     result's _meta under "echo";
//   - test_simple_text, test_error_handling, test_tool_with_progress and
//     json_schema_2020_12_tool, as the conformance suite describes them;
//   - the tools of addContentTools, which answer with images, audio and
//     embedded resources (the conformance suite's content scenarios).
func newRefServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: refServerName, Version: "1.0.0"}, &sdk.ServerOptions{
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}},
	})

	type addIn struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	type addOut struct {
		Sum float64 `json:"sum"`
	}
	sdk.AddTool(s, &sdk.Tool{
		Name: "add", Description: "Adds two numbers.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, _ *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, addOut, error) {
		return nil, addOut{Sum: in.A + in.B}, nil
	})

	type bookIn struct {
		Flight string `json:"flight"`
		Seats  int    `json:"seats"`
	}
	type bookOut struct {
		Flight string `json:"flight"`
		Seats  int    `json:"seats"`
	}
	destructive := true
	sdk.AddTool(s, &sdk.Tool{
		Name: "book", Description: "Books seats on a flight.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &destructive},
	}, func(_ context.Context, req *sdk.CallToolRequest, in bookIn) (*sdk.CallToolResult, bookOut, error) {
		res := &sdk.CallToolResult{Meta: sdk.Meta{"echo": map[string]any(req.Params.Meta)}}
		return res, bookOut(in), nil
	})

	s.AddTool(&sdk.Tool{
		Name: "test_simple_text", Description: "Answers with one text item.", InputSchema: emptyObject,
	}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "This is a simple text response for testing."},
		}}, nil
	})

	s.AddTool(&sdk.Tool{
		Name: "test_error_handling", Description: "Always fails.", InputSchema: emptyObject,
	}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var res sdk.CallToolResult
		res.SetError(errors.New("the tool failed, as it always does"))
		return &res, nil
	})

	s.AddTool(&sdk.Tool{
		Name: "test_tool_with_progress", Description: "Reports progress 0, 50 and 100 of 100.", InputSchema: emptyObject,
	}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if token := req.Params.GetProgressToken(); token != nil {
			for _, p := range []float64{0, 50, 100} {
				err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: p, Total: 100})
				if err != nil {
					return nil, err
				}
			}
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil
	})

	s.AddTool(&sdk.Tool{
		Name: "json_schema_2020_12_tool", Description: "Declares an input schema with 2020-12 keywords.",
		InputSchema: json.RawMessage(`{
			"$schema": "https://json-schema.org/draft/2020-12/schema",
			"type": "object",
			"$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
			"properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
			"additionalProperties": false
		}`),
	}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
	})
	addContentTools(s, nil)
	return s
}

// serveHTTP serves the reference server over Streamable HTTP on a loopback
// port until the test ends and returns its endpoint. With a token, a request
// without "Authorization: Bearer <token>" is answered 401.
func serveHTTP(t *testing.T, token string) string {
	t.Helper()
	srv := newRefServer()
	var h http.Handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	if token != "" {
		h = requireBearer(token, h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.CloseClientConnections() // a client's open SSE stream would hold Close
		ts.Close()
	})
	return ts.URL + "/mcp"
}

func requireBearer(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// stdioCommand returns the command and environment that serve the reference
// server over stdio: this test binary, run again.
func stdioCommand(t *testing.T) ([]string, map[string]string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe}, map[string]string{refServerEnv: "stdio"}
}
