#include "tools/mcp/mcp_oauth_client.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>

#include <sys/stat.h>

#include "base/base64.hpp"
#include "base/crypto.hpp"
#include "base/http_client.hpp"
#include "base/log.hpp"
#include "config/mcp_config.hpp"
#include "config/options.hpp"

namespace mibyan {

namespace {

constexpr uint64_t max_oauth_body = 1 << 20;
constexpr const char* probe_protocol_version = "2025-06-18";

int64_t unix_now() {
  return static_cast<int64_t>(std::time(nullptr));
}

std::mutex sink_mtx;
mcp_oauth_client::secret_sink& sink() {
  static mcp_oauth_client::secret_sink s;
  return s;
}

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i]))
        != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

std::string file_stamp(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return {};
  return std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":"
         + std::to_string(st.st_mtim.tv_sec) + "."
         + std::to_string(st.st_mtim.tv_nsec);
}

} // namespace

std::string oauth_body_excerpt(const std::string& body) {
  std::string out = body.substr(0, 200);
  for (auto& c : out)
    if (static_cast<unsigned char>(c) < 0x20)
      c = ' ';
  return out;
}

void mcp_oauth_client::set_secret_sink(secret_sink s) {
  std::lock_guard<std::mutex> guard{sink_mtx};
  sink() = std::move(s);
}

mcp_oauth_client::mcp_oauth_client(const mcp_server_options& s,
                                   const options& cfg)
  : name_(s.name), url_(resolve_mcp_refs(s.url, cfg)), home_(cfg.home),
    path_(mcp_token_path(cfg.home, s.name)), client_id_(s.oauth.client_id),
    client_secret_(resolve_mcp_refs(s.oauth.client_secret, cfg)),
    scope_(s.oauth.scope), redirect_port_(static_cast<int>(s.oauth.redirect_port)),
    timeout_(std::chrono::seconds{s.oauth.request_timeout}),
    http_(std::make_unique<http_client>()) {
  for (auto& [k, v] : s.headers)
    headers_.emplace_back(k, resolve_mcp_refs(v, cfg));
  std::lock_guard<std::mutex> guard{mtx_};
  reload_locked();
}

mcp_oauth_client::~mcp_oauth_client() {
  {
    std::lock_guard<std::mutex> guard{flag_mtx_};
    stopping_ = true; // also cancels a token request in flight
  }
  refresh_cv_.notify_all();
  if (refresher_.joinable())
    refresher_.join();
}

void mcp_oauth_client::refresh_soon() {
  std::lock_guard<std::mutex> guard{flag_mtx_};
  auto now = std::chrono::steady_clock::now();
  if (stopping_ || refresh_wanted_ || now < next_background_try_)
    return;
  refresh_wanted_ = true;
  if (!refresher_.joinable())
    refresher_ = std::thread{[this] { refresher_loop(); }};
  refresh_cv_.notify_all();
}

void mcp_oauth_client::refresher_loop() {
  std::unique_lock<std::mutex> lock{flag_mtx_};
  while (true) {
    refresh_cv_.wait(lock, [&] { return stopping_ || refresh_wanted_; });
    if (stopping_)
      return;
    lock.unlock();
    bool ok = false;
    {
      std::lock_guard<std::mutex> rguard{refresh_mtx_};
      bool still_due;
      {
        std::lock_guard<std::mutex> guard{mtx_};
        reload_locked();
        still_due = have_rec_ && rec_.refresh_due(unix_now());
      }
      if (still_due && !stopping_) {
        ok = refresh_unlocked().ok();
        if (ok)
          last_refresh_ = std::chrono::steady_clock::now();
      }
    }
    lock.lock();
    refresh_wanted_ = false;
    // A failed attempt is not repeated at once: the next request within
    // this pause just uses the old token (and a 401 refreshes in line).
    if (!ok)
      next_background_try_ = std::chrono::steady_clock::now()
                             + std::chrono::seconds{30};
  }
}

std::string mcp_oauth_client::login_hint() const {
  return "run `mibyan mcp login " + name_ + "`";
}

void mcp_oauth_client::report_secrets(const mcp_oauth_record& r) {
  secret_sink s;
  {
    std::lock_guard<std::mutex> guard{sink_mtx};
    s = sink();
  }
  if (!s)
    return;
  auto base = "MCP_" + name_ + "_OAUTH";
  if (!r.access_token.empty())
    s(base + "_ACCESS_TOKEN", r.access_token);
  if (!r.refresh_token.empty())
    s(base + "_REFRESH_TOKEN", r.refresh_token);
  if (!r.client_secret.empty())
    s(base + "_CLIENT_SECRET", r.client_secret);
}

