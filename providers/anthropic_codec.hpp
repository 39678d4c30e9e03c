// File: providers/anthropic_codec.hpp
//
// The native Anthropic Messages API wire format (docs/providers.md, "Anthropic Messages"): request
// translation from our OpenAI-shaped conversation, whole-response parsing
// and the streaming event accumulator. Pure data transformation: no I/O, no
// CAF.
//
// Mapping notes:
// * `content` is the concatenation of all `text` blocks with no separator:
//   a cited answer arrives as several text blocks that split sentences, and
//   the concatenation equals what the text callback streamed.
// * `reasoning` is the `thinking` blocks joined with "\n\n" (the callback
//   receives the same separator). Redacted thinking is not text.
// * Server tools (`server_tool_use`, `web_search_tool_result`, ...) run on
//   Anthropic's side and are not returned as tool calls.
// * stop_reason -> finish_reason: end_turn/stop_sequence -> stop, tool_use ->
//   tool_calls, max_tokens/model_context_window_exceeded -> length, refusal
//   -> content_filter; anything else is passed through.
//
// Error contract: nothing here throws; failures end in a `chat_response`
// with a non-empty `error` (and the partial fields that arrived before it,
// for diagnostics only).
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

namespace mibyan::anthropic {

// -- request -----------------------------------------------------------------

/// The output ceiling used when neither the caller nor the model profile
/// gives one.
constexpr int64_t default_max_output_tokens = 128000;

/// Everything a Messages request needs besides the conversation.
struct request_options {
  /// Model id; required.
  std::string model;
  /// Tools as `{name, description, parameters | input_schema}` objects or
  /// OpenAI-wrapped `{"type": "function", "function": {...}}` objects. Sent
  /// as `{name, description, input_schema}`, sorted by name, duplicates
  /// dropped.
  json::value tools;
  /// "" or "auto" -> {"type": "auto"}; "required" -> {"type": "any"};
  /// "none" -> tools omitted; anything else names the tool to force.
  std::string tool_choice;
  /// Sets `stream: true`.
  bool stream = true;
  /// Output limit; 0 means `default_max_output_tokens`. Clamped to
  /// `context_length - 1` when the context length is known (> 0).
  int64_t max_tokens = 0;
  int64_t context_length = 0;
  /// Sampling temperature, sent only when set (legacy thinking forces 1).
  std::optional<double> temperature;
  /// "" (no thinking) or low, medium, high, xhigh, max. Ignored for models
  /// without thinking (see `thinking_style_for`).
  std::string reasoning_effort;
  /// Send an assistant message's reasoning as a leading `thinking` block.
  /// Off by default: we keep no signatures, and Anthropic's own endpoint
  /// rejects unsigned thinking blocks; compatible endpoints may want it.
  bool echo_reasoning = false;
  /// Prompt caching: `cache_control` breakpoints on the system prompt and
  /// the last 3 messages; `cache_ttl_1h` adds "ttl": "1h".
  bool cache_control = false;
  bool cache_ttl_1h = false;
  /// Keys merged into the top level of the body last. Ignored unless an
  /// object.
  json::value extra_body;
};

/// How a model is asked to think.
enum class thinking_style {
  /// No thinking parameter (Haiku models).
  none,
  /// `thinking: {"type": "adaptive"}` + `output_config.effort`.
  adaptive,
  /// `thinking: {"type": "enabled", "budget_tokens": N}` (3.x, 4.0, 4.1).
  legacy,
};

/// Returns the thinking style for `model` (bare or "anthropic/" prefixed).
thinking_style thinking_style_for(std::string_view model);

/// Returns the Messages API `messages` array for `messages` and stores the
/// system prompt (system and developer messages joined with "\n\n") in
/// `system`. Applies the translation table of docs/providers.md, "Anthropic Messages", removes
/// orphan tool_use/tool_result blocks and merges consecutive same-role
/// messages.
json::value encode_messages(const std::vector<chat_message>& messages,
                            const request_options& opts, std::string& system);

/// Returns the request body (compact JSON text).
std::string build_request(const request_options& opts,
                          const std::vector<chat_message>& messages);

// -- responses ---------------------------------------------------------------

/// Returns our finish reason for an Anthropic stop_reason.
std::string map_stop_reason(std::string_view stop_reason);

/// Reads an Anthropic `usage` object.
token_usage read_usage(const json::value& usage);

/// Parses a whole (non-streaming) Messages response received with HTTP
/// `status`.
chat_response parse_response(int status, std::string_view body);

/// Assembles a streamed Messages response from SSE events (message_start,
/// content_block_start/delta/stop, message_delta, message_stop, ping,
/// error). Feed events with `add` or raw bytes with `feed`, then call
/// `finish` once; `done` says whether `message_stop` arrived. Callbacks run
/// synchronously inside `add`/`feed`; `on_reasoning` receives every
/// thinking fragment and "\n\n" between thinking blocks.
///
/// Thread safety: none; one owner.
class stream_accumulator : public stream_accumulator_base {
public:
  explicit stream_accumulator(
    size_t max_event_bytes = sse_parser::default_max_event_bytes);

  /// Ends the stream and returns the response. Call once.
  chat_response finish(int http_status = 200);

  /// Returns the number of JSON events consumed.
  uint64_t events() const { return events_; }

protected:
  void add_data(std::string_view data, const std::string& event) override;

private:
  struct block {
    int64_t index = 0;
    std::string type;
    std::string text;
    std::string thinking;
    std::string signature;
    std::string partial_json;
    json::value input;
    std::string id;
    std::string name;
  };

  block& block_at(int64_t index, std::string_view type_hint);
  void add_event(const json::value& ev, const std::string& sse_name);
  void merge_usage(const json::value& usage);
  void append_text(block& b, std::string_view s);
  void append_thinking(block& b, std::string_view s);

  std::vector<block> blocks_; // in start order
  json::value usage_;         // message_start usage updated by deltas
  std::string stop_reason_;
  std::string model_;
  bool tool_started_ = false;
  bool thinking_seen_ = false;
  uint64_t events_ = 0;
};

} // namespace mibyan::anthropic
