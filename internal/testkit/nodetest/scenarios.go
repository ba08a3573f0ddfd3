package nodetest

// Scenario is one server scenario of the conformance suite: what it checks,
// whether a plain tools-only server passes it, and how toolexec's MCP gateway
// stands with it.
type Scenario struct {
	Name string
	// Tools names the tools the scenario calls or looks for; a server under
	// test must offer them for the scenario to pass.
	Tools []string
	// Applies reports whether a tools-only server — one that declares the
	// tools capability and nothing else, with the tools the scenario calls —
	// is expected to pass it: the reference server of tests/mcp.
	Applies bool
	// Reason says what the scenario checks, and why it applies or not.
	Reason string
	// Exception, when set, says why the scenario is not run against the
	// gateway: it tests a feature the gateway does not advertise (resources,
	// prompts, completions).
	Exception string
	// Owed, when set, says why the gateway fails the scenario today, a
	// failure an open issue owes a fix for (none does now). A test reports it
	// as an expected failure, and fails when it passes: clear Owed then.
	Owed string
	// Strict means that the scenario passes only when every check
	// succeeded: its checks are SHOULDs, which the suite reports as
	// warnings that never fail a run.
	Strict bool
}

// Scenarios lists every server scenario of @modelcontextprotocol/conformance
// 0.1.16 (`conformance list --server`), in the suite's order. Two of them,
// json-schema-2020-12 and server-sse-polling, are in its "pending" suite,
// which a run without --scenario leaves out.
//
// The suite's own client sends no Authorization header in any scenario, so a
// server that needs a bearer token fails them all: run the gateway with a
// fixed tenant and no tokens for the suite.
var Scenarios = []Scenario{
	{Name: "server-initialize", Applies: true,
		Reason: "the initialize handshake, which every server completes"},
	{Name: "logging-set-level",
		Reason: "logging/setLevel belongs to the logging capability, which a tools-only server does not declare (a Go SDK server answers it " +
			"all the same, so passes)"},
	{Name: "ping", Applies: true,
		Reason: "ping answered with an empty result, which every server must do"},
	{Name: "completion-complete",
		Reason:    "completions complete prompt and resource-template arguments; a tools-only server has neither",
		Exception: "completions: the gateway has no prompts or resource templates to complete, and does not advertise the capability"},
	{Name: "tools-list", Applies: true,
		Reason: "every listed tool has a name, a description and an input schema"},
	{Name: "tools-call-simple-text", Tools: []string{"test_simple_text"}, Applies: true,
		Reason: "a call without arguments answered with text content"},
	{Name: "tools-call-image", Tools: []string{"test_image_content"},
		Reason: "needs a tool that answers with image content; a toolexec tool's outcome is a string, sent as text and structuredContent"},
	{Name: "tools-call-audio", Tools: []string{"test_audio_content"},
		Reason: "needs a tool that answers with audio content; a toolexec tool's outcome is a string, sent as text and structuredContent"},
	{Name: "tools-call-embedded-resource", Tools: []string{"test_embedded_resource"},
		Reason: "needs an embedded resource in a result, content of the resources feature"},
	{Name: "tools-call-mixed-content", Tools: []string{"test_multiple_content_types"},
		Reason: "needs image and embedded-resource content in one result"},
	{Name: "tools-call-with-logging", Tools: []string{"test_tool_with_logging"},
		Reason: "needs log notifications sent from inside a tool's run, which belong to the logging capability"},
	{Name: "tools-call-error", Tools: []string{"test_error_handling"}, Applies: true,
		Reason: "a tool's failure answered as a result with isError and a text saying why, not as a JSON-RPC error"},
	{Name: "tools-call-with-progress", Tools: []string{"test_tool_with_progress"}, Applies: true,
		Reason: "a call that sends a progressToken gets at least three progress notifications, not decreasing, before its result"},
	{Name: "tools-call-sampling", Tools: []string{"test_sampling"},
		Reason: "sampling: a request from the server to the client"},
	{Name: "tools-call-elicitation", Tools: []string{"test_elicitation"},
		Reason: "elicitation: a request from the server to the client"},
	{Name: "json-schema-2020-12", Tools: []string{"json_schema_2020_12_tool"}, Applies: true,
		Reason: "tools/list keeps $schema, $defs and additionalProperties of a tool's input schema as declared (pending suite: run by name)"},
	{Name: "elicitation-sep1034-defaults", Tools: []string{"test_elicitation_sep1034_defaults"},
		Reason: "elicitation: a request from the server to the client"},
	{Name: "server-sse-polling", Tools: []string{"test_reconnection"}, Strict: true,
		Reason: "a call whose response stream the server closes mid-call (SEP-1699): a priming event with an id first, a retry field, and the " +
			"result on the stream resumed with Last-Event-ID; its checks are SHOULDs, reported as warnings (pending suite)"},
	{Name: "server-sse-multiple-streams", Applies: true,
		Reason: "three concurrent POST requests (tools/list) on one session are all answered; every Streamable HTTP server with sessions"},
	{Name: "elicitation-sep1330-enums", Tools: []string{"test_elicitation_sep1330_enums"},
		Reason: "elicitation: a request from the server to the client"},
	{Name: "resources-list", Reason: "resources (a Go SDK server answers resources/list with an empty list, so passes)",
		Exception: resourcesException},
	{Name: "resources-read-text", Reason: "resources", Exception: resourcesException},
	{Name: "resources-read-binary", Reason: "resources", Exception: resourcesException},
	{Name: "resources-templates-read", Reason: "resources", Exception: resourcesException},
	{Name: "resources-subscribe", Reason: "resources", Exception: resourcesException},
	{Name: "resources-unsubscribe", Reason: "resources", Exception: resourcesException},
	{Name: "prompts-list", Reason: "prompts (a Go SDK server answers prompts/list with an empty list, so passes)",
		Exception: promptsException},
	{Name: "prompts-get-simple", Reason: "prompts", Exception: promptsException},
	{Name: "prompts-get-with-args", Reason: "prompts", Exception: promptsException},
	{Name: "prompts-get-embedded-resource", Reason: "prompts", Exception: promptsException},
	{Name: "prompts-get-with-image", Reason: "prompts", Exception: promptsException},
	{Name: "dns-rebinding-protection", Applies: true,
		Reason: "a server on a loopback address answers a request with a foreign Host and Origin with 4xx, and one with a loopback Host with " +
			"2xx; the MCP spec asks every local HTTP server to check"},
}

