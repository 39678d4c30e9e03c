#include "acp/acp_agent.hpp"

#include <sys/stat.h>

#include "acp/acp_mcp.hpp"
#include "acp/acp_session.hpp"
#include "base/log.hpp"
#include "mibyan/runtime.hpp"
#include "runtime/session_access.hpp"
#include "storage/session_id.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

namespace {

constexpr int64_t protocol_version = 1;
// Threads of session/new, session/load and session/close at once.
constexpr size_t max_workers = 64;
// Sessions one client may hold open (session/close frees them).
constexpr size_t max_sessions = 1024;

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

} // namespace

acp_agent::acp_agent(runtime& rt, acp_connection& conn, acp_agent_settings s)
  : rt_(rt), conn_(conn), settings_(std::move(s)) {}

acp_agent::~acp_agent() { shutdown(); }

void acp_agent::update(const std::string& sid, json::value u) {
  json::value p;
  p["sessionId"] = sid;
  p["update"] = std::move(u);
  conn_.notify("session/update", std::move(p));
}

acp_agent::session_ptr acp_agent::find(const std::string& id) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second;
}

bool acp_agent::spawn_work(std::function<void()> fn) {
  std::vector<std::thread> finished;
  bool refused = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    // Threads that ended are joined here, so a long editor session does
    // not pile them up.
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (it->done->load()) {
        finished.push_back(std::move(it->thread));
        it = workers_.erase(it);
      } else {
        ++it;
      }
    }
    if (workers_.size() >= max_workers) {
      refused = true;
    } else {
      auto done = std::make_shared<std::atomic<bool>>(false);
      std::thread t([fn = std::move(fn), done] {
        try {
          fn();
        } catch (const std::exception& e) {
          MIBYAN_LOG(error, "acp", "a request failed: " << e.what());
        }
        done->store(true);
      });
      workers_.push_back(worker{std::move(t), std::move(done)});
    }
  }
  for (auto& t : finished)
    t.join();
  return !refused;
}

void acp_agent::on_request(const json::value& id, const std::string& method,
                           const json::value& params) {
  MIBYAN_LOG(debug, "acp", "request " << method << " id " << id.dump());
  if (method == "initialize") {
    initialize(id, params);
    return;
  }
  bool known = method == "authenticate" || method == "session/new"
               || method == "session/load" || method == "session/prompt"
               || method == "session/set_mode" || method == "session/close";
  if (!known) {
    conn_.reply_error(id, acp_error::method_not_found,
                      "Method not found: " + method);
    return;
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!initialized_) {
      conn_.reply_error(id, acp_error::invalid_request,
                        "Invalid request: call initialize first");
      return;
    }
    if (closing_) {
      conn_.reply_error(id, acp_error::internal_error,
                        "the agent is shutting down");
      return;
    }
  }
  if (method == "authenticate") {
    // No authentication methods are offered (initialize's authMethods is
    // empty): provider keys come from $MIBYAN_HOME/.env or the
    // environment.
    conn_.reply_error(id, acp_error::invalid_params,
                      "Mibyan offers no authentication methods");
  } else if (method == "session/new") {
    if (!spawn_work([this, id, params] { new_session(id, params); }))
      conn_.reply_error(id, acp_error::internal_error,
                        "too many session requests at once; retry later");
  } else if (method == "session/load") {
    if (!spawn_work([this, id, params] { load_session(id, params); }))
      conn_.reply_error(id, acp_error::internal_error,
                        "too many session requests at once; retry later");
  } else if (method == "session/prompt") {
    prompt(id, params);
  } else if (method == "session/set_mode") {
    set_mode(id, params);
  } else if (method == "session/close") {
    if (!spawn_work([this, id, params] { close_session(id, params); }))
      conn_.reply_error(id, acp_error::internal_error,
                        "too many session requests at once; retry later");
  }
}

void acp_agent::on_notification(const std::string& method,
                                const json::value& params) {
  MIBYAN_LOG(debug, "acp", "notification " << method);
  if (method == "session/cancel")
    cancel(params);
  else if (method != "$/cancel_request")
    MIBYAN_LOG(info, "acp", "ignored the notification " << method);
}

