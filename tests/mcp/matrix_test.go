package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/internal/testkit/nodetest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/mcpgate"
	"github.com/tesserix/toolexec/tool/mcptool"
)

// matrixClient is a third-party MCP client the matrix drives. run connects to
// target as the client does by default, makes calls (one after another, or
// all at once when concurrent) and returns their results in the order of the
// calls, in the shape the TypeScript client reports them, and the protocol
// version the client settled on ("" when it does not say).
type matrixClient struct {
	name string
	// version is the protocol version the client must settle on over both
	// transports; "" for a client that does not say.
	version string
	run     func(ctx context.Context, target nodetest.Target, calls []nodetest.Call, concurrent bool) ([]nodetest.CallResult, string, error)
}

// cell is one case of the matrix for one client over one transport: its own
// run, and flights nobody else books.
type cell struct {
	run string
	n   int // the cell's number, for flights
}

// flight returns the cell's k-th flight.
func (c cell) flight(k int) string { return fmt.Sprintf("MX%03d%d", c.n, k) }

// runMeta is the _meta of a call in c's run. Calls name their run: over
// HTTP, a client of protocol 2026-07-28 has no session to share one.
func (c cell) runMeta() map[string]any { return map[string]any{mcpgate.MetaRunID: c.run} }

// matrixCase is one behaviour every client must see over every transport:
// calls to make, and what their results and the fleet must show.
type matrixCase struct {
	name       string
	concurrent bool
	calls      func(c cell) []nodetest.Call
	check      func(t *testing.T, f *gatewayFleet, c cell, r []nodetest.CallResult)
}

// stormSize is how many identical calls the storm case makes at once.
const stormSize = 20

