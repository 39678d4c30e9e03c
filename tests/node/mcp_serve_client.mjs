// Drives `mibyan mcp serve` with the official MCP TypeScript SDK client
// (@modelcontextprotocol/sdk, pinned in package.json). Run by
// tests/mcp_serve_test.cpp as
//   node mcp_serve_client.mjs SCENARIO TRANSPORT
// TRANSPORT is "stdio" (the SDK starts MIBYAN_BIN mcp serve itself, with
// MIBYAN_HOME and SERVE_ARGS) or "http" (MCP_URL, optionally MCP_KEY).
// WORK_DIR is a scratch directory, TOOL_FILE a file holding a marker.
// Prints "OK <scenario>" and exits 0, or prints the failure and exits 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from
  "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, LoggingMessageNotificationSchema } from
  "@modelcontextprotocol/sdk/types.js";
import { existsSync, mkdirSync } from "node:fs";
import { execFileSync } from "node:child_process";

const [scenario, transportKind] = process.argv.slice(2);
const WORK = process.env.WORK_DIR;

function check(cond, what) {
  if (!cond)
    throw new Error("check failed: " + what);
}

function transport(opts = {}) {
  if (transportKind === "stdio") {
    const args = ["mcp", "serve",
                  ...(process.env.SERVE_ARGS || "").split(" ").filter(Boolean)];
    return new StdioClientTransport({ command: process.env.MIBYAN_BIN, args,
                                      env: { ...process.env },
                                      stderr: "inherit" });
  }
  const headers = {};
  if (process.env.MCP_KEY)
    headers.Authorization = "Bearer " + process.env.MCP_KEY;
  return new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
    requestInit: { headers }, sessionId: opts.sessionId,
    reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 1000,
                           maxReconnectionDelay: 1000,
                           reconnectionDelayGrowFactor: 1 } });
}

async function connect(capabilities = {}, opts = {}) {
  const client = new Client({ name: "mibyan-test", version: "1.0.0" },
                            { capabilities });
  const t = transport(opts);
  await client.connect(t);
  return { client, t };
}

// The tool result's structured object (the server sends the tool's JSON).
function structured(res) {
  check(res.structuredContent && typeof res.structuredContent === "object",
        "structuredContent: " + JSON.stringify(res));
  check(res.content?.[0]?.type === "text", "text content");
  check(JSON.stringify(JSON.parse(res.content[0].text))
          === JSON.stringify(res.structuredContent),
        "the text is the structured result");
  return res.structuredContent;
}

async function run(client, code) {
  return structured(await client.callTool({ name: "execute_code",
                                            arguments: { code } }));
}

async function waitFor(pred, what, seconds = 30) {
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    if (await pred())
      return;
    await new Promise(r => setTimeout(r, 100));
  }
  throw new Error("timed out waiting for " + what);
}

function running(marker) {
  try {
    execFileSync("pgrep", ["-f", marker]);
    return true;
  } catch {
    return false;
  }
}

