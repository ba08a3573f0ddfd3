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
	"slices"
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
// target as the client does by default, changed only as o says (calls made
// all at once, elicitation declared and answered, a log level set), makes
// calls and returns what it saw in the shape the TypeScript client reports
// it (the results in the order of the calls, the elicitation requests and
// log messages received), and the protocol version the client settled on
// ("" when it does not say).
type matrixClient struct {
	name string
	// version is the protocol version the client must settle on over both
	// transports; "" for a client that does not say.
	version string
	// pinned marks a client held to an older protocol than it speaks by
	// default: it runs only the cases that differ between protocol
	// generations (matrixCase.generations).
	pinned bool
	run    func(ctx context.Context, target nodetest.Target, o nodetest.Options, calls []nodetest.Call) (*nodetest.Report, string, error)
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
	// elicit, when not empty, makes the client declare elicitation and
	// answer with these rules (nodetest.Options.Elicit).
	elicit []nodetest.ElicitRule
	// logLevel, when set, asks the server for log messages from that level.
	logLevel string
	// generations marks a case that differs between protocol generations
	// (the server asks its client with requests before 2026-07-28, in
	// input-required results since), so that pinned clients run it too.
	generations bool
	// within, when set, bounds the client's whole run instead of clientWait.
	within time.Duration
	calls  func(c cell) []nodetest.Call
	check  func(t *testing.T, f *gatewayFleet, c cell, r []nodetest.CallResult, rep *nodetest.Report)
}

// stormSize is how many identical calls the storm case makes at once.
const stormSize = 20

// elicitStormSize is how many identical calls of a tool that asks its caller
// the elicitation storm cases make at once.
const elicitStormSize = 5

