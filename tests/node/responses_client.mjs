// Drives the Responses API of `mibyan serve` (docs/serve.md, "Responses
// API") with the stock `openai` npm client (pinned in package.json). Run by
// tests/responses_test.cpp as
//   node responses_client.mjs SCENARIO
// with SERVE_URL, PROVIDER_URL (the scripted provider server,
// tests/support/http_server.py), TOOL_FILE and, for scenarios that pass
// ids between runs, STATE_FILE in the environment. Prints "OK <scenario>"
// and exits 0, or prints the failure and exits 1.
import fs from "node:fs";
import OpenAI from "openai";
import { check, control, providerRequests, reply, script, scriptRefusals,
         streamed } from "./scripted_provider.mjs";

const SERVE = process.env.SERVE_URL;
const STATE = process.env.STATE_FILE;

function client() {
  return new OpenAI({ baseURL: SERVE + "/v1", apiKey: "unused", maxRetries: 0,
                      timeout: 60000 });
}

// The texts a provider request carried, as "role:content".
function texts(req) {
  return req.messages.map((m) => m.role + ":" + (m.content ?? ""));
}

// The text of a response's message items, as the SDK's create() computes
// `output_text` (retrieve() and the stream helper leave it out).
function joined(res) {
  return res.output.filter((i) => i.type === "message")
    .flatMap((i) => i.content).filter((c) => c.type === "output_text")
    .map((c) => c.text).join("");
}

// A provider reply as SSE chunks: text, then one tool call.
function streamedTool(text, [id, name, args]) {
  const chunk = (delta, finish = null) => "data: " + JSON.stringify({
    id: "p1", object: "chat.completion.chunk", model: "m",
    choices: [{ index: 0, delta, finish_reason: finish }] }) + "\n\n";
  return [chunk({ role: "assistant", content: text }),
          chunk({ tool_calls: [{ index: 0, id, type: "function",
                                 function: { name, arguments: JSON.stringify(args) } }] }),
          chunk({}, "tool_calls"), "data: [DONE]\n\n"];
}

async function sessions() {
  const r = await fetch(SERVE + "/v1/sessions?limit=1000");
  return (await r.json()).data;
}

