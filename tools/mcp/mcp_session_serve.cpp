// The requests and notifications an MCP server sends to Mibyan
// (docs/mcp.md, "Client capabilities"): ping, roots/list, sampling,
// elicitation, and the list_changed re-listing. Part of mcp_session
// (tools/mcp/mcp_session.hpp has the thread and lock rules).
#include "tools/mcp/mcp_session.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <thread>

#include "base/log.hpp"
#include "tools/mcp/mcp_elicitation.hpp"

namespace mibyan {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// file:// URI of an absolute path (RFC 8089), reserved bytes escaped.
std::string file_uri(const std::string& path) {
  static const char* hex = "0123456789ABCDEF";
  std::string out = "file://";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.'
        || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// Whether two catalogs differ in what the registry shows.
bool same_tools(const std::vector<mcp_tool_info>& a,
                const std::vector<mcp_tool_info>& b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].description != b[i].description
        || a[i].read_only != b[i].read_only
        || a[i].input_schema.dump() != b[i].input_schema.dump())
      return false;
  return true;
}

} // namespace

void mcp_session::set_sampling_handler(mcp_sampling_fn fn) {
  std::lock_guard<std::mutex> guard{mtx_};
  sampling_ = std::move(fn);
}

void mcp_session::set_elicitation_handler(mcp_elicitation_fn fn) {
  std::lock_guard<std::mutex> guard{mtx_};
  elicitation_ = std::move(fn);
}

void mcp_session::set_roots_provider(mcp_roots_fn fn) {
  std::lock_guard<std::mutex> guard{mtx_};
  roots_ = std::move(fn);
}

void mcp_session::set_tools_changed_handler(std::function<void()> fn) {
  std::lock_guard<std::mutex> guard{mtx_};
  tools_changed_fn_ = std::move(fn);
}

std::vector<std::string>
mcp_session::roots_for(const mcp_caller* caller) const {
  if (!s_.root_dirs.empty())
    return s_.root_dirs;
  if (caller != nullptr && !caller->cwd.empty() && caller->cwd[0] == '/')
    return {caller->cwd};
  mcp_roots_fn fn;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    fn = roots_;
  }
  if (fn)
    return fn();
  std::error_code ec;
  auto cwd = std::filesystem::current_path(ec);
  if (ec)
    return {};
  return {cwd.string()};
}

json::value mcp_session::roots_result(std::vector<std::string>* sent) {
  // The session whose call is in flight (the newest one, as for
  // elicitation); outside a call the provider's directories.
  std::optional<mcp_caller> newest;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!callers_.empty())
      newest = callers_.back().second;
  }
  auto dirs = roots_for(newest ? &*newest : nullptr);
  json::value list = json::value::make_array();
  for (auto& d : dirs) {
    if (d.empty() || d[0] != '/')
      continue;
    json::value root;
    root["uri"] = file_uri(d);
    auto name = std::filesystem::path(d).filename().string();
    root["name"] = name.empty() ? d : name;
    list.push_back(std::move(root));
  }
  json::value r;
  r["roots"] = std::move(list);
  if (sent != nullptr)
    *sent = std::move(dirs);
  return r;
}

void mcp_session::roots_answered(std::vector<std::string> dirs) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    roots_asked_ = true;
    roots_sent_ = std::move(dirs);
    ++roots_answers_;
  }
  cv_.notify_all();
}

void mcp_session::sync_roots(const mcp_caller& caller,
                             const std::atomic<bool>* cancel,
                             clock::time_point deadline) {
  if (!s_.roots || !s_.root_dirs.empty())
    return; // no roots, or the same configured list for every session
  auto dirs = roots_for(&caller);
  uint64_t answers;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!roots_asked_ || state_ != state::connected || dirs == roots_sent_)
      return;
    answers = roots_answers_;
  }
  MIBYAN_LOG(debug, "mcp", s_.name << ": roots changed for session '"
                                   << caller.session_id
                                   << "'; notifying the server");
  notify_roots_changed();
  // A server that caches the roots (as server-everything does) asks again
  // on the notification; the call goes out once it has its answer.
  auto until = std::min(deadline, clock::now() + std::chrono::seconds{2});
  // Over HTTP the answer is a POST of its own: the call waits until the
  // server accepted it too.
  std::unique_lock<std::mutex> lock{mtx_};
  while ((roots_answers_ == answers
          || (transport_ && transport_->undelivered() > 0))
         && state_ == state::connected
         && (cancel == nullptr || !cancel->load())) {
    if (cv_.wait_until(lock, std::min(until, clock::now() + milliseconds{10}))
          == std::cv_status::timeout
        && clock::now() >= until)
      break;
  }
}

