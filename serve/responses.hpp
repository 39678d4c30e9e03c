// File: serve/responses.hpp
//
// The OpenAI Responses API wire format as `mibyan serve` speaks it
// (docs/serve.md, "Responses API"): parsing a POST /v1/responses body, and
// `response_builder`, which turns an agent turn's events (text deltas,
// tool activity, its end) into the response object and, when streaming,
// the SSE events with their sequence numbers. Pure functions and a plain
// class on text and json::value; no I/O, not thread-safe (one builder per
// request, used on its connection's strand).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.hpp"
#include "base/status.hpp"
#include "messages/chat.hpp"
#include "serve/openai_chat.hpp"

namespace mibyan {

/// A parsed POST /v1/responses body.
struct responses_request {
  std::string model;
  bool stream = false;
  /// Keep the response and its session (default true).
  bool store = true;
  /// "" when absent.
  std::string previous_response_id;
  /// The `instructions` text (null in the object when absent).
  json::value instructions;
  /// The `metadata` object ({} when absent).
  json::value metadata = json::value::make_object();
  /// The last input item (role user): the turn's prompt, with the
  /// instructions and the text of system/developer items in front.
  std::string prompt;
  /// The user and assistant items before the last one (text only).
  std::vector<chat_message> earlier;
};

/// Why a body was refused: the message for the client, the error code
/// ("invalid_request" for malformed input, "unsupported_parameter" for a
/// field Mibyan does not offer, "too_many_items") and the offending
/// field ("" when none), e.g. "input[1].content[0].type".
struct responses_refusal {
  std::string message;
  std::string code;
  std::string param;
};

/// Parses `body`, whose `input` array may have at most `max_items`
/// elements (counted on the raw text before any item is built). Returns
/// false and fills `why` when the request is refused.
bool parse_responses_request(std::string_view body, responses_request& out,
                             size_t max_items, responses_refusal& why);

/// "resp_" followed by 48 hex digits, unique in the process.
std::string response_id();

/// The response id of Idempotency-Key `key` (docs/serve.md, "Idempotent
/// responses"): "resp_" followed by 48 hex digits of a SHA-256 of the key,
/// so a retry finds the first attempt's response on any gateway.
std::string keyed_response_id(const std::string& key);
/// The session a keyed request that starts a session (no
/// previous_response_id, or a branch) runs in: "resp-" followed by 32 hex
/// digits of the same digest.
std::string keyed_session_id(const std::string& key);
/// The SSE events of a stored response object, for a replay:
/// response.created and response.in_progress (the object with status
/// in_progress and no output), each output item added and done (a message
/// with its text as one delta), then response.<status> with the object.
std::string replay_response_events(const json::value& object);

/// {"error":{"message","type","code","param"}}.
std::string error_body_param(const std::string& message,
                             const std::string& type, const std::string& code,
                             const std::string& param);

/// How a turn ended, for the response object.
struct response_end {
  /// "completed", "failed" or "incomplete".
  std::string status = "completed";
  /// The final answer (completed) or "".
  std::string answer;
  /// Why it failed or stopped early ("" when completed).
  std::string error;
  completion_usage usage;
  /// The "mibyan" extension object (session_id, api_calls, ...).
  json::value ext;
};

/// Builds one response: its output items from the turn's events, and the
/// SSE events a streaming client gets (each `event: TYPE` + `data: JSON`
/// with a sequence_number from 0). Output items: "message" (assistant
/// text; one per model round that wrote text) and the extension item
/// "mibyan_tool_call" ({"id","type","call_id","name","arguments",
/// "status","result","duration_us"}). Reasoning is not reported.
class response_builder {
public:
  /// `echo` holds the request fields the object repeats: instructions,
  /// metadata, previous_response_id (string or null), store (bool).
  response_builder(std::string id, int64_t created_at, std::string model,
                   json::value echo, bool events);

  /// response.created and response.in_progress.
  std::string start();
  /// A text fragment of the current round.
  std::string text(const std::string& delta);
  /// Tool activity: a call starts (an in-progress item) or ends (the item
  /// completes with its result and duration).
  std::string tool(const tool_event& ev);
  /// The provider call was retried: the text since the last tool event is
  /// void (its message item ends with status "incomplete").
  std::string restart();
  /// A Mibyan extension event (type "mibyan.<name>", e.g.
  /// mibyan.approval_required) carrying `data`'s members; stock clients
  /// ignore it. Numbered like the standard events.
  std::string extension(const std::string& name, json::value data);
  /// Ends the response: closes what is open, then response.completed,
  /// response.failed or response.incomplete.
  std::string finish(const response_end& end);

  /// The response object as it stands (status in_progress until finish).
  json::value object() const;
  const std::string& id() const { return id_; }

private:
  std::string emit(const std::string& type, json::value data);
  std::string open_message();
  std::string close_message(const std::string& text, const char* status);
  std::string item_id(const char* prefix);

  std::string id_;
  int64_t created_at_;
  std::string model_;
  json::value echo_;
  bool events_;
  int64_t seq_ = 0;
  int64_t items_ = 0;
  std::string status_ = "in_progress";
  json::value error_;
  json::value incomplete_;
  json::value usage_;
  json::value ext_;
  json::array output_;
  // The open message item (index into output_, -1: none) and its text.
  int64_t open_ = -1;
  std::string text_;
  // Running tool calls: call id -> index into output_.
  std::map<std::string, size_t> tools_;
};

} // namespace mibyan