void mcp_oauth_client::reload_locked() {
  auto stamp = file_stamp(path_);
  if (stamp == file_stamp_ && (have_rec_ || stamp.empty()))
    return;
  file_stamp_ = stamp;
  if (stamp.empty()) {
    have_rec_ = false;
    rec_ = {};
    return;
  }
  auto loaded = load_mcp_token(path_);
  if (!loaded) {
    MIBYAN_LOG(warning, "mcp", name_ << ": " << loaded.error);
    have_rec_ = false;
    rec_ = {};
    return;
  }
  rec_ = std::move(*loaded);
  // A record made for another URL (the config changed) is not used.
  have_rec_ = rec_.server_url == url_;
  if (have_rec_)
    report_secrets(rec_);
}

status mcp_oauth_client::store_locked(const mcp_oauth_record& r) {
  report_secrets(r);
  auto st = save_mcp_token(path_, r);
  rec_ = r;
  have_rec_ = true;
  file_stamp_ = file_stamp(path_);
  return st;
}

// -- HTTP ----------------------------------------------------------------------

result<mcp_oauth_client::http_reply>
mcp_oauth_client::send(const std::string& method, const std::string& url,
                       std::vector<std::pair<std::string, std::string>> headers,
                       std::string body) {
  http_request req;
  req.method = method;
  req.url = url;
  req.headers = std::move(headers);
  req.body = std::move(body);
  req.total_timeout = timeout_;
  req.connect_timeout = std::min(timeout_, std::chrono::milliseconds{10000});
  req.max_body_bytes = max_oauth_body;
  req.follow_redirects = false;
  req.user_agent = "mibyan";
  auto res = http_->fetch(std::move(req), &stopping_);
  if (!res.summary.ok()) {
    auto st = res.summary.get_status();
    std::string why = res.summary.timed_out
                        ? "no answer within "
                            + std::to_string(timeout_.count() / 1000)
                            + " s (oauth.request_timeout)"
                        : res.summary.capped ? "the answer is larger than 1 MiB"
                                             : res.summary.error;
    return result<http_reply>::failure(st.code, method + " " + url + ": "
                                                  + why);
  }
  http_reply r;
  r.status = res.summary.status;
  r.body = std::move(res.body);
  r.content_type = res.summary.content_type;
  if (auto h = find_header(res.headers, "www-authenticate"))
    r.www_authenticate = *h;
  return r;
}

result<json::value> mcp_oauth_client::get_json(const std::string& url,
                                               const std::string& what) {
  if (auto st = check_oauth_endpoint(url, what); !st)
    return st;
  auto r = send("GET", url,
                {{"Accept", "application/json"},
                 {"MCP-Protocol-Version", probe_protocol_version}},
                {});
  if (!r)
    return r.get_status();
  if (r->status != 200)
    return result<json::value>::failure(status_code::not_found,
                                        what + " " + url + ": HTTP "
                                          + std::to_string(r->status));
  auto parsed = json::parse(r->body);
  if (!parsed || !parsed.v->is_object())
    return result<json::value>::failure(status_code::data_corrupt,
                                        what + " " + url
                                          + " is not a JSON object");
  return *parsed.v;
}