// matrixCases are the cases of TestClientMatrix. A case of a new behaviour
// is one more entry.
var matrixCases = []matrixCase{
	{name: "dedup",
		calls: func(c cell) []nodetest.Call {
			return []nodetest.Call{
				{Tool: "book", Arguments: map[string]any{"flight": c.flight(0), "seats": 1, "request_id": "a"}, Meta: c.runMeta()},
				{Tool: "book", Arguments: map[string]any{"flight": c.flight(0), "seats": 1, "request_id": "b"}, Meta: c.runMeta()},
			}
		},
		check: func(t *testing.T, f *gatewayFleet, c cell, r []nodetest.CallResult, _ *nodetest.Report) {
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
		check: func(t *testing.T, f *gatewayFleet, c cell, r []nodetest.CallResult, _ *nodetest.Report) {
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
		check: func(t *testing.T, f *gatewayFleet, c cell, r []nodetest.CallResult, _ *nodetest.Report) {
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
		check: func(t *testing.T, _ *gatewayFleet, _ cell, r []nodetest.CallResult, _ *nodetest.Report) {
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
		check: func(t *testing.T, f *gatewayFleet, c cell, r []nodetest.CallResult, _ *nodetest.Report) {
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
	elicitationCase("elicitation", "matrix_confirm"),
	undeclaredCase("elicitation-undeclared", "matrix_confirm"),
	elicitationStormCase("elicitation-storm", "matrix_confirm"),
	elicitationCase("elicitation-mrtr", "matrix_confirm_mrtr"),
	elicitationStormCase("elicitation-mrtr-storm", "matrix_confirm_mrtr"),
	undeclaredCase("elicitation-mrtr-undeclared", "matrix_confirm_mrtr"),
	progressCase("upstream-progress", "matrix_chatty"),
	progressCase("upstream-progress-mrtr", "matrix_chatty_mrtr"),
}

// progressCase is the case of an upstream tool (matrix_chatty or
// matrix_chatty_mrtr, see askUpstream) that sends progress notifications
// with the progress token of its call and log messages as it goes: a client
// that sent a progressToken gets the upstream's progress relayed with its own
// token, never going back, and, having asked for log messages from level
// info, the upstream's log messages.
func progressCase(name, tool string) matrixCase {
	return matrixCase{name: name, generations: true, logLevel: "info",
		calls: func(c cell) []nodetest.Call {
			return []nodetest.Call{{Tool: tool, Progress: true, Meta: c.runMeta(), Arguments: map[string]any{"flight": c.flight(0)}}}
		},
		check: func(t *testing.T, f *gatewayFleet, c cell, r []nodetest.CallResult, rep *nodetest.Report) {
			if r[0].IsError || kind(r[0]) != "completed" || r[0].Text() != "done" {
				t.Fatalf("%s: %s", tool, describe(r[0]))
			}
			p := r[0].Progress
			var steps []string
			for i, n := range p {
				if i > 0 && n.Progress <= p[i-1].Progress {
					t.Errorf("progress went from %v to %v", p[i-1].Progress, n.Progress)
				}
				if strings.HasPrefix(n.Message, "step ") {
					steps = append(steps, n.Message)
				}
			}
			// The executor passes on a call's progress at most every 250 ms
			// (bus.DefaultNoteEvery), the latest winning meanwhile: of steps
			// 100 ms apart, the first and the last come, in order.
			if len(steps) < 2 || steps[0] != "step 1" || steps[len(steps)-1] != "step 3" || !slices.IsSorted(steps) {
				t.Errorf("the upstream's progress relayed: %q of %+v; want step 1 … step 3 in order", steps, p)
			}
			want := []string{"step 1", "step 2", "step 3"}
			var logs []string
			for _, l := range rep.Logs {
				var data string
				if l.Logger == "chatty" && json.Unmarshal(l.Data, &data) == nil && l.Level == "info" {
					logs = append(logs, data)
				}
			}
			if !reflect.DeepEqual(logs, want) {
				t.Errorf("the upstream's log messages relayed: %q of %+v; want %q at level info", logs, rep.Logs, want)
			}
			if n := f.ask.ran(tool, c.flight(0)); n != 1 {
				t.Errorf("%s ran %d times, want once", tool, n)
			}
		}}
}

// elicitationCase is the case of an upstream tool (matrix_confirm or
// matrix_confirm_mrtr, see askUpstream) that asks its caller to confirm a
// booking: the client, declaring elicitation, accepts with content, and the
// tool answers with what it was given; the same call again is deduplicated,
// and the client not asked again; a booking it declines gets the tool's
// answer to a decline.
func elicitationCase(name, tool string) matrixCase {
	return matrixCase{name: name, generations: true,
		elicit: []nodetest.ElicitRule{
			{Contains: "decline", Action: "decline"},
			{Action: "accept", Content: map[string]any{"seat": "12A", "meal": "veg"}},
		},
		calls: func(c cell) []nodetest.Call {
			yes := map[string]any{"flight": c.flight(0), "message": "Book " + c.flight(0) + "? Please confirm"}
			return []nodetest.Call{
				{Tool: tool, Arguments: yes, Meta: c.runMeta()},
				{Tool: tool, Arguments: yes, Meta: c.runMeta()},
				{Tool: tool, Arguments: map[string]any{"flight": c.flight(1), "message": "Book " + c.flight(1) + "? (the client will decline)"}, Meta: c.runMeta()},
			}
		},
		check: func(t *testing.T, f *gatewayFleet, c cell, r []nodetest.CallResult, rep *nodetest.Report) {
			const accepted = `accept {"meal":"veg","seat":"12A"}`
			if r[0].IsError || kind(r[0]) != "completed" || r[0].Text() != accepted {
				t.Errorf("a booking the client confirmed: %s; want %q", describe(r[0]), accepted)
			}
			if r[1].IsError || kind(r[1]) != "deduplicated" || r[1].Text() != accepted {
				t.Errorf("its repeat: %s; want deduplicated, %q", describe(r[1]), accepted)
			}
			if r[2].IsError || kind(r[2]) != "completed" || r[2].Text() != "decline" {
				t.Errorf("a booking the client declined: %s; want the tool's answer %q", describe(r[2]), "decline")
			}
			var asked []string
			for _, e := range rep.Elicitations {
				asked = append(asked, e.Message)
				if (e.Mode != "" && e.Mode != "form") || !jsonEqual(e.RequestedSchema, confirmSchema) {
					t.Errorf("elicitation %q: mode %q, schema %s; want form mode and the upstream's schema", e.Message, e.Mode, e.RequestedSchema)
				}
			}
			want := []string{"Book " + c.flight(0) + "? Please confirm", "Book " + c.flight(1) + "? (the client will decline)"}
			if !reflect.DeepEqual(asked, want) {
				t.Errorf("the client was asked %q; want %q (once a booking, not again for the repeat)", asked, want)
			}
			for _, fl := range []string{c.flight(0), c.flight(1)} {
				if n := f.ask.ran(tool, fl); n != 1 {
					t.Errorf("%s ran %d times for %s, want once", tool, n, fl)
				}
			}
		}}
}

// elicitationStormCase is the case of many identical calls at once of an
// upstream tool that asks its caller to confirm: one runs, the client is
// asked once, and every call gets the answer the one run gave.
func elicitationStormCase(name, tool string) matrixCase {
	return matrixCase{name: name, generations: true, concurrent: true,
		elicit: []nodetest.ElicitRule{{Action: "accept", Content: map[string]any{"seat": "3C"}}},
		calls: func(c cell) []nodetest.Call {
			calls := make([]nodetest.Call, elicitStormSize)
			for i := range calls {
				calls[i] = nodetest.Call{Tool: tool, Meta: c.runMeta(),
					Arguments: map[string]any{"flight": c.flight(0), "message": "Book " + c.flight(0) + "?"}}
			}
			return calls
		},
		check: func(t *testing.T, f *gatewayFleet, c cell, r []nodetest.CallResult, rep *nodetest.Report) {
			kinds := map[string]int{}
			for _, res := range r {
				kinds[kind(res)]++
				if res.IsError || res.Text() != `accept {"seat":"3C"}` {
					t.Errorf("one of %d identical calls: %s", elicitStormSize, describe(res))
				}
			}
			if kinds["completed"] != 1 || kinds["deduplicated"] != elicitStormSize-1 {
				t.Errorf("%d identical calls at once answered %v, want 1 completed and the rest deduplicated", elicitStormSize, kinds)
			}
			if len(rep.Elicitations) != 1 {
				t.Errorf("the client was asked %d times, want once", len(rep.Elicitations))
			}
			if n := f.ask.ran(tool, c.flight(0)); n != 1 {
				t.Errorf("%s ran %d times, want once", tool, n)
			}
		}}
}

// undeclaredCase is the case of an upstream tool that asks its caller to
// confirm, called by a client that declared no elicitation: the call is
// refused at once (within a few seconds, not the client's 60 s timeout).
func undeclaredCase(name, tool string) matrixCase {
	return matrixCase{name: name, generations: true, within: 10 * time.Second,
		calls: func(c cell) []nodetest.Call {
			return []nodetest.Call{{Tool: tool, Meta: c.runMeta(),
				Arguments: map[string]any{"flight": c.flight(0), "message": "Book " + c.flight(0) + "?"}}}
		},
		check: func(t *testing.T, f *gatewayFleet, c cell, r []nodetest.CallResult, rep *nodetest.Report) {
			// The gateway declares in the call what its client can answer
			// (nothing here), so the executor (mcptool) refuses the
			// upstream's request at once: the call fails without effect (the
			// tool's error result on 2025-11-25, ErrInputRequired on
			// 2026-07-28).
			if !r[0].IsError || kind(r[0]) != "failed" || r[0].Meta[mcpgate.MetaCode] != "no_effect" ||
				!strings.Contains(r[0].Text(), "cannot answer elicitation/create") {
				t.Errorf("a call whose tool asks a client that declared no elicitation: %s (%q); want it refused at once", describe(r[0]), r[0].Text())
			}
			if len(rep.Elicitations) != 0 {
				t.Errorf("a client that declared no elicitation was asked %d times", len(rep.Elicitations))
			}
		}}
}

// TestClientMatrix: each third-party client (the Go SDK's, mark3labs/mcp-go's
// with its defaults, the TypeScript SDK's) over each transport (Streamable
// HTTP with a bearer token, and stdio spawning emitter mcp) sees every case
// of matrixCases: a repeat deduplicated, a storm of identical calls taken as
// one effect, a lost answer indeterminate and never run again, the gateway's
// progress while a call waits, an upstream's image, audio and resources as
// MCP content, the same in a deduplicated answer, an upstream's elicitation
// answered through the client library's own handler (and refused at once
// when the client declared none), and an upstream's progress and log
// messages relayed. The Go clients speak 2026-07-28 by default, where the
// gateway asks in input-required results; they run the cases of an
// upstream's requests and notes again held to 2025-11-25, where it asks with
// requests mid-call, as the TypeScript SDK does. Every client exposes log
// messages: the Go SDK through ClientOptions.LoggingMessageHandler, mcp-go
// through OnNotification (method notifications/message), the TypeScript SDK
// through setNotificationHandler(LoggingMessageNotificationSchema).
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
		{name: "go-sdk", version: "2026-07-28", run: goSDK("")},
		{name: "go-sdk-2025-11-25", version: "2025-11-25", pinned: true, run: goSDK("2025-11-25")},
		{name: "mcp-go", version: "2026-07-28", run: mcpGo("")},
		{name: "mcp-go-2025-11-25", version: "2025-11-25", pinned: true, run: mcpGo("2025-11-25")},
		// SDK 1.32.2 speaks the initialize handshake, up to 2025-11-25.
		{name: "typescript", run: func(ctx context.Context, target nodetest.Target, o nodetest.Options, calls []nodetest.Call) (*nodetest.Report, string, error) {
			rep, err := ts.RunOptions(ctx, target, o, calls...)
			if err != nil {
				return nil, "", err
			}
			if len(rep.Errors) > 0 {
				return nil, "", fmt.Errorf("the SDK reported errors on the side: %q", rep.Errors)
			}
			return rep, "", nil
		}},
	}
	n := 0
	for _, cl := range clients {
		for _, tr := range transports {
			for _, mc := range matrixCases {
				if cl.pinned && !mc.generations {
					continue
				}
				n++
				c := cell{run: fmt.Sprintf("matrix-%s-%s-%s", cl.name, tr.name, mc.name), n: n}
				t.Run(cl.name+"/"+tr.name+"/"+mc.name, func(t *testing.T) {
					calls := mc.calls(c)
					wait := clientWait
					if mc.within > 0 {
						wait = mc.within
					}
					start := time.Now()
					rep, version, err := cl.run(testenv.Context(t, wait), tr.target,
						nodetest.Options{Concurrent: mc.concurrent, Elicit: mc.elicit, LogLevel: mc.logLevel}, calls)
					if err != nil {
						t.Fatalf("%s (after %s): %v", cl.name, time.Since(start).Round(time.Millisecond), err)
					}
					if version != cl.version {
						t.Errorf("%s settled on protocol version %s, want %s", cl.name, version, cl.version)
					}
					res := rep.Results
					if len(res) != len(calls) {
						t.Fatalf("%d results for %d calls", len(res), len(calls))
					}
					for i, r := range res {
						if r.Error != nil {
							t.Fatalf("call %d (%s): JSON-RPC error %+v", i, calls[i].Tool, r.Error)
						}
					}
					mc.check(t, f, c, res, rep)
				})
			}
		}
	}
}

// elicitAnswer is the answer of rules (nodetest.Options.Elicit) to an
// elicitation request with message: the first rule that matches, or cancel.
func elicitAnswer(rules []nodetest.ElicitRule, message string) (action string, content map[string]any) {
	for _, r := range rules {
		if r.Contains == "" || strings.Contains(message, r.Contains) {
			if r.Action == "accept" {
				return r.Action, clone(r.Content)
			}
			return r.Action, nil
		}
	}
	return "cancel", nil
}

// seenLog keeps the elicitation requests and log messages a Go client
// received, for its report.
type seenLog struct {
	mu           sync.Mutex
	elicitations []nodetest.Elicitation
	logs         []nodetest.LogMessage
}

func (s *seenLog) elicited(mode, message string, schema any) {
	b, _ := json.Marshal(schema)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.elicitations = append(s.elicitations, nodetest.Elicitation{Mode: mode, Message: message, RequestedSchema: b})
}

func (s *seenLog) logged(level, logger string, data any) {
	b, _ := json.Marshal(data)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logs = append(s.logs, nodetest.LogMessage{Level: level, Logger: logger, Data: b})
}

// report returns the results with what s saw.
func (s *seenLog) report(results []nodetest.CallResult) *nodetest.Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &nodetest.Report{Results: results, Elicitations: s.elicitations, Logs: s.logs}
}

// goSDK returns matrixClient.run for the Go SDK's client, with its defaults
// (protocol 2026-07-28 where the server offers it) when version is "", held
// to version otherwise. Its handlers: ElicitationHandler (set only when o
// has rules, so that the client declares elicitation only then),
// ProgressNotificationHandler and LoggingMessageHandler. The log level is set
// with logging/setLevel on the initialize handshake, and in each request's
// _meta (io.modelcontextprotocol/logLevel) on 2026-07-28, which has no
// session to hold it.
func goSDK(version string) func(ctx context.Context, target nodetest.Target, o nodetest.Options, calls []nodetest.Call) (*nodetest.Report, string, error) {
	return func(ctx context.Context, target nodetest.Target, o nodetest.Options, calls []nodetest.Call) (*nodetest.Report, string, error) {
		prog, seen := newProgressLog(), &seenLog{}
		opts := &sdk.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
				p := req.Params
				prog.add(p.ProgressToken, nodetest.Progress{Progress: p.Progress, Total: p.Total, Message: p.Message})
			},
			LoggingMessageHandler: func(_ context.Context, req *sdk.LoggingMessageRequest) {
				seen.logged(string(req.Params.Level), req.Params.Logger, req.Params.Data)
			},
		}
		if len(o.Elicit) > 0 {
			opts.ElicitationHandler = func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				seen.elicited(req.Params.Mode, req.Params.Message, req.Params.RequestedSchema)
				action, content := elicitAnswer(o.Elicit, req.Params.Message)
				return &sdk.ElicitResult{Action: action, Content: content}, nil
			}
		}
		client := sdk.NewClient(&sdk.Implementation{Name: "matrix-go-sdk", Version: "1"}, opts)
		var tr sdk.Transport
		if target.URL != "" {
			tr = &sdk.StreamableClientTransport{Endpoint: target.URL, HTTPClient: &http.Client{Transport: bearerTransport(target.Token)}}
		} else {
			tr = &sdk.CommandTransport{Command: command(ctx, target)}
		}
		cs, err := client.Connect(ctx, tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			return nil, "", fmt.Errorf("connect: %w", err)
		}
		defer cs.Close()
		got := cs.InitializeResult().ProtocolVersion
		modern := got >= "2026-07-28"
		if o.LogLevel != "" && !modern {
			if err := cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: sdk.LoggingLevel(o.LogLevel)}); err != nil {
				return nil, got, fmt.Errorf("logging/setLevel: %w", err)
			}
		}
		res, err := callAll(calls, o.Concurrent, prog, func(i int, c nodetest.Call) (any, error) {
			p := &sdk.CallToolParams{Name: c.Tool, Arguments: arguments(c), Meta: sdk.Meta(clone(c.Meta))}
			if o.LogLevel != "" && modern {
				p.Meta[sdk.MetaKeyLogLevel] = o.LogLevel
			}
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
		return seen.report(res), got, err
	}
}

