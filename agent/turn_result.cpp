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

bool compute_completed(const turn_result& r) {
  return r.final_response.has_value() && !r.failed
         && (r.api_calls < r.max_iterations
             || r.exit == turn_exit::completed);
}

std::string turn_exit_reason(const turn_result& r) {
  return r.exit_detail.empty() ? std::string{to_string(r.exit)}
                               : r.exit_detail;
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

json::value tool_event_json(const tool_event& ev) {
  auto v = json::value::make_object();
  if (ev.what == tool_event::phase::start) {
    v["arguments"] = ev.args_json;
    if (ev.tasks > 0)
      v["tasks"] = static_cast<int64_t>(ev.tasks);
  } else {
    v["result"] = ev.result_json;
    v["duration_us"] = ev.duration_us;
  }
  v["id"] = ev.call_id;
  v["name"] = ev.tool;
  if (ev.depth > 0)
    v["depth"] = static_cast<int64_t>(ev.depth);
  return v;
}

const char* tool_event_kind(const tool_event& ev) {
  return ev.what == tool_event::phase::start ? "tool_start" : "tool_end";
}

json::value turn_result_json(const turn_result& r) {
  auto out = json::value::make_object();
  out["final_response"] = optional_string(r.final_response);
  out["last_reasoning"] = optional_string(r.last_reasoning);
  auto msgs = json::value::make_array();
  for (auto& m : r.messages)
    msgs.push_back(turn_message_json(m));
  out["messages"] = std::move(msgs);
  out["api_calls"] = r.api_calls;
  out["completed"] = r.completed;
  out["turn_exit_reason"] = turn_exit_reason(r);
  out["exit_reason"] = to_string(r.exit);
  out["failed"] = r.failed;
  out["partial"] = r.partial;
  out["interrupted"] = r.interrupted;
  out["model"] = r.provider.model;
  out["provider"] = r.provider.provider;
  out["base_url"] = r.provider.base_url;
  out["input_tokens"] = r.usage.input_tokens;
  out["output_tokens"] = r.usage.output_tokens;
  out["cache_read_tokens"] = r.usage.cache_read_tokens;
  out["cache_write_tokens"] = r.usage.cache_write_tokens;
  out["reasoning_tokens"] = r.usage.reasoning_tokens;
  auto prompt = r.usage.input_tokens + r.usage.cache_read_tokens
                + r.usage.cache_write_tokens;
  out["prompt_tokens"] = prompt;
  out["completion_tokens"] = r.usage.output_tokens;
  out["total_tokens"] = prompt + r.usage.output_tokens;
  out["last_prompt_tokens"] = r.last_prompt_tokens;
  out["session_id"] = r.session_id;
  out["error"] = r.error.empty() ? json::value{} : json::value{r.error};
  if (r.interrupted || !r.interrupt_message.empty())
    out["interrupt_message"] = r.interrupt_message;
  if (!r.cleanup_errors.empty()) {
    auto errs = json::value::make_array();
    for (auto& e : r.cleanup_errors)
      errs.push_back(e);
    out["cleanup_errors"] = std::move(errs);
  }
  if (!r.pending_steer.empty())
    out["pending_steer"] = r.pending_steer;
  if (r.retryable)
    out["retryable"] = true;
  if (r.replayed)
    out["replayed"] = true;
  return out;
}

} // namespace mibyan