result<json::value> mcp_oauth_client::token_request(
  const mcp_oauth_record& r,
  std::vector<std::pair<std::string, std::string>> fields) {
  if (auto st = check_oauth_endpoint(r.token_endpoint, "token endpoint"); !st)
    return st;
  std::vector<std::pair<std::string, std::string>> headers = {
    {"Content-Type", "application/x-www-form-urlencoded"},
    {"Accept", "application/json"}};
  fields.emplace_back("client_id", r.client_id);
  if (!r.client_secret.empty()) {
    if (r.token_auth_method == "client_secret_post") {
      fields.emplace_back("client_secret", r.client_secret);
    } else {
      // client_secret_basic; RFC 6749 §2.3.1: both parts form-encoded
      // before base64.
      headers.emplace_back("Authorization",
                           "Basic "
                             + base64_encode(form_encode(r.client_id) + ":"
                                             + form_encode(r.client_secret)));
    }
  }
  auto resp = send("POST", r.token_endpoint, std::move(headers),
                   form_body(fields));
  if (!resp)
    return resp.get_status();
  auto parsed = json::parse(resp->body);
  if (resp->status != 200) {
    std::string err;
    if (parsed && parsed.v->is_object()) {
      err = parsed.v->get_string("error", "");
      auto desc = parsed.v->get_string("error_description", "");
      if (!desc.empty())
        err += ": " + desc;
    }
    if (err.empty())
      err = oauth_body_excerpt(resp->body);
    return result<json::value>::failure(
      resp->status >= 500 ? status_code::unavailable
                          : status_code::permission_denied,
      "the token endpoint answered HTTP " + std::to_string(resp->status)
        + (err.empty() ? "" : " (" + err + ")"));
  }
  if (!parsed || !parsed.v->is_object()
      || parsed.v->get_string("access_token", "").empty())
    return result<json::value>::failure(
      status_code::data_corrupt,
      "the token endpoint's answer holds no access_token");
  auto type = parsed.v->get_string("token_type", "Bearer");
  if (!iequal(type, "bearer"))
    return result<json::value>::failure(
      status_code::data_corrupt,
      "the token endpoint issued a '" + type + "' token, not a Bearer token");
  return *parsed.v;
}

bool mcp_oauth_client::logout() {
  std::lock_guard<std::mutex> guard{mtx_};
  have_rec_ = false;
  rec_ = {};
  file_stamp_.clear();
  return remove_mcp_token(path_);
}

// -- use ---------------------------------------------------------------------------

void mcp_oauth_client::persist_step_up_locked() {
  std::string pending;
  {
    std::lock_guard<std::mutex> guard{flag_mtx_};
    pending.swap(step_up_);
  }
  if (pending.empty() || !have_rec_)
    return;
  auto r = rec_;
  // The challenge's scopes are authoritative; the granted ones are kept so
  // that the new token loses nothing.
  r.step_up_scope = scope_union(r.step_up_scope, scope_union(r.scope, pending));
  if (auto st = store_locked(r); !st)
    MIBYAN_LOG(warning, "mcp", name_ << ": " << st.error);
}

status mcp_oauth_client::refresh_unlocked() {
  mcp_oauth_record r;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    reload_locked();
    if (!have_rec_ || (rec_.access_token.empty()
                       && rec_.refresh_token.empty()))
      return status::failure(status_code::not_found,
                             "no stored token for MCP server '" + name_
                               + "'; " + login_hint());
    r = rec_;
  }
  auto fail_login = [&](std::string why) {
    r.login_reason = std::move(why);
    r.access_token.clear();
    r.refresh_token.clear();
    std::lock_guard<std::mutex> guard{mtx_};
    if (auto st = store_locked(r); !st)
      MIBYAN_LOG(warning, "mcp", name_ << ": " << st.error);
    MIBYAN_LOG(warning, "mcp", name_ << ": " << r.login_reason);
    return status::failure(status_code::permission_denied, r.login_reason);
  };
  if (r.refresh_token.empty())
    return fail_login("the access token of MCP server '" + name_
                      + "' was refused or expired and there is no refresh "
                        "token; "
                      + login_hint());
  std::vector<std::pair<std::string, std::string>> f = {
    {"grant_type", "refresh_token"}, {"refresh_token", r.refresh_token}};
  if (!r.resource.empty())
    f.emplace_back("resource", r.resource);
  auto t = token_request(r, std::move(f));
  if (!t) {
    // The server refused the refresh token: only a new login helps.
    if (t.code == status_code::permission_denied
        || t.code == status_code::data_corrupt)
      return fail_login("refreshing the access token of MCP server '" + name_
                        + "' failed: " + t.error + "; " + login_hint());
    // Transient (no answer, 5xx): keep the tokens, try again later.
    if (!stopping_)
      MIBYAN_LOG(warning, "mcp", name_ << ": refreshing the access token "
                                        "failed for now: "
                                     << t.error);
    return status::failure(t.code, "refreshing the access token failed: "
                                     + t.error);
  }
  r.apply_tokens(*t, r.scope, unix_now());
  MIBYAN_LOG(info, "mcp", name_ << ": access token refreshed");
  std::lock_guard<std::mutex> guard{mtx_};
  return store_locked(r);
}

status mcp_oauth_client::refresh() {
  std::lock_guard<std::mutex> guard{refresh_mtx_};
  auto st = refresh_unlocked();
  if (st)
    last_refresh_ = std::chrono::steady_clock::now();
  return st;
}

