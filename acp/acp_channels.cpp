// The per-session channels of the ACP agent (acp/acp_agent.hpp): flagged
// commands asked with session/request_permission, file reads and writes
// through fs/read_text_file and fs/write_text_file, and the edit reports
// that become diff content (docs/acp.md, "Approvals", "File access").
#include "acp/acp_agent.hpp"

#include "acp/acp_mcp.hpp"
#include "acp/acp_session.hpp"
#include "acp/acp_updates.hpp"
#include "base/log.hpp"
#include "mibyan/runtime.hpp"
#include "runtime/session_access.hpp"
#include "tools/client_files.hpp"

namespace mibyan {

namespace {

json::value permission_option(const char* id, const char* name) {
  json::value o;
  o["optionId"] = id;
  o["name"] = name;
  o["kind"] = id;
  return o;
}

// The running call a flagged command belongs to: a terminal call with
// that command, else an execute_code / patch / write_file call whose
// arguments contain it; "" when none matches.
std::string call_of(const acp_session& s, const std::string& command) {
  std::string loose;
  for (auto& [id, call] : s.calls) {
    auto& [tool, args] = call;
    if (!args.is_object())
      continue;
    if (tool == "terminal" && args.get_string("command") == command)
      return id;
    if (loose.empty() && !command.empty()
        && args.dump().find(json::quote(command).substr(1)) != std::string::npos)
      loose = id;
  }
  if (loose.empty() && s.calls.size() == 1)
    loose = s.calls.begin()->first;
  return loose;
}

} // namespace

void acp_agent::bind_runtime_session(const session_ptr& s,
                                     const std::string& rsid) {
  std::weak_ptr<acp_session> weak = s;
  session_channels ch;
  ch.context = approval_context::unattended;
  ch.approval = [this, weak](const approval_prompt& p) -> approval_choice {
    auto s = weak.lock();
    if (!s)
      return approval_choice::deny;
    std::string call_id;
    {
      std::lock_guard<std::mutex> guard{s->mtx};
      // Patterns rejected "always" in this session are denied unasked.
      bool all_denied = !p.descriptions.empty();
      for (auto& d : p.descriptions)
        all_denied = all_denied && s->denied.count(d) > 0;
      if (all_denied) {
        MIBYAN_LOG(info, "acp", "session " << s->id
                                  << ": denied unasked (rejected always)");
        return approval_choice::deny;
      }
      call_id = call_of(*s, p.command);
      if (call_id.empty())
        call_id = "permission-" + std::to_string(++s->permissions);
    }
    std::string why;
    for (auto& d : p.descriptions)
      why += (why.empty() ? "" : "; ") + d;
    json::value tool_call;
    tool_call["toolCallId"] = call_id;
    json::value title_args;
    title_args["command"] = p.command;
    tool_call["title"] = acp_tool_title("terminal", title_args);
    tool_call["kind"] = "execute";
    tool_call["status"] = "pending";
    json::value raw;
    raw["command"] = p.command;
    raw["reasons"] = json::value::make_array();
    for (auto& d : p.descriptions)
      raw["reasons"].push_back(d);
    if (!p.guardian_verdict.empty())
      raw["guardian_verdict"] = p.guardian_verdict;
    tool_call["rawInput"] = std::move(raw);
    json::value block;
    block["type"] = "text";
    block["text"] = "Flagged: " + (why.empty() ? std::string{"dangerous command"}
                                               : why)
                    + "\n```sh\n" + p.command + "\n```";
    json::value content;
    content["type"] = "content";
    content["content"] = std::move(block);
    tool_call["content"] = json::array{std::move(content)};
    auto options = json::value::make_array();
    options.push_back(permission_option("allow_once", "Allow once"));
    if (p.allow_always || p.allow_session)
      options.push_back(permission_option("allow_always", "Always allow"));
    options.push_back(permission_option("reject_once", "Reject"));
    options.push_back(permission_option("reject_always", "Always reject"));
    json::value params;
    params["sessionId"] = s->id;
    params["toolCall"] = std::move(tool_call);
    params["options"] = std::move(options);
    auto cancelled = p.cancelled;
    auto answer = conn_.request(
      "session/request_permission", std::move(params),
      std::chrono::duration_cast<std::chrono::milliseconds>(p.timeout),
      [s, cancelled] {
        return s->cancelled.load()
               || (cancelled != nullptr && cancelled->load());
      });
    if (!answer) {
      MIBYAN_LOG(info, "acp", "session " << s->id << ": permission request: "
                                << answer.error);
      return answer.code == status_code::timeout ? approval_choice::timeout
                                                 : approval_choice::deny;
    }
    auto outcome = answer->find("outcome");
    if (outcome == nullptr || !outcome->is_object()
        || outcome->get_string("outcome") != "selected")
      return approval_choice::deny; // "cancelled" or malformed
    auto option = outcome->get_string("optionId");
    if (option == "allow_once")
      return approval_choice::once;
    if (option == "allow_always")
      return p.allow_always ? approval_choice::always
             : p.allow_session ? approval_choice::session
                               : approval_choice::once;
    if (option == "reject_always") {
      std::lock_guard<std::mutex> guard{s->mtx};
      for (auto& d : p.descriptions)
        s->denied.insert(d);
    }
    return approval_choice::deny;
  };
  // Clarify: ACP has no question method; the tool tells the model to go on
  // by its own judgement.
  rt_.set_session_channels(rsid, std::move(ch));

  bool read = false;
  bool write = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    read = fs_read_;
    write = fs_write_;
  }
  auto files = std::make_shared<client_file_access>();
  auto timeout = settings_.fs_timeout;
  if (read)
    files->read = [this, weak, timeout](const std::string& path,
                                        const std::atomic<bool>* cancelled)
      -> result<std::string> {
      auto s = weak.lock();
      if (!s)
        return result<std::string>::failure(status_code::unavailable,
                                             "the session is closed");
      json::value params;
      params["sessionId"] = s->id;
      params["path"] = path;
      auto r = conn_.request("fs/read_text_file", std::move(params), timeout,
                             [cancelled] {
                               return cancelled != nullptr
                                      && cancelled->load();
                             });
      if (!r)
        return result<std::string>::failure(r.code, r.error);
      auto c = r->find("content");
      if (c == nullptr || !c->is_string())
        return result<std::string>::failure(
          status_code::invalid_argument,
          "the client's answer has no text content");
      return c->as_string();
    };
  if (write)
    files->write = [this, weak, timeout](const std::string& path,
                                         const std::string& content,
                                         const std::atomic<bool>* cancelled)
      -> status {
      auto s = weak.lock();
      if (!s)
        return status::failure(status_code::unavailable,
                               "the session is closed");
      json::value params;
      params["sessionId"] = s->id;
      params["path"] = path;
      params["content"] = content;
      auto r = conn_.request("fs/write_text_file", std::move(params), timeout,
                             [cancelled] {
                               return cancelled != nullptr
                                      && cancelled->load();
                             });
      return r ? status{} : status::failure(r.code, r.error);
    };
  files->changed = [weak](const std::string& call_id, const std::string& path,
                          const std::string* old_text,
                          const std::string& new_text) {
    auto s = weak.lock();
    if (!s)
      return;
    acp_file_diff d;
    d.path = path;
    d.has_old = old_text != nullptr;
    if (old_text != nullptr)
      d.old_text = *old_text;
    d.new_text = new_text;
    std::lock_guard<std::mutex> guard{s->mtx};
    s->diffs[call_id].push_back(std::move(d));
  };
  set_session_file_access(rt_, rsid, std::move(files));
  if (s->tools)
    s->tools->bind(rsid);
  {
    std::lock_guard<std::mutex> guard{s->mtx};
    if (s->mode == "yolo")
      rt_.set_session_yolo(rsid, true);
  }
}

} // namespace mibyan
