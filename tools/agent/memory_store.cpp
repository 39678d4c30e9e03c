#include "tools/agent/memory_store.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/stat.h>
#include <unistd.h>

#include "config/options.hpp"
#include "tools/file_io.hpp"
#include "tools/file_lock.hpp"
#include "tools/tool.hpp"
#include "base/strings.hpp"

namespace mibyan {

namespace {

constexpr size_t max_memory_file_bytes = 4 * 1024 * 1024;

std::string with_commas(size_t n) {
  auto s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string usage_text(size_t cur, size_t limit) {
  size_t pct = limit == 0 ? 100 : cur * 100 / limit;
  return std::to_string(pct) + "% — " + with_commas(cur) + "/"
         + with_commas(limit) + " chars";
}

json::value entries_json(const std::vector<std::string>& entries) {
  json::value out = json::value::make_array();
  for (auto& e : entries)
    out.push_back(e);
  return out;
}

json::value failure(std::string message, const std::vector<std::string>& cur,
                    size_t limit) {
  json::value r = error_result(std::move(message));
  r["success"] = false;
  r["current_entries"] = entries_json(cur);
  r["usage"] = usage_text(utf8_length(join_memory(cur)), limit);
  return r;
}

const char* label_of(const std::string& target) {
  return target == "user" ? "USER PROFILE (who the user is)"
                          : "MEMORY (your personal notes)";
}

} // namespace

std::string memory_file(const std::string& home, const std::string& target) {
  if (target == "memory")
    return home + "/memories/MEMORY.md";
  if (target == "user")
    return home + "/memories/USER.md";
  return {};
}

size_t memory_limit(const options& cfg, const std::string& target) {
  auto v = target == "user" ? cfg.memory.user_char_limit
                            : cfg.memory.memory_char_limit;
  return static_cast<size_t>(std::max<int64_t>(v, 0));
}

size_t utf8_length(const std::string& text) {
  size_t n = 0;
  for (unsigned char c : text)
    if ((c & 0xC0) != 0x80)
      ++n;
  return n;
}

std::string join_memory(const std::vector<std::string>& entries) {
  std::string out;
  for (auto& e : entries) {
    if (!out.empty())
      out += memory_separator;
    out += e;
  }
  return out;
}

std::vector<std::string> read_memory_entries(const std::string& path) {
  std::vector<std::string> out;
  auto text = read_whole_file(path, max_memory_file_bytes);
  if (!text)
    return out;
  std::string sep = memory_separator;
  size_t pos = 0;
  while (pos <= text->size()) {
    auto next = text->find(sep, pos);
    auto piece = strings::trim(text->substr(pos, next == std::string::npos
                                               ? std::string::npos
                                               : next - pos));
    if (!piece.empty())
      out.push_back(piece);
    if (next == std::string::npos)
      break;
    pos = next + sep.size();
  }
  return out;
}

status check_memory_content(const std::string& text) {
  auto refused = [](std::string msg) {
    return status::failure(status_code::permission_denied, std::move(msg));
  };
  auto low = strings::lower(text);
  static const char* injection[] = {
    "ignore previous instructions", "ignore all previous",
    "ignore the above", "disregard previous", "disregard all previous",
    "forget your instructions", "you are now", "new instructions:",
    "system prompt:", "<|im_start|>", "<system>", "</system>",
  };
  for (auto p : injection)
    if (low.find(p) != std::string::npos)
      return refused(
        std::string{"Refused: the content looks like a prompt injection ("}
        + p + "). Memory holds facts and preferences, not instructions "
              "that override your own.");
  static const char* exfil[] = {
    "curl ", "wget ", "| nc ", "/dev/tcp/", "~/.ssh", ".ssh/id_",
    "authorized_keys", "base64 -d", "cat .env", "cat ~/.env",
  };
  for (auto p : exfil)
    if (low.find(p) != std::string::npos)
      return refused(
        std::string{"Refused: the content looks like an exfiltration or "
                    "remote-execution command ("}
        + p + "). Store a description of the fact instead.");
  // Invisible characters hide instructions from people reading the file.
  static const char* invisible[] = {"\u200b", "\u200c", "\u200d", "\u2060",
                                    "\ufeff", "\u202e"};
  for (auto p : invisible)
    if (text.find(p) != std::string::npos)
      return refused(
        "Refused: the content contains invisible Unicode characters.");
  return {};
}

json::value apply_memory_ops(const std::string& home, const options& cfg,
                             const std::string& target,
                             const std::vector<memory_op>& ops) {
  auto path = memory_file(home, target);
  if (path.empty())
    return error_result("target must be 'memory' or 'user', got '" + target
                        + "'");
  if (target == "memory" && !cfg.memory.memory_enabled)
    return error_result("Memory is disabled (memory.memory_enabled: false).");
  if (target == "user" && !cfg.memory.user_profile_enabled)
    return error_result(
      "The user profile is disabled (memory.user_profile_enabled: false).");
  if (ops.empty())
    return error_result("Nothing to do: give action (add, replace, remove) "
                        "or operations.");
  auto limit = memory_limit(cfg, target);
  auto dir = home + "/memories";
  ::mkdir(home.c_str(), 0700);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return error_result("cannot create " + dir + ": " + std::strerror(errno));
  auto slash = path.rfind('/');
  file_lock lock{dir + "/." + path.substr(slash + 1) + ".lock",
                 "the memory file"};
  if (!lock.error().empty())
    return error_result(lock.error());
  auto before = read_memory_entries(path);
  auto entries = before;
  std::vector<std::string> notes;
  for (auto& op : ops) {
    auto content = strings::trim(op.content);
    if (op.action == "add") {
      if (content.empty())
        return failure("Content cannot be empty.", before, limit);
      if (auto safe = check_memory_content(content); !safe.ok())
        return failure(safe.error, before, limit);
      if (std::find(entries.begin(), entries.end(), content) != entries.end()) {
        notes.push_back("Entry already exists (no duplicate added).");
        continue;
      }
      entries.push_back(content);
      continue;
    }
    if (op.action != "replace" && op.action != "remove")
      return failure("Unknown action '" + op.action
                       + "': use add, replace or remove.",
                     before, limit);
    auto old_text = strings::trim(op.old_text);
    if (old_text.empty())
      return failure("old_text is required for " + op.action
                       + ": a substring of the entry to change.",
                     before, limit);
    std::vector<size_t> hits;
    std::vector<std::string> distinct;
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].find(old_text) != std::string::npos) {
        hits.push_back(i);
        if (std::find(distinct.begin(), distinct.end(), entries[i])
            == distinct.end())
          distinct.push_back(entries[i]);
      }
    if (hits.empty())
      return failure("No entry matched '" + old_text + "'.", before, limit);
    if (distinct.size() > 1)
      return failure("Multiple entries matched '" + old_text
                       + "'. Be more specific.",
                     before, limit);
    if (op.action == "remove") {
      for (auto i = hits.rbegin(); i != hits.rend(); ++i)
        entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(*i));
      continue;
    }
    if (content.empty())
      return failure("content is required for replace (use remove to delete "
                     "an entry).",
                     before, limit);
    if (auto safe = check_memory_content(content); !safe.ok())
      return failure(safe.error, before, limit);
    entries[hits.front()] = content;
    for (size_t k = hits.size(); k-- > 1;)
      entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(hits[k]));
  }
  auto joined = join_memory(entries);
  auto cur = utf8_length(joined);
  if (cur > limit) {
    auto r = failure("Memory at " + with_commas(utf8_length(join_memory(before)))
                       + "/" + with_commas(limit)
                       + " chars; this change would make it "
                       + with_commas(cur)
                       + ". Consolidate first: replace or remove existing "
                         "entries (merge related ones, drop stale ones), "
                         "then retry.",
                     before, limit);
    return r;
  }
  if (entries != before) {
    auto out = atomic_write(path, joined.empty() ? joined : joined + "\n");
    if (!out.ok())
      return error_result("cannot write " + path + ": " + out.error);
  }
  json::value r;
  r["success"] = true;
  r["done"] = true;
  r["target"] = target;
  r["usage"] = usage_text(cur, limit);
  r["entry_count"] = static_cast<int64_t>(entries.size());
  std::string msg;
  if (ops.size() == 1)
    msg = ops[0].action == "add"
            ? (notes.empty() ? "Entry added." : notes.front())
            : ops[0].action == "replace" ? "Entry replaced." : "Entry removed.";
  else
    msg = std::to_string(ops.size()) + " operations applied.";
  r["message"] = msg;
  r["note"] = "The write is complete and saved; do not repeat it. It shows "
              "in the system prompt from the next session on.";
  return r;
}

std::string memory_prompt_snapshot(const std::string& home,
                                   const options& cfg) {
  std::string out;
  std::string rule;
  for (int i = 0; i < 46; ++i)
    rule += "═";
  for (const char* target : {"memory", "user"}) {
    std::string t = target;
    if ((t == "memory" && !cfg.memory.memory_enabled)
        || (t == "user" && !cfg.memory.user_profile_enabled))
      continue;
    auto entries = read_memory_entries(memory_file(home, t));
    if (entries.empty())
      continue;
    auto joined = join_memory(entries);
    if (!out.empty())
      out += "\n\n";
    out += rule + "\n" + label_of(t) + " ["
           + usage_text(utf8_length(joined), memory_limit(cfg, t)) + "]\n"
           + rule + "\n" + joined;
  }
  return out;
}

} // namespace mibyan