// mcpGo returns matrixClient.run for mark3labs/mcp-go's client with its
// defaults (it probes with server/discover and speaks 2026-07-28 when the
// server lists it) when version is "", held to version
// (client.WithProtocolVersion) otherwise. Elicitation requests go to
// client.WithElicitationHandler (set only when o has rules, so that the
// client declares elicitation only then), through input-required results on
// 2026-07-28; progress and log messages to OnNotification, the client's one
// handler of every notification; SetLevel sets the log level (on 2026-07-28
// the client keeps it and sends it in each request's _meta).
func mcpGo(version string) func(ctx context.Context, target nodetest.Target, o nodetest.Options, calls []nodetest.Call) (*nodetest.Report, string, error) {
	return func(ctx context.Context, target nodetest.Target, o nodetest.Options, calls []nodetest.Call) (*nodetest.Report, string, error) {
		prog, seen := newProgressLog(), &seenLog{}
		var opts []mcpgoclient.ClientOption
		if version != "" {
			opts = append(opts, mcpgoclient.WithProtocolVersion(version))
		}
		if len(o.Elicit) > 0 {
			opts = append(opts, mcpgoclient.WithElicitationHandler(elicitFunc(func(_ context.Context, req mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
				p := req.Params
				seen.elicited(string(p.Mode), p.Message, p.RequestedSchema)
				action, content := elicitAnswer(o.Elicit, p.Message)
				r := &mcpgo.ElicitationResult{}
				r.Action = mcpgo.ElicitationResponseAction(action)
				if content != nil {
					r.Content = content
				}
				return r, nil
			})))
		}
		var (
			tr  mcpgotransport.Interface
			err error
		)
		if target.URL != "" {
			tr, err = mcpgotransport.NewStreamableHTTP(target.URL,
				mcpgotransport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + target.Token}))
		} else {
			var env []string
			for k, v := range target.Env {
				env = append(env, k+"="+v)
			}
			tr = mcpgotransport.NewStdio(target.Command[0], env, target.Command[1:]...)
		}
		if err != nil {
			return nil, "", err
		}
		c := mcpgoclient.NewClient(tr, opts...)
		defer c.Close()
		c.OnNotification(func(n mcpgo.JSONRPCNotification) {
			b, _ := json.Marshal(n.Params)
			switch n.Method {
			case "notifications/progress":
				var p struct {
					ProgressToken any `json:"progressToken"`
					nodetest.Progress
				}
				if json.Unmarshal(b, &p) == nil {
					prog.add(p.ProgressToken, p.Progress)
				}
			case "notifications/message":
				var m struct {
					Level  string `json:"level"`
					Logger string `json:"logger"`
					Data   any    `json:"data"`
				}
				if json.Unmarshal(b, &m) == nil {
					seen.logged(m.Level, m.Logger, m.Data)
				}
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
		if o.LogLevel != "" {
			if err := c.SetLevel(ctx, mcpgo.SetLevelRequest{Params: mcpgo.SetLevelParams{Level: mcpgo.LoggingLevel(o.LogLevel)}}); err != nil {
				return nil, c.ProtocolVersion(), fmt.Errorf("logging/setLevel: %w", err)
			}
		}
		res, err := callAll(calls, o.Concurrent, prog, func(i int, call nodetest.Call) (any, error) {
			meta := mcpgo.NewMetaFromMap(clone(call.Meta))
			if call.Progress {
				meta.ProgressToken = progressToken(i)
			}
			return c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: call.Tool, Arguments: arguments(call), Meta: meta}})
		})
		return seen.report(res), c.ProtocolVersion(), err
	}
}

// elicitFunc is an mcp-go elicitation handler as a function.
type elicitFunc func(context.Context, mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error)

// Elicit implements mcpgoclient.ElicitationHandler.
func (f elicitFunc) Elicit(ctx context.Context, req mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
	return f(ctx, req)
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
