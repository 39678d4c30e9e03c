// The MCP server core (mcp_server/server_core.hpp): sessions, the
// JSON-RPC dispatch and the ticker (progress heartbeats, list_changed, idle
// sessions). What the core sends to a client (responses, notifications,
// server-to-client requests and the approval and clarify channels) is in
// mcp_server/core_outbound.cpp, the tool and resource methods in
// mcp_server/core_methods.cpp.
#include "mcp_server/server_core.hpp"

#include <algorithm>

#include "base/crypto.hpp"
#include "base/log.hpp"
#include "mcp_server/core_impl.hpp"

namespace mibyan {

using steady = std::chrono::steady_clock;

const std::vector<std::string>& mcp_server_protocol_versions() {
  static const std::vector<std::string> v{"2025-11-25", "2025-06-18"};
  return v;
}

std::string mcp_error_response(const json::value& id, int code,
                               const std::string& message) {
  json::value err;
  err["code"] = code;
  err["message"] = message;
  json::value m;
  m["jsonrpc"] = "2.0";
  m["id"] = id;
  m["error"] = std::move(err);
  return m.dump();
}

const char* const mcp_log_levels[8] = {"debug",   "info",  "notice",
                                      "warning", "error", "critical",
                                      "alert",   "emergency"};

namespace {

int log_level_index(const std::string& name) {
  for (int i = 0; i < 8; ++i)
    if (name == mcp_log_levels[i])
      return i;
  return -1;
}

bool valid_request_id(const json::value& id) {
  return id.is_string() || id.is_int();
}

} // namespace

// -- construction and sessions ------------------------------------------------

mcp_server_core::mcp_server_core(mcp_backend backend,
                                 mcp_core_settings settings)
    : p_(std::make_unique<impl>()) {
  p_->backend = std::move(backend);
  p_->cfg = std::move(settings);
}

std::shared_ptr<mcp_server_core>
mcp_server_core::create(mcp_backend backend, mcp_core_settings settings) {
  std::shared_ptr<mcp_server_core> core(
    new mcp_server_core(std::move(backend), std::move(settings)));
  core->p_->self = core;
  // The list the first list_changed check compares with.
  bool changed = false;
  (void)core->p_->current_tools(&changed);
  // Event-driven: a registry change wakes the ticker, which compares the
  // offered list at once (the interval check stays for toolset changes).
  if (core->p_->backend.watch_tools) {
    auto* p = core->p_.get();
    core->p_->tools_watch = core->p_->backend.watch_tools([p] {
      {
        std::lock_guard<std::mutex> g{p->mtx};
        p->tools_dirty = true;
      }
      p->tick_cv.notify_all();
    });
  }
  std::weak_ptr<mcp_server_core> weak = core;
  core->p_->ticker = std::thread([weak, p = core->p_.get()] {
    p->tick_loop(weak);
  });
  return core;
}

mcp_server_core::~mcp_server_core() {
  shutdown();
}

void mcp_server_core::shutdown() {
  // First: no registry callback may reach this core any more (waits for
  // one running now; it takes p_->mtx, which is not held here).
  uint64_t watch = 0;
  {
    std::lock_guard<std::mutex> g{p_->mtx};
    std::swap(watch, p_->tools_watch);
  }
  if (watch != 0 && p_->backend.unwatch_tools)
    p_->backend.unwatch_tools(watch);
  {
    std::lock_guard<std::mutex> g{p_->mtx};
    if (p_->stopping)
      return;
    p_->stopping = true;
  }
  p_->tick_cv.notify_all();
  if (p_->ticker.joinable()) {
    if (p_->ticker.get_id() == std::this_thread::get_id())
      p_->ticker.detach();
    else
      p_->ticker.join();
  }
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> g{p_->mtx};
    for (auto& [id, s] : p_->sessions)
      ids.push_back(id);
  }
  for (auto& id : ids)
    close_session(id, "the server is shutting down");
}

std::shared_ptr<mcp_server_core::session>
mcp_server_core::open_session(mcp_outbound out) {
  auto s = std::make_shared<session>();
  s->id = random_hex(16);
  s->mibyan_id = p_->cfg.session_prefix + s->id;
  s->out = std::move(out);
  s->last_seen = steady::now();
  std::lock_guard<std::mutex> g{p_->mtx};
  if (p_->stopping || p_->sessions.size() >= p_->cfg.max_sessions)
    return nullptr;
  p_->sessions[s->id] = s;
  return s;
}

std::shared_ptr<mcp_server_core::session>
mcp_server_core::find_session(const std::string& id) const {
  std::lock_guard<std::mutex> g{p_->mtx};
  auto i = p_->sessions.find(id);
  return i == p_->sessions.end() ? nullptr : i->second;
}