void acp_agent::initialize(const json::value& id, const json::value& params) {
  auto v = params.find("protocolVersion");
  if (v == nullptr || !v->is_int() || v->as_int() < 0) {
    conn_.reply_error(id, acp_error::invalid_params,
                      "Invalid params: protocolVersion must be a "
                      "non-negative integer");
    return;
  }
  bool read = false;
  bool write = false;
  if (auto caps = params.find("clientCapabilities");
      caps != nullptr && caps->is_object())
    if (auto fs = caps->find("fs"); fs != nullptr && fs->is_object()) {
      read = fs->get_bool("readTextFile", false);
      write = fs->get_bool("writeTextFile", false);
    }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    initialized_ = true;
    fs_read_ = read;
    fs_write_ = write;
  }
  json::value prompt_caps;
  prompt_caps["image"] = false;
  prompt_caps["audio"] = false;
  prompt_caps["embeddedContext"] = true;
  json::value mcp_caps;
  mcp_caps["http"] = true;
  mcp_caps["sse"] = false;
  json::value caps;
  caps["loadSession"] = true;
  caps["promptCapabilities"] = std::move(prompt_caps);
  caps["mcpCapabilities"] = std::move(mcp_caps);
  json::value session_caps;
  session_caps["close"] = json::value::make_object();
  caps["sessionCapabilities"] = std::move(session_caps);
  json::value info;
  info["name"] = "mibyan";
  info["title"] = "Mibyan";
  info["version"] = settings_.version;
  json::value r;
  // Version 1 is the only one: the answer to any request (docs/acp.md).
  r["protocolVersion"] = protocol_version;
  r["agentCapabilities"] = std::move(caps);
  r["authMethods"] = json::value::make_array();
  r["agentInfo"] = std::move(info);
  MIBYAN_LOG(info, "acp", "initialized (client protocol version "
                            << v->as_int() << ", fs read " << read
                            << ", fs write " << write << ")");
  conn_.reply(id, std::move(r));
}

json::value acp_agent::modes_of(const acp_session& s) const {
  auto mode = [](const char* id, const char* name, const char* text) {
    json::value m;
    m["id"] = id;
    m["name"] = name;
    m["description"] = text;
    return m;
  };
  json::value modes;
  modes["currentModeId"] = s.mode;
  auto list = json::value::make_array();
  list.push_back(mode("ask", "Ask", "Flagged commands ask for permission"));
  list.push_back(mode("yolo", "Yolo",
                      "Flagged commands run without asking (hardline "
                      "commands and deny rules still refuse)"));
  modes["availableModes"] = std::move(list);
  return modes;
}

void acp_agent::send_commands(const acp_session& s) {
  auto cmd = [](const char* name, const char* text) {
    json::value c;
    c["name"] = name;
    c["description"] = text;
    return c;
  };
  json::value u;
  u["sessionUpdate"] = "available_commands_update";
  auto list = json::value::make_array();
  list.push_back(cmd("help", "List Mibyan's commands and modes"));
  list.push_back(cmd("yolo", "Switch between the ask and yolo modes"));
  u["availableCommands"] = std::move(list);
  update(s.id, std::move(u));
}

result<acp_agent::session_ptr>
acp_agent::open_session(const std::string& sid, const std::string& cwd,
                        const json::value& mcp_servers) {
  auto s = std::make_shared<acp_session>();
  s->id = sid;
  s->cwd = cwd;
  s->runtime_id = sid;
  if (mcp_servers.is_array() && !mcp_servers.as_array().empty()) {
    std::string why;
    auto tools = acp_session_tools::start(rt_, cwd, mcp_servers, why);
    if (!tools)
      return status::failure(status_code::invalid_argument, why);
    s->tools = std::move(tools);
  }
  bind_runtime_session(s, sid);
  return s;
}

