#include "tools/mcp/mcp_session.hpp"

#include "tools/mcp/mcp_message.hpp"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "base/log.hpp"
#include "config/options.hpp"
#include "tools/tool.hpp"

namespace mibyan {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

json::value rpc(const std::string& method, json::value params) {
  json::value m;
  m["jsonrpc"] = "2.0";
  m["method"] = method;
  if (!params.is_null())
    m["params"] = std::move(params);
  return m;
}

std::string with_tail(std::string msg, const std::string& tail) {
  if (tail.empty())
    return msg;
  auto t = tail;
  if (t.size() > 1500)
    t = "..." + t.substr(t.size() - 1500);
  while (!t.empty() && (t.back() == '\n' || t.back() == ' '))
    t.pop_back();
  return msg + "; server stderr (tail): " + t;
}

} // namespace

bool mcp_version_supported(const std::string& v) {
  return v == "2025-11-25" || v == "2025-06-18" || v == "2025-03-26"
         || v == "2024-11-05";
}

mcp_session::mcp_session(mcp_server_options s, const options& cfg,
                         http_client* http)
  : s_(std::move(s)), cfg_(cfg), http_(http) {}

mcp_session::~mcp_session() {
  close();
}

const char* mcp_session::state_name(state s) {
  switch (s) {
    case state::idle: return "idle";
    case state::connecting: return "connecting";
    case state::connected: return "connected";
    case state::failed: return "failed";
    case state::closed: return "closed";
  }
  return "unknown";
}

status mcp_session::connect() {
  std::lock_guard<std::mutex> cguard{connect_mtx_};
  auto deadline = clock::now() + std::chrono::seconds{s_.connect_timeout};
  std::shared_ptr<mcp_transport> old;
  uint64_t gen;
  std::vector<mcp_tool_info> before;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    before = tools_;
    if (state_ == state::closed)
      return status::failure(status_code::unavailable,
                             "the MCP client is shut down");
    if (state_ == state::connected && transport_)
      return {};
    old = std::move(transport_);
    state_ = state::connecting;
    gen = ++gen_;
    roots_asked_ = false; // a new connection asks afresh
    roots_sent_.clear();
  }
  if (old)
    old->close();
  std::shared_ptr<mcp_transport> t{make_mcp_transport(s_, cfg_, http_)};
  auto fail = [&](status st) {
    if (t)
      t->close(); // first: it keeps what stderr still holds
    std::string tail = t ? t->stderr_tail() : std::string{};
    std::lock_guard<std::mutex> guard{mtx_};
    if (gen_ == gen) {
      transport_.reset();
      state_ = state::failed;
      last_stderr_ = tail;
      last_error_ = with_tail(st.error, tail);
    }
    return status::failure(st.code, with_tail(st.error, tail));
  };
  if (!t)
    return fail(status::failure(status_code::unavailable,
                                "no HTTP client for a remote server"));
  mcp_transport::handlers h;
  h.on_message = [this, gen](std::string m) { on_message(gen, std::move(m)); };
  h.on_closed = [this, gen](std::string why) { on_closed(gen, std::move(why)); };
  auto left = std::chrono::duration_cast<milliseconds>(deadline - clock::now());
  if (auto st = t->start(std::move(h), left); !st)
    return fail(st);
  {
    std::lock_guard<std::mutex> guard{mtx_};
    transport_ = t;
  }
  if (auto st = handshake(deadline); !st) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (gen_ == gen)
        transport_.reset();
    }
    return fail(st);
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (gen_ != gen || !transport_)
      return status::failure(status_code::unavailable,
                             "the connection was lost during discovery");
    state_ = state::connected;
    last_error_.clear();
    connected_at_ = clock::now();
    last_used_ = connected_at_;
  }
  tools_changed_from(before); // a reconnection may bring other tools
  return {};
}