void mcp_session::notify_roots_changed() {
  std::shared_ptr<mcp_transport> t;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (state_ != state::connected)
      return; // the next initialize announces the roots anyway
    t = transport_;
  }
  if (!t)
    return;
  json::value m;
  m["jsonrpc"] = "2.0";
  m["method"] = "notifications/roots/list_changed";
  auto st = t->send(m.dump());
  (void) st;
}

void mcp_session::schedule_refresh() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (state_ == state::closed)
      return;
    refresh_again_ = true;
    if (refreshing_)
      return; // the running refresh lists once more
    refreshing_ = true;
  }
  ++helper_threads_;
  std::thread([this] { refresh_loop(); }).detach();
}

void mcp_session::refresh_loop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (!refresh_again_ || state_ == state::closed) {
        refreshing_ = false;
        break;
      }
      refresh_again_ = false;
    }
    // After a connect in progress (its handshake lists the tools itself).
    std::lock_guard<std::mutex> cguard{connect_mtx_};
    std::vector<mcp_tool_info> before;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (state_ != state::connected || !transport_)
        continue; // the next connect lists them
      before = tools_;
    }
    tools_changed_ = false;
    auto listed = list_tools(clock::now()
                             + std::chrono::seconds{s_.connect_timeout});
    if (!listed) {
      MIBYAN_LOG(warning, "mcp", s_.name << ": listing the changed tools "
                                            "failed: "
                                         << listed.error);
      continue;
    }
    {
      std::lock_guard<std::mutex> guard{mtx_};
      tools_ = std::move(*listed);
    }
    tools_changed_from(before);
  }
  --helper_threads_;
}

void mcp_session::tools_changed_from(const std::vector<mcp_tool_info>& before) {
  std::function<void()> fn;
  size_t n;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (same_tools(before, tools_))
      return;
    fn = tools_changed_fn_;
    n = tools_.size();
  }
  if (!before.empty())
    MIBYAN_LOG(info, "mcp", s_.name << ": the tool list changed ("
                                    << before.size() << " -> " << n
                                    << " tools)");
  if (fn)
    fn();
}

void mcp_session::on_message(uint64_t gen, std::string text) {
  auto msgs = parse_mcp_messages(text);
  if (!msgs) {
    MIBYAN_LOG(warning, "mcp", s_.name << ": skipped a message that is no "
                                          "valid JSON ("
                                       << msgs.error << ")");
    return;
  }
  for (auto& m : *msgs)
    on_one(gen, std::move(m));
}

void mcp_session::on_one(uint64_t gen, mcp_incoming msg) {
  using kind = mcp_incoming::kind;
  switch (msg.k) {
    case kind::invalid:
      MIBYAN_LOG(warning, "mcp", s_.name << ": skipped " << msg.error);
      return;
    case kind::notification:
      if (msg.method == "notifications/tools/list_changed") {
        // Re-listed at once (a handshake in progress lists again itself);
        // the registry gets the new tools for the next turn.
        tools_changed_ = true;
        MIBYAN_LOG(debug, "mcp", s_.name << ": the server's tool list "
                                            "changed; listing it again");
        schedule_refresh();
      } else if (msg.method == "notifications/resources/list_changed"
                 || msg.method == "notifications/prompts/list_changed") {
        // Resource and prompt lists are not cached (list_resources /
        // list_prompts ask the server each time): the catalog is listed
        // again in case the server's tools changed with them.
        MIBYAN_LOG(debug, "mcp", s_.name << ": " << msg.method);
        schedule_refresh();
      }
      return;
    case kind::request:
      if (msg.method == "ping") {
        answer(gen, msg.id, json::value::make_object());
      } else if (msg.method == "roots/list" && s_.roots) {
        // Counted once written: sync_roots sends the waiting call only
        // after the answer, so the server reads them in that order.
        std::vector<std::string> dirs;
        answer(gen, msg.id, roots_result(&dirs));
        roots_answered(std::move(dirs));
      } else if (msg.method == "sampling/createMessage"
                 && s_.sampling.enabled) {
        serve_sampling(gen, msg.id, std::move(msg.params));
      } else if (msg.method == "elicitation/create" && s_.elicitation) {
        serve_elicitation(gen, msg.id, std::move(msg.params));
      } else {
        json::value err;
        err["code"] = -32601;
        err["message"] = "Method not found: " + msg.method;
        answer(gen, msg.id, nullptr, &err);
      }
      return;
    case kind::reply:
      break;
  }
  std::lock_guard<std::mutex> guard{mtx_};
  if (gen != gen_)
    return;
  auto i = pending_.find(msg.id.as_int());
  if (i == pending_.end()) {
    MIBYAN_LOG(warning, "mcp", s_.name << ": skipped a reply to unknown "
                                          "request id "
                                       << msg.id.as_int());
    return;
  }
  auto& p = *i->second;
  p.done = true;
  p.ok = msg.ok;
  if (msg.ok)
    p.result = std::move(msg.result);
  else
    p.error = std::move(msg.error);
  pending_.erase(i);
  cv_.notify_all();
}

