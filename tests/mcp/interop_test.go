package mcp

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/internal/testkit/nodetest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// How long one run of a node peer may take. Each is done in seconds; the
// bounds are generous for a loaded two-core machine.
const (
	clientWait      = 2 * time.Minute
	conformanceWait = 5 * time.Minute
)

// The calls the TypeScript client makes on the reference server, and what it
// must see for each (checked by checkResults).
var tsCalls = []nodetest.Call{
	{Tool: "add", Arguments: map[string]any{"a": 2, "b": 3}},
	{Tool: "book", Arguments: map[string]any{"flight": "XX1", "seats": 2},
		Meta: map[string]any{"io.tesserix.toolexec/run_id": "run-1"}},
	{Tool: "test_error_handling"},
	{Tool: "test_tool_with_progress", Progress: true},
	{Tool: "no_such_tool"},
}

func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	client := nodetest.Client(t)
	command, env := stdioCommand(t)
	const token = "s3cret-token"
	for _, tc := range []struct {
		name   string
		target nodetest.Target
	}{
		{"http", nodetest.Target{URL: serveHTTP(t, "")}},
		{"http with bearer token", nodetest.Target{URL: serveHTTP(t, token), Token: token}},
		{"stdio", nodetest.Target{Command: command, Env: env}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, err := client.Run(testenv.Context(t, clientWait), tc.target, tsCalls...)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Server == nil || rep.Server.Name != refServerName {
				t.Errorf("server = %+v, want %s", rep.Server, refServerName)
			}
			if len(rep.Errors) > 0 {
				t.Errorf("the client's SDK reported errors: %q", rep.Errors)
			}
			checkTools(t, rep)
			checkResults(t, rep.Results)
		})
	}
}

// TestTypeScriptClientReportsErrors checks that the client does not hide a
// failure to connect: a server that refuses its token ends the run with the
// HTTP status on the client's standard error.
func TestTypeScriptClientReportsErrors(t *testing.T) {
	t.Parallel()
	client := nodetest.Client(t)
	url := serveHTTP(t, "right-token")
	rep, err := client.Run(testenv.Context(t, clientWait), nodetest.Target{URL: url, Token: "wrong-token"}, tsCalls[0])
	var runErr *nodetest.RunError
	if !errors.As(err, &runErr) {
		t.Fatalf("Run = %+v, %v; want a *nodetest.RunError", rep, err)
	}
	if !strings.Contains(runErr.Stderr, "401") {
		t.Errorf("client stderr does not name the 401:\n%s", runErr.Stderr)
	}
}

func checkTools(t *testing.T, rep *nodetest.Report) {
	t.Helper()
	for _, want := range []struct {
		tool  string
		hints map[string]any
	}{
		{"add", map[string]any{"readOnlyHint": true}},
		{"book", map[string]any{"readOnlyHint": false, "idempotentHint": false, "destructiveHint": true}},
	} {
		tl, ok := rep.Tool(want.tool)
		if !ok {
			t.Errorf("tools/list lacks %s: %+v", want.tool, rep.Tools)
			continue
		}
		for hint, v := range want.hints {
			if got, ok := tl.Annotations[hint]; !ok || got != v {
				t.Errorf("%s annotations %v: %s = %v, want %v", want.tool, tl.Annotations, hint, got, v)
			}
		}
	}
	for _, name := range []string{"test_simple_text", "test_error_handling", "test_tool_with_progress", "json_schema_2020_12_tool"} {
		if _, ok := rep.Tool(name); !ok {
			t.Errorf("tools/list lacks %s", name)
		}
	}
}

