// File: tools/mcp/mcp_oauth_client.hpp
//
// OAuth 2.1 authorization of one HTTP MCP server (docs/mcp.md,
// "Authorization"; MCP 2025-11-25 basic/authorization):
//
// - login (`mibyan mcp login`, cli/mcp_login.cpp): `probe` sends an
//   unauthenticated `initialize` and reads the 401's WWW-Authenticate;
//   `discover` fetches the protected-resource metadata (the header's URL,
//   else the well-known URLs) and the authorization-server metadata
//   (RFC 8414, then OpenID discovery), checks PKCE S256 support and picks
//   the scope (the challenge's, else scopes_supported, plus a pending
//   step-up scope); `begin` uses the configured client or registers one
//   (RFC 7591) and builds the authorization URL (PKCE S256, state,
//   resource); `finish` checks the redirect's state (and `iss`), exchanges
//   the code with the verifier and stores the tokens (mcp_oauth_store.hpp).
// - use (the HTTP transport's hooks, mcp_http_auth): `bearer` returns the
//   stored access token as it is, and wakes a background refresh (a
//   thread of this object) when it expires within min(60 s, half its
//   lifetime); `on_unauthorized` handles a 401 (token refused or
//   expired: refresh it and let the transport send the request again; no
//   token: login needed) or a 403 insufficient_scope (step-up: login
//   needed with the larger scope).
//
// Every metadata, registration and token endpoint must be https except on
// a loopback host; redirects are not followed; each request is bounded by
// `oauth.request_timeout` and its body by 1 MiB. Tokens are handed to the
// secret sink (the runtime's redactor) as soon as they are known and are
// never logged.
//
// Threads: every member is thread-safe. `bearer` and `login_needed` never
// touch the network (a due refresh runs on this object's own refresher
// thread, joined by the destructor, which cancels its request). `on_unauthorized` and the login calls do, through an
// HTTP client of their own, each request bounded by request_timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/json.hpp"
#include "base/status.hpp"
#include "config/mcp_options.hpp"
#include "tools/mcp/mcp_oauth.hpp"
#include "tools/mcp/mcp_oauth_store.hpp"

namespace mibyan {

struct options;
class http_client;

/// What discovery found for one server.
struct mcp_oauth_discovery {
  std::string resource_metadata_url; // "" when none answered
  std::string resource;              // the RFC 8707 `resource` value
  std::string scope;                 // selected scope ("" = omit)
  std::string issuer;
  std::string authorization_endpoint;
  std::string token_endpoint;
  std::string registration_endpoint;
  std::vector<std::string> token_auth_methods; // supported; empty = default
  std::vector<std::string> notes;    // what was tried and skipped
};

/// One authorization request waiting for its redirect.
struct mcp_oauth_pending {
  std::string url; // the authorization URL for the browser
  std::string state;
  std::string verifier;
  std::string redirect_uri;
  std::string scope;
  mcp_oauth_record record; // client and endpoints (no tokens yet)
};

class mcp_oauth_client {
public:
  /// Receives every token learnt (name, value) for secret redaction.
  using secret_sink = std::function<void(const std::string& name,
                                         const std::string& value)>;

  /// `cfg` resolves ${VAR} references (URL, headers, client secret) and
  /// gives $MIBYAN_HOME; it is not kept.
  mcp_oauth_client(const mcp_server_options& s, const options& cfg);
  ~mcp_oauth_client();
  mcp_oauth_client(const mcp_oauth_client&) = delete;
  mcp_oauth_client& operator=(const mcp_oauth_client&) = delete;

  const std::string& server() const { return name_; }
  const std::string& token_path() const { return path_; }
  /// The redirect port configured for login (0 = any).
  int redirect_port() const { return redirect_port_; }

  // -- login -----------------------------------------------------------------

  /// An unauthenticated `initialize` POST: the Bearer challenge of a 401
  /// (present=false when the server answered otherwise; `accepted` tells
  /// whether it answered 2xx without authorization).
  struct probe_result {
    long status = 0;
    bearer_challenge challenge;
  };
  result<probe_result> probe();

  /// Metadata discovery; see the file comment. Fails with a message that
  /// names every URL tried and why it was refused.
  result<mcp_oauth_discovery> discover(const bearer_challenge& ch);

  /// Chooses or registers the client for `redirect_uri` and builds the
  /// authorization request.
  result<mcp_oauth_pending> begin(const mcp_oauth_discovery& d,
                                  const std::string& redirect_uri);