status mcp_session::handshake(clock::time_point deadline) {
  auto left = [&] {
    return std::max(milliseconds{1}, std::chrono::duration_cast<milliseconds>(
                                       deadline - clock::now()));
  };
  // docs/mcp.md, "Client capabilities": sampling, form-mode elicitation
  // (declined where nobody can answer) and roots, as configured.
  json::value caps = json::value::make_object();
  if (s_.sampling.enabled)
    caps["sampling"] = json::value::make_object();
  if (s_.elicitation) {
    json::value elicitation;
    elicitation["form"] = json::value::make_object();
    caps["elicitation"] = std::move(elicitation);
  }
  if (s_.roots) {
    json::value roots;
    roots["listChanged"] = true;
    caps["roots"] = std::move(roots);
  }
  json::value info;
  info["name"] = "mibyan";
  info["version"] = "0.1";
  json::value params;
  params["protocolVersion"] = mcp_protocol_version;
  params["capabilities"] = std::move(caps);
  params["clientInfo"] = std::move(info);
  // The handshake runs before the state is `connected`: request() must
  // not try to connect again, so it is called with the transport present.
  auto init = request("initialize", std::move(params), left());
  if (!init)
    return status::failure(init.code, "initialize failed: " + init.error);
  // Version negotiation: the server answers ours or another it prefers;
  // one Mibyan does not speak ends the connection.
  auto version = init->get_string("protocolVersion", "");
  if (!mcp_version_supported(version))
    return status::failure(
      status_code::invalid_argument,
      "the server answered protocol version '" + version
        + "', which Mibyan does not support (it speaks 2025-11-25, "
          "2025-06-18, 2025-03-26 and 2024-11-05)");
  bool resources = false, prompts = false;
  if (auto c = init->find("capabilities"); c != nullptr && c->is_object()) {
    resources = c->find("resources") != nullptr;
    prompts = c->find("prompts") != nullptr;
  }
  std::shared_ptr<mcp_transport> t;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    t = transport_;
    version_ = version;
  }
  if (!t)
    return status::failure(status_code::unavailable, "connection lost");
  t->set_protocol_version(version);
  tools_changed_ = false;
  if (auto st = t->send(rpc("notifications/initialized", nullptr).dump()); !st)
    return st;
  // Over HTTP each message is its own POST: no request may overtake this
  // notification.
  if (auto st = t->drain(left()); !st)
    return status::failure(st.code, "notifications/initialized: " + st.error);
  auto tools = list_tools(deadline);
  if (!tools)
    return tools.get_status();
  std::lock_guard<std::mutex> guard{mtx_};
  tools_ = std::move(*tools);
  resources_ = resources;
  prompts_ = prompts;
  return {};
}

result<std::vector<mcp_tool_info>>
mcp_session::list_tools(clock::time_point deadline) {
  using R = result<std::vector<mcp_tool_info>>;
  auto left = [&] {
    return std::max(milliseconds{1}, std::chrono::duration_cast<milliseconds>(
                                       deadline - clock::now()));
  };
  std::vector<mcp_tool_info> tools;
  std::string cursor;
  // A server may change its list while it is being listed (tools that
  // depend on the client's capabilities appear right after `initialized`):
  // then the listing runs once more.
  for (int page = 0, rounds = 0; page < 100; ++page) {
    json::value p = json::value::make_object();
    if (!cursor.empty())
      p["cursor"] = cursor;
    auto listed = request("tools/list", std::move(p), left());
    if (!listed)
      return R::failure(listed.code, "tools/list failed: " + listed.error);
    if (auto arr = listed->find("tools"); arr != nullptr && arr->is_array()) {
      for (auto& x : arr->as_array()) {
        if (!x.is_object() || x.get_string("name", "").empty())
          continue;
        mcp_tool_info ti;
        ti.name = x.get_string("name", "");
        ti.description = x.get_string("description", "");
        if (auto sc = x.find("inputSchema"))
          ti.input_schema = *sc;
        if (auto an = x.find("annotations"); an != nullptr && an->is_object())
          ti.read_only = an->get_bool("readOnlyHint", false);
        tools.push_back(std::move(ti));
      }
    }
    cursor = listed->get_string("nextCursor", "");
    if (cursor.empty()) {
      if (!tools_changed_.exchange(false) || ++rounds > 1)
        break;
      tools.clear();
    }
  }
  return tools;
}

result<json::value> mcp_session::request(const std::string& method,
                                         json::value params,
                                         milliseconds timeout,
                                         const std::atomic<bool>* cancel) {
  auto p = std::make_shared<pending>();
  int64_t id;
  std::shared_ptr<mcp_transport> t;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!transport_)
      return result<json::value>::failure(status_code::unavailable,
                                          "not connected");
    t = transport_;
    id = next_id_++;
    pending_[id] = p;
  }
  auto msg = rpc(method, std::move(params));
  msg["id"] = id;
  auto forget = [&] {
    std::lock_guard<std::mutex> guard{mtx_};
    pending_.erase(id);
  };
  if (auto st = t->send(msg.dump()); !st) {
    forget();
    return result<json::value>{st};
  }
  auto deadline = clock::now() + timeout;
  std::unique_lock<std::mutex> lock{mtx_};
  while (!p->done) {
    bool cancelled = cancel != nullptr && cancel->load();
    if (cancelled || clock::now() >= deadline) {
      pending_.erase(id);
      lock.unlock();
      json::value cp;
      cp["requestId"] = id;
      cp["reason"] = cancelled ? "interrupted by the user"
                               : "timed out after "
                                   + std::to_string(timeout.count()) + " ms";
      auto sent = t->send(rpc("notifications/cancelled", std::move(cp)).dump());
      (void) sent;
      if (cancelled)
        return result<json::value>::failure(status_code::cancelled,
                                            method + " was cancelled");
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.1f", timeout.count() / 1000.0);
      return result<json::value>::failure(
        status_code::timeout,
        method + " timed out after " + secs + " s");
    }
    auto wake = std::min(deadline, clock::now() + milliseconds{50});
    cv_.wait_until(lock, wake);
  }
  pending_.erase(id);
  if (!p->ok)
    return result<json::value>::failure(
      p->error.rfind("connection lost", 0) == 0 ? status_code::unavailable
                                                : status_code::internal,
      p->error);
  return std::move(p->result);
}