void mcp_session::answer(uint64_t gen, const json::value& id,
                         json::value result, const json::value* error) {
  std::shared_ptr<mcp_transport> t;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (gen != gen_)
      return;
    t = transport_;
  }
  if (!t)
    return;
  json::value m;
  m["jsonrpc"] = "2.0";
  m["id"] = id;
  if (error != nullptr)
    m["error"] = *error;
  else
    m["result"] = std::move(result);
  auto st = t->send(m.dump());
  (void) st;
}

void mcp_session::serve_sampling(uint64_t gen, json::value id,
                                 json::value params) {
  auto refuse = [&](const std::string& why) {
    json::value err;
    err["code"] = -32603;
    err["message"] = why;
    answer(gen, id, nullptr, &err);
  };
  mcp_sampling_fn fn;
  bool has_handler;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    fn = sampling_;
    has_handler = static_cast<bool>(fn);
    auto now = clock::now();
    while (!sampling_times_.empty()
           && now - sampling_times_.front() > std::chrono::minutes{1})
      sampling_times_.pop_front();
    if (static_cast<int64_t>(sampling_times_.size()) >= s_.sampling.max_rpm) {
      fn = nullptr;
    } else {
      sampling_times_.push_back(now);
    }
  }
  if (!has_handler) {
    refuse("sampling is not available in this client");
    return;
  }
  if (!fn) {
    refuse("sampling rate limit reached (" + std::to_string(s_.sampling.max_rpm)
           + " requests per minute)");
    return;
  }
  ++helper_threads_;
  std::thread([this, gen, id, params = std::move(params), fn] {
    auto timeout = milliseconds{s_.sampling.timeout * 1000};
    auto r = fn(s_.name, params, timeout);
    if (r) {
      answer(gen, id, std::move(*r));
    } else {
      json::value err;
      err["code"] = -32603;
      err["message"] = "sampling failed: " + r.error;
      answer(gen, id, nullptr, &err);
    }
    --helper_threads_;
  }).detach();
}

void mcp_session::serve_elicitation(uint64_t gen, json::value id,
                                    json::value params) {
  auto refuse = [&](int code, const std::string& why) {
    json::value err;
    err["code"] = code;
    err["message"] = why;
    answer(gen, id, nullptr, &err);
  };
  auto mode = params.get_string("mode", "form");
  if (mode != "form") {
    // Only form mode is offered (the capability says so).
    refuse(-32602, "elicitation mode '" + mode + "' is not supported");
    return;
  }
  const json::value* schema = params.find("requestedSchema");
  if (schema == nullptr || !mcp_parse_form(*schema)) {
    refuse(-32602, "requestedSchema is not a form of primitive properties"
                   + (schema == nullptr ? std::string{}
                                        : ": " + mcp_parse_form(*schema).error));
    return;
  }
  mcp_elicitation_request r;
  r.server = s_.name;
  r.message = params.get_string("message", "");
  r.schema = *schema;
  r.timeout = milliseconds{s_.timeout * 1000};
  auto slot = std::make_shared<elicit_slot>();
  mcp_elicitation_fn fn;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    fn = elicitation_;
    if (!callers_.empty()) {
      // The newest running call is the one the server works for (calls of
      // a sequential server run one at a time).
      slot->caller = callers_.back().first;
      r.session_id = callers_.back().second.session_id;
    }
    if (state_ == state::closed)
      slot->stop = true;
    elicitations_.push_back(slot);
  }
  ++helper_threads_;
  std::thread([this, gen, id, r = std::move(r), fn, slot]() mutable {
    r.cancelled = &slot->stop;
    json::value out = fn ? fn(r) : mcp_elicit_result("decline");
    auto action = out.get_string("action", "");
    if (action == "accept") {
      auto fields = mcp_parse_form(r.schema);
      auto content = mcp_complete_form(*fields, out.find("content")
                                                  ? *out.find("content")
                                                  : json::value{});
      if (!content) {
        MIBYAN_LOG(warning, "mcp", s_.name << ": the elicitation answer does "
                                              "not fit the form ("
                                           << content.error
                                           << "); answering cancel");
        out = mcp_elicit_result("cancel");
      } else {
        out["content"] = std::move(*content);
      }
    } else if (action != "decline" && action != "cancel") {
      out = mcp_elicit_result("cancel");
    }
    MIBYAN_LOG(info, "mcp", s_.name << ": elicitation answered "
                                    << out.get_string("action", ""));
    answer(gen, id, std::move(out));
    {
      std::lock_guard<std::mutex> guard{mtx_};
      elicitations_.erase(std::remove(elicitations_.begin(),
                                      elicitations_.end(), slot),
                          elicitations_.end());
    }
    --helper_threads_;
  }).detach();
}

} // namespace mibyan
