package nodetest

// Scenario is one server scenario of the conformance suite, with whether it
// applies to a tools-only server like toolexec's MCP gateway: one that
// declares the tools capability and nothing else, and answers every call with
// text content (and structuredContent for a JSON object) — never image,
// audio or resource content.
type Scenario struct {
	Name string
	// Tools names the tools the scenario calls or looks for; a server under
	// test must offer them for the scenario to pass.
	Tools []string
	// Applies reports whether a tools-only server is expected to pass it.
	Applies bool
	// Reason says what the scenario checks and why it applies or not.
	Reason string
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
		Reason: "logging/setLevel belongs to the logging capability, which a tools-only server does not declare (a Go SDK server answers it all the same, so passes)"},
	{Name: "ping", Applies: true,
		Reason: "ping answered with an empty result, which every server must do"},
	{Name: "completion-complete",
		Reason: "completions complete prompt and resource-template arguments; a tools-only server has neither"},
	{Name: "tools-list", Applies: true,
		Reason: "every listed tool has a name, a description and an input schema"},
	{Name: "tools-call-simple-text", Tools: []string{"test_simple_text"}, Applies: true,
		Reason: "a call without arguments answered with text content"},
	{Name: "tools-call-image", Tools: []string{"test_image_content"},
		Reason: "needs a tool that answers with image content; toolexec's answers are JSON outcomes, sent as text and structuredContent"},
	{Name: "tools-call-audio", Tools: []string{"test_audio_content"},
		Reason: "needs a tool that answers with audio content; toolexec's answers are JSON outcomes, sent as text and structuredContent"},
	{Name: "tools-call-embedded-resource", Tools: []string{"test_embedded_resource"},
		Reason: "needs an embedded resource in a result, content of the resources feature"},
	{Name: "tools-call-mixed-content", Tools: []string{"test_multiple_content_types"},
		Reason: "needs image and embedded-resource content in one result"},
	{Name: "tools-call-with-logging", Tools: []string{"test_tool_with_logging"},
		Reason: "needs log notifications sent from inside a tool's run, which belong to the logging capability; a toolexec tool runs in an executor, which has no way to send them"},
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
	{Name: "server-sse-polling", Tools: []string{"test_reconnection"},
		Reason: "needs a tool that makes the server close its own response stream mid-call, and stream resumption by Last-Event-ID; its checks are SHOULDs, reported as warnings that never fail a run (pending suite)"},
	{Name: "server-sse-multiple-streams", Applies: true,
		Reason: "three concurrent POST requests (tools/list) on one session are all answered; every Streamable HTTP server with sessions"},
	{Name: "elicitation-sep1330-enums", Tools: []string{"test_elicitation_sep1330_enums"},
		Reason: "elicitation: a request from the server to the client"},
	{Name: "resources-list", Reason: "resources (a Go SDK server answers resources/list with an empty list, so passes)"},
	{Name: "resources-read-text", Reason: "resources"},
	{Name: "resources-read-binary", Reason: "resources"},
	{Name: "resources-templates-read", Reason: "resources"},
	{Name: "resources-subscribe", Reason: "resources"},
	{Name: "resources-unsubscribe", Reason: "resources"},
	{Name: "prompts-list", Reason: "prompts (a Go SDK server answers prompts/list with an empty list, so passes)"},
	{Name: "prompts-get-simple", Reason: "prompts"},
	{Name: "prompts-get-with-args", Reason: "prompts"},
	{Name: "prompts-get-embedded-resource", Reason: "prompts"},
	{Name: "prompts-get-with-image", Reason: "prompts"},
	{Name: "dns-rebinding-protection", Applies: true,
		Reason: "a server on a loopback address answers a request with a foreign Host and Origin with 4xx, and one with a loopback Host with 2xx; the MCP spec asks every local HTTP server to check"},
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

// scenario returns the scenario called name, or false.
func scenario(name string) (Scenario, bool) {
	for _, s := range Scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}