void mcp_session::on_closed(uint64_t gen, std::string why) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (gen != gen_)
    return;
  MIBYAN_LOG(warning, "mcp", s_.name << ": connection lost: " << why);
  for (auto& [id, p] : pending_) {
    p->done = true;
    p->ok = false;
    p->error = "connection lost: " + why;
  }
  pending_.clear();
  if (state_ != state::closed)
    state_ = state::failed;
  last_error_ = why;
  // The transport stays until the next connect/disconnect closes it (its
  // reader thread is the one running this callback).
  cv_.notify_all();
}

json::value mcp_session::error_for_failure(const std::string& what,
                                           const status& st) const {
  std::string text;
  if (st.code == status_code::timeout)
    text = what + " on MCP server '" + s_.name + "' " + st.error
           + " (notifications/cancelled was sent).";
  else if (st.code == status_code::cancelled)
    text = what + " on MCP server '" + s_.name + "' was interrupted.";
  else if (st.code == status_code::unavailable)
    text = "MCP server '" + s_.name + "' is unavailable: "
           + with_tail(st.error, stderr_tail())
           + ". A reconnect was requested; do not retry immediately.";
  else
    text = what + " on MCP server '" + s_.name + "' failed: " + st.error;
  return error_result(text);
}

json::value mcp_session::call_tool(const std::string& raw_name,
                                   const json::value& args,
                                   const std::atomic<bool>* cancel,
                                   clock::time_point deadline,
                                   const std::string& media_dir,
                                   const mcp_caller* caller) {
  json::value params;
  params["name"] = raw_name;
  params["arguments"] = args.is_object() ? args : json::value::make_object();
  auto r = call_method("tools/call", std::move(params), cancel, deadline,
                       caller);
  if (r.find("error") != nullptr)
    return r;
  auto res = r.find("result");
  return mcp_result_to_tool_result(res ? *res : json::value{}, media_dir);
}

json::value mcp_session::call_method(const std::string& method,
                                     json::value params,
                                     const std::atomic<bool>* cancel,
                                     clock::time_point deadline,
                                     const mcp_caller* caller) {
  std::string what = method == "tools/call"
                       ? "Tool '" + params.get_string("name", "") + "'"
                       : method;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (auto open = breaker_.check(s_.name))
      return error_result(*open);
    if (state_ == state::closed)
      return error_result("MCP server '" + s_.name + "' is shut down.");
  }
  std::unique_lock<std::timed_mutex> call_lock{call_mtx_, std::defer_lock};
  if (!s_.supports_parallel_tool_calls) {
    // Sequential server: wait for the call lock, but not past the deadline
    // or an interrupt.
    while (!call_lock.try_lock_for(milliseconds{50})) {
      if (cancel != nullptr && cancel->load())
        return error_result(what + " on MCP server '" + s_.name
                            + "' was interrupted while waiting for an "
                              "earlier call to this server.");
      if (clock::now() >= deadline)
        return error_result(what + " on MCP server '" + s_.name
                            + "' timed out while waiting for an earlier "
                              "call to this server (its calls run one at a "
                              "time).");
    }
  }
  // Counted from here: the call owns the server (upkeep leaves it alone).
  ++active_;
  // The caller is known while the call runs: an elicitation the server
  // sends meanwhile goes to its session, and ends with the call.
  uint64_t token;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    token = next_caller_++;
    callers_.emplace_back(token, caller != nullptr ? *caller : mcp_caller{});
  }
  struct done {
    mcp_session& s;
    uint64_t token;
    ~done() {
      std::lock_guard<std::mutex> guard{s.mtx_};
      s.callers_.erase(std::remove_if(s.callers_.begin(), s.callers_.end(),
                                      [&](const auto& c) {
                                        return c.first == token;
                                      }),
                       s.callers_.end());
      for (auto& e : s.elicitations_)
        if (e->caller == token)
          e->stop = true;
      --s.active_;
    }
  } d{*this, token};
  if (caller != nullptr)
    sync_roots(*caller, cancel, deadline);
  bool expired = false;
  auto r = call_once(method, params, cancel, deadline, what, &expired);
  if (expired) {
    // HTTP 404: the server forgot the session before it saw this call.
    // A new session is initialized and the call sent once more.
    MIBYAN_LOG(info, "mcp", s_.name << ": the server's session expired; "
                                       "initializing a new one");
    r = call_once(method, params, cancel, deadline, what, &expired);
  }
  return r;
}

