// File: providers/openai_codec.hpp
//
// The OpenAI-compatible Chat Completions wire format (docs/providers.md):
// building the request body, parsing a whole JSON response, and assembling
// a streamed (SSE) response chunk by chunk. Pure data transformation: no
// I/O, no CAF. The provider actor owns the transfer and feeds bytes through
// `sse_parser` into `openai_stream`.
//
// Error contract: nothing here throws. Every failure (HTTP error body,
// in-stream error object, malformed JSON, truncated or empty stream) ends in
// a `chat_response` whose `error` is non-empty and whose `retryable` says
// whether the same request may succeed later. The other fields of an error
// response hold what arrived before the failure, for diagnostics only.
//
// End-of-stream policy (docs/providers.md, "Streaming"): no finish reason and nothing
// received -> retryable "empty stream" error; unparseable tool arguments
// without a finish reason -> no tool calls, finish_reason "length"; with a
// finish reason -> calls kept verbatim, finish_reason "length"; no finish
// reason and no [DONE] -> retryable "connection dropped" error. A stream
// with content that ends in [DONE] but never names a finish reason is
// accepted with finish_reason "" (the HF router does this, corpus 064).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/chat.hpp"
#include "base/sse_parser.hpp"
#include "providers/stream_accumulator_base.hpp"
#include "base/json.hpp"

namespace mibyan::openai {

// -- request -----------------------------------------------------------------

/// Everything a Chat Completions request needs besides the messages.
struct request_options {
  /// Model id; required.
  std::string model;
  /// Tools as an array of `{name, description, parameters}` objects or of
  /// already wrapped `{"type": "function", "function": {...}}` objects. They
  /// are sent sorted by name, duplicates dropped; the key is omitted when
  /// there are none. A missing `parameters` becomes an empty object schema.
  json::value tools;
  /// When not empty, used instead of `tools`: the text render_tools
  /// returned for them (a caller that sends the same tools with every
  /// request renders them once).
  std::string tools_json;
  /// Sets `stream: true` and `stream_options.include_usage`.
  bool stream = true;
  /// Sends `stream_options: {"include_usage": true}` when streaming (off only
  /// for endpoints that reject it).
  bool include_usage = true;
  /// Output limit, sent only when set.
  std::optional<int64_t> max_tokens;
  /// Name the limit `max_completion_tokens` (see
  /// `wants_max_completion_tokens`) instead of `max_tokens`.
  bool max_completion_tokens = false;
  /// Sampling temperature, sent only when set.
  std::optional<double> temperature;
  /// When non-empty: `reasoning: {"enabled": true, "effort": ...}` (only for
  /// providers that support it).
  std::string reasoning_effort;
  /// Echo assistant reasoning as `reasoning_content` (DeepSeek, Kimi).
  bool echo_reasoning_content = false;
  /// Keys merged into the top level of the body last, overriding ours (the
  /// "extra body" escape hatch: `provider`, `service_tier`, ...). Ignored
  /// unless an object.
  json::value extra_body;
};

/// Returns whether the output limit must be called `max_completion_tokens`:
/// for api.openai.com, Azure and Copilot endpoints and for gpt-4o, gpt-4.1,
/// gpt-5 and o-series models.
bool wants_max_completion_tokens(std::string_view base_url,
                                 std::string_view model);

/// Returns the wire form of one message (docs/providers.md, "Messages on the wire"). System messages
/// use the role `developer` when the model name contains "gpt-5" or
/// "codex". Assistant tool-call arguments are sent as given ("" becomes
/// "{}"); canonicalising them is the agent loop's job.
json::value encode_message(const chat_message& msg,
                           const request_options& opts);

/// Returns the JSON text build_request writes as the value of "tools" for
/// `tools` (see request_options::tools), or "" when there are none.
std::string render_tools(const json::value& tools);

/// Returns the request body (compact JSON text) for `messages`.
std::string build_request(const request_options& opts,
                          const std::vector<chat_message>& messages);

// -- responses ---------------------------------------------------------------

/// Parses a whole (non-streaming) response body received with HTTP
/// `status`. Non-2xx statuses, error bodies, non-JSON bodies and bodies
/// without `choices` give an error response.
chat_response parse_response(int status, std::string_view body);

/// Assembles a streamed response from SSE events.
///
/// Feed every event in order with `add` (or raw bytes with `feed`), then
/// call `finish` once. An event is a JSON chunk, `[DONE]` (sets `done`), or
/// an error; events after a fatal problem (malformed JSON) are ignored.
/// Callbacks run synchronously inside `add`/`feed`; `on_reasoning` also
/// receives `reasoning_details` text while no plain reasoning field came.
///
/// Thread safety: none; one owner.
class stream_accumulator : public stream_accumulator_base {
public:
  // -- constructors ----------------------------------------------------------

  /// `max_event_bytes` bounds one SSE event when bytes are fed with `feed`.
  explicit stream_accumulator(
    size_t max_event_bytes = sse_parser::default_max_event_bytes);

  // -- input -----------------------------------------------------------------

  /// Ends the stream and returns the response (see docs/providers.md, "Streaming", the end of
  /// stream"). `http_status` is copied into the response. Call once.
  chat_response finish(int http_status = 200);

  // -- observers -------------------------------------------------------------

  /// Returns the number of JSON chunks consumed.
  uint64_t chunks() const { return chunks_; }

protected:
  void add_data(std::string_view data, const std::string& event) override;

private:
  struct slot {
    int64_t index = 0;
    std::string id;
    std::string name;
    std::string arguments;
  };

  void add_chunk(const json::value& chunk, const std::string& event);
  void add_delta(const json::value& delta);
  void add_tool_call(const json::value& tc);

  std::string content_;
  std::string reasoning_;
  std::string details_reasoning_; // reasoning_details text (fallback only)
  std::vector<slot> slots_;
  std::vector<std::pair<int64_t, size_t>> open_slot_; // index -> slot
  std::string finish_reason_;
  std::string model_;
  token_usage usage_;
  bool have_usage_ = false;
  uint64_t chunks_ = 0;
};

// -- shared helpers ----------------------------------------------------------

/// Reads a Chat Completions `usage` object (prompt/completion tokens, cached
/// and reasoning token details, DeepSeek cache hit/miss counts).
token_usage read_usage(const json::value& usage);

} // namespace mibyan::openai
