#include "storage/trajectory.hpp"

#include <cerrno>
#include <cstring>
#include <map>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errno_status.hpp"

namespace mibyan {

namespace {

// Mibyan's own preamble wording; fixed across versions (docs/storage.md,
// "Trajectories").
constexpr const char* preamble_head
  = "You are a function-calling assistant. The functions you may call are "
    "described by the signatures inside <tools></tools> below. Call them "
    "when they help answer the user; otherwise answer in plain language. "
    "Never guess argument values you do not know.\n<tools>\n";

constexpr const char* preamble_tail
  = "\n</tools>\nEvery function call is a JSON object that follows this "
    "schema:\n"
    R"({"title": "FunctionCall", "type": "object", "properties": )"
    R"({"name": {"title": "Name", "type": "string"}, "arguments": )"
    R"({"title": "Arguments", "type": "object"}}, "required": )"
    R"(["name", "arguments"]})"
    "\nWrite each call inside <tool_call></tool_call> tags, for example:\n"
    "<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-object>}\n</tool_call>\nThe results of your calls come back "
    "inside <tool_response></tool_response> tags.";

void replace_all(std::string& s, const std::string& from,
                 const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos;
       pos += to.size())
    s.replace(pos, from.size(), to);
}

json::value entry(const char* from, std::string value) {
  json::value e = json::value::make_object();
  e["from"] = from;
  e["value"] = std::move(value);
  return e;
}

std::string string_member(const json::value& v, std::string_view key) {
  auto m = v.find(key);
  return m != nullptr && m->is_string() ? m->as_string() : std::string{};
}

std::string render_gpt(const json::value& msg,
                       std::map<std::string, std::string>& call_names) {
  std::string out = "<think>\n";
  auto reasoning = convert_scratchpad_tags(string_member(msg, "reasoning"));
  if (!reasoning.empty())
    out += reasoning + "\n";
  out += "</think>\n";
  out += convert_scratchpad_tags(string_member(msg, "content"));
  auto calls = msg.find("tool_calls");
  if (calls == nullptr || !calls->is_array())
    return out;
  for (auto& c : calls->as_array()) {
    const json::value* fn = c.find("function");
    std::string name = fn ? string_member(*fn, "name") : std::string{};
    std::string args_text = fn ? string_member(*fn, "arguments")
                               : std::string{};
    call_names[string_member(c, "id")] = name;
    json::value call = json::value::make_object();
    call["name"] = name;
    auto parsed = json::parse(args_text);
    if (parsed && parsed.v->is_object())
      call["arguments"] = std::move(*parsed.v);
    else
      call["arguments"] = json::value::make_object();
    if (!out.empty() && out.back() != '\n')
      out += '\n';
    out += "<tool_call>\n" + call.dump() + "\n</tool_call>";
  }
  return out;
}

std::string render_tool(const json::value& msg,
                        const std::map<std::string, std::string>& names) {
  auto id = string_member(msg, "tool_call_id");
  auto it = names.find(id);
  json::value block = json::value::make_object();
  block["tool_call_id"] = id;
  block["name"] = it != names.end() ? it->second : string_member(msg, "name");
  auto content = string_member(msg, "content");
  auto parsed = json::parse(content);
  if (parsed && (parsed.v->is_object() || parsed.v->is_array()))
    block["content"] = std::move(*parsed.v);
  else
    block["content"] = content;
  return "<tool_response>\n" + block.dump() + "\n</tool_response>";
}

std::string local_timestamp(std::time_t when) {
  std::tm tm{};
  ::localtime_r(&when, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

// Creates `dir` and its missing parents with mode 0700.
status make_dirs(const std::string& dir) {
  std::string path;
  size_t pos = 0;
  while (pos <= dir.size()) {
    auto next = dir.find('/', pos);
    if (next == std::string::npos)
      next = dir.size();
    path = dir.substr(0, next);
    pos = next + 1;
    if (path.empty())
      continue;
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
      return errno_status(errno, "cannot create directory " + path);
  }
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return status::failure(status_code::invalid_argument,
                           dir + " is not a directory");
  return {};
}

} // namespace

std::string
trajectory_system_prompt(const std::vector<trajectory_tool>& tools) {
  json::value list = json::value::make_array();
  for (auto& t : tools) {
    json::value e = json::value::make_object();
    e["name"] = t.name;
    e["description"] = t.description;
    e["parameters"] = t.parameters;
    e["required"] = nullptr;
    list.push_back(std::move(e));
  }
  return preamble_head + list.dump() + preamble_tail;
}

std::string convert_scratchpad_tags(std::string text) {
  replace_all(text, "<REASONING_SCRATCHPAD>", "<think>");
  replace_all(text, "</REASONING_SCRATCHPAD>", "</think>");
  return text;
}

json::value make_trajectory(const json::value& messages,
                            const std::vector<trajectory_tool>& tools,
                            const std::string& model, bool completed,
                            std::time_t when) {
  json::value conv = json::value::make_array();
  conv.push_back(entry("system", trajectory_system_prompt(tools)));
  std::map<std::string, std::string> call_names;
  std::string pending_tools;
  auto flush_tools = [&] {
    if (!pending_tools.empty())
      conv.push_back(entry("tool", std::move(pending_tools)));
    pending_tools.clear();
  };
  if (messages.is_array()) {
    for (auto& m : messages.as_array()) {
      if (!m.is_object())
        continue;
      auto role = string_member(m, "role");
      if (role == "tool") {
        if (!pending_tools.empty())
          pending_tools += '\n';
        pending_tools += render_tool(m, call_names);
        continue;
      }
      flush_tools();
      if (role == "user")
        conv.push_back(entry("human", string_member(m, "content")));
      else if (role == "assistant")
        conv.push_back(entry("gpt", render_gpt(m, call_names)));
      // "system" and unknown roles are not part of the sample.
    }
  }
  flush_tools();
  json::value out = json::value::make_object();
  out["conversations"] = std::move(conv);
  out["timestamp"] = local_timestamp(when);
  out["model"] = model;
  out["completed"] = completed;
  return out;
}

std::string trajectory_line(const json::value& turn_result,
                            const std::vector<trajectory_tool>& tools,
                            std::time_t when) {
  static const json::value no_messages = json::value::make_array();
  const json::value* msgs = turn_result.find("messages");
  auto completed = turn_result.find("completed");
  return make_trajectory(msgs ? *msgs : no_messages, tools,
                         string_member(turn_result, "model"),
                         completed && completed->is_bool()
                           && completed->as_bool(),
                         when)
    .dump();
}

status append_trajectory_line(const std::string& dir,
                              const std::string& file,
                              const std::string& line) {
  if (file.empty() || file.find('/') != std::string::npos)
    return status::failure(status_code::invalid_argument,
                           "invalid trajectory file name '" + file + "'");
  if (line.find('\n') != std::string::npos)
    return status::failure(status_code::invalid_argument,
                           "a trajectory line must not contain a newline");
  std::string path = file;
  if (!dir.empty()) {
    if (auto made = make_dirs(dir); !made.ok())
      return made;
    path = dir + (dir.back() == '/' ? "" : "/") + file;
  }
  int fd = ::open(path.c_str(),
                  O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                  0600);
  if (fd < 0)
    return errno_status(errno, "cannot open " + path);
  std::string data = line + "\n";
  // One write: O_APPEND writes to regular files are not interleaved.
  ssize_t n;
  do {
    n = ::write(fd, data.data(), data.size());
  } while (n < 0 && errno == EINTR);
  status err;
  if (n < 0)
    err = errno_status(errno, "cannot write " + path);
  else if (static_cast<size_t>(n) != data.size())
    err = status::failure(status_code::resource_exhausted,
                          "short write to " + path + " (disk full?)");
  if (::close(fd) != 0 && err.ok())
    err = errno_status(errno, "cannot write " + path);
  return err;
}

} // namespace mibyan
