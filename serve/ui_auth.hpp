// File: serve/ui_auth.hpp
//
// The security layer of the dashboard (/ui/, docs/serve.md "Dashboard"),
// Beast-free so it can be tested without sockets:
//   * login with the server key: a session cookie `mibyan_ui` signed with
//     HMAC-SHA256 under a per-process random secret (a restart logs
//     everybody out), with an expiry inside the signed value;
//   * a CSRF token bound to the cookie (an HMAC of the cookie's nonce),
//     required as `X-CSRF-Token` on state-changing requests authorised by
//     the cookie;
//   * the Host-header check against DNS rebinding and the Origin check on
//     state-changing requests;
//   * a limit on wrong key attempts per client address (429 + Retry-After);
//   * the security headers of every /ui/ response.
// Without a key (only allowed on loopback, cli/serve_command.cpp) every
// request is authorised; the Host and Origin checks still apply.
//
// Thread safety: every member function may be called from any thread (the
// attempt table and the logout list are behind a mutex).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mibyan::serve {

/// What the checks read from one request (headers as sent; "" = absent).
struct ui_request {
  std::string method;
  std::string host;
  std::string authorization;
  /// Every Cookie header, joined with "; ".
  std::string cookie;
  std::string csrf;
  std::string origin;
  /// The client's address (the rate limit's key).
  std::string client_addr;
  /// The client reached the node over TLS (a TLS-terminating proxy says so
  /// with `X-Forwarded-Proto: https`): the cookie gets `Secure`.
  bool tls = false;
};

/// The outcome of a check: `status` 200 means go on; otherwise the error
/// reply (401, 403, 421, 429) with its message and code.
struct ui_verdict {
  int status = 200;
  std::string message;
  std::string code;
  /// Seconds for Retry-After (429 only).
  int64_t retry_after_s = 0;
  bool ok() const { return status == 200; }
};

struct ui_auth_settings {
  /// The server key ("" = open).
  std::string key;
  /// The bound address and port (after binding: port 0 resolved).
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 0;
  /// server.allowed_hosts: "name" (any port) or "name:port".
  std::vector<std::string> allowed_hosts;
  /// Lifetime of a login cookie.
  int64_t session_ttl_s = 12 * 3600;
  /// Wrong keys one address may send per window before it gets 429 until
  /// the window ends.
  int64_t max_failures = 5;
  int64_t failure_window_s = 60;
  /// Addresses tracked at once; beyond it (after dropping ended windows)
  /// every new address is refused with 429 until windows end.
  size_t max_tracked_addresses = 65536;
  /// Seconds since the epoch (tests inject a clock).
  std::function<int64_t()> now_s;
};

class ui_auth {
public:
  static constexpr const char* cookie_name = "mibyan_ui";

  explicit ui_auth(ui_auth_settings s);

  /// No key is set: every request is authorised.
  bool open() const { return cfg_.key.empty(); }

  /// DNS-rebinding defence: `host` (the Host header) names the listen
  /// address, a loopback name when listening on loopback, any IP literal
  /// when listening on a wildcard address, or an allowed_hosts entry.
  /// 421 otherwise (also for a missing Host).
  ui_verdict check_host(const std::string& host) const;

  /// Authorises a dashboard request: open server, `Authorization: Bearer
  /// KEY`, or a valid unexpired cookie. A state-changing request must also
  /// pass the Origin check (a browser's Origin, when sent, names an
  /// accepted host: 403) and, when authorised by the cookie only, carry
  /// X-CSRF-Token bound to it (403). A wrong bearer key counts as a failed
  /// attempt of the client's address (429 once over the limit).
  ui_verdict authorise(const ui_request& r, bool state_changing);

  /// POST /ui/api/login with `key_given`. On success `set_cookie` holds
  /// the Set-Cookie value and `csrf` the token; 401 for a wrong key, 429
  /// over the attempt limit, 400 on an open server (nothing to log in to).
  struct login_result {
    ui_verdict verdict;
    std::string set_cookie;
    std::string csrf;
  };
  login_result login(const ui_request& r, const std::string& key_given);

  /// POST /ui/api/logout: revokes the request's cookie (if valid) until its
  /// expiry and returns the Set-Cookie value that clears it.
  std::string logout(const ui_request& r);

  /// GET /ui/api/whoami: {"auth_required","logged_in","csrf"} (csrf is ""
  /// when not logged in; on an open server a token that is accepted but
  /// not required).
  std::string whoami_json(const ui_request& r);

  /// The headers every /ui/ response carries (CSP without inline script,
  /// nosniff, no referrer, no framing).
  static const std::vector<std::pair<std::string, std::string>>&
  security_headers();

  /// The value of cookie `name` in a Cookie header ("" when absent).
  static std::string cookie_value(const std::string& header,
                                  const std::string& name);

private:
  int64_t now() const;
  // The nonce of a valid, unexpired, unrevoked cookie value ("" if not).
  std::string valid_nonce(const std::string& value) const;
  std::string csrf_for(const std::string& nonce) const;
  std::string make_cookie(const std::string& value, int64_t max_age,
                          bool tls) const;
  bool bearer_given(const ui_request& r, std::string& given) const;
  bool origin_ok(const std::string& origin) const;
  // The attempt table (lock held by the caller for both).
  ui_verdict locked_out(const std::string& addr, int64_t now);
  void record_failure(const std::string& addr, int64_t now);

  ui_auth_settings cfg_;
  std::string secret_;
  mutable std::mutex mtx_;
  struct attempts {
    int64_t window_start = 0;
    int64_t failures = 0;
  };
  std::map<std::string, attempts> attempts_;
  // Revoked cookie nonces -> their expiry.
  std::map<std::string, int64_t> revoked_;
};

} // namespace mibyan::serve
