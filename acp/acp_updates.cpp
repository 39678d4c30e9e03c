#include "acp/acp_updates.hpp"

#include "agent/turn_result.hpp"

#include <algorithm>
#include <cstring>

#include "base/strings.hpp"

namespace mibyan {

namespace {

// The first line of `s`, cut to `max` bytes (on a character boundary).
std::string short_line(const std::string& s, size_t max = 80) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos)
    return {};
  auto e = s.find('\n', b);
  auto line = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
  bool more = e != std::string::npos
              && s.find_first_not_of(" \t\r\n", e) != std::string::npos;
  if (line.size() > max) {
    line = json::sanitize_utf8(line.substr(0, max));
    more = true;
  }
  return more ? line + " ..." : line;
}

json::value text_block(const std::string& text) {
  json::value b;
  b["type"] = "text";
  b["text"] = text;
  return b;
}

json::value text_content(const std::string& text) {
  json::value c;
  c["type"] = "content";
  c["content"] = text_block(text);
  return c;
}

// Backtick fence long enough for `text`.
std::string fence_for(const std::string& text) {
  size_t run = 0;
  size_t longest = 0;
  for (char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return std::string(std::max<size_t>(3, longest + 1), '`');
}

std::string fenced(const std::string& text, const char* lang = "") {
  auto f = fence_for(text);
  std::string out = f + lang + "\n" + text;
  if (!text.empty() && text.back() != '\n')
    out += "\n";
  return out + f;
}

std::string cut(const std::string& s, size_t max) {
  if (s.size() <= max)
    return s;
  return json::sanitize_utf8(s.substr(0, max)) + "\n... ("
         + std::to_string(s.size() - max) + " more bytes)";
}

// The paths of a V4A patch text ("*** Update File: a", "*** Add File: b",
// "*** Delete File: c", "*** Move to: d").
void v4a_paths(const std::string& text, std::vector<std::string>& out) {
  static const char* const heads[] = {"*** Update File:", "*** Add File:",
                                      "*** Delete File:", "*** Move to:"};
  size_t pos = 0;
  while (pos < text.size()) {
    auto e = text.find('\n', pos);
    auto line = text.substr(pos, e == std::string::npos ? std::string::npos
                                                        : e - pos);
    for (auto h : heads)
      if (strings::starts_with(line, h)) {
        auto p = line.substr(std::strlen(h));
        auto b = p.find_first_not_of(" \t");
        auto l = p.find_last_not_of(" \t\r");
        if (b != std::string::npos)
          out.push_back(p.substr(b, l - b + 1));
      }
    if (e == std::string::npos)
      break;
    pos = e + 1;
  }
}

} // namespace

const char* acp_tool_kind(const std::string& tool) {
  if (tool == "read_file" || tool == "skill_view" || tool == "skills_list")
    return "read";
  if (tool == "write_file" || tool == "patch")
    return "edit";
  if (tool == "search_files" || tool == "web_search"
      || tool == "session_search")
    return "search";
  if (tool == "terminal" || tool == "process" || tool == "execute_code")
    return "execute";
  if (tool == "web_extract")
    return "fetch";
  if (tool == "todo" || tool == "delegate_task")
    return "think";
  return "other";
}

std::vector<std::string> acp_call_paths(const std::string& tool,
                                        const json::value& args) {
  std::vector<std::string> out;
  if (!args.is_object())
    return out;
  if (tool == "read_file" || tool == "write_file" || tool == "patch") {
    auto p = args.get_string("path");
    if (!p.empty())
      out.push_back(p);
    if (tool == "patch")
      v4a_paths(args.get_string("patch"), out);
  } else if (tool == "search_files") {
    auto p = args.get_string("path");
    if (!p.empty())
      out.push_back(p);
  }
  return out;
}

