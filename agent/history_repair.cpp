// File: agent/history_repair.cpp
#include "agent/history_repair.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <optional>
#include <unordered_set>
#include <utility>

#include "providers/tool_call_id.hpp"
#include "base/strings.hpp"

namespace mibyan {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
         || c == '\v';
}

bool trim_in_place(std::string& s) {
  auto kept = strings::trim_view(s, strings::ascii_space);
  if (kept.size() == s.size())
    return false;
  s = std::string{kept};
  return true;
}

struct call_ref {
  size_t msg;
  size_t call;
};

} // namespace

const char* const missing_tool_result_text =
  "[Tool result unavailable: the result of this call was lost (the turn "
  "was interrupted, or the conversation was compressed). See the context "
  "summary for what happened, and run the call again if you still need "
  "its output.]";

bool history_repair_stats::changed() const {
  return invalid_roles_dropped + empty_names_renamed + ids_assigned
           + orphan_results_dropped + stub_results_inserted + contents_trimmed
           + empty_assistants_dropped + user_messages_merged
           + arguments_canonicalized
         > 0;
}

bool is_valid_role(const std::string& role) {
  return role == "system" || role == "user" || role == "assistant"
         || role == "tool" || role == "function" || role == "developer";
}

json::value sort_keys(const json::value& v) {
  if (v.is_array()) {
    json::array out;
    out.reserve(v.size());
    for (auto& x : v.as_array())
      out.push_back(sort_keys(x));
    return json::value{std::move(out)};
  }
  if (v.is_object()) {
    json::object out;
    out.reserve(v.size());
    for (auto& [key, x] : v.as_object())
      out.emplace_back(key, sort_keys(x));
    std::stable_sort(out.begin(), out.end(),
                     [](const json::member& a, const json::member& b) {
                       return a.first < b.first;
                     });
    return json::value{std::move(out)};
  }
  return v;
}

std::string canonical_arguments(const std::string& arguments) {
  bool blank = std::all_of(arguments.begin(), arguments.end(), is_space);
  if (blank)
    return "{}";
  auto parsed = json::parse(arguments);
  if (!parsed)
    return arguments;
  return sort_keys(*parsed.v).dump();
}

std::string gateway_loss_result_text(const std::string& node) {
  return "[Tool call interrupted by a gateway loss: gateway node " + node
         + ", which ran this conversation, was lost while this call ran. "
           "The call was not run again and its outcome is unknown: check "
           "its effects before you repeat it.]";
}

std::vector<chat_message>
unanswered_call_results(const std::vector<chat_message>& messages,
                        const std::string& text) {
  std::vector<chat_message> out;
  size_t last = messages.size();
  for (size_t i = messages.size(); i-- > 0;)
    if (messages[i].role == "assistant" && !messages[i].tool_calls.empty()) {
      last = i;
      break;
    }
  if (last == messages.size())
    return out;
  std::set<std::string> answered;
  for (size_t i = last + 1; i < messages.size(); ++i)
    if (messages[i].role == "tool")
      answered.insert(messages[i].tool_call_id);
  for (auto& c : messages[last].tool_calls) {
    if (c.id.empty() || answered.count(c.id) > 0)
      continue;
    answered.insert(c.id);
    chat_message m;
    m.role = "tool";
    m.tool_call_id = c.id;
    m.tool_name = c.name;
    m.content = text;
    out.push_back(std::move(m));
  }
  return out;
}