  /// Completes the flow from the redirect's query parameters: state (and
  /// iss, when sent) must match, an `error` is reported, the code is
  /// exchanged with the verifier, the tokens are stored.
  status finish(const mcp_oauth_pending& p,
                const std::map<std::string, std::string>& query);

  /// Removes the stored tokens; true when there were some.
  bool logout();

  // -- use -------------------------------------------------------------------

  /// The access token for the Authorization header ("" = none: no login
  /// yet, or a refresh was refused). Reloads the token file when another
  /// process replaced it (a stat, a small read); no network I/O, so it may
  /// run on the HTTP client thread (mcp_http_auth::bearer). An expired
  /// token is returned as it is: the server's 401 makes on_unauthorized
  /// refresh it.
  std::string bearer();

  /// A 401 or 403 of the MCP server (mcp_http_auth::on_unauthorized):
  /// 401 with a token refreshes it (blocking, at most request_timeout) and
  /// returns true when the request may be sent again; 401 without a token
  /// marks a login as needed; 403 insufficient_scope stores the step-up
  /// scope for the next login and marks it needed. Never on the HTTP
  /// client thread.
  bool on_unauthorized(int status, const std::string& www_authenticate);

  /// Why a login is needed ("" = not known to be needed): never logged in
  /// after a 401, a refresh refused, a step-up scope pending.
  std::string login_needed();

  /// A refresh now (tests, `mibyan mcp login --refresh`).
  status refresh();

  /// Where tokens are reported for redaction (process-wide; the runtime
  /// sets it). Tokens loaded or obtained later are reported at once.
  static void set_secret_sink(secret_sink sink);

private:
  struct http_reply {
    long status = 0;
    std::string body;
    std::string www_authenticate;
    std::string content_type;
  };
  result<http_reply> send(const std::string& method, const std::string& url,
                          std::vector<std::pair<std::string, std::string>>
                            headers,
                          std::string body);
  result<json::value> get_json(const std::string& url, const std::string& what);
  result<json::value> token_request(const mcp_oauth_record& r,
                                    std::vector<std::pair<std::string,
                                                          std::string>>
                                      fields);
  status refresh_unlocked(); // caller holds refresh_mtx_
  void refresh_soon();       // wakes the background refresher
  void refresher_loop();
  void reload_locked();
  void persist_step_up_locked();
  status store_locked(const mcp_oauth_record& r);
  void report_secrets(const mcp_oauth_record& r);
  std::string login_hint() const;

  std::string name_;
  std::string url_;     // resolved server URL
  std::vector<std::pair<std::string, std::string>> headers_; // resolved
  std::string home_;
  std::string path_;
  std::string client_id_;     // configured (pre-registered)
  std::string client_secret_; // resolved
  std::string scope_;         // configured
  int redirect_port_ = 0;
  std::chrono::milliseconds timeout_{30000};

  std::unique_ptr<http_client> http_;

  std::mutex refresh_mtx_; // one refresh at a time (held during its I/O)
  std::chrono::steady_clock::time_point last_refresh_{};
  std::mutex mtx_; // the record and the file (never held during I/O)
  mcp_oauth_record rec_;
  bool have_rec_ = false;
  std::string file_stamp_; // inode/mtime/size of the file last read

  std::mutex flag_mtx_; // quick state set from the transport's callbacks
  std::string login_reason_;  // in-memory reason (a 401 without a token)
  std::string step_up_;       // scope of a 403 not yet in the record
  bool refresh_wanted_ = false;
  std::chrono::steady_clock::time_point next_background_try_{};
  std::condition_variable refresh_cv_;
  std::atomic<bool> stopping_{false}; // set under flag_mtx_; cancels I/O
  std::thread refresher_; // started by the first refresh_soon()
};

/// The OAuth client of server `s` under `cfg.home`, made on first use and
/// shared by every transport of that server in this process (so a state
/// like "login needed" is visible to `mibyan mcp list` and the dashboard).
std::shared_ptr<mcp_oauth_client> mcp_oauth_for(const mcp_server_options& s,
                                                const options& cfg);

/// The one made by mcp_oauth_for, or null.
std::shared_ptr<mcp_oauth_client> mcp_oauth_find(const std::string& home,
                                                 const std::string& server);

/// Whether the transport of `s` should use OAuth: an http/sse server with
/// `oauth.enabled` and no Authorization header of its own.
bool mcp_oauth_applies(const mcp_server_options& s);

/// A short, log-safe excerpt of a server's error body: its first 200 bytes,
/// control characters as spaces.
std::string oauth_body_excerpt(const std::string& body);

} // namespace mibyan