const scenarios = {
  // Paging, a structured read_file result, execute_code state per session.
  async tools() {
    const { client } = await connect();
    const names = [];
    let cursor, pages = 0;
    do {
      const page = await client.listTools(cursor ? { cursor } : {});
      for (const t of page.tools) {
        check(t.inputSchema?.type === "object", "inputSchema of " + t.name);
        names.push(t.name);
      }
      cursor = page.nextCursor;
      ++pages;
    } while (cursor && pages < 100);
    check(pages > 1, "more than one page (" + pages + ")");
    check(new Set(names).size === names.length, "no tool twice");
    for (const n of ["read_file", "execute_code", "terminal"])
      check(names.includes(n), n + " offered: " + names.join(","));
    const rf = structured(await client.callTool({
      name: "read_file", arguments: { path: process.env.TOOL_FILE } }));
    check(rf.content.includes("MCP-SERVE-MARKER"), "read_file content");
    const missing = await client.callTool({
      name: "read_file", arguments: { path: WORK + "/no-such-file" } });
    check(missing.isError === true, "a tool error is isError");
    let unknown;
    try {
      await client.callTool({ name: "no_such_tool", arguments: {} });
    } catch (e) {
      unknown = e;
    }
    check(unknown && /Unknown tool/.test(String(unknown)), "unknown tool");
    // The kernel keeps state within the session ...
    await run(client, "x = 41");
    const r = await run(client, "print(x + 1)");
    check(r.output.includes("42"), "state kept: " + JSON.stringify(r));
    // ... and a second session has its own.
    const other = await connect();
    const r2 = await run(other.client, "print(x + 1)");
    check(JSON.stringify(r2).includes("NameError"),
          "no state across sessions: " + JSON.stringify(r2));
    await other.client.close();
    await client.close();
  },

  // Heartbeats for a long call, then cancelling it kills its command.
  async progress() {
    const { client } = await connect();
    const marker = "sleep 59.25" + (transportKind === "http" ? "1" : "2");
    const ac = new AbortController();
    const seen = [];
    let wasRunning = false;
    const call = client.callTool(
      { name: "terminal", arguments: { command: marker, timeout: 120 } },
      undefined,
      { signal: ac.signal, timeout: 120000,
        onprogress: p => {
          seen.push(p);
          wasRunning = running(marker.replace("sleep 5", "sleep [5]"));
          ac.abort("enough");
        } });
    let err;
    try {
      await call;
    } catch (e) {
      err = e;
    }
    check(seen.length >= 1 && typeof seen[0].progress === "number",
          "progress seen: " + JSON.stringify(seen));
    check(err, "the cancelled call rejects");
    check(wasRunning, "the command ran while the call reported progress");
    // "sleep [5]9.25.." matches the command but not pgrep's own line.
    const pattern = marker.replace("sleep 5", "sleep [5]");
    check(pattern !== marker, "the pattern");
    await waitFor(() => !running(pattern), "the command to be killed");
    // The session serves on.
    await client.ping();
    const r = await run(client, "print('after')");
    check(r.output.includes("after"), "serves after a cancel: " + JSON.stringify(r));
    await client.close();
  },

  // A flagged command asks through elicitation: once allows, decline
  // denies.
  async elicit() {
    const { client } = await connect({ elicitation: { form: {} } });
    const asked = [];
    client.setRequestHandler(ElicitRequestSchema, async req => {
      asked.push(req.params);
      if (req.params.requestedSchema.properties.answer)
        return { action: "accept", content: { answer: "the blue one" } };
      if (asked.length === 1)
        return { action: "accept", content: { decision: "once" } };
      return { action: "decline" };
    });
    const a = WORK + "/elicit-a", b = WORK + "/elicit-b";
    mkdirSync(a, { recursive: true });
    mkdirSync(b, { recursive: true });
    const r1 = structured(await client.callTool({
      name: "terminal", arguments: { command: "rm -r " + a } }));
    check(asked.length === 1, "asked once: " + asked.length);
    check(asked[0].message.includes("rm -r"), "the message names the command");
    const props = asked[0].requestedSchema.properties;
    check(props.decision.enum.includes("once") &&
          props.decision.enum.includes("deny"), "the choices");
    check(!existsSync(a), "allowed once: removed " + JSON.stringify(r1));
    const r2 = await client.callTool({
      name: "terminal", arguments: { command: "rm -r " + b } });
    check(asked.length === 2, "asked again");
    check(existsSync(b), "declined: kept");
    check(/BLOCKED|denied/i.test(r2.content[0].text),
          "denied with a reason: " + r2.content[0].text);
    // clarify asks through elicitation too.
    const q = await client.callTool({
      name: "clarify", arguments: { question: "Which colour?",
                                    choices: ["red", "the blue one"] } });
    check(asked.length === 3 && asked[2].message.includes("Which colour?"),
          "clarify asked: " + JSON.stringify(asked[2]));
    check(!q.isError && q.content[0].text.includes("the blue one"),
          "clarify answered: " + q.content[0].text);
    await client.close();
  },

  // Without elicitation nobody can answer: denied with the reason.
  async noelicit() {
    const { client } = await connect();
    const c = WORK + "/noelicit";
    mkdirSync(c, { recursive: true });
    const r = await client.callTool({
      name: "terminal", arguments: { command: "rm -r " + c } });
    check(existsSync(c), "not run");
    check(/BLOCKED|no user|non-interactive/i.test(r.content[0].text),
          "the reason: " + r.content[0].text);
    const q = await client.callTool({
      name: "clarify", arguments: { question: "Which colour?" } });
    check(q.isError === true, "clarify is unavailable: "
                              + q.content[0].text);
    await client.close();
  },

  // logging/setLevel decides which notifications/message arrive.
  async logging() {
    const { client } = await connect();
    const got = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema,
                                  n => got.push(n.params));
    await client.setLoggingLevel("debug");
    await client.callTool({ name: "read_file",
                            arguments: { path: process.env.TOOL_FILE } });
    await waitFor(() => got.some(m => m.level === "debug"), "a debug message");
    await client.setLoggingLevel("error");
    got.length = 0;
    await client.callTool({ name: "read_file",
                            arguments: { path: process.env.TOOL_FILE } });
    await client.ping();
    check(!got.some(m => m.level === "debug" || m.level === "info"),
          "no info after setLevel error: " + JSON.stringify(got));
    let bad;
    try {
      await client.setLoggingLevel("loud");
    } catch (e) {
      bad = e;
    }
    check(bad, "an unknown level is refused");
    await client.close();
  },

  // HTTP: the session continues on a new connection by Mcp-Session-Id;
  // DELETE ends it.
  async resume() {
    const first = await connect();
    const sid = first.t.sessionId;
    check(sid && /^[0-9a-f]{32}$/.test(sid), "a session id: " + sid);
    await run(first.client, "y = 7");
    await first.t.close(); // no DELETE: the session stays
    const second = await connect({}, { sessionId: sid });
    const r = await run(second.client, "print(y * 6)");
    check(r.output.includes("42"), "resumed: " + JSON.stringify(r));
    await second.t.terminateSession();
    await second.client.close();
    const res = await fetch(process.env.MCP_URL, {
      method: "POST",
      headers: { "Content-Type": "application/json",
                 "Accept": "application/json, text/event-stream",
                 "Mcp-Session-Id": sid,
                 ...(process.env.MCP_KEY
                       ? { Authorization: "Bearer " + process.env.MCP_KEY }
                       : {}) },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }) });
    check(res.status === 404, "ended session: " + res.status);
  },
};

try {
  if (!scenarios[scenario])
    throw new Error("unknown scenario " + scenario);
  await scenarios[scenario]();
  console.log("OK " + scenario);
  process.exit(0);
} catch (e) {
  console.log("FAILED " + scenario + ": " + (e && e.stack || e));
  process.exit(1);
}