// matrixCases are the cases of TestClientMatrix. A case of a new behaviour
// (elicitation, say) is one more entry.
var matrixCases = []matrixCase{
	{name: "dedup",
		calls: func(c cell) []nodetest.Call {
			return []nodetest.Call{
				{Tool: "book", Arguments: map[string]any{"flight": c.flight(0), "seats": 1, "request_id": "a"}, Meta: c.runMeta()},
				{Tool: "book", Arguments: map[string]any{"flight": c.flight(0), "seats": 1, "request_id": "b"}, Meta: c.runMeta()},
			}
		},
		check: func(t *testing.T, f *gatewayFleet, c cell, r []nodetest.CallResult) {
			if kind(r[0]) != "completed" || kind(r[1]) != "deduplicated" || r[0].Text() == "" || r[0].Text() != r[1].Text() ||
				r[0].Meta[mcpgate.MetaKey] != r[1].Meta[mcpgate.MetaKey] {
				t.Errorf("a booking and its repeat: %s / %s", describe(r[0]), describe(r[1]))
			}
			if n := f.airline.Bookings(c.flight(0)); n != 1 {
				t.Errorf("%d bookings, want 1", n)
			}
		}},
	{name: "storm", concurrent: true,
		calls: func(c cell) []nodetest.Call {
			calls := make([]nodetest.Call, stormSize)
			for i := range calls {
				calls[i] = nodetest.Call{Tool: "book", Meta: c.runMeta(),
					Arguments: map[string]any{"flight": c.flight(0), "seats": 2, "request_id": fmt.Sprint(i)}}
			}
			return calls
		},
		check: func(t *testing.T, f *gatewayFleet, c cell, r []nodetest.CallResult) {
			kinds := map[string]int{}
			for _, res := range r {
				kinds[kind(res)]++
			}
			if kinds["completed"] != 1 || kinds["deduplicated"] != stormSize-1 {
				t.Errorf("%d identical calls at once answered %v, want 1 completed and the rest deduplicated", stormSize, kinds)
			}
			if n := f.airline.Bookings(c.flight(0)); n != 1 {
				t.Errorf("%d bookings, want 1", n)
			}
		}},
	{name: "indeterminate",
		calls: func(c cell) []nodetest.Call {
			return []nodetest.Call{
				{Tool: "book", Arguments: map[string]any{"flight": c.flight(0), "seats": 1, "request_id": "a", "fail_after_effect": true}, Meta: c.runMeta()},
				{Tool: "book", Arguments: map[string]any{"flight": c.flight(0), "seats": 1, "request_id": "b"}, Meta: c.runMeta()},
			}
		},
		check: func(t *testing.T, f *gatewayFleet, c cell, r []nodetest.CallResult) {
			for i, res := range r {
				if !res.IsError || kind(res) != "indeterminate" || res.Meta[mcpgate.MetaBodyEntered] != true ||
					!strings.Contains(res.Text(), "will not run it again") {
					t.Errorf("lost booking, call %d: %s", i+1, describe(res))
				}
			}
			if n := f.airline.Bookings(c.flight(0)); n != 1 {
				t.Errorf("%d bookings after a lost answer and its retry, want 1", n)
			}
		}},
	{name: "progress",
		calls: func(c cell) []nodetest.Call {
			return []nodetest.Call{{Tool: "test_tool_with_progress", Progress: true, Meta: c.runMeta()}}
		},
		check: func(t *testing.T, _ *gatewayFleet, _ cell, r []nodetest.CallResult) {
			p := r[0].Progress
			if r[0].IsError || kind(r[0]) != "completed" || len(p) < 2 {
				t.Fatalf("a call that waits 600 ms, progress every 100 ms: %d notifications, %s", len(p), describe(r[0]))
			}
			for i := 1; i < len(p); i++ {
				if p[i].Progress <= p[i-1].Progress {
					t.Errorf("progress went from %v to %v", p[i-1].Progress, p[i].Progress)
				}
			}
		}},
	{name: "content",
		calls: func(c cell) []nodetest.Call {
			var calls []nodetest.Call
			for _, name := range []string{"test_image_content", "test_audio_content", "test_embedded_resource",
				"test_multiple_content_types", "test_multiple_content_types", "test_large_image", "test_large_image",
				"test_medium_image", "test_medium_image"} {
				calls = append(calls, nodetest.Call{Tool: name, Meta: c.runMeta()})
			}
			return calls
		},
		check: func(t *testing.T, f *gatewayFleet, c cell, r []nodetest.CallResult) {
			pixel := map[string]any{"type": "image", "mimeType": "image/png", "data": b64(redPixel)}
			resource := map[string]any{"type": "resource", "resource": map[string]any{
				"uri": embedded.URI, "mimeType": embedded.MIMEType, "text": embedded.Text}}
			for i, want := range [][]map[string]any{
				{pixel},
				{{"type": "audio", "mimeType": "audio/wav", "data": b64(shortWAV)}},
				{resource},
				{{"type": "text", "text": mixedText}, pixel, resource},
			} {
				if r[i].IsError || kind(r[i]) != "completed" || !sameContent(r[i].Content, want) {
					t.Errorf("%s: %s; want the content as the upstream sent it", r[i].Tool, describe(r[i]))
				}
			}
			if !sameContent(r[7].Content, []map[string]any{{"type": "image", "mimeType": "image/png", "data": b64(midImage)}}) {
				t.Errorf("an image of 40 KiB: %s; want it whole", describe(r[7]))
			}
			for _, pair := range [][2]int{{3, 4}, {5, 6}, {7, 8}} {
				a, b := r[pair[0]], r[pair[1]]
				if kind(a) != "completed" || kind(b) != "deduplicated" || !sameRaw(a.Content, b.Content) {
					t.Errorf("%s and its repeat: %s / %s; want the same content", a.Tool, describe(a), describe(b))
				}
				if n := f.content.ran(a.Tool, c.run); n != 1 {
					t.Errorf("%s ran %d times in run %s, want once", a.Tool, n, c.run)
				}
			}
			large := r[5].Content
			if len(large) != 2 || large[0].Type != "text" || !strings.Contains(large[0].Text, "left out") ||
				!strings.Contains(string(large[0].Raw), mcptool.MetaOmitted) || large[1].Text != "a large picture" {
				t.Errorf("an image over the bound: %s; want a text item with its digest, then the text", describe(r[5]))
			}
		}},
}

