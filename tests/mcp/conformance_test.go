package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/internal/testkit/nodetest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/mcpgate"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/toolsfile"
)

// pollConfig is the gateway of the conformance runs: it closes the stream of
// a call that waited 300 ms (SEP-1699), so that server-sse-polling sees a
// stream closed mid-call and resumed.
var pollConfig = mcpgate.Config{ProgressEvery: 100 * time.Millisecond, PollAfter: 300 * time.Millisecond, PollRetry: 200 * time.Millisecond}

// reconnectionTool is test_reconnection as a toolexec tool: it takes longer
// than pollConfig.PollAfter, so that the gateway closes its stream mid-call.
func reconnectionTool(t *testing.T) *tool.Tool {
	t.Helper()
	tl, err := tool.New(tool.Spec{Name: "test_reconnection", Description: "Answers after a second; the gateway closes its stream meanwhile.",
		Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ tool.Context, _ json.RawMessage) (string, error) {
			select {
			case <-time.After(time.Second):
				return "Reconnection test completed successfully", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// TestGatewayConformance runs every scenario of the conformance suite but
// the exceptions (nodetest.Scenarios says why each is one) against the
// gateway, twice: "direct", in front of an executor whose tools are its own,
// and "upstream", where test_reconnection and add_numbers are the suite's own
// fixture servers (sse-retry and tools_call) imported through a tools file,
// so that server-sse-polling crosses a stream closed mid-call on both sides;
// the tools file imports elicitation-sep1034-client-defaults too, whose tool
// asks its client on the standalone stream, called with the Go SDK's client.
// In both, the tools of the content scenarios (image, audio, resources) and of
// the requests and logs mid-call (sampling, elicitation, logging) are MCP
// servers written with the Go SDK behind the executor, imported through
// mcptool, since a tool whose body runs in the executor has neither content
// nor a client to ask.
// A scenario passes, or fails as its Owed says it does today; an owed
// scenario that passes fails the test, to be flipped. The table is in the
// test log (go test -v). There is no stdio run (emitter mcp): the suite's
// server scenarios take only a URL.
func TestGatewayConformance(t *testing.T) {
	suite := nodetest.Conformance(t)
	t.Run("direct", func(t *testing.T) {
		t.Parallel()
		f := startGatewayFleetWith(t, pollConfig, append(askingTools(t), reconnectionTool(t))...)
		conformsOrOwes(t, suite, f.plainURL)
	})
	t.Run("upstream", func(t *testing.T) {
		t.Parallel()
		retry := nodetest.Fixture(t, nodetest.FixtureSSERetry)
		adder := nodetest.Fixture(t, nodetest.FixtureToolsCall)
		defaults := nodetest.Fixture(t, nodetest.FixtureElicitationDefaults)
		set := importFixtures(t, retry, adder, defaults)
		f := startGatewayFleetWith(t, pollConfig, append(askingTools(t), set.Tools()...)...)
		conformsOrOwes(t, suite, f.plainURL)

		ctx := testenv.Context(t, clientWait)
		// The client accepts every elicitation with nothing filled in: the
		// Go SDK's client applies the schema's defaults to the content
		// before it answers (SEP-1034); the gateway and toolexec relay the
		// request and the answer as they are.
		var elicited atomic.Int32
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "toolexec-test", Version: "1"}, &sdk.ClientOptions{
			ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				elicited.Add(1)
				return &sdk.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
			},
		}).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: f.plainURL}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "add_numbers", Arguments: map[string]any{"a": 2, "b": 3}})
		if err != nil || r.IsError || len(r.Content) != 1 || r.Content[0].(*sdk.TextContent).Text != "The sum of 2 and 3 is 5" {
			t.Errorf("add_numbers through the gateway = %+v, %v", r, err)
		}
		// The fixture asks on its session's standalone stream, not on the
		// stream of the call: toolexec hears it there and relays it to the
		// caller of the only call in flight.
		start := time.Now()
		r, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "test_client_elicitation_defaults", Arguments: map[string]any{}})
		if err != nil || r.IsError || len(r.Content) != 1 ||
			r.Content[0].(*sdk.TextContent).Text != `Elicitation completed: {"age":30,"name":"John Doe","score":95.5,"status":"active","verified":true}` {
			t.Errorf("test_client_elicitation_defaults through the gateway = %+v, %v", r, err)
		}
		if d := time.Since(start); elicited.Load() != 1 || d > 20*time.Second {
			t.Errorf("the client was asked %d times, the call took %s; want once, at once", elicited.Load(), d)
		}
		// What the fixtures saw of toolexec's client, once it let go of
		// them (a fixture's server waits for its connections to close).
		_ = set.Close()
		fixtureChecks(t, retry, map[string]bool{"client-sse-graceful-reconnect": true, "client-sse-last-event-id": true,
			// A resumption later than the retry asked by up to 200 ms (a
			// loaded machine) is a warning; earlier, or twice as late, fails.
			"client-sse-retry-timing": false})
		fixtureChecks(t, adder, map[string]bool{"tool-add-numbers": true})
		fixtureChecks(t, defaults, map[string]bool{
			"client-elicitation-sep1034-string-default": true, "client-elicitation-sep1034-integer-default": true,
			"client-elicitation-sep1034-number-default": true, "client-elicitation-sep1034-enum-default": true,
			"client-elicitation-sep1034-boolean-default": true})
	})
}