void mcp_server_core::set_outbound(const std::shared_ptr<session>& s,
                                   mcp_outbound out) {
  std::lock_guard<std::mutex> g{s->mtx};
  s->out = std::move(out);
}

bool mcp_server_core::close_session(const std::string& id,
                                    const std::string& why) {
  std::shared_ptr<session> s;
  {
    std::lock_guard<std::mutex> g{p_->mtx};
    auto i = p_->sessions.find(id);
    if (i == p_->sessions.end())
      return false;
    s = i->second;
    p_->sessions.erase(i);
  }
  bool had_calls = false;
  bool was_initialized = false;
  {
    std::lock_guard<std::mutex> g{s->mtx};
    s->closed = true;
    was_initialized = s->initialized;
    had_calls = !s->calls.empty();
    for (auto& [k, c] : s->calls)
      c->abandoned = true;
    s->calls.clear();
    for (auto& [k, o] : s->outgoing) {
      std::lock_guard<std::mutex> og{o->m};
      o->done = true;
      o->error = "the MCP session ended";
      o->cv.notify_all();
    }
    s->outgoing.clear();
    s->out = nullptr;
  }
  MIBYAN_LOG(info, "mcp-serve", "session " << id << " closed: " << why);
  if (had_calls && p_->backend.interrupt)
    p_->backend.interrupt(s->mibyan_id, why);
  if (was_initialized && p_->backend.clear_channels)
    p_->backend.clear_channels(s->mibyan_id);
  if (p_->backend.close_session)
    p_->backend.close_session(s->mibyan_id);
  return true;
}

const std::string& mcp_server_core::id_of(const session& s) {
  return s.id;
}

const std::string& mcp_server_core::mibyan_id_of(const session& s) {
  return s.mibyan_id;
}

bool mcp_server_core::initialized(const session& s) {
  std::lock_guard<std::mutex> g{s.mtx};
  return s.initialized;
}

std::string mcp_server_core::protocol_version_of(const session& s) {
  std::lock_guard<std::mutex> g{s.mtx};
  return s.version;
}

size_t mcp_server_core::session_count() const {
  std::lock_guard<std::mutex> g{p_->mtx};
  return p_->sessions.size();
}

size_t mcp_server_core::running_calls() const {
  std::vector<std::shared_ptr<session>> all;
  {
    std::lock_guard<std::mutex> g{p_->mtx};
    for (auto& [id, s] : p_->sessions)
      all.push_back(s);
  }
  size_t n = 0;
  for (auto& s : all) {
    std::lock_guard<std::mutex> g{s->mtx};
    n += s->calls.size();
  }
  return n;
}

// -- dispatch --------------------------------------------------------------------

void mcp_server_core::reject(const std::shared_ptr<session>& s, int code,
                             const std::string& message) {
  p_->fail(s, nullptr, code, message);
}

void mcp_server_core::handle_text(const std::shared_ptr<session>& s,
                                  std::string_view text) {
  if (text.size() > p_->cfg.max_message_bytes) {
    p_->fail(s, nullptr, mcp_errors::invalid_request,
             "message too large: " + std::to_string(text.size())
               + " bytes, the limit is "
               + std::to_string(p_->cfg.max_message_bytes));
    return;
  }
  auto parsed = json::parse(text);
  if (!parsed) {
    p_->fail(s, nullptr, mcp_errors::parse_error,
             "Parse error: " + parsed.error);
    return;
  }
  handle(s, *parsed.v);
}

void mcp_server_core::handle(const std::shared_ptr<session>& s,
                             const json::value& msg) {
  auto& p = *p_;
  {
    std::lock_guard<std::mutex> g{s->mtx};
    s->last_seen = steady::now();
    if (s->closed)
      return;
  }
  if (msg.is_array()) {
    p.fail(s, nullptr, mcp_errors::invalid_request,
           "Invalid Request: JSON-RPC batches are not supported (protocol "
           "2025-06-18 and later)");
    return;
  }
  if (!msg.is_object() || msg.get_string("jsonrpc") != "2.0") {
    p.fail(s, nullptr, mcp_errors::invalid_request,
           "Invalid Request: not a JSON-RPC 2.0 message");
    return;
  }
  const auto* method = msg.find("method");
  const auto* id = msg.find("id");
  if (method == nullptr) {
    if (id != nullptr && (msg.find("result") || msg.find("error"))) {
      p.on_reply(s, msg);
      return;
    }
    p.fail(s, id != nullptr && valid_request_id(*id) ? *id : json::value{},
           mcp_errors::invalid_request,
           "Invalid Request: neither a request, a notification nor a "
           "response");
    return;
  }
  if (!method->is_string()) {
    p.fail(s, id != nullptr && valid_request_id(*id) ? *id : json::value{},
           mcp_errors::invalid_request, "Invalid Request: method is not a "
                                        "string");
    return;
  }
  json::value params = json::value::make_object();
  if (const auto* pr = msg.find("params")) {
    if (!pr->is_object()) {
      if (id != nullptr && valid_request_id(*id))
        p.fail(s, *id, mcp_errors::invalid_params,
               "Invalid params: params must be an object");
      return;
    }
    params = *pr;
  }
  const auto& m = method->as_string();
  if (id == nullptr) {
    p.on_notification(s, m, params);
    return;
  }
  if (!valid_request_id(*id)) {
    p.fail(s, nullptr, mcp_errors::invalid_request,
           "Invalid Request: the id must be a string or an integer");
    return;
  }
  p.on_request(s, *id, m, params);
}