// TestClientMatrix: each third-party client (the Go SDK's, mark3labs/mcp-go's
// with its defaults, the TypeScript SDK's) over each transport (Streamable
// HTTP with a bearer token, and stdio spawning emitter mcp) sees every case
// of matrixCases: a repeat deduplicated, a storm of identical calls taken as
// one effect, a lost answer indeterminate and never run again, the gateway's
// progress while a call waits, and an upstream's image, audio and resources
// as MCP content, the same in a deduplicated answer.
func TestClientMatrix(t *testing.T) {
	ts := nodetest.Client(t)
	f := startGatewayFleet(t)
	emitter := buildEmitter(t)
	transports := []struct {
		name   string
		target nodetest.Target
	}{
		{"http", nodetest.Target{URL: f.tokURL, Token: gatewayToken}},
		{"stdio", nodetest.Target{Command: []string{emitter, "mcp", "--tenant", "acme", "--progress-every", "100ms"},
			Env: map[string]string{"NATS_URL": f.srv.ClientURL()}}},
	}
	clients := []matrixClient{
		{"go-sdk", "2026-07-28", runGoSDK},
		{"mcp-go", "2026-07-28", runMCPGo},
		// SDK 1.32.2 speaks the initialize handshake, up to 2025-11-25.
		{"typescript", "", func(ctx context.Context, target nodetest.Target, calls []nodetest.Call, concurrent bool) ([]nodetest.CallResult, string, error) {
			run := ts.Run
			if concurrent {
				run = ts.RunConcurrent
			}
			rep, err := run(ctx, target, calls...)
			if err != nil {
				return nil, "", err
			}
			if len(rep.Errors) > 0 {
				return nil, "", fmt.Errorf("the SDK reported errors on the side: %q", rep.Errors)
			}
			return rep.Results, "", nil
		}},
	}
	n := 0
	for _, cl := range clients {
		for _, tr := range transports {
			for _, mc := range matrixCases {
				n++
				c := cell{run: fmt.Sprintf("matrix-%s-%s-%s", cl.name, tr.name, mc.name), n: n}
				t.Run(cl.name+"/"+tr.name+"/"+mc.name, func(t *testing.T) {
					calls := mc.calls(c)
					res, version, err := cl.run(testenv.Context(t, clientWait), tr.target, calls, mc.concurrent)
					if err != nil {
						t.Fatalf("%s: %v", cl.name, err)
					}
					if version != cl.version {
						t.Errorf("%s settled on protocol version %s, want %s", cl.name, version, cl.version)
					}
					if len(res) != len(calls) {
						t.Fatalf("%d results for %d calls", len(res), len(calls))
					}
					for i, r := range res {
						if r.Error != nil {
							t.Fatalf("call %d (%s): JSON-RPC error %+v", i, calls[i].Tool, r.Error)
						}
					}
					mc.check(t, f, c, res)
				})
			}
		}
	}
}

// runGoSDK is matrixClient.run for the Go SDK's client with its defaults
// (protocol 2026-07-28 where the server offers it).
func runGoSDK(ctx context.Context, target nodetest.Target, calls []nodetest.Call, concurrent bool) ([]nodetest.CallResult, string, error) {
	prog := newProgressLog()
	client := sdk.NewClient(&sdk.Implementation{Name: "matrix-go-sdk", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			p := req.Params
			prog.add(p.ProgressToken, nodetest.Progress{Progress: p.Progress, Total: p.Total, Message: p.Message})
		},
	})
	var tr sdk.Transport
	if target.URL != "" {
		tr = &sdk.StreamableClientTransport{Endpoint: target.URL, HTTPClient: &http.Client{Transport: bearerTransport(target.Token)}}
	} else {
		tr = &sdk.CommandTransport{Command: command(ctx, target)}
	}
	cs, err := client.Connect(ctx, tr, nil)
	if err != nil {
		return nil, "", fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	res, err := callAll(calls, concurrent, prog, func(i int, c nodetest.Call) (any, error) {
		p := &sdk.CallToolParams{Name: c.Tool, Arguments: arguments(c), Meta: sdk.Meta(clone(c.Meta))}
		if c.Progress {
			p.SetProgressToken(progressToken(i))
		}
		r, err := cs.CallTool(ctx, p)
		var we *jsonrpc.Error
		if errors.As(err, &we) {
			return nil, &rpcError{nodetest.RPCError{Code: int(we.Code), Message: we.Message}}
		}
		return r, err
	})
	return res, cs.InitializeResult().ProtocolVersion, err
}

// runMCPGo is matrixClient.run for mark3labs/mcp-go's client with its
// defaults: it probes with server/discover and speaks 2026-07-28 when the
// server lists it.
func runMCPGo(ctx context.Context, target nodetest.Target, calls []nodetest.Call, concurrent bool) ([]nodetest.CallResult, string, error) {
	var (
		c   *mcpgoclient.Client
		err error
	)
	if target.URL != "" {
		c, err = mcpgoclient.NewStreamableHttpClient(target.URL,
			mcpgotransport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + target.Token}))
	} else {
		var env []string
		for k, v := range target.Env {
			env = append(env, k+"="+v)
		}
		c, err = mcpgoclient.NewStdioMCPClient(target.Command[0], env, target.Command[1:]...)
	}
	if err != nil {
		return nil, "", err
	}
	defer c.Close()
	prog := newProgressLog()
	c.OnNotification(func(n mcpgo.JSONRPCNotification) {
		if n.Method != "notifications/progress" {
			return
		}
		b, _ := json.Marshal(n.Params)
		var p struct {
			ProgressToken any `json:"progressToken"`
			nodetest.Progress
		}
		if json.Unmarshal(b, &p) == nil {
			prog.add(p.ProgressToken, p.Progress)
		}
	})
	if err := c.Start(ctx); err != nil {
		return nil, "", fmt.Errorf("start: %w", err)
	}
	if _, err := c.Initialize(ctx, mcpgo.InitializeRequest{Params: mcpgo.InitializeParams{
		ClientInfo: mcpgo.Implementation{Name: "matrix-mcp-go", Version: "1"},
	}}); err != nil {
		return nil, "", fmt.Errorf("initialize: %w", err)
	}
	res, err := callAll(calls, concurrent, prog, func(i int, call nodetest.Call) (any, error) {
		meta := mcpgo.NewMetaFromMap(clone(call.Meta))
		if call.Progress {
			meta.ProgressToken = progressToken(i)
		}
		return c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: call.Tool, Arguments: arguments(call), Meta: meta}})
	})
	return res, c.ProtocolVersion(), err
}