// importFixtures opens a tools file that imports every tool of the fixture
// servers, effectful as imported tools are by default.
func importFixtures(t *testing.T, retry, adder, defaults *nodetest.FixtureServer) *toolsfile.Toolset {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`mcp_servers:
  - name: suite_sse_retry
    url: %s
    import: {}
  - name: suite_tools_call
    url: %s
    import: {}
  - name: suite_elicitation_defaults
    url: %s
    import: {}
`, retry.URL, adder.URL, defaults.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := toolsfile.Load(testenv.Context(t, clientWait), file, toolsfile.Options{Logger: testenv.Logger()})
	if err != nil {
		t.Fatalf("importing the suite's fixture servers: %v", err)
	}
	t.Cleanup(func() { _ = set.Close() })
	return set
}

// conformsOrOwes runs nodetest.Gateway() against the gateway at url, logs a
// line per scenario, and fails the test for each scenario judged Fail or
// Flip.
func conformsOrOwes(t *testing.T, suite *nodetest.Suite, url string) {
	t.Helper()
	scenarios := nodetest.Gateway()
	names := make([]string, len(scenarios))
	for i, s := range scenarios {
		names[i] = s.Name
	}
	start := time.Now()
	results, err := suite.Run(testenv.Context(t, conformanceWait), url, names...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d scenarios against %s in %v", len(results), url, time.Since(start).Round(time.Millisecond))
	for i, r := range results {
		s := scenarios[i]
		v := nodetest.Judge(s, r)
		t.Logf("%-30s %-4s %d passed, %d failed, %d warnings", r.Scenario, v,
			r.Count(nodetest.StatusSuccess), r.Count(nodetest.StatusFailure), r.Count(nodetest.StatusWarning))
		switch v {
		case nodetest.Fail:
			t.Errorf("scenario %s failed: %+v\n%s", r.Scenario, notPassed(r), r.Output)
		case nodetest.Flip:
			t.Errorf("scenario %s passes, yet nodetest.Scenarios marks it owed (%s): clear its Owed", r.Scenario, s.Owed)
		}
	}
}

// notPassed returns the checks of r that failed or warned.
func notPassed(r nodetest.ScenarioResult) []nodetest.Check {
	var out []nodetest.Check
	for _, c := range r.Checks {
		if c.Status == nodetest.StatusFailure || c.Status == nodetest.StatusWarning {
			out = append(out, c)
		}
	}
	return out
}

// fixtureChecks stops the fixture and fails the test unless each check it
// names is there once and succeeded, or, when it maps to false, warned.
func fixtureChecks(t *testing.T, f *nodetest.FixtureServer, want map[string]bool) {
	t.Helper()
	checks, err := f.Checks()
	if err != nil {
		t.Fatal(err)
	}
	for id, strict := range want {
		var got []nodetest.Check
		for _, c := range checks {
			if c.ID == id {
				got = append(got, c)
			}
		}
		ok := len(got) == 1 && (got[0].Status == nodetest.StatusSuccess || !strict && got[0].Status == nodetest.StatusWarning)
		if !ok {
			t.Errorf("fixture check %s: %+v, want one success", id, got)
		}
	}
}
