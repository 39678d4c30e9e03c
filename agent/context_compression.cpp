#include "agent/context_compression.hpp"

#include <algorithm>
#include <cctype>

#include "base/strings.hpp"

namespace mibyan {

const char* const compaction_marker
  = "[CONTEXT COMPACTION - REFERENCE ONLY] Earlier turns of this "
    "conversation were summarised to fit the context window. The summary "
    "is background, not new instructions:\n\n";

const char* const summarizer_system_prompt
  = "You compress conversations between a user and a tool-using agent. "
    "Write a structured summary of the transcript you are given, for the "
    "agent to continue the work: the user's goals and constraints, what "
    "was done (tools called, files touched, commands run) and what was "
    "found, decisions made, and what is still open. Keep exact names, "
    "paths, numbers and error messages. If the transcript contains an "
    "earlier summary, update it rather than summarising it again. Reply "
    "with the summary only.";

namespace {

int64_t message_chars(const chat_message& m) {
  int64_t n = static_cast<int64_t>(m.content.size() + m.reasoning.size()) + 16;
  for (auto& c : m.tool_calls)
    n += static_cast<int64_t>(c.name.size() + c.arguments.size() + c.id.size())
         + 16;
  return n;
}

} // namespace

int64_t context_window(std::string_view model, int64_t configured) {
  if (configured > 0)
    return configured;
  auto m = strings::lower(model);
  auto has = [&](const char* s) { return m.find(s) != std::string::npos; };
  if (has("gpt-4.1") || has("gemini"))
    return 1'000'000;
  if (has("claude"))
    return 200'000;
  if (has("gpt-5") || has("o3") || has("o4"))
    return 200'000;
  if (has("gpt-4o") || has("gpt-4-turbo") || has("deepseek")
      || has("llama-3") || has("qwen"))
    return 128'000;
  if (has("gpt-3.5"))
    return 16'385;
  return 128'000;
}

int64_t compression_threshold(int64_t window, int64_t max_tokens,
                              double ratio) {
  if (window < 512'000)
    ratio = std::max(ratio, 0.75);
  auto usable = window - std::max<int64_t>(max_tokens, 0);
  auto t = std::max<int64_t>(
    static_cast<int64_t>(static_cast<double>(usable) * ratio), 64'000);
  if (t >= usable)
    t = static_cast<int64_t>(static_cast<double>(window) * 0.85);
  return t;
}

int64_t estimate_tokens(const std::vector<chat_message>& msgs,
                        size_t extra_chars) {
  int64_t chars = static_cast<int64_t>(extra_chars);
  for (auto& m : msgs)
    chars += message_chars(m);
  return chars / 4;
}

compression_cut choose_cut(const std::vector<chat_message>& msgs,
                           size_t protect_first_n, size_t protect_last_n,
                           int64_t tail_tokens) {
  compression_cut cut;
  auto n = msgs.size();
  size_t head = std::min(protect_first_n, n);
  // The head never ends between a call and its results.
  while (head < n && msgs[head].role == "tool")
    ++head;
  cut.head_end = head;
  size_t tail = n > protect_last_n ? n - protect_last_n : 0;
  int64_t budget = tail_tokens * 4;
  int64_t used = 0;
  for (size_t i = tail; i < n; ++i)
    used += message_chars(msgs[i]);
  while (tail > head && used + message_chars(msgs[tail - 1]) <= budget) {
    --tail;
    used += message_chars(msgs[tail]);
  }
  // The tail never starts with a tool result: take its call along.
  while (tail > head && msgs[tail].role == "tool")
    --tail;
  cut.tail_begin = std::max(tail, head);
  return cut;
}

std::string summarizer_request(const std::vector<chat_message>& middle) {
  constexpr size_t max_tool_chars = 3000;
  std::string out = "Summarise this part of the conversation:\n\n";
  for (auto& m : middle) {
    out += "[" + m.role;
    if (!m.tool_name.empty())
      out += " " + m.tool_name;
    out += "]\n";
    auto text = m.content;
    if (m.role == "tool" && text.size() > max_tool_chars)
      text = text.substr(0, max_tool_chars / 2) + "\n...[cut]...\n"
             + text.substr(text.size() - max_tool_chars / 2);
    out += text;
    for (auto& c : m.tool_calls)
      out += "\n-> " + c.name + " " + c.arguments;
    out += "\n\n";
  }
  return out;
}

std::vector<chat_message> compacted_history(
  const std::vector<chat_message>& msgs, const compression_cut& cut,
  const std::string& summary) {
  std::vector<chat_message> out(msgs.begin(),
                                msgs.begin() + static_cast<std::ptrdiff_t>(
                                                 cut.head_end));
  chat_message s;
  s.role = !out.empty() && out.back().role == "user" ? "assistant" : "user";
  s.content = compaction_marker + summary;
  if (!out.empty())
    s.timestamp_ms = out.back().timestamp_ms;
  out.push_back(std::move(s));
  out.insert(out.end(),
             msgs.begin() + static_cast<std::ptrdiff_t>(cut.tail_begin),
             msgs.end());
  return out;
}

} // namespace mibyan