// callAll makes each call with do, one after another or all at once, and
// turns what do returns (a client's own result type, or an *rpcError) into
// results. Another error ends the run.
func callAll(calls []nodetest.Call, concurrent bool, prog *progressLog, do func(int, nodetest.Call) (any, error)) ([]nodetest.CallResult, error) {
	out := make([]nodetest.CallResult, len(calls))
	errs := make([]error, len(calls))
	one := func(i int) {
		c := calls[i]
		r, err := do(i, c)
		var rpc *rpcError
		switch {
		case errors.As(err, &rpc):
			out[i] = nodetest.CallResult{Tool: c.Tool, Error: &rpc.e}
			return
		case err != nil:
			errs[i] = fmt.Errorf("call %d (%s): %w", i, c.Tool, err)
			return
		}
		b, err := json.Marshal(r)
		if err == nil {
			err = json.Unmarshal(b, &out[i])
		}
		if err != nil {
			errs[i] = fmt.Errorf("call %d (%s): reading the result: %w", i, c.Tool, err)
			return
		}
		out[i].Tool = c.Tool
		if c.Progress {
			out[i].Progress = prog.of(progressToken(i))
		}
	}
	if concurrent {
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() { one(i) })
		}
		wg.Wait()
	} else {
		for i := range calls {
			one(i)
		}
	}
	return out, errors.Join(errs...)
}

// rpcError is a JSON-RPC error a server answered a call with.
type rpcError struct{ e nodetest.RPCError }

func (e *rpcError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.e.Code, e.e.Message) }

// progressLog keeps the progress notifications a client received, by token.
type progressLog struct {
	mu   sync.Mutex
	byTk map[string][]nodetest.Progress
}

func newProgressLog() *progressLog { return &progressLog{byTk: map[string][]nodetest.Progress{}} }

func (l *progressLog) add(token any, p nodetest.Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := fmt.Sprint(token)
	l.byTk[k] = append(l.byTk[k], p)
}

func (l *progressLog) of(token string) []nodetest.Progress {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byTk[token]
}

// progressToken is the token of the i-th call, as the TypeScript client names it.
func progressToken(i int) string { return fmt.Sprintf("progress-%d", i) }

// arguments returns a call's arguments, {} when it has none.
func arguments(c nodetest.Call) map[string]any {
	if c.Arguments == nil {
		return map[string]any{}
	}
	return c.Arguments
}

// clone returns a copy of m that a client may add to.
func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// command returns the command of a stdio target, with its Env added to this
// process's environment.
func command(ctx context.Context, target nodetest.Target) *exec.Cmd {
	cmd := exec.CommandContext(ctx, target.Command[0], target.Command[1:]...)
	cmd.Env = os.Environ()
	for k, v := range target.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// bearerTransport adds "Authorization: Bearer <token>" to every request.
type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// kind returns a result's answer kind.
func kind(r nodetest.CallResult) string {
	k, _ := r.Meta[mcpgate.MetaKind].(string)
	return k
}

// describe shows a result in a failure message, its data cut short.
func describe(r nodetest.CallResult) string {
	var items []string
	for _, c := range r.Content {
		s := string(c.Raw)
		if len(s) > 200 {
			s = s[:200] + "…"
		}
		items = append(items, s)
	}
	return fmt.Sprintf("{isError:%v kind:%s content:[%s] _meta:%v}", r.IsError, kind(r), strings.Join(items, ", "), r.Meta)
}

// sameContent reports whether content holds exactly the items of want (as
// JSON values: members beyond want's, such as annotations, must be absent).
func sameContent(content []nodetest.Content, want []map[string]any) bool {
	if len(content) != len(want) {
		return false
	}
	for i, c := range content {
		var got any
		if json.Unmarshal(c.Raw, &got) != nil {
			return false
		}
		w, _ := json.Marshal(want[i])
		var wv any
		_ = json.Unmarshal(w, &wv)
		if !reflect.DeepEqual(got, wv) {
			return false
		}
	}
	return true
}

// sameRaw reports whether two content lists hold the same JSON values.
func sameRaw(a, b []nodetest.Content) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for i := range a {
		var x, y any
		if json.Unmarshal(a[i].Raw, &x) != nil || json.Unmarshal(b[i].Raw, &y) != nil || !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}