history_repair_stats repair_history(std::vector<chat_message>& messages) {
  history_repair_stats stats;
  // 1. Roles.
  std::vector<chat_message> in;
  in.reserve(messages.size());
  for (auto& m : messages) {
    if (is_valid_role(m.role))
      in.push_back(std::move(m));
    else
      ++stats.invalid_roles_dropped;
  }
  // 2 and 3. Names, ids, pairing.
  std::map<std::string, std::vector<call_ref>> pending;
  std::unordered_set<std::string> used_ids;
  std::vector<std::vector<std::optional<chat_message>>> answers(in.size());
  std::vector<bool> keep(in.size(), true);
  for (size_t i = 0; i < in.size(); ++i) {
    auto& m = in[i];
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      answers[i].resize(m.tool_calls.size());
      for (size_t k = 0; k < m.tool_calls.size(); ++k) {
        auto& c = m.tool_calls[k];
        if (c.name.empty()) {
          c.name = invalid_tool_call_name;
          ++stats.empty_names_renamed;
        }
        auto original = c.id;
        if (c.id.empty() || used_ids.count(c.id) > 0) {
          auto id = make_tool_call_id(c.name, c.arguments, k);
          auto candidate = id;
          for (size_t n = 2; used_ids.count(candidate) > 0; ++n)
            candidate = id + "_" + std::to_string(n);
          c.id = candidate;
          ++stats.ids_assigned;
        }
        used_ids.insert(c.id);
        if (!original.empty())
          pending[original].push_back({i, k});
      }
    } else if (m.role == "tool") {
      keep[i] = false;
      auto it = pending.find(m.tool_call_id);
      if (it == pending.end() || it->second.empty()) {
        ++stats.orphan_results_dropped;
        continue;
      }
      // The most recent declaring message wins (providers that number ids
      // per message reuse them); within it, the earliest unanswered call.
      auto& refs = it->second;
      size_t best = 0;
      for (size_t r = 1; r < refs.size(); ++r)
        if (refs[r].msg > refs[best].msg)
          best = r;
      auto ref = refs[best];
      refs.erase(refs.begin() + static_cast<std::ptrdiff_t>(best));
      auto& call = in[ref.msg].tool_calls[ref.call];
      m.tool_call_id = call.id;
      if (m.tool_name.empty())
        m.tool_name = call.name;
      answers[ref.msg][ref.call] = std::move(m);
    }
  }
  std::vector<chat_message> paired;
  paired.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (!keep[i])
      continue;
    paired.push_back(std::move(in[i]));
    auto& calls = paired.back().tool_calls;
    if (paired.back().role != "assistant" || calls.empty())
      continue;
    // Copy what the stubs need before `paired` grows.
    std::vector<std::pair<std::string, std::string>> ids;
    for (auto& c : calls)
      ids.emplace_back(c.id, c.name);
    for (size_t k = 0; k < ids.size(); ++k) {
      if (answers[i][k]) {
        paired.push_back(std::move(*answers[i][k]));
        continue;
      }
      chat_message stub;
      stub.role = "tool";
      stub.tool_call_id = ids[k].first;
      stub.tool_name = ids[k].second;
      stub.content = missing_tool_result_text;
      paired.push_back(std::move(stub));
      ++stats.stub_results_inserted;
    }
  }
  // 4-6. Trim, drop empty assistant turns, merge adjacent user messages.
  std::vector<chat_message> out;
  out.reserve(paired.size());
  for (auto& m : paired) {
    if (trim_in_place(m.content))
      ++stats.contents_trimmed;
    if (m.role == "assistant" && m.tool_calls.empty() && m.content.empty()) {
      ++stats.empty_assistants_dropped;
      continue;
    }
    if (m.role == "user" && !out.empty() && out.back().role == "user") {
      auto& prev = out.back().content;
      if (!prev.empty() && !m.content.empty())
        prev += "\n\n";
      prev += m.content;
      ++stats.user_messages_merged;
      continue;
    }
    out.push_back(std::move(m));
  }
  // 7. Canonical arguments.
  for (auto& m : out) {
    for (auto& c : m.tool_calls) {
      auto canon = canonical_arguments(c.arguments);
      if (canon != c.arguments) {
        c.arguments = std::move(canon);
        ++stats.arguments_canonicalized;
      }
    }
  }
  messages = std::move(out);
  return stats;
}

} // namespace mibyan