const scenarios = {
  async plain() {
    await control("/__reset", {});
    await script({ body: reply("Hello from the provider", [], [11, 4]) });
    const c = client();
    const res = await c.responses.create({
      model: "m", instructions: "Be brief.", input: "Say hello",
      metadata: { run: "plain" } });
    check(res.object === "response", "object " + res.object);
    check(/^resp_[0-9a-f]{48}$/.test(res.id), "id " + res.id);
    check(res.status === "completed", "status " + res.status);
    check(res.output_text === "Hello from the provider",
          "output_text " + JSON.stringify(res.output_text));
    check(res.output.length === 1 && res.output[0].type === "message"
          && res.output[0].role === "assistant"
          && res.output[0].content[0].type === "output_text",
          "output " + JSON.stringify(res.output));
    check(res.usage.input_tokens === 11 && res.usage.output_tokens === 4
          && res.usage.total_tokens === 15, "usage " + JSON.stringify(res.usage));
    check(res.instructions === "Be brief." && res.metadata.run === "plain",
          "echoed fields");
    check(res.previous_response_id === null && res.error === null, "nulls");
    check(typeof res.created_at === "number" && res.model === "m", "created_at, model");
    const sent = (await providerRequests())[0];
    const user = sent.messages.filter((m) => m.role === "user").pop();
    check(user.content.includes("Be brief.") && user.content.includes("Say hello"),
          "instructions reach the model: " + JSON.stringify(user));

    // Retrieve: the stored object, as created.
    const got = await c.responses.retrieve(res.id);
    check(got.id === res.id && joined(got) === "Hello from the provider"
          && got.status === "completed", "retrieve " + JSON.stringify(got));

    // An input array of messages: earlier items are history.
    await script({ body: reply("Paris, as before.") });
    const r2 = await c.responses.create({ model: "m", input: [
      { role: "developer", content: "Answer in English." },
      { role: "user", content: [{ type: "input_text", text: "Capital of France?" }] },
      { role: "assistant", content: [{ type: "output_text", text: "Paris." }] },
      { type: "message", role: "user", content: "And again?" }] });
    check(r2.output_text === "Paris, as before.", "array input answer");
    const t2 = texts((await providerRequests()).pop());
    check(t2.includes("assistant:Paris.")
          && t2.some((t) => t.startsWith("user:Answer in English.")
                            && t.includes("Capital of France?")),
          "earlier items reach the model: " + JSON.stringify(t2));
    check(t2[t2.length - 1] === "user:And again?", "the prompt is last");

    // Delete: gone afterwards.
    await c.responses.del(r2.id);
    try {
      await c.responses.retrieve(r2.id);
      throw new Error("a deleted response was retrieved");
    } catch (e) {
      check(e instanceof OpenAI.NotFoundError, "404 after delete, got " + e);
    }
  },

  async streamed() {
    await control("/__reset", {});
    await script({ chunks: streamed(["Str", "eam", "ed!"]),
                   headers: { "Content-Type": "text/event-stream" } });
    const c = client();
    const stream = await c.responses.create({
      model: "m", input: "Stream please", stream: true });
    const events = [];
    let text = "";
    for await (const ev of stream) {
      events.push(ev);
      if (ev.type === "response.output_text.delta") text += ev.delta;
    }
    const types = events.map((e) => e.type);
    const expect = ["response.created", "response.in_progress",
                    "response.output_item.added", "response.content_part.added",
                    "response.output_text.delta", "response.output_text.delta",
                    "response.output_text.delta", "response.output_text.done",
                    "response.content_part.done", "response.output_item.done",
                    "response.completed"];
    check(JSON.stringify(types) === JSON.stringify(expect),
          "event order " + JSON.stringify(types));
    check(events.every((e, i) => e.sequence_number === i), "sequence numbers");
    check(text === "Streamed!", "deltas " + JSON.stringify(text));
    const done = events.find((e) => e.type === "response.output_text.done");
    check(done.text === "Streamed!", "done text");
    const fin = events[events.length - 1].response;
    check(fin.status === "completed" && fin.usage.total_tokens === 12,
          "final object " + JSON.stringify(fin));
    check(fin.output[0].content[0].text === "Streamed!", "final output");
    const created = events[0].response;
    check(created.status === "in_progress" && created.id === fin.id
          && created.output.length === 0, "created " + JSON.stringify(created));
    const item = events[2].item;
    check(item.type === "message" && item.status === "in_progress"
          && events[4].item_id === item.id && events[4].output_index === 0,
          "item ids");

    // The SDK's own stream helper accumulates the same events.
    await script({ chunks: streamed(["Hel", "per"]),
                   headers: { "Content-Type": "text/event-stream" } });
    const helper = c.responses.stream({ model: "m", input: "Again" });
    const final = await helper.finalResponse();
    check(joined(final) === "Helper" && final.status === "completed",
          "stream helper " + JSON.stringify(final));
    // The stored copy of a streamed response.
    const got = await c.responses.retrieve(final.id);
    check(joined(got) === "Helper", "retrieve streamed");
  },

  async chain() {
    await control("/__reset", {});
    const c = client();
    await script({ body: reply("Noted: the word is OSPREY.") });
    const first = await c.responses.create({ model: "m", input: "Remember OSPREY." });
    await script({ body: reply("The word was OSPREY.") });
    const second = await c.responses.create({
      model: "m", input: "What was the word?", previous_response_id: first.id });
    check(second.output_text === "The word was OSPREY.", "second answer");
    check(second.previous_response_id === first.id, "previous id echoed");
    check(second.mibyan.session_id === first.mibyan.session_id,
          "the latest response continues its session");
    const t2 = texts((await providerRequests()).pop());
    check(t2.includes("user:Remember OSPREY.")
          && t2.includes("assistant:Noted: the word is OSPREY."),
          "the first turn reaches the provider: " + JSON.stringify(t2));

    // From the first response again (no longer the latest): a branch, a
    // new session with the history up to the first response only.
    await script({ body: reply("Branched.") });
    const third = await c.responses.create({
      model: "m", input: "Another question", previous_response_id: first.id });
    check(third.output_text === "Branched.", "branch answer");
    check(third.mibyan.session_id !== first.mibyan.session_id, "branch session");
    const t3 = texts((await providerRequests()).pop());
    check(t3.includes("user:Remember OSPREY.")
          && !t3.includes("user:What was the word?"),
          "the branch holds the history up to the first response: " + JSON.stringify(t3));
    // Streamed continuation of the branch.
    await script({ chunks: streamed(["Still ", "OSPREY."]),
                   headers: { "Content-Type": "text/event-stream" } });
    const s = await c.responses.create({ model: "m", input: "Word?", stream: true,
                                         previous_response_id: third.id });
    let fin = null;
    for await (const ev of s) if (ev.type === "response.completed") fin = ev.response;
    check(fin && fin.output[0].content[0].text === "Still OSPREY."
          && fin.mibyan.session_id === third.mibyan.session_id, "streamed continuation");
    const t4 = texts((await providerRequests()).pop());
    check(t4.includes("user:Another question") && t4.includes("assistant:Branched."),
          "the continuation sees the branch: " + JSON.stringify(t4));
    if (STATE)
      fs.writeFileSync(STATE, JSON.stringify({ id: second.id, session: second.mibyan.session_id }));
  },

  async tools() {
    await control("/__reset", {});
    await script({ chunks: streamedTool("Let me look.", ["call_r", "read_file",
                                        { path: process.env.TOOL_FILE }]),
                   headers: { "Content-Type": "text/event-stream" } });
    await script({ body: reply("", [["call_x", "execute_code",
                                     { code: "print(6 * 7)" }]]) });
    await script({ body: reply("The file says SERVE-MARKER and 6*7 is 42.") });
    const c = client();
    const stream = await c.responses.create({
      model: "m", input: "Read the file and compute.", stream: true });
    const events = [];
    for await (const ev of stream) events.push(ev);
    const fin = events[events.length - 1];
    check(fin.type === "response.completed", "completed, got " + fin.type);
    const items = fin.response.output;
    const kinds = items.map((i) => i.type + (i.name ? ":" + i.name : ""));
    check(JSON.stringify(kinds) === JSON.stringify(
            ["message", "mibyan_tool_call:read_file", "mibyan_tool_call:execute_code",
             "message"]), "output items " + JSON.stringify(kinds));
    check(items[0].content[0].text === "Let me look.", "text before the tool call");
    check(items[1].status === "completed" && items[1].result.includes("SERVE-MARKER")
          && JSON.parse(items[1].arguments).path === process.env.TOOL_FILE,
          "read_file item " + JSON.stringify(items[1]));
    check(items[2].result.includes("42") && items[2].call_id === "call_x",
          "execute_code item " + JSON.stringify(items[2]));
    check(fin.response.output_text === undefined
          || typeof fin.response.output_text === "string", "no crash on extension items");
    const added = events.filter((e) => e.type === "response.output_item.added"
                                      && e.item.type === "mibyan_tool_call");
    check(added.length === 2 && added[0].item.status === "in_progress", "added events");
    check(events.every((e, i) => e.sequence_number === i), "sequence numbers");

    // Plain: the same items, and output_text (the SDK's) joins the messages.
    await control("/__reset", {});
    await script({ body: reply("", [["call_x", "execute_code",
                                     { code: "print(6 * 7)" }]], [20, 5]) });
    await script({ body: reply("Done: 42.", [], [30, 7]) });
    const res = await c.responses.create({ model: "m", input: "Again, please." });
    check(res.output_text === "Done: 42.", "plain output_text " + JSON.stringify(res.output_text));
    check(res.output.length === 2 && res.output[0].type === "mibyan_tool_call"
          && res.output[0].result.includes("42"), "plain items " + JSON.stringify(res.output));
    check(res.usage.input_tokens === 50 && res.usage.output_tokens === 12, "summed usage");
    // The SDK's stream helper accepts the extension items too.
    await script({ body: reply("", [["call_y", "execute_code",
                                     { code: "print(1 + 1)" }]]) });
    await script({ body: reply("Two.") });
    const final = await c.responses.stream({ model: "m", input: "1+1?" }).finalResponse();
    check(joined(final) === "Two." && final.output[0].type === "mibyan_tool_call",
          "stream helper with tools " + JSON.stringify(final.output));
  },

  async nostore() {
    await control("/__reset", {});
    const c = client();
    const before = (await sessions()).length;
    await script({ body: reply("Forgotten.") });
    const res = await c.responses.create({ model: "m", input: "Do not keep", store: false });
    check(res.output_text === "Forgotten." && res.store === false, "store:false answer");
    try {
      await c.responses.retrieve(res.id);
      throw new Error("a store:false response was retrieved");
    } catch (e) {
      check(e instanceof OpenAI.NotFoundError, "404, got " + e);
    }
    // store:false after a stored response: the history is used, nothing kept.
    await script({ body: reply("Kept.") });
    const kept = await c.responses.create({ model: "m", input: "Keep RAVEN." });
    const after1 = (await sessions()).length;
    await script({ body: reply("RAVEN, without keeping.") });
    const r2 = await c.responses.create({ model: "m", input: "Word?", store: false,
                                          previous_response_id: kept.id });
    check(r2.output_text === "RAVEN, without keeping.", "stateless continuation");
    const t = texts((await providerRequests()).pop());
    check(t.includes("user:Keep RAVEN."), "history reaches the model " + JSON.stringify(t));
    // Streamed store:false.
    await script({ chunks: streamed(["gone"]), headers: { "Content-Type": "text/event-stream" } });
    const s = await c.responses.create({ model: "m", input: "x", store: false, stream: true });
    for await (const _ of s) { /* drain */ }
    // The stateless sessions are deleted right after the answers.
    let n = -1;
    for (let i = 0; i < 200; ++i) {
      n = (await sessions()).length;
      if (n === after1) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    check(n === after1 && after1 === before + 1,
          "only the stored response's session is left: " + before + " " + after1 + " " + n);
    // The continued response was not changed: still the latest of its session.
    await script({ body: reply("Continued.") });
    const r3 = await c.responses.create({ model: "m", input: "More",
                                          previous_response_id: kept.id });
    check(r3.mibyan.session_id === kept.mibyan.session_id, "kept session continues");
  },

  async restarted() {
    // After a restart of the server: the response of the `chain` run is
    // still there, and a continuation sees its history.
    const state = JSON.parse(fs.readFileSync(STATE, "utf8"));
    await control("/__reset", {});
    const c = client();
    const got = await c.responses.retrieve(state.id);
    check(got.id === state.id && joined(got) === "The word was OSPREY.",
          "retrieve after restart " + JSON.stringify(got));
    await script({ body: reply("OSPREY, after the restart.") });
    const res = await c.responses.create({ model: "m", input: "Word?",
                                           previous_response_id: state.id });
    check(res.mibyan.session_id === state.session, "continues the stored session");
    const t = texts((await providerRequests()).pop());
    check(t.includes("user:Remember OSPREY.") && t.includes("user:What was the word?"),
          "the stored history reaches the provider: " + JSON.stringify(t));
  },

  async failures() {
    // The provider refuses (400, not retried): the turn fails. The plain
    // answer is a response with status "failed" (stored); the stream ends
    // with response.failed.
    await control("/__reset", {});
    await scriptRefusals(2);
    const c = client();
    const res = await c.responses.create({ model: "m", input: "fail" });
    check(res.status === "failed" && res.error && res.error.code === "server_error"
          && res.error.message.length > 0, "failed response " + JSON.stringify(res));
    const got = await c.responses.retrieve(res.id);
    check(got.status === "failed", "the failed response is stored");
    const s = await c.responses.create({ model: "m", input: "fail", stream: true });
    const types = [];
    let last = null;
    for await (const ev of s) { types.push(ev.type); last = ev; }
    check(types[0] === "response.created" && last.type === "response.failed"
          && last.response.status === "failed", "stream " + JSON.stringify(types));
  },

  async manual() {
    // Context managed by the client (store: false): an earlier response's
    // output, its mibyan_tool_call items included, sent back as input.
    await control("/__reset", {});
    await script({ body: reply("", [["call_x", "execute_code", { code: "print(6 * 7)" }]]) });
    await script({ body: reply("The answer is 42.") });
    const c = client();
    const first = await c.responses.create({ model: "m", input: "Compute 6*7.", store: false });
    check(first.output.length === 2 && first.output[0].type === "mibyan_tool_call",
          "first output " + JSON.stringify(first.output));
    await script({ body: reply("Manual continuation.") });
    const second = await c.responses.create({ model: "m", store: false, input: [
      { role: "user", content: "Compute 6*7." }, ...first.output,
      { role: "user", content: "And doubled?" }] });
    check(second.output_text === "Manual continuation.", "second answer");
    const sent = (await providerRequests()).pop().messages;
    const call = sent.find((m) => m.role === "assistant" && m.tool_calls);
    check(call && call.tool_calls[0].id === "call_x"
          && call.tool_calls[0].function.name === "execute_code",
          "the tool call reaches the model: " + JSON.stringify(sent));
    const result = sent.find((m) => m.role === "tool");
    check(result && result.tool_call_id === "call_x" && result.content.includes("42"),
          "the tool result reaches the model: " + JSON.stringify(result));
    const t = texts({ messages: sent });
    check(t.includes("assistant:The answer is 42.") && t[t.length - 1] === "user:And doubled?",
          "order " + JSON.stringify(t));
  },

  async keepalive() {
    // server.keepalive_s is 1: the slow stream carries ": keep-alive"
    // comments between the events, which the stock client skips.
    await control("/__reset", {});
    await script({ body: reply("Slow streamed answer."), delay_ms: 2500 });
    const s = await client().responses.create({ model: "m", input: "slow", stream: true });
    const types = [];
    let fin = null;
    for await (const ev of s) {
      types.push(ev.type);
      if (ev.type === "response.completed") fin = ev.response;
    }
    check(fin && joined(fin) === "Slow streamed answer.", "slow stream " + JSON.stringify(types));
  },

  async errors() {
    await control("/__reset", {});
    const c = client();
    const expect = async (what, status, fn) => {
      try {
        await fn();
      } catch (e) {
        check(e instanceof OpenAI.APIError && e.status === status,
              what + ": " + status + " expected, got " + e.status + " " + e.message);
        return e;
      }
      throw new Error(what + ": no error");
    };
    const e1 = await expect("unknown previous id", 404, () => c.responses.create({
      model: "m", input: "x", previous_response_id: "resp_" + "0".repeat(48) }));
    check(e1.code === "response_not_found", "code " + e1.code);
    const e2 = await expect("function tools", 400, () => c.responses.create({
      model: "m", input: "x",
      tools: [{ type: "function", name: "f", parameters: {}, strict: true }] }));
    check(e2.param === "tools" && e2.code === "unsupported_parameter", "tools param");
    const e3 = await expect("image input", 400, () => c.responses.create({
      model: "m", input: [{ role: "user", content: [
        { type: "input_text", text: "look" },
        { type: "input_image", image_url: "https://example.com/x.png", detail: "auto" }] }] }));
    check(e3.param === "input[0].content[1].type", "image param " + e3.param);
    await expect("function_call_output item", 400, () => c.responses.create({
      model: "m", input: [{ type: "function_call_output", call_id: "c", output: "1" }] }));
    await expect("unknown model", 404, () => c.responses.create({ model: "gpt-x", input: "x" }));
    await expect("retrieve unknown", 404, () => c.responses.retrieve("resp_" + "1".repeat(48)));
    await expect("retrieve malformed", 400, () => c.responses.retrieve("not-a-response"));
    check((await providerRequests()).length === 0, "no turn ran");
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