json::value mcp_session::call_once(const std::string& method,
                                   const json::value& params,
                                   const std::atomic<bool>* cancel,
                                   clock::time_point deadline,
                                   const std::string& what, bool* expired) {
  *expired = false;
  bool need_connect;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    need_connect = state_ != state::connected || !transport_;
  }
  if (need_connect) {
    if (auto st = connect(); !st) {
      std::lock_guard<std::mutex> guard{mtx_};
      breaker_.on_failure();
      return error_result("MCP server '" + s_.name
                          + "' could not be reached: " + st.error
                          + ". A reconnect will be tried on the next call; "
                            "do not retry immediately.");
    }
  }
  auto now = clock::now();
  auto timeout = milliseconds{s_.timeout * 1000};
  if (deadline > now && deadline - now < timeout)
    timeout = std::chrono::duration_cast<milliseconds>(deadline - now);
  auto r = request(method, params, timeout, cancel);
  // Retried only on the request's own 404 (the server did not run it); a
  // request failed because another one learned of the expiry is not.
  bool gone = !r && r.error.find(mcp_session_expired_reason) != std::string::npos
              && r.error.rfind("connection lost", 0) != 0;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    last_used_ = clock::now();
    if (r || r.code == status_code::internal || r.code == status_code::cancelled
        || gone)
      breaker_.on_success(); // the server answered (or we stopped waiting)
    else
      breaker_.on_failure();
  }
  if (!r) {
    // A crash or a forgotten session: the next call connects afresh.
    if (r.code == status_code::unavailable || gone)
      disconnect(r.error);
    if (gone) {
      *expired = true;
      return error_result("MCP server '" + s_.name + "' ended its session ("
                          + r.error + ").");
    }
    return error_for_failure(what, r.get_status());
  }
  json::value out;
  out["result"] = std::move(*r);
  return out;
}

status mcp_session::ping(milliseconds timeout) {
  auto r = request("ping", json::value::make_object(), timeout);
  return r.get_status();
}

void mcp_session::disconnect(const std::string& why) {
  std::shared_ptr<mcp_transport> t;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    t = std::move(transport_);
    ++gen_;
    for (auto& [id, p] : pending_) {
      p->done = true;
      p->ok = false;
      p->error = "connection lost: " + why;
    }
    pending_.clear();
    if (t)
      last_stderr_ = t->stderr_tail();
    if (state_ != state::closed)
      state_ = state::idle;
    cv_.notify_all();
  }
  if (t)
    t->close();
}

void mcp_session::close() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (state_ == state::closed && !transport_)
      return;
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    state_ = state::closed;
    for (auto& e : elicitations_)
      e->stop = true;
  }
  disconnect("shutdown");
  // Helper threads capture `this`: sampling ends within its timeout,
  // elicitation when told to stop, a refresh when its requests fail.
  auto limit = clock::now() + std::chrono::seconds{s_.sampling.timeout + 2};
  while (helper_threads_.load() > 0 && clock::now() < limit)
    std::this_thread::sleep_for(milliseconds{10});
}

mcp_session::state mcp_session::current_state() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return state_;
}

std::vector<mcp_tool_info> mcp_session::tools() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return tools_;
}

std::string mcp_session::protocol_version() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return version_;
}

bool mcp_session::has_resources() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return resources_;
}

bool mcp_session::has_prompts() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return prompts_;
}

std::string mcp_session::last_error() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return last_error_;
}

std::string mcp_session::stderr_tail() const {
  std::shared_ptr<mcp_transport> t;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    t = transport_;
    if (!t)
      return last_stderr_;
  }
  return t->stderr_tail();
}

int mcp_session::pid() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return transport_ ? transport_->pid() : -1;
}

clock::time_point mcp_session::last_used() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return last_used_;
}

clock::time_point mcp_session::connected_at() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return connected_at_;
}

void mcp_session::seed_catalog(std::vector<mcp_tool_info> tools,
                               bool resources, bool prompts) {
  std::lock_guard<std::mutex> guard{mtx_};
  tools_ = std::move(tools);
  resources_ = resources;
  prompts_ = prompts;
}

} // namespace mibyan