std::string acp_tool_title(const std::string& tool, const json::value& args) {
  auto arg = [&](const char* key) {
    return args.is_object() ? short_line(args.get_string(key)) : std::string{};
  };
  if (tool == "terminal") {
    auto c = arg("command");
    return c.empty() ? "Run a command" : "`" + c + "`";
  }
  if (tool == "execute_code") {
    auto c = arg("code");
    return c.empty() ? "Run Python" : "Run Python: " + c;
  }
  if (tool == "read_file")
    return "Read " + arg("path");
  if (tool == "write_file")
    return "Write " + arg("path");
  if (tool == "patch") {
    auto p = arg("path");
    if (!p.empty())
      return "Edit " + p;
    auto paths = acp_call_paths(tool, args);
    if (paths.empty())
      return "Apply a patch";
    std::string t = "Edit " + paths[0];
    if (paths.size() > 1)
      t += " and " + std::to_string(paths.size() - 1) + " more";
    return t;
  }
  if (tool == "search_files") {
    auto pat = arg("pattern");
    auto p = arg("path");
    return "Search " + (pat.empty() ? std::string{"files"} : "`" + pat + "`")
           + (p.empty() ? "" : " in " + p);
  }
  if (tool == "web_search")
    return "Search the web: " + arg("query");
  if (tool == "web_extract") {
    std::string u;
    if (args.is_object())
      if (auto urls = args.find("urls"); urls && urls->is_array()
                                         && !urls->as_array().empty()
                                         && urls->as_array()[0].is_string())
        u = short_line(urls->as_array()[0].as_string());
    return u.empty() ? "Fetch web pages" : "Fetch " + u;
  }
  if (tool == "process")
    return "Process " + arg("action");
  if (tool == "todo")
    return "Update the plan";
  if (tool == "delegate_task") {
    auto g = arg("goal");
    return g.empty() ? "Delegate tasks" : "Delegate: " + g;
  }
  if (tool == "session_search")
    return "Search past sessions: " + arg("query");
  if (strings::starts_with(tool, "mcp__")) {
    auto rest = tool.substr(5);
    auto sep = rest.find("__");
    if (sep != std::string::npos)
      return rest.substr(sep + 2) + " (" + rest.substr(0, sep) + ")";
  }
  return tool;
}

json::value acp_tool_call(const std::string& id, const std::string& tool,
                          const json::value& args) {
  json::value u;
  u["sessionUpdate"] = "tool_call";
  u["toolCallId"] = id;
  u["title"] = acp_tool_title(tool, args);
  u["kind"] = acp_tool_kind(tool);
  u["status"] = "in_progress";
  u["rawInput"] = args.is_null() ? json::value::make_object() : args;
  auto content = json::value::make_array();
  if (args.is_object()) {
    if (tool == "terminal" && !args.get_string("command").empty())
      content.push_back(
        text_content(fenced("$ " + args.get_string("command"), "sh")));
    else if (tool == "execute_code" && !args.get_string("code").empty())
      content.push_back(
        text_content(fenced(cut(args.get_string("code"), 16 * 1024),
                            "python")));
  }
  u["content"] = std::move(content);
  auto locs = json::value::make_array();
  for (auto& p : acp_call_paths(tool, args)) {
    json::value l;
    l["path"] = p;
    if (tool == "read_file" && args.get_int("offset", 0) > 0)
      l["line"] = args.get_int("offset", 1);
    locs.push_back(std::move(l));
  }
  u["locations"] = std::move(locs);
  return u;
}

bool acp_result_failed(const json::value& result) {
  if (!result.is_object())
    return false;
  auto e = result.find("error");
  if (e == nullptr)
    return result.get_bool("success", true) == false;
  if (e->is_string())
    return !e->as_string().empty();
  return e->is_object() || (e->is_bool() && e->as_bool());
}

