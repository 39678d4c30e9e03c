// A streamed chat completion through a gateway that does not hold the
// session's lease (docs/cluster.md, "Streaming of forwarded turns"), with
// the stock `openai` npm client. Run by tests/gateway_turns_test.cpp as
//   node gateway_stream_client.mjs forwarded
// with SERVE_URL (the non-holder `serve --join` gateway) and SESSION in the
// environment; the provider streams "Str", "eam", "ed!" for this turn.
// Prints "OK forwarded" and exits 0, or prints the failure and exits 1.
import OpenAI from "openai";

function check(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
}

const scenarios = {
  async forwarded() {
    const c = new OpenAI({ baseURL: process.env.SERVE_URL + "/v1",
                           apiKey: "unused", maxRetries: 0, timeout: 60000,
                           defaultHeaders: { "X-Mibyan-Session":
                                               process.env.SESSION } });
    const stream = await c.chat.completions.create({
      model: "m", stream: true,
      messages: [{ role: "user", content: "stream through the holder" }] });
    let text = "", deltas = 0, finish = null;
    for await (const chunk of stream) {
      check(chunk.object === "chat.completion.chunk", "chunk object");
      for (const ch of chunk.choices) {
        if (ch.delta.content) { text += ch.delta.content; ++deltas; }
        if (ch.finish_reason) finish = ch.finish_reason;
      }
    }
    check(text === "Streamed!", "streamed text " + JSON.stringify(text));
    // Forwarded answers used to come whole, as one chunk.
    check(deltas >= 3, "several content deltas, got " + deltas);
    check(finish === "stop", "finish_reason " + finish);
  },
};

const name = process.argv[2];
try {
  await scenarios[name]();
  console.log("OK " + name);
} catch (e) {
  console.log("FAILED " + name + ": " + (e && e.stack || e));
  process.exit(1);
}
