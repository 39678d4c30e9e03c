// Drives `mibyan serve` with the stock `openai` npm client (pinned in
// package.json). Run by tests/serve_test.cpp as
//   node serve_client.mjs SCENARIO
// with SERVE_URL (http://host:port), PROVIDER_URL (the scripted provider
// server, tests/support/http_server.py) and optionally SERVE_KEY in the
// environment. Prints "OK <scenario>" and exits 0, or prints the failure
// and exits 1.
import OpenAI from "openai";
import { check, control, providerRequests, reply, script, scriptRefusals,
         streamed } from "./scripted_provider.mjs";

const SERVE = process.env.SERVE_URL;
const KEY = process.env.SERVE_KEY || "unused";

function client(key = KEY) {
  return new OpenAI({ baseURL: SERVE + "/v1", apiKey: key, maxRetries: 0,
                      timeout: 60000 });
}

const scenarios = {
  async answers() {
    await control("/__reset", {});
    await script({ body: reply("Hello from the provider", [], [11, 4]) });
    const c = client();
    const res = await c.chat.completions.create({
      model: "m", messages: [{ role: "system", content: "Be brief." },
                             { role: "user", content: "Say hello" }] });
    check(res.object === "chat.completion", "object");
    check(res.choices[0].message.content === "Hello from the provider",
          "content: " + JSON.stringify(res.choices[0]));
    check(res.choices[0].finish_reason === "stop", "finish_reason");
    check(res.usage.prompt_tokens === 11 && res.usage.completion_tokens === 4,
          "usage " + JSON.stringify(res.usage));
    const sent = (await providerRequests())[0];
    const user = sent.messages.filter((m) => m.role === "user").pop();
    check(user.content.includes("Be brief.") && user.content.includes("Say hello"),
          "the client's system text reaches the model: " + JSON.stringify(user));

    // Streaming: the provider streams three pieces; the client sees them
    // as separate content deltas, then finish_reason stop.
    await script({ chunks: streamed(["Str", "eam", "ed!"]),
                   headers: { "Content-Type": "text/event-stream" } });
    const stream = await c.chat.completions.create({
      model: "m", stream: true, stream_options: { include_usage: true },
      messages: [{ role: "user", content: "Stream please" }] });
    let text = "", deltas = 0, finish = null, usage = null;
    for await (const chunk of stream) {
      check(chunk.object === "chat.completion.chunk", "chunk object");
      if (chunk.usage) usage = chunk.usage;
      for (const ch of chunk.choices) {
        if (ch.delta.content) { text += ch.delta.content; ++deltas; }
        if (ch.finish_reason) finish = ch.finish_reason;
      }
    }
    check(text === "Streamed!", "streamed text " + JSON.stringify(text));
    check(deltas >= 3, "several content deltas, got " + deltas);
    check(finish === "stop", "stream finish_reason");
    check(usage && usage.total_tokens === 12, "stream usage " + JSON.stringify(usage));

    // Stateless: the client's messages are the whole history.
    await script({ body: reply("Paris, as before.") });
    const r3 = await c.chat.completions.create({
      model: "m", messages: [
        { role: "user", content: "Capital of France?" },
        { role: "assistant", content: "Paris." },
        { role: "user", content: "And again?" }] });
    check(r3.choices[0].message.content === "Paris, as before.", "stateless answer");
    const last = (await providerRequests()).pop();
    const texts = last.messages.map((m) => m.role + ":" + m.content);
    check(texts.includes("user:Capital of France?") && texts.includes("assistant:Paris."),
          "prior messages reach the model: " + JSON.stringify(texts));
  },

  async failures() {
    // The provider refuses (400, not retried): the turn fails. The client
    // raises an API error for both the plain and the streamed request.
    await control("/__reset", {});
    await scriptRefusals(2);
    const c = client();
    try {
      await c.chat.completions.create(
        { model: "m", messages: [{ role: "user", content: "fail" }] });
      throw new Error("a failed turn was not an error");
    } catch (e) {
      check(e instanceof OpenAI.APIError && e.status === 502,
            "502 APIError, got " + e.constructor.name + " " + e.status + ": " + e.message);
    }
    const stream = await c.chat.completions.create(
      { model: "m", stream: true, messages: [{ role: "user", content: "fail" }] });
    try {
      for await (const _ of stream) { /* the error event ends it */ }
      throw new Error("a failed streamed turn did not raise");
    } catch (e) {
      check(e instanceof OpenAI.APIError, "stream APIError, got " + e.constructor.name + ": " + e.message);
    }
  },

  async tools() {
    await control("/__reset", {});
    // Round 1: read_file; round 2: execute_code; round 3: the answer.
    await script({ body: reply("", [["call_r", "read_file",
                                     { path: process.env.TOOL_FILE }]]) });
    await script({ body: reply("", [["call_x", "execute_code",
                                     { code: "print(6 * 7)" }]]) });
    await script({ body: reply("The file says SERVE-MARKER and 6*7 is 42.") });
    const c = client();
    const stream = await c.chat.completions.create({
      model: "m", stream: true,
      messages: [{ role: "user", content: "Read the file and compute." }] });
    let text = "";
    const tools = [];
    let end = null;
    for await (const chunk of stream) {
      for (const ch of chunk.choices) if (ch.delta.content) text += ch.delta.content;
      if (chunk.mibyan) {
        if (chunk.mibyan.type === "tool_start") tools.push(chunk.mibyan.tool.name);
        if (chunk.mibyan.type === "turn_end") end = chunk.mibyan;
      }
    }
    check(text.includes("6*7 is 42"), "final text " + JSON.stringify(text));
    check(JSON.stringify(tools) === JSON.stringify(["read_file", "execute_code"]),
          "tool events " + JSON.stringify(tools));
    check(end && end.api_calls === 3, "turn_end " + JSON.stringify(end));
    const reqs = await providerRequests();
    check(reqs.length === 3, "three provider calls, got " + reqs.length);
    const toolMsgs = reqs[2].messages.filter((m) => m.role === "tool")
                                     .map((m) => m.content).join("\n");
    check(toolMsgs.includes("SERVE-MARKER"), "read_file result reached the model");
    check(toolMsgs.includes("42"), "execute_code output reached the model: " + toolMsgs);

    // The same turn without streaming: usage summed over the three calls.
    await control("/__reset", {});
    await script({ body: reply("", [["call_r", "read_file",
                                     { path: process.env.TOOL_FILE }]], [10, 3]) });
    await script({ body: reply("", [["call_x", "execute_code",
                                     { code: "print(6 * 7)" }]], [20, 5]) });
    await script({ body: reply("Done: 42.", [], [30, 7]) });
    const res = await c.chat.completions.create({
      model: "m", messages: [{ role: "user", content: "Again, please." }] });
    check(res.choices[0].message.content === "Done: 42.", "answer");
    check(res.usage.prompt_tokens === 60 && res.usage.completion_tokens === 15,
          "usage summed over the turn " + JSON.stringify(res.usage));
  },

  async session() {
    await control("/__reset", {});
    const sid = "node-session-" + process.pid;
    const c = client();
    await script({ body: reply("Noted: the word is OSPREY.") });
    const first = await c.chat.completions.create(
      { model: "m", messages: [{ role: "user", content: "Remember OSPREY." }] },
      { headers: { "X-Mibyan-Session": sid } }).withResponse();
    check(first.response.headers.get("x-mibyan-session") === sid, "session header echoed");
    check(first.data.choices[0].message.content.includes("OSPREY"), "first answer");
    await script({ body: reply("The word was OSPREY.") });
    const second = await c.chat.completions.create(
      { model: "m", messages: [{ role: "user", content: "What was the word?" }] },
      { headers: { "X-Mibyan-Session": sid } });
    check(second.choices[0].message.content === "The word was OSPREY.", "second answer");
    const last = (await providerRequests()).pop();
    const texts = last.messages.map((m) => m.role + ":" + m.content);
    check(texts.includes("user:Remember OSPREY."), "history kept: " + JSON.stringify(texts));
    check(texts.includes("assistant:Noted: the word is OSPREY."), "answer kept");
    // The session endpoints show it, like `mibyan sessions --json`.
    const r = await fetch(SERVE + "/v1/sessions/" + sid,
                          { headers: { Authorization: "Bearer " + KEY } });
    const body = await r.json();
    check(r.status === 200 && body.id === sid, "GET session " + r.status);
    check(body.messages.filter((m) => m.role === "user").length === 2, "stored turns");
  },

  async auth() {
    await control("/__reset", {});
    await script({ body: reply("Authorized.") });
    try {
      await client("wrong-key").chat.completions.create(
        { model: "m", messages: [{ role: "user", content: "hi" }] });
      throw new Error("a wrong key was accepted");
    } catch (e) {
      check(e instanceof OpenAI.AuthenticationError,
            "AuthenticationError, got " + e.constructor.name + ": " + e.message);
      check(e.status === 401, "status 401");
      check(e.error && e.error.type && e.error.message, "OpenAI error shape");
    }
    const ok = await client().chat.completions.create(
      { model: "m", messages: [{ role: "user", content: "hi" }] });
    check(ok.choices[0].message.content === "Authorized.", "right key works");
    const h = await fetch(SERVE + "/health");
    check(h.status === 200, "/health needs no key");
  },

  async limit() {
    // max_concurrent_turns is 1: a slow turn holds the slot.
    await control("/__reset", {});
    await script({ body: reply("Slow answer."), delay_ms: 3000 });
    const c = client();
    const slow = c.chat.completions.create(
      { model: "m", messages: [{ role: "user", content: "slow" }] });
    // Wait until the provider has the slow request, then ask again.
    for (let i = 0; i < 200; ++i) {
      const reqs = await control("/__requests");
      if (reqs.some((r) => r.path.startsWith("/v1/chat/completions"))) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    try {
      await c.chat.completions.create(
        { model: "m", messages: [{ role: "user", content: "fast" }] });
      throw new Error("the second turn was not refused");
    } catch (e) {
      check(e instanceof OpenAI.RateLimitError,
            "RateLimitError, got " + e.constructor.name + ": " + e.message);
      check(e.headers["retry-after"], "Retry-After header");
    }
    const done = await slow;
    check(done.choices[0].message.content === "Slow answer.", "slow turn finished");
  },

  async keepalive() {
    // server.keepalive_s is 1: the slow stream carries ": keep-alive"
    // comments, which the stock client must skip.
    await control("/__reset", {});
    await script({ body: reply("Slow streamed answer."), delay_ms: 3500 });
    const stream = await client().chat.completions.create(
      { model: "m", stream: true, messages: [{ role: "user", content: "slow" }] });
    let text = "";
    let chunks = 0;
    for await (const chunk of stream) {
      ++chunks;
      text += chunk.choices[0]?.delta?.content ?? "";
    }
    check(text === "Slow streamed answer.", "streamed text: " + text);
    check(chunks >= 3, "chunks: " + chunks);
  },

  async approval() {
    // approvals.http is pending: the model asks for a flagged command, the
    // stream carries a `mibyan` approval_required chunk (which the stock
    // client passes through untouched), the approval is answered over HTTP
    // and the turn goes on to its answer.
    await control("/__reset", {});
    const dir = (await import("node:fs")).readFileSync(
      process.env.TOOL_FILE.replace(/tool\.txt$/, "work_dir.txt"), "utf8").trim();
    await script({ body: reply("", [["call_rm", "terminal",
                                     { command: "rm -rf ./build-output", workdir: dir }]]) });
    await script({ body: reply("Deleted after approval.") });
    const stream = await client().chat.completions.create(
      { model: "m", stream: true, messages: [{ role: "user", content: "clean up" }] });
    let text = "", asked = null, resolved = null, finish = null;
    for await (const chunk of stream) {
      check(chunk.object === "chat.completion.chunk", "chunk object");
      for (const ch of chunk.choices) {
        if (ch.delta.content) text += ch.delta.content;
        if (ch.finish_reason) finish = ch.finish_reason;
      }
      if (chunk.mibyan && chunk.mibyan.type === "approval_required") {
        asked = chunk.mibyan.approval;
        const r = await fetch(SERVE + "/v1/approvals/" + asked.id, {
          method: "POST", body: JSON.stringify({ choice: "once" }),
          headers: { "Content-Type": "application/json",
                     Authorization: "Bearer " + KEY } });
        check(r.status === 200, "POST approval " + r.status);
      }
      if (chunk.mibyan && chunk.mibyan.type === "approval_resolved")
        resolved = chunk.mibyan;
    }
    check(asked && asked.command === "rm -rf ./build-output",
          "approval_required " + JSON.stringify(asked));
    check(asked.choices.includes("once"), "choices " + JSON.stringify(asked));
    check(resolved && resolved.outcome === "once", "resolved " + JSON.stringify(resolved));
    check(text === "Deleted after approval.", "streamed text " + JSON.stringify(text));
    check(finish === "stop", "finish_reason " + finish);
  },

  async concurrent() {
    await control("/__reset", {});
    await script({ body: reply("Parallel answer."), times: 20, delay_ms: 100 });
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) =>
      client().chat.completions.create(
        { model: "m", messages: [{ role: "user", content: "client " + i }] })));
    check(results.every((r) => r.choices[0].message.content === "Parallel answer."),
          "20 answers");
    const reqs = await providerRequests();
    check(reqs.length === 20, "20 provider calls, got " + reqs.length);
  },
};

const name = process.argv[2];
if (!scenarios[name]) {
  console.error("unknown scenario " + name);
  process.exit(2);
}
try {
  await scenarios[name]();
  console.log("OK " + name);
} catch (e) {
  console.error("FAIL " + name + ": " + (e.stack || e));
  process.exit(1);
}
