// The pieces the node clients (serve_client.mjs, responses_client.mjs,
// dashboard_browser.mjs) share: a failing check, the replies they script
// into the scripted provider server (tests/support/http_server.py, at
// PROVIDER_URL) and that server's control endpoints. Pure helpers; the
// provider functions reject when the server cannot be reached.

const PROVIDER = process.env.PROVIDER_URL;

// Throws "check failed: <what>" unless `cond` holds.
export function check(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
}

// A provider reply (OpenAI chat, non-streaming) with optional tool calls
// ([id, name, args] each) and usage [prompt, completion] tokens; `extra`
// adds usage fields (e.g. a gateway's `cost`).
export function reply(content, calls = [], usage = [10, 3], extra = {}) {
  const msg = { role: "assistant", content };
  if (calls.length)
    msg.tool_calls = calls.map(([id, name, args]) => ({
      id, type: "function", function: { name, arguments: JSON.stringify(args) } }));
  return JSON.stringify({
    id: "p1", object: "chat.completion", model: "m",
    choices: [{ index: 0, message: msg,
                finish_reason: calls.length ? "tool_calls" : "stop" }],
    usage: { prompt_tokens: usage[0], completion_tokens: usage[1],
             total_tokens: usage[0] + usage[1], ...extra } });
}

// A provider reply as SSE chunks, one per piece of text, then a "stop"
// chunk carrying usage [prompt, completion] and [DONE].
export function streamed(pieces, usage = [7, 5]) {
  const chunks = pieces.map((p) => "data: " + JSON.stringify({
    id: "p1", object: "chat.completion.chunk", model: "m",
    choices: [{ index: 0, delta: { content: p }, finish_reason: null }] }) + "\n\n");
  chunks.push("data: " + JSON.stringify({
    id: "p1", object: "chat.completion.chunk", model: "m",
    choices: [{ index: 0, delta: {}, finish_reason: "stop" }],
    usage: { prompt_tokens: usage[0], completion_tokens: usage[1],
             total_tokens: usage[0] + usage[1] } }) + "\n\n");
  chunks.push("data: [DONE]\n\n");
  return chunks;
}

// A control request to the provider server: a GET, or a POST of `body`.
export async function control(path, body) {
  const r = await fetch(PROVIDER + path, body === undefined ? {} : {
    method: "POST", body: JSON.stringify(body) });
  return r.json();
}

// Queues one scripted chat-completions answer (`spec`: body, chunks, ...).
export async function script(spec) {
  await control("/__script", { path: "/v1/chat/completions", status: 200, ...spec });
}

// Queues `times` refusals: 400 with an OpenAI error body ("bad request
// upstream"), which serve does not retry, so each fails one turn.
export async function scriptRefusals(times) {
  const refusal = JSON.stringify({ error: { message: "bad request upstream",
                                            type: "invalid_request_error" } });
  await script({ status: 400, body: refusal, times });
}

// The parsed bodies of the chat-completion requests the provider received.
export async function providerRequests() {
  const reqs = await control("/__requests");
  return reqs.filter((r) => r.path.startsWith("/v1/chat/completions"))
             .map((r) => JSON.parse(r.body));
}
