// An MCP client built on the TypeScript SDK, for Go tests that need a peer no
// one here wrote. It reads one JSON request on standard input:
//
//   {
//     "url": "http://127.0.0.1:8080/mcp",   // Streamable HTTP, or:
//     "command": ["/path/server", "arg"],  // stdio: spawn this server
//     "env": {"NAME": "value"},            // stdio: added to the SDK's default environment
//     "token": "secret",                   // HTTP: sent as Authorization: Bearer
//     "calls": [{"tool": "add", "arguments": {"a": 1}, "_meta": {}, "progress": true}],
//     "concurrent": true,                  // make the calls all at once
//     "elicitation": [{"contains": "no", "action": "decline"},
//                     {"action": "accept", "content": {"seat": "1A"}}],
//     "logLevel": "info"                   // sent in logging/setLevel
//   }
//
// connects, lists every tool, makes the calls one after another (or all at
// once) and prints one JSON document on standard output:
//
//   {"server": {...}, "tools": [{"name", "annotations"}],
//    "results": [{"tool", "isError", "content", "structuredContent", "_meta", "progress"}
//                | {"tool", "error": {"code", "message", "data"}}],
//    "elicitations": [{"mode", "message", "requestedSchema"}],
//    "logs": [{"level", "logger", "data"}],
//    "errors": ["..."]}
//
// With "elicitation", the client declares the elicitation capability and
// answers each elicitation/create request with the first rule whose
// "contains" (absent: any) is in the request's message, through the SDK's
// setRequestHandler(ElicitRequestSchema); a request no rule matches is
// cancelled. Without it, the client declares no capability but the SDK's
// default. Every request and every notifications/message is recorded.
//
// A call answered with a JSON-RPC error is recorded under "error" with the code
// the server sent (or the SDK's own -32001 when no answer came within its
// default 60 seconds). "errors" lists what the SDK reported through the client's
// onerror while the calls ran (a notification it could not handle, say).
// Anything else that goes wrong (connecting, listing, a transport failure) is
// printed on standard error and ends the process with exit status 1, without
// a result document.
//
// A call with "progress" sends the progress token "progress-<n>" (n counts the
// calls from 0) and records the notifications that carry it. They are taken by
// a notification handler of this client's own rather than the SDK's onprogress
// option: the SDK hands a notification to onprogress a microtask late, and
// drops it as unknown when the result came in the same read (over stdio, a
// server that notifies just before answering).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  McpError,
  ProgressNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

function transportFor(req) {
  if (req.url && req.command) throw new Error("request names both url and command");
  if (req.url) {
    const headers = req.token ? { Authorization: `Bearer ${req.token}` } : {};
    return new StreamableHTTPClientTransport(new URL(req.url), { requestInit: { headers } });
  }
  if (Array.isArray(req.command) && req.command.length > 0) {
    const [command, ...args] = req.command;
    return new StdioClientTransport({
      command,
      args,
      env: { ...getDefaultEnvironment(), ...(req.env ?? {}) },
      stderr: "inherit",
    });
  }
  throw new Error("request names neither url nor command");
}

async function listAllTools(client) {
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined);
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools.map((t) => ({ name: t.name, annotations: t.annotations ?? null }));
}

async function call(client, c, n, progressByToken) {
  const params = { name: c.tool, arguments: c.arguments ?? {} };
  const token = `progress-${n}`;
  if (c._meta || c.progress) params._meta = { ...(c._meta ?? {}), ...(c.progress ? { progressToken: token } : {}) };
  if (c.progress) progressByToken.set(token, []);
  try {
    const r = await client.callTool(params);
    return {
      tool: c.tool,
      isError: r.isError === true,
      content: r.content ?? [],
      structuredContent: r.structuredContent ?? null,
      _meta: r._meta ?? null,
      ...(c.progress ? { progress: progressByToken.get(token) } : {}),
    };
  } catch (err) {
    if (err instanceof McpError) {
      return { tool: c.tool, error: { code: err.code, message: err.message, data: err.data ?? null } };
    }
    throw err;
  }
}

async function main() {
  const req = await readStdin();
  const rules = req.elicitation ?? [];
  const client = new Client(
    { name: "toolexec-ts-client", version: "1.0.0" },
    rules.length > 0 ? { capabilities: { elicitation: {} } } : undefined,
  );
  const errors = [];
  client.onerror = (err) => errors.push(String(err?.message ?? err));
  const elicitations = [];
  if (rules.length > 0) {
    client.setRequestHandler(ElicitRequestSchema, ({ params }) => {
      elicitations.push({ mode: params.mode ?? "", message: params.message, requestedSchema: params.requestedSchema ?? null });
      const rule = rules.find((r) => !r.contains || params.message.includes(r.contains));
      if (!rule) return { action: "cancel" };
      return rule.action === "accept" ? { action: "accept", content: rule.content ?? {} } : { action: rule.action };
    });
  }
  const logs = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, ({ params }) => {
    logs.push({ level: params.level, logger: params.logger ?? "", data: params.data ?? null });
  });
  const progressByToken = new Map();
  client.setNotificationHandler(ProgressNotificationSchema, ({ params }) => {
    const { progressToken, ...rest } = params;
    const list = progressByToken.get(progressToken);
    if (list) list.push(rest);
    else errors.push(`progress for unknown token ${JSON.stringify(progressToken)}`);
  });
  await client.connect(transportFor(req));
  try {
    if (req.logLevel) await client.setLoggingLevel(req.logLevel);
    const tools = await listAllTools(client);
    const calls = [...(req.calls ?? []).entries()];
    const results = [];
    if (req.concurrent) results.push(...(await Promise.all(calls.map(([n, c]) => call(client, c, n, progressByToken)))));
    else for (const [n, c] of calls) results.push(await call(client, c, n, progressByToken));
    process.stdout.write(JSON.stringify({ server: client.getServerVersion() ?? null, tools, results, elicitations, logs, errors }) + "\n");
  } finally {
    await client.close();
  }
}

main().catch((err) => {
  // A StreamableHTTPError carries the HTTP status in code.
  const code = err?.code !== undefined ? ` (code ${err.code})` : "";
  process.stderr.write(`client.mjs${code}: ${err?.stack ?? err}\n`);
  process.exit(1);
});
