package mcpgate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/mcpgate"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/mcptool"
)

// oldProtocol is the newest protocol version in which a server may send its
// client requests while it serves a call.
const oldProtocol = "2025-11-25"

// confirmSchema asks for a booking's details with defaults (SEP-1034) and
// the enum shapes of SEP-1330: plain, titled (oneOf of const and title),
// legacy enumNames, and a multi-select array.
const confirmSchema = `{"type":"object","properties":{` +
	`"name":{"type":"string","title":"Name","default":"Ada"},` +
	`"seats":{"type":"integer","default":2},` +
	`"vip":{"type":"boolean","default":false},` +
	`"class":{"type":"string","enum":["economy","business"],"default":"economy"},` +
	`"meal":{"type":"string","oneOf":[{"const":"veg","title":"Vegetarian"},{"const":"std","title":"Standard"}]},` +
	`"seat":{"type":"string","enum":["a","w"],"enumNames":["Aisle","Window"]},` +
	`"extras":{"type":"array","items":{"type":"string","enum":["wifi","bag"]},"default":["wifi"]}` +
	`},"required":["name"]}`

// relayUpstream is an MCP server written with the Go SDK for the test, its
// tools asking their client (classic requests on an old protocol, or
// input-required results on the newest) and reporting progress and logs.
type relayUpstream struct {
	mrtr    bool
	confirm atomic.Int32 // confirm's handler entered
}