void acp_agent::new_session(const json::value& id, const json::value& params) {
  auto cwd = params.get_string("cwd");
  if (cwd.empty() || cwd[0] != '/' || !is_directory(cwd)) {
    conn_.reply_error(id, acp_error::invalid_params,
                      "Invalid params: cwd must be the absolute path of a "
                      "directory, got '" + cwd + "'");
    return;
  }
  auto servers = params.find("mcpServers");
  if (servers != nullptr && !servers->is_array() && !servers->is_null()) {
    conn_.reply_error(id, acp_error::invalid_params,
                      "Invalid params: mcpServers must be an array");
    return;
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (sessions_.size() >= max_sessions) {
      conn_.reply_error(id, acp_error::internal_error,
                        "too many open sessions (" + std::to_string(max_sessions)
                          + "); close some with session/close");
      return;
    }
  }
  // A fresh id: not open here and not stored (ids carry only 24 random
  // bits per second).
  auto store = runtime_session_store(rt_);
  std::string sid;
  for (;;) {
    sid = new_session_id();
    bool taken = false;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      taken = sessions_.count(sid) > 0;
      if (!taken)
        sessions_[sid] = nullptr; // reserved until opened
    }
    if (!taken && store && store->get_session(sid)) {
      std::lock_guard<std::mutex> guard{mtx_};
      sessions_.erase(sid);
      taken = true;
    }
    if (!taken)
      break;
  }
  auto opened = open_session(sid, cwd, servers ? *servers : json::value{});
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (opened)
      sessions_[sid] = *opened;
    else
      sessions_.erase(sid);
  }
  if (!opened) {
    conn_.reply_error(id, acp_error::invalid_params, opened.error);
    return;
  }
  auto s = std::move(*opened);
  MIBYAN_LOG(info, "acp", "session " << sid << " in " << cwd);
  json::value r;
  r["sessionId"] = sid;
  r["modes"] = modes_of(*s);
  conn_.reply(id, std::move(r));
  send_commands(*s);
}

void acp_agent::load_session(const json::value& id,
                             const json::value& params) {
  auto sid = params.get_string("sessionId");
  auto store = runtime_session_store(rt_);
  if (!store) {
    conn_.reply_error(id, acp_error::internal_error,
                      "the session store is unavailable");
    return;
  }
  auto info = sid.empty() ? decltype(store->get_session(sid)){}
                          : store->get_session(sid);
  if (!info) {
    conn_.reply_error(id, acp_error::resource_not_found,
                      "Resource not found: no session '" + sid + "'");
    return;
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (sessions_.count(sid) == 0 && sessions_.size() >= max_sessions) {
      conn_.reply_error(id, acp_error::internal_error,
                        "too many open sessions (" + std::to_string(max_sessions)
                          + "); close some with session/close");
      return;
    }
  }
  if (auto old = find(sid); old) {
    std::lock_guard<std::mutex> guard{old->mtx};
    if (old->running) {
      conn_.reply_error(id, acp_error::invalid_request,
                        "Invalid request: a prompt of session '" + sid
                          + "' is running");
      return;
    }
  }
  // The stored working directory stays the session's (a moved project
  // keeps its history); a session without one takes the client's.
  auto cwd = info->cwd;
  if (cwd.empty() || !is_directory(cwd))
    cwd = params.get_string("cwd");
  auto servers = params.find("mcpServers");
  auto opened = open_session(sid, cwd, servers ? *servers : json::value{});
  if (!opened) {
    conn_.reply_error(id, acp_error::invalid_params, opened.error);
    return;
  }
  auto s = std::move(*opened);
  session_ptr replaced;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& slot = sessions_[sid];
    replaced = slot;
    slot = s;
  }
  if (replaced && replaced->tools)
    replaced->tools->stop();
  replay_history(*s);
  json::value r;
  r["modes"] = modes_of(*s);
  conn_.reply(id, std::move(r));
  send_commands(*s);
}

void acp_agent::set_mode(const json::value& id, const json::value& params) {
  auto s = find(params.get_string("sessionId"));
  if (!s) {
    conn_.reply_error(id, acp_error::resource_not_found,
                      "Resource not found: no session '"
                        + params.get_string("sessionId") + "'");
    return;
  }
  auto mode = params.get_string("modeId");
  if (mode != "ask" && mode != "yolo") {
    conn_.reply_error(id, acp_error::invalid_params,
                      "Invalid params: unknown mode '" + mode
                        + "' (ask or yolo)");
    return;
  }
  std::string rsid;
  {
    std::lock_guard<std::mutex> guard{s->mtx};
    s->mode = mode;
    rsid = s->runtime_id;
  }
  // The update first: a client sees the new mode by the time its request
  // resolves.
  announce_mode(*s, rsid, mode);
  conn_.reply(id, json::value::make_object());
}