json::value acp_tool_call_done(const std::string& id, const std::string& tool,
                               const json::value& args,
                               const std::string& result_json,
                               const std::vector<acp_file_diff>& diffs,
                               size_t max_text) {
  json::value u;
  u["sessionUpdate"] = "tool_call_update";
  u["toolCallId"] = id;
  auto parsed = json::parse(result_json);
  json::value res = parsed ? std::move(*parsed.v) : json::value{result_json};
  bool failed = acp_result_failed(res);
  u["status"] = failed ? "failed" : "completed";
  auto content = json::value::make_array();
  std::string text;
  if (res.is_object()) {
    auto err = res.find("error");
    std::string err_text = err == nullptr ? std::string{}
                           : err->is_string() ? err->as_string()
                                              : err->dump();
    if (tool == "terminal" || tool == "execute_code") {
      std::string head;
      if (tool == "terminal" && args.is_object())
        head = "$ " + args.get_string("command") + "\n";
      auto out = res.get_string("output");
      text = fenced(cut(head + out, max_text), "console");
      if (res.find("exit_code") != nullptr && res.get_int("exit_code", 0) != 0)
        text += "\nexit code " + std::to_string(res.get_int("exit_code", 0));
      if (!err_text.empty())
        text += "\n" + cut(err_text, max_text);
    } else if (!err_text.empty()) {
      text = cut(err_text, max_text);
      auto hint = res.get_string("hint", res.get_string("_hint"));
      if (!hint.empty())
        text += "\n" + cut(hint, 4096);
    } else if (tool == "read_file") {
      // The file is in the editor already: the location says which.
      text = res.get_string("status") == "unchanged"
               ? std::string{"(unchanged since the last read)"}
               : std::to_string(res.get_int("total_lines", 0)) + " lines";
    } else if ((tool == "write_file" || tool == "patch") && !diffs.empty()) {
      // The diff content below says it.
    } else if (tool == "patch" && !res.get_string("diff").empty()) {
      text = fenced(cut(res.get_string("diff"), max_text), "diff");
    } else {
      text = fenced(cut(res.pretty(), max_text), "json");
    }
  } else {
    text = cut(res.is_string() ? res.as_string() : res.dump(), max_text);
  }
  if (!text.empty())
    content.push_back(text_content(text));
  for (auto& d : diffs) {
    json::value c;
    c["type"] = "diff";
    c["path"] = d.path;
    c["oldText"] = d.has_old ? json::value{d.old_text} : json::value{};
    c["newText"] = d.new_text;
    content.push_back(std::move(c));
  }
  u["content"] = std::move(content);
  if (!diffs.empty()) {
    auto locs = json::value::make_array();
    for (auto& d : diffs) {
      json::value l;
      l["path"] = d.path;
      locs.push_back(std::move(l));
    }
    u["locations"] = std::move(locs);
  }
  // rawOutput: the result, unless it is large (the content carries it).
  if (result_json.size() <= max_text)
    u["rawOutput"] = res;
  return u;
}

json::value acp_plan_from_todo(const json::value& result) {
  if (!result.is_object())
    return {};
  auto list = result.find("todos");
  if (list == nullptr || !list->is_array())
    return {};
  json::value u;
  u["sessionUpdate"] = "plan";
  auto entries = json::value::make_array();
  for (auto& item : list->as_array()) {
    if (!item.is_object())
      continue;
    auto st = item.get_string("status");
    if (st == "cancelled")
      continue;
    if (st != "pending" && st != "in_progress" && st != "completed")
      st = "pending";
    json::value e;
    e["content"] = item.get_string("content");
    e["priority"] = "medium";
    e["status"] = st;
    entries.push_back(std::move(e));
  }
  u["entries"] = std::move(entries);
  return u;
}

std::string acp_stop_reason(const turn_result& r, std::string& error,
                            std::string& final_text) {
  if (!r.started) {
    error = r.error.empty() ? "the turn did not start" : r.error;
    return {};
  }
  final_text = r.final_response.value_or("");
  auto exit = r.exit;
  auto detail = turn_exit_reason(r);
  if (r.interrupted || exit == turn_exit::interrupted_by_user)
    return "cancelled";
  if (exit == turn_exit::budget_exhausted
      || exit == turn_exit::max_iterations_reached)
    return "max_turn_requests";
  if (exit == turn_exit::truncated
      || detail.find("finish_reason=length") != std::string::npos)
    return "max_tokens";
  if (detail.find("finish_reason=content_filter") != std::string::npos
      || detail.find("finish_reason=refusal") != std::string::npos)
    return "refusal";
  if (r.failed) {
    error = r.error;
    if (error.empty())
      error = "the turn failed (" + detail + ")";
    return {};
  }
  return "end_turn";
}

json::value acp_text_chunk(const char* kind, const std::string& text) {
  json::value u;
  u["sessionUpdate"] = kind;
  u["content"] = text_block(text);
  return u;
}

} // namespace mibyan
