#include "agent/tool_guardrails.hpp"

#include <algorithm>

#include "providers/tool_call_id.hpp"
#include "base/json.hpp"

namespace mibyan {

namespace {

constexpr const char* marker = "[tool-loop guardrail] ";

json::value canonical(const json::value& v) {
  if (v.is_array()) {
    json::value out = json::value::make_array();
    for (auto& x : v.as_array())
      out.push_back(canonical(x));
    return out;
  }
  if (v.is_object()) {
    json::object members;
    for (auto& [k, x] : v.as_object())
      members.emplace_back(k, canonical(x));
    std::stable_sort(members.begin(), members.end(),
                     [](const json::member& a, const json::member& b) {
                       return a.first < b.first;
                     });
    return json::value{std::move(members)};
  }
  return v;
}

std::string append_warning(std::string result, const std::string& text) {
  result += "\n\n";
  result += marker;
  result += text;
  return result;
}

std::string first_error(std::string_view result_json) {
  auto parsed = json::parse(result_json);
  if (parsed && parsed.v->is_object()) {
    if (auto e = parsed.v->find("error"); e && e->is_string())
      return e->as_string().substr(0, 300);
  }
  return std::string{result_json.substr(0, 300)};
}

} // namespace

std::string guardrail_call_key(std::string_view tool,
                               std::string_view args_json) {
  std::string text{tool};
  text.push_back('\0');
  auto parsed = json::parse(args_json.empty() ? std::string_view{"{}"}
                                              : args_json);
  if (parsed)
    text += canonical(*parsed.v).dump();
  else
    text.append(args_json);
  return sha256_hex(text);
}

bool is_failed_tool_result(std::string_view result_json) {
  auto parsed = json::parse(result_json);
  if (!parsed || !parsed.v->is_object())
    return false;
  auto& v = *parsed.v;
  if (auto e = v.find("error"); e && !e->is_null()
                                && !(e->is_string() && e->as_string().empty()))
    return true;
  if (auto s = v.find("success"); s && s->is_bool() && !s->as_bool())
    return true;
  if (auto s = v.find("status"); s && s->is_string()) {
    auto& st = s->as_string();
    return st == "error" || st == "blocked" || st == "timeout";
  }
  return false;
}

bool is_idempotent_tool(std::string_view tool) {
  return tool == "read_file" || tool == "search_files"
         || tool == "web_search" || tool == "web_extract";
}

tool_guardrails::tool_guardrails(const tool_loop_guardrail_options& opts)
  : opts_(opts) {}

std::optional<std::string>
tool_guardrails::before_call(std::string_view tool,
                             std::string_view args_json) {
  if (!opts_.hard_stop_enabled)
    return std::nullopt;
  auto it = calls_.find(guardrail_call_key(tool, args_json));
  if (it == calls_.end())
    return std::nullopt;
  auto& st = it->second;
  auto& hard = opts_.hard_stop_after;
  std::string why;
  if (hard.identical_failure > 0 && st.failures >= hard.identical_failure)
    why = "this exact call (same tool and arguments) already failed "
          + std::to_string(st.failures) + " times this turn";
  else if (hard.idempotent_repeat > 0 && is_idempotent_tool(tool)
           && st.repeats >= hard.idempotent_repeat)
    why = "this exact call already returned the same result "
          + std::to_string(st.repeats) + " times this turn";
  if (why.empty())
    return std::nullopt;
  json::value r;
  r["error"] = "BLOCKED by the tool-loop guardrail: " + why
               + ". The call was not run. Do not repeat it; use what you "
                 "already have, change the arguments or take another "
                 "approach.";
  r["status"] = "blocked";
  return r.dump();
}

std::string tool_guardrails::after_call(std::string_view tool,
                                        std::string_view args_json,
                                        std::string result_json) {
  auto& st = calls_[guardrail_call_key(tool, args_json)];
  auto& tool_fails = tool_failures_[std::string{tool}];
  auto& warn = opts_.warn_after;
  auto& hard = opts_.hard_stop_after;
  std::string warning;
  if (is_failed_tool_result(result_json)) {
    ++st.failures;
    ++tool_fails;
    st.repeats = 0;
    st.last_hash.clear();
    if (opts_.hard_stop_enabled && hard.same_tool_failure > 0
        && tool_fails >= hard.same_tool_failure && !halted_) {
      halted_ = true;
      halt_message_ = "I stopped working on this turn: the " + std::string{tool}
                      + " tool failed " + std::to_string(tool_fails)
                      + " times in a row, so continuing would most likely "
                        "repeat the same failure. Last error: "
                      + first_error(result_json)
                      + "\nPlease check the situation or give me different "
                        "instructions.";
    }
    if (warn.identical_failure > 0 && st.failures >= warn.identical_failure)
      warning = "This exact call (same tool and arguments) has now failed "
                + std::to_string(st.failures)
                + " times this turn. Repeating it will not help: change the "
                  "arguments or try a different approach.";
    else if (warn.same_tool_failure > 0
             && tool_fails >= warn.same_tool_failure)
      warning = std::string{tool} + " has failed "
                + std::to_string(tool_fails)
                + " times in a row this turn. Step back and reconsider the "
                  "approach before calling it again.";
  } else {
    st.failures = 0;
    tool_fails = 0;
    if (is_idempotent_tool(tool)) {
      auto hash = sha256_hex(result_json);
      if (hash == st.last_hash) {
        ++st.repeats;
      } else {
        st.last_hash = std::move(hash);
        st.repeats = 1;
      }
      if (warn.idempotent_repeat > 0 && st.repeats >= warn.idempotent_repeat)
        warning = "This call returned the same result "
                  + std::to_string(st.repeats)
                  + " times this turn; repeating it will not change "
                    "anything. Use the result you already have.";
    }
  }
  if (opts_.warnings_enabled && !warning.empty())
    return append_warning(std::move(result_json), warning);
  return result_json;
}

} // namespace mibyan
