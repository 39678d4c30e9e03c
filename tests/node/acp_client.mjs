// The official ACP TypeScript client library (@agentclientprotocol/sdk) as a
// real editor against `mibyan acp` (tests/acp_test.cpp drives it; the
// scripted provider's replies are queued there before each scenario).
//
//   node acp_client.mjs SCENARIO
//
// Environment: MIBYAN_BIN (the binary), ACP_ARGS (JSON array: the
// arguments after `acp`), ACP_CWD (the sessions' working directory),
// ACP_SESSION (session/load), ACP_MCP_ENTRY (server-everything's entry).
// Prints one JSON object (the facts the C++ side checks) on its last stdout
// line; exits 1 with a message on a failed expectation.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const scenario = process.argv[2];
const bin = process.env.MIBYAN_BIN;
const args = ["acp", ...JSON.parse(process.env.ACP_ARGS || "[]")];
const cwd = process.env.ACP_CWD;

function fail(msg) {
  console.error("acp_client: " + msg);
  process.exit(1);
}
function expect(cond, msg) {
  if (!cond) fail(msg);
}

const child = spawn(bin, args, {
  stdio: ["pipe", "pipe", "inherit"],
  env: process.env,
});
child.on("error", (e) => fail("cannot start mibyan: " + e));
// Every stdout line must be a JSON-RPC message (the SDK would reject
// anything else too, but this says which line).
const rawLines = [];
child.stdout.on("data", (d) => rawLines.push(d.toString()));

const facts = { updates: [], permissions: [], reads: [], writes: [],
                cancelledPermissions: 0 };
// The buffers the "editor" holds: path -> text (differs from the disk).
const buffers = new Map();
// How the client answers permission requests, in order; "never" keeps a
// request open until the agent withdraws it.
const answers = (process.env.ACP_PERMISSIONS || "").split(",").filter(Boolean);
let updateWaiters = [];

function onUpdate(n) {
  facts.updates.push(n);
  updateWaiters = updateWaiters.filter((w) => !w(n));
}
function waitUpdate(pred) {
  for (const n of facts.updates) if (pred(n)) return Promise.resolve(n);
  return new Promise((resolve) => {
    updateWaiters.push((n) => (pred(n) ? (resolve(n), true) : false));
  });
}

const app = acp
  .client({ name: "mibyan-acp-test" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    onUpdate(params);
  })
  .onRequest(acp.methods.client.session.requestPermission,
             async ({ params, signal }) => {
    facts.permissions.push(params);
    const how = answers.shift() || "reject_once";
    if (how === "never") {
      await new Promise((resolve) => {
        if (signal.aborted) return resolve();
        signal.addEventListener("abort", resolve, { once: true });
      });
      facts.cancelledPermissions++;
      return { outcome: { outcome: "cancelled" } };
    }
    return { outcome: { outcome: "selected", optionId: how } };
  })
  .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => {
    facts.reads.push(params.path);
    if (buffers.has(params.path)) return { content: buffers.get(params.path) };
    return { content: readFileSync(params.path, "utf8") };
  })
  .onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => {
    facts.writes.push({ path: params.path, content: params.content });
    buffers.set(params.path, params.content);
    writeFileSync(params.path, params.content);
    return {};
  });

const stream = acp.ndJsonStream(Writable.toWeb(child.stdin),
                                Readable.toWeb(child.stdout));

function sessionUpdates(sid, kind) {
  return facts.updates.filter((n) => n.sessionId === sid
                                     && n.update.sessionUpdate === kind)
                      .map((n) => n.update);
}
function text(blocks) {
  return blocks.map((u) => (u.content && u.content.text) || "").join("");
}

async function initialize(cx, fs = true) {
  const init = await cx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION ?? 1,
    clientCapabilities: { fs: { readTextFile: fs, writeTextFile: fs },
                          terminal: false },
    clientInfo: { name: "mibyan-acp-test", version: "1" },
  });
  facts.protocolVersion = init.protocolVersion;
  facts.agentCapabilities = init.agentCapabilities;
  facts.agentInfo = init.agentInfo;
  return init;
}