void acp_agent::announce_mode(const acp_session& s, const std::string& rsid,
                              const std::string& mode) {
  rt_.set_session_yolo(rsid, mode == "yolo");
  json::value u;
  u["sessionUpdate"] = "current_mode_update";
  u["currentModeId"] = mode;
  update(s.id, std::move(u));
}

void acp_agent::cancel(const json::value& params) {
  auto s = find(params.get_string("sessionId"));
  if (!s) {
    MIBYAN_LOG(info, "acp", "session/cancel for an unknown session '"
                              << params.get_string("sessionId") << "'");
    return;
  }
  std::string rsid;
  {
    std::lock_guard<std::mutex> guard{s->mtx};
    if (!s->running)
      return;
    s->cancelled = true;
    rsid = s->runtime_id;
  }
  MIBYAN_LOG(info, "acp", "session " << s->id << ": cancelled by the client");
  rt_.interrupt(rsid, "the user cancelled the turn in the editor");
}

void acp_agent::release(const session_ptr& s, bool close) {
  std::string rsid;
  {
    std::lock_guard<std::mutex> guard{s->mtx};
    rsid = s->runtime_id;
  }
  for (auto& id : {s->id, rsid}) {
    rt_.clear_session_channels(id);
    set_session_file_access(rt_, id, nullptr);
    if (id == rsid)
      break;
  }
  if (s->tools)
    s->tools->stop();
  if (close) {
    rt_.close_session(rsid);
    if (rsid != s->id)
      rt_.close_session(s->id);
  }
}

void acp_agent::close_session(const json::value& id,
                              const json::value& params) {
  auto sid = params.get_string("sessionId");
  session_ptr s;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = sessions_.find(sid);
    if (it != sessions_.end() && it->second) {
      s = it->second;
      sessions_.erase(it); // no new prompts
    }
  }
  if (!s) {
    conn_.reply(id, json::value::make_object()); // closing is idempotent
    return;
  }
  std::string rsid;
  bool running = false;
  {
    std::lock_guard<std::mutex> guard{s->mtx};
    running = s->running;
    if (running)
      s->cancelled = true;
    rsid = s->runtime_id;
  }
  if (running) {
    rt_.interrupt(rsid, "the editor closed the session");
    std::unique_lock<std::mutex> lock{mtx_};
    idle_cv_.wait_for(lock, std::chrono::seconds(20), [&] {
      std::lock_guard<std::mutex> guard{s->mtx};
      return !s->running;
    });
  }
  release(s, true);
  MIBYAN_LOG(info, "acp", "session " << sid << " closed");
  conn_.reply(id, json::value::make_object());
}

void acp_agent::on_closed() {
  std::vector<session_ptr> running;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    closing_ = true;
    for (auto& [id, s] : sessions_)
      if (s) // null: reserved by a session/new under way
        running.push_back(s);
  }
  for (auto& s : running) {
    std::string rsid;
    {
      std::lock_guard<std::mutex> guard{s->mtx};
      if (!s->running)
        continue;
      s->cancelled = true;
      rsid = s->runtime_id;
    }
    rt_.interrupt(rsid, "the editor disconnected");
  }
  std::lock_guard<std::mutex> guard{mtx_};
  idle_cv_.notify_all();
}

void acp_agent::shutdown(std::chrono::milliseconds wait) {
  on_closed();
  {
    std::unique_lock<std::mutex> lock{mtx_};
    if (!idle_cv_.wait_for(lock, wait, [&] { return running_ == 0; }))
      MIBYAN_LOG(warning, "acp", running_ << " turn(s) still running at "
                                             "shutdown");
  }
  std::vector<worker> workers;
  std::map<std::string, session_ptr> sessions;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    workers.swap(workers_);
    sessions.swap(sessions_);
  }
  for (auto& w : workers)
    if (w.thread.joinable())
      w.thread.join();
  for (auto& [id, s] : sessions)
    if (s)
      release(s, false);
}

} // namespace mibyan
