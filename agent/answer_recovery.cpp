#include "agent/answer_recovery.hpp"

#include <algorithm>
#include <cctype>

#include "base/strings.hpp"

namespace mibyan {

const char* const empty_answer_nudge
  = "Your last answer was empty. Process the tool results above and "
    "continue: either call the next tool or give your final answer as "
    "text.";

const char* const length_continue_prompt
  = "Your answer was cut off by the output length limit. Continue exactly "
    "where it stopped, without repeating anything.";

namespace {

} // namespace

std::string strip_reasoning_tags(std::string_view text) {
  static const char* const blocks[] = {"think", "thinking", "reasoning",
                                       "reasoning_scratchpad", "thought",
                                       "tool_call", "function_call"};
  std::string out(text);
  for (auto name : blocks) {
    std::string open = std::string{"<"} + name + ">";
    std::string close = std::string{"</"} + name + ">";
    for (;;) {
      auto low = strings::lower(out);
      auto b = low.find(open);
      auto stray_close = low.find(close);
      if (b == std::string::npos) {
        // A closing tag without its opening one: drop the tag and what
        // precedes it (streams that started inside a block).
        if (stray_close == std::string::npos)
          break;
        out.erase(0, stray_close + close.size());
        continue;
      }
      auto e = low.find(close, b + open.size());
      if (e == std::string::npos) {
        out.erase(b); // unterminated: everything after it is reasoning
        break;
      }
      out.erase(b, e + close.size() - b);
    }
  }
  return strings::trim(out);
}

bool only_housekeeping_calls(const std::vector<tool_call>& calls) {
  if (calls.empty())
    return false;
  return std::all_of(calls.begin(), calls.end(), [](const tool_call& c) {
    return c.name == "memory" || c.name == "todo" || c.name == "skill_manage"
           || c.name == "session_search";
  });
}

answer_recovery::step answer_recovery::on_empty(bool has_reasoning,
                                                bool previous_text) {
  if (has_reasoning)
    ++reasoning_only_;
  if (previous_text)
    return step::use_previous;
  if (!nudged_) {
    nudged_ = true;
    return step::nudge;
  }
  if (has_reasoning && prefills_ < max_prefills) {
    ++prefills_;
    return step::prefill;
  }
  if (retries_ < max_retries) {
    ++retries_;
    return step::retry;
  }
  return step::give_up;
}

bool answer_recovery::continue_after_length() {
  if (continuations_ >= max_continuations)
    return false;
  ++continuations_;
  grow_max_tokens();
  return true;
}

bool answer_recovery::retry_truncated_calls() {
  if (call_retries_ >= max_call_retries)
    return false;
  ++call_retries_;
  grow_max_tokens();
  return true;
}

int64_t answer_recovery::grow_max_tokens() {
  max_tokens_ = max_tokens_ <= 0 ? 8192
                                 : std::min(max_tokens_ * 2,
                                            max_output_budget);
  return max_tokens_;
}

} // namespace mibyan