async function newSession(cx, mcpServers = []) {
  const s = await cx.request(acp.methods.agent.session.new,
                             { cwd, mcpServers });
  facts.modes = s.modes;
  return s.sessionId;
}

async function prompt(cx, sid, textOrBlocks) {
  const blocks = typeof textOrBlocks === "string"
    ? [{ type: "text", text: textOrBlocks }] : textOrBlocks;
  return cx.request(acp.methods.agent.session.prompt,
                    { sessionId: sid, prompt: blocks });
}

const scenarios = {
  // execute_code and a patch of a file whose editor buffer differs from
  // the disk: the patch reads and writes through the client.
  async edit(cx) {
    await initialize(cx);
    const sid = await newSession(cx);
    facts.sessionId = sid;
    const file = cwd + "/notes.txt";
    buffers.set(file, "hello from the buffer\nsecond line\n");
    buffers.set(cwd + "/main.py", "print('buffer')\n");
    const r = await prompt(cx, sid, [
      { type: "text", text: "compute and edit notes.txt" },
      { type: "resource", resource: { uri: "file://" + file,
                                      text: "context text", mimeType:
                                      "text/plain" } },
    ]);
    facts.stopReason = r.stopReason;
    facts.toolCalls = sessionUpdates(sid, "tool_call");
    facts.toolUpdates = sessionUpdates(sid, "tool_call_update");
    facts.answer = text(sessionUpdates(sid, "agent_message_chunk"));
    facts.commands = sessionUpdates(sid, "available_commands_update");
    facts.plans = sessionUpdates(sid, "plan");
  },
  // Two flagged commands: the first allowed once, the second rejected.
  async permission(cx) {
    await initialize(cx);
    const sid = await newSession(cx);
    const r = await prompt(cx, sid, "clean up");
    facts.stopReason = r.stopReason;
    facts.thoughts = text(sessionUpdates(sid, "agent_thought_chunk"));
    facts.answer = text(sessionUpdates(sid, "agent_message_chunk"));
    facts.toolCalls = sessionUpdates(sid, "tool_call");
    facts.toolUpdates = sessionUpdates(sid, "tool_call_update");
  },
  // A long command, cancelled once it runs; and a flagged one whose
  // permission request is open when the turn is cancelled.
  async cancel(cx) {
    await initialize(cx);
    const sid = await newSession(cx);
    const p = prompt(cx, sid, "wait a while");
    await waitUpdate((n) => n.sessionId === sid
                            && n.update.sessionUpdate === "tool_call");
    await cx.notify(acp.methods.agent.session.cancel, { sessionId: sid });
    facts.stopReason = (await p).stopReason;
    const p2 = prompt(cx, sid, "now the flagged one");
    while (facts.permissions.length === 0)
      await new Promise((r) => setTimeout(r, 20));
    await cx.notify(acp.methods.agent.session.cancel, { sessionId: sid });
    facts.stopReason2 = (await p2).stopReason;
    // The agent withdrew the open request ($/cancel_request).
    for (let i = 0; i < 500 && facts.cancelledPermissions === 0; ++i)
      await new Promise((r) => setTimeout(r, 20));
  },
  // A permission request the client never answers: the agent gives up
  // after approvals.timeout (deny) and the turn goes on.
  async timeout(cx) {
    await initialize(cx);
    const sid = await newSession(cx);
    const r = await prompt(cx, sid, "try it");
    facts.stopReason = r.stopReason;
    facts.toolUpdates = sessionUpdates(sid, "tool_call_update");
    for (let i = 0; i < 500 && facts.cancelledPermissions === 0; ++i)
      await new Promise((r) => setTimeout(r, 20));
  },
  // session/load replays the stored history before it answers.
  async load(cx) {
    const init = await initialize(cx);
    expect(init.agentCapabilities.loadSession === true, "loadSession");
    const sid = process.env.ACP_SESSION;
    const before = facts.updates.length;
    await cx.request(acp.methods.agent.session.load,
                     { sessionId: sid, cwd, mcpServers: [] });
    const replayed = facts.updates.slice(before)
                          .filter((n) => n.sessionId === sid)
                          .map((n) => n.update);
    facts.replayed = replayed;
    // The loaded session takes a new prompt.
    const r = await prompt(cx, sid, "and now?");
    facts.stopReason = r.stopReason;
    try {
      await cx.request(acp.methods.agent.session.load,
                       { sessionId: "no-such-session", cwd, mcpServers: [] });
      facts.loadMissing = "ok";
    } catch (e) {
      facts.loadMissing = e.code;
    }
  },
  // An MCP server given by the client, seen only by its session.
  async mcp(cx) {
    await initialize(cx);
    const servers = [{
      name: "everything", command: "node",
      args: [process.env.ACP_MCP_ENTRY, "stdio"], env: [],
    }];
    if (process.env.ACP_MCP_HTTP)
      servers.push({ type: "http", name: "remote",
                     url: process.env.ACP_MCP_HTTP, headers: [] });
    const sid = await newSession(cx, servers);
    const r = await prompt(cx, sid, "echo something");
    facts.stopReason = r.stopReason;
    facts.toolUpdates = sessionUpdates(sid, "tool_call_update");
    try {
      await newSession(cx, [{ type: "sse", name: "old", url: "http://x/sse",
                              headers: [] }]);
      facts.sse = "ok";
    } catch (e) {
      facts.sse = e.code;
    }
    const other = await newSession(cx);
    facts.stopReason2 = (await prompt(cx, other, "plain")).stopReason;
  },
  // Modes, slash commands, a prompt while one runs, bad params.
  async modes(cx) {
    await initialize(cx, false);
    const sid = await newSession(cx);
    await cx.request(acp.methods.agent.session.setMode,
                     { sessionId: sid, modeId: "yolo" });
    facts.modeUpdates = sessionUpdates(sid, "current_mode_update");
    const r = await prompt(cx, sid, "/help");
    facts.help = text(sessionUpdates(sid, "agent_message_chunk"));
    facts.helpStop = r.stopReason;
    try {
      await cx.request(acp.methods.agent.session.setMode,
                       { sessionId: sid, modeId: "warp" });
      facts.badMode = "ok";
    } catch (e) {
      facts.badMode = e.code;
    }
    try {
      await prompt(cx, sid, [{ type: "image", data: "AAAA",
                               mimeType: "image/png" }]);
      facts.image = "ok";
    } catch (e) {
      facts.image = e.code;
    }
    try {
      await cx.request(acp.methods.agent.session.new,
                       { cwd: "relative/dir", mcpServers: [] });
      facts.relativeCwd = "ok";
    } catch (e) {
      facts.relativeCwd = e.code;
    }
    // The flagged command runs unasked in yolo mode.
    const r2 = await prompt(cx, sid, "clean up quickly");
    facts.yoloStop = r2.stopReason;
    facts.toolUpdates = sessionUpdates(sid, "tool_call_update");
    // session/close: the session is gone; closing again is fine.
    facts.closeCap = !!(facts.agentCapabilities.sessionCapabilities
                        && facts.agentCapabilities.sessionCapabilities.close);
    await cx.request(acp.methods.agent.session.close, { sessionId: sid });
    try {
      await prompt(cx, sid, "still there?");
      facts.afterClose = "ok";
    } catch (e) {
      facts.afterClose = e.code;
    }
    await cx.request(acp.methods.agent.session.close, { sessionId: sid });
    facts.closedTwice = true;
  },
};

const run = scenarios[scenario];
if (!run) fail("unknown scenario " + scenario);
try {
  await app.connectWith(stream, run);
} catch (e) {
  fail(scenario + ": " + (e && e.stack ? e.stack : JSON.stringify(e)));
}
child.stdin.end();
const code = await new Promise((resolve) => {
  if (child.exitCode !== null) return resolve(child.exitCode);
  child.on("exit", (c, sig) => resolve(sig ? -1 : c));
});
facts.exitCode = code;
const all = rawLines.join("");
facts.stdoutLines = 0;
for (const line of all.split("\n")) {
  if (line === "") continue;
  facts.stdoutLines++;
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    fail("a stdout line that is no JSON: " + line.slice(0, 200));
  }
  expect(m.jsonrpc === "2.0", "a stdout line that is no JSON-RPC: " + line);
}
console.log(JSON.stringify(facts));
process.exit(0);