func checkResults(t *testing.T, res []nodetest.CallResult) {
	t.Helper()
	add, book, fails, progress, unknown := res[0], res[1], res[2], res[3], res[4]

	if add.IsError || add.Error != nil || !jsonEqual(add.StructuredContent, `{"sum":5}`) {
		t.Errorf("add = %+v; want structuredContent {\"sum\":5}", add)
	}
	if !jsonEqual(json.RawMessage(add.Text()), `{"sum":5}`) {
		t.Errorf("add text = %q; want the structured content as JSON", add.Text())
	}

	echo, _ := book.Meta["echo"].(map[string]any)
	if book.IsError || !jsonEqual(book.StructuredContent, `{"flight":"XX1","seats":2}`) ||
		echo["io.tesserix.toolexec/run_id"] != "run-1" {
		t.Errorf("book = %+v; want the booking, and the request's _meta echoed in _meta", book)
	}

	if !fails.IsError || fails.Text() == "" || fails.Error != nil {
		t.Errorf("test_error_handling = %+v; want isError with a text", fails)
	}

	var got []float64
	for _, p := range progress.Progress {
		got = append(got, p.Progress)
	}
	if progress.IsError || !reflect.DeepEqual(got, []float64{0, 50, 100}) {
		t.Errorf("test_tool_with_progress = %+v; want progress 0, 50, 100", progress)
	}

	// The MCP spec names -32602 (invalid params) for an unknown tool.
	if unknown.Error == nil || unknown.Error.Code != -32602 {
		t.Errorf("no_such_tool = %+v; want JSON-RPC error -32602", unknown)
	}
}

func jsonEqual(got json.RawMessage, want string) bool {
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// TestConformance runs the conformance scenarios that apply to a tools-only
// server against the reference server: each must pass. The table of results
// is in the test log (go test -v).
func TestConformance(t *testing.T) {
	t.Parallel()
	passesConformance(t, nodetest.Conformance(t), serveHTTP(t, ""))
}

// passesConformance runs the scenarios that apply to a tools-only server
// against the server at url, logs a line per scenario, and fails the test for
// each scenario that does not pass.
func passesConformance(t *testing.T, suite *nodetest.Suite, url string) {
	t.Helper()
	start := time.Now()
	results, err := suite.Run(testenv.Context(t, conformanceWait), url, nodetest.ToolsOnly()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d scenarios against %s in %v", len(results), url, time.Since(start).Round(time.Millisecond))
	for _, r := range results {
		t.Logf("%-30s %-4s %d passed, %d failed, %d warnings", r.Scenario, verdict(r),
			r.Count(nodetest.StatusSuccess), r.Count(nodetest.StatusFailure), r.Count(nodetest.StatusWarning))
		if !r.Passed() {
			t.Errorf("scenario %s failed: %+v\n%s", r.Scenario, r.Failures(), r.Output)
		}
	}
}

func verdict(r nodetest.ScenarioResult) string {
	if r.Passed() {
		return "pass"
	}
	return "FAIL"
}

// TestGoClientMemory has the Go SDK's client create an entity in
// server-memory over stdio, and checks its file. A second identical call
// changes nothing and says so: server-memory skips names it holds.
func TestGoClientMemory(t *testing.T) {
	t.Parallel()
	mem := nodetest.Memory(t)
	ctx := testenv.Context(t, clientWait)
	client := sdk.NewClient(&sdk.Implementation{Name: "toolexec-test", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: mem.Command(ctx)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	entity := map[string]any{"name": "toolexec", "entityType": "project", "observations": []string{"runs each effect once"}}
	for i, wantCreated := range []int{1, 0} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{
			Name:      "create_entities",
			Arguments: map[string]any{"entities": []any{entity}},
		})
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if res.IsError {
			t.Fatalf("call %d: isError: %+v", i+1, res.Content)
		}
		if got := createdCount(t, res.StructuredContent); got != wantCreated {
			t.Errorf("call %d created %d entities, want %d", i+1, got, wantCreated)
		}
		ents, err := mem.Entities()
		if err != nil {
			t.Fatal(err)
		}
		want := []nodetest.Entity{{Name: "toolexec", EntityType: "project", Observations: []string{"runs each effect once"}}}
		if !reflect.DeepEqual(ents, want) {
			t.Errorf("after call %d the memory file holds %+v, want %+v", i+1, ents, want)
		}
	}
}

// createdCount returns the length of the entities list in create_entities's
// structured result.
func createdCount(t *testing.T, structured any) int {
	t.Helper()
	b, err := json.Marshal(structured)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Entities []json.RawMessage `json:"entities"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Entities == nil {
		t.Fatalf("structuredContent %s has no entities list (%v)", b, err)
	}
	return len(v.Entities)
}