// The exceptions shared by several scenarios.
const (
	resourcesException = "resources: toolexec serves tools only and does not advertise the resources capability"
	promptsException   = "prompts: toolexec serves tools only and does not advertise the prompts capability"
)

// Gateway returns the scenarios run against toolexec's MCP gateway: all but
// the exceptions, in the suite's order.
func Gateway() []Scenario {
	var out []Scenario
	for _, s := range Scenarios {
		if s.Exception == "" {
			out = append(out, s)
		}
	}
	return out
}

// Verdict is how a scenario's result stands against what the table expects
// of the gateway.
type Verdict string

// The verdicts of [Judge].
const (
	// Pass: the scenario passed, as expected.
	Pass Verdict = "pass"
	// Fail: the scenario failed, though nothing excuses it.
	Fail Verdict = "FAIL"
	// Owed: the scenario failed, as its Owed says it does today.
	Owed Verdict = "owed"
	// Flip: the scenario passed though it is marked owed: clear Owed.
	Flip Verdict = "FLIP"
)

// Judge returns the verdict on r, a result of scenario s: whether it passed
// (every check succeeded for a Strict scenario; see [ScenarioResult.Passed]
// otherwise), weighed against s.Owed. Fail and Flip fail a test.
func Judge(s Scenario, r ScenarioResult) Verdict {
	passed := r.Passed()
	if s.Strict {
		passed = passed && r.Count(StatusWarning) == 0
	}
	switch {
	case passed && s.Owed == "":
		return Pass
	case passed:
		return Flip
	case s.Owed != "":
		return Owed
	default:
		return Fail
	}
}

// ToolsOnly returns the names of the scenarios that apply to a tools-only
// server, in the suite's order.
func ToolsOnly() []string {
	var names []string
	for _, s := range Scenarios {
		if s.Applies {
			names = append(names, s.Name)
		}
	}
	return names
}

// Lookup returns the scenario called name, or false.
func Lookup(name string) (Scenario, bool) {
	for _, s := range Scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}
