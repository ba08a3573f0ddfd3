// Package mcp tests MCP interoperability against peers that no one here wrote,
// from the npm harness in tests/mcp/node (see internal/testkit/nodetest): the
// TypeScript SDK's client, the official conformance suite and
// @modelcontextprotocol/server-memory.
//
// Its first tests prove the harness itself against a reference server written
// with the Go SDK inside the test (tools only, served over Streamable HTTP by
// httptest and over stdio by running the test binary again): the TypeScript
// client over both transports, the conformance scenarios that apply to a
// tools-only server, and the Go SDK's client creating an entity in
// server-memory over stdio.
//
// Then the same peers meet toolexec's own MCP gateway (package mcpgate) in
// front of an executor: the TypeScript client over Streamable HTTP with a
// bearer token and over stdio (spawning emitter mcp) sees completed,
// deduplicated and indeterminate answers; the conformance suite runs every
// scenario but the exceptions (resources, prompts, completions, which the
// gateway does not advertise) against the gateway twice, in front of the
// executor's own tools and with the suite's own fixture servers imported as
// upstreams, each scenario passing or failing as nodetest.Scenarios says
// issue 32 still owes (tests/docs runs the README's TypeScript client, as
// written, against an executor started as the README says); and
// server-memory behind two executors, with two gateways in front,
// takes a storm of 200 identical calls as one effect, and a crash after a
// request was sent as an unknown outcome that is never run again.
//
// TestClientMatrix runs one table of cases (matrixCases: a repeat
// deduplicated, a storm of identical calls as one effect, a lost answer
// indeterminate, the gateway's progress while a call waits, an upstream's
// image, audio and resources as MCP content, the same when deduplicated, an
// upstream's elicitation, asked mid-call or in an input-required result,
// answered — accepted, its repeat deduplicated without asking again,
// declined, a storm of identical calls asked once — or refused at once to a
// client that declared none, an upstream's progress and log messages
// relayed) with each third-party client — the Go SDK's, mark3labs/mcp-go's
// with its defaults, and the TypeScript SDK's — over Streamable HTTP and over
// stdio; the Go clients speak protocol 2026-07-28 over both, and run the
// cases of an upstream's requests and notes again held to 2025-11-25. The
// content, the
// requests and the notes come from MCP servers behind the executor
// (contentUpstream, askUpstream), so that they cross the executor, its record
// and the gateway. A new behaviour is one more case.
//
// An upstream written with the Go SDK that asks its client mid-call
// (elicitation, sampling) and logs, behind an executor, meets the Go SDK's
// client through `emitter mcp`, on the old protocol and the newest, and the
// conformance scenarios of those requests and of logging through the HTTP
// gateway: the gateway relays them to the calling client.
//
// The package has no code of its own; run it with go test ./tests/mcp. Its
// tests need node and the harness's packages (`npm ci` in tests/mcp/node):
// without them they skip, and under CI=true they fail.
package mcp
