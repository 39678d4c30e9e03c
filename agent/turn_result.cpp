// File: agent/turn_result.cpp
#include "agent/turn_result.hpp"

namespace mibyan {

namespace {

constexpr turn_exit all_exits[] = {
  turn_exit::completed,
  turn_exit::interrupted_by_user,
  turn_exit::budget_exhausted,
  turn_exit::max_iterations_reached,
  turn_exit::guardrail_halt,
  turn_exit::empty_response_exhausted,
  turn_exit::invalid_tool_calls,
  turn_exit::truncated,
  turn_exit::provider_error,
  turn_exit::error,
};

json::value optional_string(const std::optional<std::string>& s) {
  if (!s)
    return json::value{};
  return json::value{*s};
}

} // namespace

const char* to_string(turn_exit x) {
  switch (x) {
    case turn_exit::completed:
      return "completed";
    case turn_exit::interrupted_by_user:
      return "interrupted_by_user";
    case turn_exit::budget_exhausted:
      return "budget_exhausted";
    case turn_exit::max_iterations_reached:
      return "max_iterations_reached";
    case turn_exit::guardrail_halt:
      return "guardrail_halt";
    case turn_exit::empty_response_exhausted:
      return "empty_response_exhausted";
    case turn_exit::invalid_tool_calls:
      return "invalid_tool_calls";
    case turn_exit::truncated:
      return "truncated";
    case turn_exit::provider_error:
      return "provider_error";
    case turn_exit::error:
      return "error";
  }
  return "error";
}

bool from_string(std::string_view name, turn_exit& x) {
  for (auto e : all_exits) {
    if (name == to_string(e)) {
      x = e;
      return true;
    }
  }
  return false;
}

std::string text_response_reason(std::string_view finish_reason) {
  std::string out = "text_response(finish_reason=";
  out += finish_reason.empty() ? std::string_view{"unknown"} : finish_reason;
  out += ')';
  return out;
}

std::string max_iterations_reason(int64_t used, int64_t max) {
  return "max_iterations_reached(" + std::to_string(used) + "/"
         + std::to_string(max) + ")";
}

bool turn_result::compute_completed() const {
  return final_response.has_value() && !failed
         && (api_calls < max_iterations || exit == turn_exit::completed);
}

std::string turn_result::turn_exit_reason() const {
  return exit_detail.empty() ? std::string{to_string(exit)} : exit_detail;
}

json::value turn_message_json(const chat_message& m) {
  auto out = json::value::make_object();
  out["role"] = m.role;
  out["content"] = m.content;
  if (!m.tool_calls.empty()) {
    auto calls = json::value::make_array();
    for (auto& c : m.tool_calls) {
      auto fn = json::value::make_object();
      fn["name"] = c.name;
      fn["arguments"] = c.arguments;
      auto call = json::value::make_object();
      call["id"] = c.id;
      call["type"] = "function";
      call["function"] = std::move(fn);
      calls.push_back(std::move(call));
    }
    out["tool_calls"] = std::move(calls);
  }
  if (m.role == "tool" || !m.tool_call_id.empty())
    out["tool_call_id"] = m.tool_call_id;
  if (!m.tool_name.empty())
    out["name"] = m.tool_name;
  if (!m.reasoning.empty())
    out["reasoning"] = m.reasoning;
  if (!m.finish_reason.empty())
    out["finish_reason"] = m.finish_reason;
  if (m.timestamp_ms != 0)
    out["timestamp_ms"] = m.timestamp_ms;
  return out;
}

json::value turn_result::to_json() const {
  auto out = json::value::make_object();
  out["final_response"] = optional_string(final_response);
  out["last_reasoning"] = optional_string(last_reasoning);
  auto msgs = json::value::make_array();
  for (auto& m : messages)
    msgs.push_back(turn_message_json(m));
  out["messages"] = std::move(msgs);
  out["api_calls"] = api_calls;
  out["completed"] = completed;
  out["turn_exit_reason"] = turn_exit_reason();
  out["exit_reason"] = to_string(exit);
  out["failed"] = failed;
  out["partial"] = partial;
  out["interrupted"] = interrupted;
  out["model"] = model;
  out["provider"] = provider;
  out["base_url"] = base_url;
  out["input_tokens"] = usage.input_tokens;
  out["output_tokens"] = usage.output_tokens;
  out["cache_read_tokens"] = usage.cache_read_tokens;
  out["cache_write_tokens"] = usage.cache_write_tokens;
  out["reasoning_tokens"] = usage.reasoning_tokens;
  auto prompt = usage.input_tokens + usage.cache_read_tokens
                + usage.cache_write_tokens;
  out["prompt_tokens"] = prompt;
  out["completion_tokens"] = usage.output_tokens;
  out["total_tokens"] = prompt + usage.output_tokens;
  out["last_prompt_tokens"] = last_prompt_tokens;
  out["session_id"] = session_id;
  out["error"] = error.empty() ? json::value{} : json::value{error};
  if (interrupted || !interrupt_message.empty())
    out["interrupt_message"] = interrupt_message;
  if (!cleanup_errors.empty()) {
    auto errs = json::value::make_array();
    for (auto& e : cleanup_errors)
      errs.push_back(e);
    out["cleanup_errors"] = std::move(errs);
  }
  if (!pending_steer.empty())
    out["pending_steer"] = pending_steer;
  if (retryable)
    out["retryable"] = true;
  if (replayed)
    out["replayed"] = true;
  return out;
}

} // namespace mibyan