std::string mcp_oauth_client::bearer() {
  std::lock_guard<std::mutex> guard{mtx_};
  reload_locked();
  if (!have_rec_ || !rec_.login_reason.empty())
    return {};
  // A token close to its expiry is refreshed in the background; until
  // then (and when it expired) the old one is sent: the server's 401 leads
  // to a refresh in on_unauthorized and the request is sent again.
  if (rec_.refresh_due(unix_now()))
    refresh_soon();
  return rec_.access_token;
}

bool mcp_oauth_client::on_unauthorized(int status, const std::string& header) {
  if (status != 401 && status != 403)
    return false;
  auto ch = parse_bearer_challenge(header);
  if (status == 403) {
    if (ch.error != "insufficient_scope")
      return false;
    // Step-up needs the user's consent in a browser: remember the scope
    // for the next `mibyan mcp login` and say so.
    {
      std::lock_guard<std::mutex> guard{flag_mtx_};
      step_up_ = scope_union(step_up_, ch.scope);
      login_reason_ = "MCP server '" + name_ + "' needs the scope '"
                      + ch.scope + "' for this request (insufficient_scope"
                      + (ch.error_description.empty()
                           ? std::string{}
                           : ": " + ch.error_description)
                      + "); " + login_hint() + " to grant it";
    }
    std::lock_guard<std::mutex> guard{mtx_};
    reload_locked();
    persist_step_up_locked();
    MIBYAN_LOG(warning, "mcp", name_ << ": step-up authorization needed for "
                                        "scope '"
                                     << ch.scope << "'; " << login_hint());
    return false;
  }
  std::lock_guard<std::mutex> rguard{refresh_mtx_};
  // Several requests refused together: the first one refreshes, the
  // others retry with its token.
  if (std::chrono::steady_clock::now() - last_refresh_
      < std::chrono::seconds{10})
    return true;
  bool had_token;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    reload_locked();
    had_token = have_rec_ && !rec_.access_token.empty()
                && rec_.login_reason.empty();
  }
  if (!had_token) {
    std::lock_guard<std::mutex> guard{flag_mtx_};
    if (login_reason_.empty())
      login_reason_ = "MCP server '" + name_ + "' requires authorization; "
                      + login_hint();
    return false;
  }
  auto st = refresh_unlocked();
  if (!st)
    return false;
  last_refresh_ = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> guard{flag_mtx_};
  login_reason_.clear();
  return true;
}

std::string mcp_oauth_client::login_needed() {
  std::string reason;
  {
    std::lock_guard<std::mutex> guard{flag_mtx_};
    reason = login_reason_;
  }
  std::lock_guard<std::mutex> guard{mtx_};
  reload_locked();
  if (have_rec_ && !rec_.login_reason.empty())
    return rec_.login_reason;
  if (have_rec_ && !rec_.step_up_scope.empty())
    return reason.empty() ? "MCP server '" + name_ + "' needs the scope '"
                              + rec_.step_up_scope + "'; " + login_hint()
                              + " to grant it"
                          : reason;
  if (have_rec_ && !rec_.access_token.empty())
    return {}; // logged in (perhaps by another process since the reason)
  return reason;
}

// -- the per-process registry ---------------------------------------------------

namespace {

std::mutex registry_mtx;
std::map<std::string, std::shared_ptr<mcp_oauth_client>>& registry() {
  static std::map<std::string, std::shared_ptr<mcp_oauth_client>> r;
  return r;
}

} // namespace

std::shared_ptr<mcp_oauth_client> mcp_oauth_for(const mcp_server_options& s,
                                                const options& cfg) {
  auto key = cfg.home + "\n" + s.name + "\n" + s.url;
  std::lock_guard<std::mutex> guard{registry_mtx};
  auto& slot = registry()[key];
  if (!slot)
    slot = std::make_shared<mcp_oauth_client>(s, cfg);
  return slot;
}

std::shared_ptr<mcp_oauth_client> mcp_oauth_find(const std::string& home,
                                                 const std::string& server) {
  auto prefix = home + "\n" + server + "\n";
  std::lock_guard<std::mutex> guard{registry_mtx};
  for (auto& [k, v] : registry())
    if (k.compare(0, prefix.size(), prefix) == 0)
      return v;
  return nullptr;
}

bool mcp_oauth_applies(const mcp_server_options& s) {
  if (s.transport == "stdio" || !s.oauth.enabled)
    return false;
  for (auto& [k, v] : s.headers)
    if (iequal(k, "authorization"))
      return false;
  return true;
}

} // namespace mibyan