void mcp_server_core::impl::on_notification(const std::shared_ptr<session>& s,
                                            const std::string& method,
                                            const json::value& params) {
  if (method == "notifications/cancelled") {
    const auto* rid = params.find("requestId");
    if (rid != nullptr && valid_request_id(*rid))
      cancel(s, *rid, "cancelled by the MCP client: "
                        + params.get_string("reason", "no reason given"));
    return;
  }
  if (method == "notifications/initialized") {
    std::lock_guard<std::mutex> g{s->mtx};
    s->client_ready = true;
    return;
  }
  // Other notifications (progress, roots/list_changed, ...) need nothing.
  MIBYAN_LOG(debug, "mcp-serve", "session " << s->id << ": notification "
                                            << method << " ignored");
}

void mcp_server_core::impl::on_request(const std::shared_ptr<session>& s,
                                       const json::value& id,
                                       const std::string& method,
                                       const json::value& params) {
  if (method == "initialize") {
    initialize(s, id, params);
    return;
  }
  if (method == "ping") {
    respond(s, id, json::value::make_object());
    return;
  }
  if (!initialized_now(s)) {
    fail(s, id, mcp_errors::invalid_request,
         "Invalid Request: the session is not initialized (send initialize "
         "first)");
    return;
  }
  if (method == "tools/list")
    return list_tools(s, id, params);
  if (method == "tools/call")
    return call_tool(s, id, params);
  if (method == "logging/setLevel") {
    auto level = params.get_string("level");
    int i = log_level_index(level);
    if (i < 0) {
      fail(s, id, mcp_errors::invalid_params,
           "Invalid params: level must be one of debug, info, notice, "
           "warning, error, critical, alert, emergency");
      return;
    }
    {
      std::lock_guard<std::mutex> g{s->mtx};
      s->log_level = i;
    }
    respond(s, id, json::value::make_object());
    return;
  }
  if (has_resources()) {
    if (method == "resources/list")
      return list_resources(s, id, params);
    if (method == "resources/read")
      return read_resource(s, id, params);
    if (method == "resources/templates/list") {
      json::value r;
      r["resourceTemplates"] = json::value::make_array();
      respond(s, id, std::move(r));
      return;
    }
  }
  fail(s, id, mcp_errors::method_not_found, "Method not found: " + method);
}

bool mcp_server_core::impl::initialized_now(const std::shared_ptr<session>& s) {
  std::lock_guard<std::mutex> g{s->mtx};
  return s->initialized;
}

void mcp_server_core::impl::initialize(const std::shared_ptr<session>& s,
                                       const json::value& id,
                                       const json::value& params) {
  const auto& versions = mcp_server_protocol_versions();
  auto asked = params.get_string("protocolVersion");
  // The client's version when we speak it, else our newest (the client
  // then decides whether to go on).
  std::string version = versions.front();
  if (std::find(versions.begin(), versions.end(), asked) != versions.end())
    version = asked;
  bool elicit = false;
  if (const auto* caps = params.find("capabilities");
      caps != nullptr && caps->is_object()) {
    if (const auto* e = caps->find("elicitation"); e != nullptr
                                                   && e->is_object()) {
      // An empty object means form mode (the 2025-06-18 shape).
      elicit = e->size() == 0 || e->find("form") != nullptr;
    }
  }
  std::string client;
  if (const auto* ci = params.find("clientInfo"); ci && ci->is_object())
    client = ci->get_string("name") + " " + ci->get_string("version");
  {
    std::lock_guard<std::mutex> g{s->mtx};
    if (s->initialized) {
      // fall through to the error below, outside the lock
      version.clear();
    } else {
      s->initialized = true;
      s->version = version;
      s->elicit_form = elicit;
    }
  }
  if (version.empty()) {
    fail(s, id, mcp_errors::invalid_request,
         "Invalid Request: the session is already initialized");
    return;
  }
  install_channels(s, elicit);
  MIBYAN_LOG(info, "mcp-serve",
             "session " << s->id << " initialized by '" << client
                        << "' (protocol " << version << ", elicitation "
                        << (elicit ? "yes" : "no") << ", Mibyan session "
                        << s->mibyan_id << ")");
  json::value caps;
  json::value tools;
  tools["listChanged"] = true;
  caps["tools"] = std::move(tools);
  caps["logging"] = json::value::make_object();
  if (has_resources()) {
    json::value res;
    res["listChanged"] = false;
    res["subscribe"] = false;
    caps["resources"] = std::move(res);
  }
  json::value info;
  info["name"] = cfg.name;
  info["title"] = "Mibyan";
  info["version"] = cfg.version;
  json::value r;
  r["protocolVersion"] = version;
  r["capabilities"] = std::move(caps);
  r["serverInfo"] = std::move(info);
  r["instructions"] =
    "Mibyan's tools. execute_code runs Python in a kernel that keeps its "
    "state for this MCP session; its scripts call the other tools as "
    "functions of mibyan_tools. Dangerous commands need an approval, asked "
    "through elicitation when the client supports it and denied otherwise.";
  respond(s, id, std::move(r));
}

