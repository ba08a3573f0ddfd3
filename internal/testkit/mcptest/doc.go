// Package mcptest is an MCP server for tests, built on the official Go SDK's
// own server (mcp.NewServer), so that toolexec's MCP client code is tested
// against a peer it did not write. The same server runs in process, behind
// mcp.NewStreamableHTTPHandler ([NewServer]), or as a stdio server in a child
// process: the test binary itself, started again by [Command] and turned into
// the server by [Main], which the test package's TestMain calls.
//
// Its tools (see [NewServer]) answer in each way a tools/call can be
// answered: text, structured content, other content, isError, JSON-RPC
// errors, input required; they report the _meta and Idempotency-Key they
// received; "effect" and "hang" append a line per run to a file, so that a
// test counts how many times the upstream really ran; "hang" then waits until
// it is cancelled or its process is killed. A set of tools carries each
// combination of annotations an import must map.
//
// Only tests import this package; production code must not.
package mcptest
