package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/mcptool"
)

// confirmSchema is what the confirm tool asks its caller for: a form with a
// seat (required) and a meal.
const confirmSchema = `{"type":"object","properties":{` +
	`"seat":{"type":"string","description":"The seat to book"},` +
	`"meal":{"type":"string","enum":["veg","fish"]}},"required":["seat"]}`

// chattySteps is how many progress notifications and log messages the chatty
// tool sends.
const chattySteps = 3

// askUpstream is two MCP servers written with the Go SDK, over Streamable
// HTTP, whose tools talk to their caller mid-call: one on the protocol of
// 2025-11-25, where a server sends its client requests and notifications
// while it serves a call, and one on 2026-07-28, where a server asks in an
// input-required result (multi round-trip requests) and mcptool sends the
// call again with the answer. An executor imports their tools (package
// mcptool, each effectful: one run per key), so that what they ask and tell
// crosses the executor and the gateway to the calling MCP client:
//
//	matrix_confirm  {"flight", "message"}: asks its caller to confirm
//	                (elicitation/create, form mode, confirmSchema, with
//	                message), and answers the action and, when accepted,
//	                the content as JSON: `accept {"seat":"1A"}`, `decline`;
//	                a refused request is an error result
//	matrix_confirm_mrtr  the same on 2026-07-28, asking in an
//	                input-required result
//	matrix_chatty   {"flight"}: sends chattySteps progress notifications
//	                (when the call carries a progress token) and log messages
//	                at level info, "step 1" …, 100 ms apart, and answers "done"
//	matrix_chatty_mrtr  the same on 2026-07-28 (the log level in the
//	                request's _meta)
//
// It counts the runs of each tool by flight (of matrix_confirm_mrtr, the
// runs that had their answer).
type askUpstream struct {
	tools []*tool.Tool

	mu   sync.Mutex
	runs map[[2]string]int // {tool, flight} → runs
}

// startAskUpstream serves the upstream until the test ends and returns it
// with its tools imported.
func startAskUpstream(t *testing.T) *askUpstream {
	t.Helper()
	u := &askUpstream{runs: map[[2]string]int{}}
	srv := sdk.NewServer(&sdk.Implementation{Name: "ask-upstream", Version: "1"}, &sdk.ServerOptions{
		SupportedProtocolVersions: []string{"2025-11-25"},
		Capabilities:              &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}, Logging: &sdk.LoggingCapabilities{}},
	})
	type args struct {
		Flight  string `json:"flight"`
		Message string `json:"message"`
	}
	read := func(name string, req *sdk.CallToolRequest) args {
		var a args
		_ = json.Unmarshal(req.Params.Arguments, &a)
		u.mu.Lock()
		u.runs[[2]string{name, a.Flight}]++
		u.mu.Unlock()
		return a
	}
	text := func(isError bool, format string, v ...any) *sdk.CallToolResult {
		return &sdk.CallToolResult{IsError: isError, Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf(format, v...)}}}
	}
	schema := json.RawMessage(`{"type":"object","properties":{"flight":{"type":"string"},"message":{"type":"string"}},"required":["flight"]}`)
	srv.AddTool(&sdk.Tool{Name: "matrix_confirm", Description: "Asks its caller to confirm a booking.", InputSchema: schema},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			a := read("matrix_confirm", req)
			r, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Mode: "form", Message: a.Message, RequestedSchema: json.RawMessage(confirmSchema)})
			if err != nil {
				return text(true, "the caller could not be asked: %v", err), nil
			}
			if r.Action != "accept" {
				return text(false, "%s", r.Action), nil
			}
			b, _ := json.Marshal(r.Content)
			return text(false, "accept %s", b), nil
		})
	mrtr := sdk.NewServer(&sdk.Implementation{Name: "ask-upstream-mrtr", Version: "1"}, &sdk.ServerOptions{
		SupportedProtocolVersions: []string{"2026-07-28"},
		Capabilities:              &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}, Logging: &sdk.LoggingCapabilities{}},
	})
	mrtr.AddTool(&sdk.Tool{Name: "matrix_confirm_mrtr", Description: "Asks its caller to confirm a booking, in an input-required result.", InputSchema: schema},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			if ip := req.Session.InitializeParams(); ip == nil || ip.ProtocolVersion < "2026-07-28" {
				return text(true, "called on protocol %+v, not 2026-07-28", ip), nil
			}
			r, ok := req.Params.InputResponses["confirm"].(*sdk.ElicitResult)
			if !ok {
				var a args
				_ = json.Unmarshal(req.Params.Arguments, &a)
				return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{
					"confirm": &sdk.ElicitParams{Mode: "form", Message: a.Message, RequestedSchema: json.RawMessage(confirmSchema)},
				}}, nil
			}
			read("matrix_confirm_mrtr", req)
			if r.Action != "accept" {
				return text(false, "%s", r.Action), nil
			}
			b, _ := json.Marshal(r.Content)
			return text(false, "accept %s", b), nil
		})
	chatty := func(name string) sdk.ToolHandler {
		return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			read(name, req)
			token := req.Params.GetProgressToken()
			for i := 1; i <= chattySteps; i++ {
				if token != nil {
					_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token,
						Progress: float64(i), Total: chattySteps, Message: fmt.Sprintf("step %d", i)})
				}
				_ = req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Logger: "chatty", Data: fmt.Sprintf("step %d", i)})
				time.Sleep(100 * time.Millisecond)
			}
			return text(false, "done"), nil
		}
	}
	srv.AddTool(&sdk.Tool{Name: "matrix_chatty", Description: "Reports progress and logs as it goes.", InputSchema: schema}, chatty("matrix_chatty"))
	mrtr.AddTool(&sdk.Tool{Name: "matrix_chatty_mrtr", Description: "Reports progress and logs as it goes.", InputSchema: schema}, chatty("matrix_chatty_mrtr"))
	ctx := testenv.Context(t, clientWait)
	// The SDK's stateful handler serves only the protocols of the initialize
	// handshake; 2026-07-28, which has no sessions, needs a stateless one.
	for _, up := range []struct {
		name string
		srv  *sdk.Server
		opts *sdk.StreamableHTTPOptions
	}{{"ask", srv, nil}, {"ask-mrtr", mrtr, &sdk.StreamableHTTPOptions{Stateless: true}}} {
		name := up.name
		ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up.srv }, up.opts))
		t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
		up, err := mcptool.Open(ctx, mcptool.Config{Name: name, URL: ts.URL, Logger: testenv.Logger()})
		if err != nil {
			t.Fatalf("opening the asking upstream %s: %v", name, err)
		}
		t.Cleanup(func() { _ = up.Close() })
		tools, err := up.Import(ctx, mcptool.ImportOptions{})
		if err != nil {
			t.Fatalf("importing the asking upstream %s's tools: %v", name, err)
		}
		u.tools = append(u.tools, tools...)
	}
	return u
}

// ran returns how many times tool ran for flight.
func (u *askUpstream) ran(tool, flight string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs[[2]string{tool, flight}]
}