func (u *relayUpstream) server() *mcp.Server {
	opts := &mcp.ServerOptions{}
	if !u.mrtr {
		opts.SupportedProtocolVersions = []string{oldProtocol}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "relay-upstream", Version: "1"}, opts)
	s.AddTool(&mcp.Tool{Name: "confirm", InputSchema: json.RawMessage(`{"type":"object","properties":{"flight":{"type":"string"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.confirm.Add(1)
			ask := &mcp.ElicitParams{Message: "Book this flight?", RequestedSchema: json.RawMessage(confirmSchema)}
			var res *mcp.ElicitResult
			if u.mrtr {
				r, ok := req.Params.InputResponses["ok"].(*mcp.ElicitResult)
				if !ok {
					return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"ok": ask}, RequestState: "s1"}, nil
				}
				res = r
			} else {
				r, err := req.Session.Elicit(ctx, ask)
				if err != nil {
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "elicitation failed: " + err.Error()}}}, nil
				}
				res = r
			}
			b, _ := json.Marshal(res.Content)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action + " " + string(b)}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "write", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ask := &mcp.CreateMessageParams{MaxTokens: 50, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Say hello"}}}}
			var text string
			if u.mrtr {
				r, ok := req.Params.InputResponses["say"].(*mcp.CreateMessageWithToolsResult)
				if !ok {
					return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"say": ask}}, nil
				}
				if len(r.Content) > 0 {
					if tc, ok := r.Content[0].(*mcp.TextContent); ok {
						text = tc.Text
					}
				}
			} else {
				r, err := req.Session.CreateMessage(ctx, ask)
				if err != nil {
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "sampling failed: " + err.Error()}}}, nil
				}
				if tc, ok := r.Content.(*mcp.TextContent); ok {
					text = tc.Text
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "model said: " + text}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "chatty", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ N int }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			token := req.Params.GetProgressToken()
			for i := 1; i <= args.N; i++ {
				if token != nil {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: float64(args.N), Message: fmt.Sprintf("step %d", i)})
				}
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "chatty", Data: fmt.Sprintf("line %d", i)})
				if i%50 == 0 {
					time.Sleep(100 * time.Millisecond)
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	return s
}

// relayFleet is an embedded NATS server, an executor serving the upstream's
// tools (confirm effectful on flight, write and chatty without a policy) and
// a gateway over Streamable HTTP for acme.
type relayFleet struct {
	srv *server.Server
	up  *relayUpstream
	gw  *mcpgate.Gateway
	url string
}

func startRelayFleet(t *testing.T, mrtr bool) *relayFleet {
	t.Helper()
	ctx := ctxT(t)
	f := &relayFleet{srv: natstest.Start(t), up: &relayUpstream{mrtr: mrtr}}
	srvMCP := f.up.server()
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srvMCP }, nil))
	t.Cleanup(up.Close)
	u, err := mcptool.Open(ctx, mcptool.Config{Name: "up", URL: up.URL, Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	mk := func(spec tool.Spec, remote string) *tool.Tool {
		tl, err := u.Tool(spec, remote)
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	tools := []*tool.Tool{
		mk(tool.Spec{Name: "confirm", Timeout: 30 * time.Second, Parameters: json.RawMessage(`{"type":"object","properties":{"flight":{"type":"string"}}}`),
			Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}}}, "confirm"),
		mk(tool.Spec{Name: "write", Timeout: 30 * time.Second}, "write"),
		mk(tool.Spec{Name: "chatty", Timeout: 30 * time.Second, Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}, "chatty"),
	}
	ex, err := toolexec.NewExecutor(ctx, natstest.Connect(t, f.srv), toolexec.ExecutorConfig{Tools: tools, Logger: testenv.Logger()})
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ex.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("executor: %v", err)
		}
		ex.Close()
	})
	f.gw, err = mcpgate.New(natstest.Connect(t, f.srv), mcpgate.Config{Logger: testenv.Logger(), ProgressEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f.url = serveHTTP(t, f.gw, mcpgate.HTTPConfig{Tenant: "acme"}).URL
	return f
}

// humanClient is a Go SDK client that answers elicitation as a person
// would (accepting with a name only, leaving the rest to the defaults) and
// sampling as a model would, and records what it was asked.
type humanClient struct {
	mu       sync.Mutex
	asked    []json.RawMessage // the requestedSchema of each elicitation
	sampled  int
	progress []float64
	logs     []string
}

func (h *humanClient) options(elicit, sample bool) *mcp.ClientOptions {
	o := &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			h.mu.Lock()
			h.progress = append(h.progress, r.Params.Progress)
			h.mu.Unlock()
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			h.mu.Lock()
			h.logs = append(h.logs, fmt.Sprint(r.Params.Data))
			h.mu.Unlock()
		},
	}
	if elicit {
		o.ElicitationHandler = func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			b, _ := json.Marshal(r.Params.RequestedSchema)
			h.mu.Lock()
			h.asked = append(h.asked, b)
			h.mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Grace", "meal": "veg", "seat": "w"}}, nil
		}
	}
	if sample {
		o.CreateMessageHandler = func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			h.mu.Lock()
			h.sampled++
			h.mu.Unlock()
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: &mcp.TextContent{Text: "hello"}}, nil
		}
	}
	return o
}

// connectOld opens a Go SDK session to url on the old protocol, where the
// gateway may send requests to the client while it serves a call.
func connectOld(t *testing.T, url string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectVersion(t, url, opts, oldProtocol)
}

// connectVersion opens a Go SDK session to url on protocol version ("" for
// the newest, where the gateway asks the client in input-required results).
func connectVersion(t *testing.T, url string, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "toolexec-test", Version: "1"}, opts)
	cs, err := c.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestRelayElicitationAndSampling: an upstream's elicitation and sampling
// requests, made mid-call, reach the Go SDK client behind the HTTP gateway
// and its answers come back, with an upstream on the old protocol (requests
// on the call's stream) and on the newest (input-required results), and a
// client on either (asked with requests, or in input-required results). The
// schema reaches the client as the upstream wrote it, and the defaults the
// client left out are applied. A repeat of the effectful call is answered
// from the record without asking again.
func TestRelayElicitationAndSampling(t *testing.T) {
	for _, c := range []struct {
		name   string
		mrtr   bool   // the upstream asks in input-required results
		client string // the client's protocol version
	}{
		{"classic upstream, client " + oldProtocol, false, oldProtocol},
		{"input-required upstream, client " + oldProtocol, true, oldProtocol},
		{"classic upstream, newest client", false, ""},
		{"input-required upstream, newest client", true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := startRelayFleet(t, c.mrtr)
			h := &humanClient{}
			cs := connectVersion(t, f.url, h.options(true, true), c.client)

			// The run is named: a client on the newest protocol has no session
			// over HTTP, and without a run_id each call would be a run of its
			// own. A fresh _meta for each call: the SDK writes into it.
			run := func() mcp.Meta { return mcp.Meta{mcpgate.MetaRunID: "trip-relay"} }
			r := callTool(t, cs, "confirm", map[string]any{"flight": "BA117"}, run())
			if r.IsError || !strings.HasPrefix(text(r), "accept ") {
				t.Fatalf("confirm: %+v %q", r, text(r))
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(text(r), "accept ")), &got); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"name": "Grace", "meal": "veg", "seat": "w", "seats": float64(2), "vip": false, "class": "economy", "extras": []any{"wifi"}}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the upstream got %v; want %v (the client's answer with the defaults)", got, want)
			}
			h.mu.Lock()
			asked := h.asked
			h.mu.Unlock()
			if len(asked) != 1 {
				t.Fatalf("the client was asked %d times; want once", len(asked))
			}
			var gotSchema, wantSchema any
			_ = json.Unmarshal(asked[0], &gotSchema)
			_ = json.Unmarshal([]byte(confirmSchema), &wantSchema)
			if fmt.Sprint(gotSchema) != fmt.Sprint(wantSchema) {
				t.Errorf("schema the client saw:\n%s\nwant\n%s", asked[0], confirmSchema)
			}

			// The repeat is answered from the record: nobody is asked again.
			before := f.up.confirm.Load()
			r2 := callTool(t, cs, "confirm", map[string]any{"flight": "BA117"}, run())
			if metaOf(r2, "kind") != "deduplicated" || text(r2) != text(r) {
				t.Errorf("repeat: %+v %q", r2.Meta, text(r2))
			}
			h.mu.Lock()
			n := len(h.asked)
			h.mu.Unlock()
			if n != 1 || f.up.confirm.Load() != before {
				t.Errorf("the repeat asked the client again (%d asks) or entered the upstream", n)
			}

			w := callTool(t, cs, "write", map[string]any{}, nil)
			if w.IsError || text(w) != "model said: hello" {
				t.Errorf("write: %+v %q", w, text(w))
			}
		})
	}
}

// TestRelayRefusedAtOnce: a caller that cannot answer gets the upstream's
// request refused at once, not after a stall: an MCP client that declared
// neither capability, and a plain NATS caller.
func TestRelayRefusedAtOnce(t *testing.T) {
	for _, mrtr := range []bool{false, true} {
		t.Run(map[bool]string{false: "classic", true: "input-required"}[mrtr], func(t *testing.T) {
			f := startRelayFleet(t, mrtr)
			h := &humanClient{}
			version := oldProtocol
			if mrtr {
				version = ""
			}
			cs := connectVersion(t, f.url, h.options(false, false), version)
			start := time.Now()
			r := callTool(t, cs, "confirm", map[string]any{"flight": "LH400"}, nil)
			if !r.IsError || metaOf(r, "kind") != "failed" {
				t.Errorf("confirm without the capability: %+v %q; want failed", r.Meta, text(r))
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("the refusal took %s", d)
			}

			c, err := toolexec.NewClient(natstest.Connect(t, f.srv), toolexec.WithLogger(testenv.Logger()))
			if err != nil {
				t.Fatal(err)
			}
			start = time.Now()
			res, err := c.Call(ctxT(t), "acme", "write", map[string]any{})
			if err == nil || res == nil || res.Kind != events.KindFailed {
				t.Errorf("a NATS caller: %+v, %v; want failed", res, err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("the refusal took %s", d)
			}
		})
	}
}

// TestRelayProgressAndLogs: an upstream's progress and log notifications
// reach the client, progress never going back after the gateway's own, and a
// flood of them is bounded: the client and the events stream get at most the
// executor's bound of notes, and the call's answer comes as usual.
func TestRelayProgressAndLogs(t *testing.T) {
	f := startRelayFleet(t, false)
	h := &humanClient{}
	cs := connectOld(t, f.url, h.options(false, false))
	if err := cs.SetLoggingLevel(ctxT(t), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	// Watch the stored notes, as an auditor would.
	nc := natstest.Connect(t, f.srv)
	var notes atomic.Int32
	sub, err := nc.Subscribe(wire.EventPrefix+"acme.*.chatty.*.*.*", func(m *nats.Msg) {
		if _, err := wire.DecodeNote(m.Subject, m.Data); err == nil {
			notes.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	params := &mcp.CallToolParams{Name: "chatty", Arguments: map[string]any{"n": 1000}}
	params.SetProgressToken("p1")
	r, err := cs.CallTool(ctxT(t), params)
	if err != nil || r.IsError || text(r) != "done" {
		t.Fatalf("chatty: %+v, %v", r, err)
	}
	time.Sleep(300 * time.Millisecond) // notifications sent just before the answer
	h.mu.Lock()
	progress, logs := append([]float64(nil), h.progress...), append([]string(nil), h.logs...)
	h.mu.Unlock()
	if len(logs) == 0 || !strings.HasPrefix(logs[0], "line ") {
		t.Errorf("logs relayed: %q", logs)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i] <= progress[i-1] {
			t.Errorf("progress went back: %v", progress)
			break
		}
	}
	if len(progress) == 0 {
		t.Error("no progress relayed")
	}
	total := len(progress) + len(logs)
	t.Logf("%d progress and %d logs relayed, %d notes stored", len(progress), len(logs), notes.Load())
	if n := int(notes.Load()); n == 0 || n > 101 || total > 101+50 {
		t.Errorf("%d notes stored, %d progress and %d logs relayed, for 2000 notifications; want at most the bound (100, and one saying how many were dropped)",
			n, len(progress), len(logs))
	}
}