void mcp_server_core::impl::cancel(const std::shared_ptr<session>& s,
                                   const json::value& id,
                                   const std::string& why) {
  bool found = false;
  std::string call_id;
  {
    std::lock_guard<std::mutex> g{s->mtx};
    auto i = s->calls.find(id.dump());
    if (i != s->calls.end() && !i->second->abandoned) {
      i->second->abandoned = true;
      found = true;
      call_id = i->second->call_id;
    }
  }
  if (!found)
    return; // finished already, or never a call: nothing to do
  MIBYAN_LOG(info, "mcp-serve", "session " << s->id << ": request "
                                           << id.dump() << " " << why);
  // Only this call: the session's other calls go on.
  if (backend.cancel_call && !call_id.empty())
    backend.cancel_call(s->mibyan_id, call_id, why);
  else if (backend.interrupt)
    backend.interrupt(s->mibyan_id, why);
}

void mcp_server_core::abandon_request(const std::shared_ptr<session>& s,
                                      const json::value& id,
                                      const std::string& why) {
  p_->cancel(s, id, why);
}

// -- the ticker ------------------------------------------------------------------

void mcp_server_core::impl::tick_loop(std::weak_ptr<mcp_server_core> weak) {
  auto step = std::min({cfg.progress_interval, cfg.list_check_interval,
                        std::chrono::milliseconds(1000)});
  step = std::max(step, std::chrono::milliseconds(10));
  auto last_list = steady::now();
  for (;;) {
    bool dirty = false;
    {
      std::unique_lock<std::mutex> lk{mtx};
      tick_cv.wait_for(lk, step, [this] { return stopping || tools_dirty; });
      if (stopping)
        return;
      dirty = tools_dirty;
      tools_dirty = false;
    }
    auto core = weak.lock();
    if (!core)
      return;
    auto now = steady::now();
    heartbeats(now);
    if (dirty || now - last_list >= cfg.list_check_interval) {
      last_list = now;
      check_tool_list();
    }
    if (cfg.idle_timeout.count() > 0)
      close_idle(*core, now);
    // When this was the last reference, the core (and this impl) is gone
    // now, destroyed on this thread, which the destructor detached:
    // return without touching a member.
    core.reset();
    if (weak.expired())
      return;
  }
}

void mcp_server_core::impl::heartbeats(steady::time_point now) {
  std::vector<std::shared_ptr<session>> all;
  {
    std::lock_guard<std::mutex> g{mtx};
    for (auto& [id, s] : sessions)
      all.push_back(s);
  }
  for (auto& s : all) {
    std::vector<std::pair<json::value, json::value>> beats; // id, params
    {
      std::lock_guard<std::mutex> g{s->mtx};
      for (auto& [k, c] : s->calls) {
        if (!c->has_token || c->abandoned
            || now - c->last_beat < cfg.progress_interval)
          continue;
        c->last_beat = now;
        ++c->beats;
        auto secs = std::chrono::duration_cast<std::chrono::seconds>(
                      now - c->started)
                      .count();
        json::value params;
        params["progressToken"] = c->token;
        params["progress"] = c->beats;
        params["message"] = c->tool + " running for "
                            + std::to_string(secs) + " s";
        beats.emplace_back(c->id, std::move(params));
      }
    }
    for (auto& [id, params] : beats)
      notify(s, "notifications/progress", std::move(params), id);
  }
}

void mcp_server_core::impl::close_idle(mcp_server_core& core,
                                       steady::time_point now) {
  std::vector<std::string> idle;
  {
    std::lock_guard<std::mutex> g{mtx};
    for (auto& [id, s] : sessions) {
      std::lock_guard<std::mutex> sg{s->mtx};
      if (s->calls.empty() && s->outgoing.empty()
          && now - s->last_seen > cfg.idle_timeout)
        idle.push_back(id);
    }
  }
  for (auto& id : idle)
    core.close_session(id, "idle for longer than the idle timeout");
}

} // namespace mibyan
