// The dashboard's security layer (serve/ui_auth.hpp).
#include "serve/ui_auth.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <chrono>

#include "base/strings.hpp"
#include "base/crypto.hpp"
#include "base/json.hpp"

namespace mibyan::serve {

namespace {

// Splits "name[:port]" / "[v6][:port]" into a lower-case name (brackets
// removed) and a port (-1 when absent, -2 when malformed).
void split_host(const std::string& text, std::string& name, long& port) {
  name.clear();
  port = -1;
  std::string rest;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos) {
      port = -2;
      return;
    }
    name = text.substr(1, close - 1);
    rest = text.substr(close + 1);
    if (!rest.empty() && rest[0] != ':') {
      port = -2;
      return;
    }
  } else {
    auto colon = text.find(':');
    name = text.substr(0, colon);
    if (colon != std::string::npos)
      rest = text.substr(colon);
  }
  name = strings::lower(name);
  if (!rest.empty()) {
    auto digits = rest.substr(1);
    if (digits.empty() || digits.size() > 5
        || digits.find_first_not_of("0123456789") != std::string::npos) {
      port = -2;
      return;
    }
    port = std::stol(digits);
    if (port > 65535)
      port = -2;
  }
}

bool is_ip_literal(const std::string& name) {
  in_addr a4{};
  in6_addr a6{};
  return ::inet_pton(AF_INET, name.c_str(), &a4) == 1
         || ::inet_pton(AF_INET6, name.c_str(), &a6) == 1;
}

bool is_loopback_ip(const std::string& name) {
  in_addr a4{};
  if (::inet_pton(AF_INET, name.c_str(), &a4) == 1)
    return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (::inet_pton(AF_INET6, name.c_str(), &a6) == 1)
    return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

bool is_wildcard_ip(const std::string& name) {
  return name == "0.0.0.0" || name == "::";
}

bool same_ip(const std::string& a, const std::string& b) {
  in6_addr x{}, y{};
  in_addr p{}, q{};
  if (::inet_pton(AF_INET, a.c_str(), &p) == 1
      && ::inet_pton(AF_INET, b.c_str(), &q) == 1)
    return p.s_addr == q.s_addr;
  if (::inet_pton(AF_INET6, a.c_str(), &x) == 1
      && ::inet_pton(AF_INET6, b.c_str(), &y) == 1)
    return std::equal(std::begin(x.s6_addr), std::end(x.s6_addr),
                      std::begin(y.s6_addr));
  return false;
}

ui_verdict deny(int status, std::string message, std::string code) {
  ui_verdict v;
  v.status = status;
  v.message = std::move(message);
  v.code = std::move(code);
  return v;
}

} // namespace

ui_auth::ui_auth(ui_auth_settings s)
  : cfg_(std::move(s)), secret_(random_hex(32)) {}

int64_t ui_auth::now() const {
  if (cfg_.now_s)
    return cfg_.now_s();
  return std::chrono::duration_cast<std::chrono::seconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

ui_verdict ui_auth::check_host(const std::string& host) const {
  std::string name;
  long port = -1;
  split_host(host, name, port);
  if (host.empty() || name.empty() || port == -2)
    return deny(421, "a request to the dashboard needs a valid Host header",
                "bad_host");
  for (auto& entry : cfg_.allowed_hosts) {
    std::string en;
    long ep = -1;
    split_host(entry, en, ep);
    if (en == name && (ep == -1 || ep == port))
      return {};
  }
  bool port_ok = port == cfg_.listen_port
                 || (port == -1 && cfg_.listen_port == 80);
  if (port_ok) {
    const auto& listen = cfg_.listen_host;
    if (is_ip_literal(name)) {
      if (same_ip(name, listen) || is_wildcard_ip(listen)
          || (is_loopback_ip(listen) && is_loopback_ip(name)))
        return {};
    } else if (name == "localhost" && is_loopback_ip(listen)) {
      return {};
    }
  }
  return deny(421,
              "the Host header '" + host
                + "' does not name this server; add the name to "
                  "server.allowed_hosts to reach the dashboard by it",
              "bad_host");
}

bool ui_auth::origin_ok(const std::string& origin) const {
  if (origin.empty())
    return true; // not a browser, or a same-origin GET
  auto sep = origin.find("://");
  if (sep == std::string::npos)
    return false; // "null" and garbage
  auto host = origin.substr(sep + 3);
  if (auto slash = host.find('/'); slash != std::string::npos)
    host.resize(slash);
  auto scheme = strings::lower(origin.substr(0, sep));
  std::string name;
  long port = -1;
  split_host(host, name, port);
  if (port == -1)
    host += scheme == "https" ? ":443" : ":80";
  return check_host(host).ok() || check_host(origin.substr(sep + 3)).ok();
}

std::string ui_auth::cookie_value(const std::string& header,
                                  const std::string& name) {
  size_t pos = 0;
  while (pos < header.size()) {
    auto end = header.find(';', pos);
    if (end == std::string::npos)
      end = header.size();
    auto item = header.substr(pos, end - pos);
    auto b = item.find_first_not_of(' ');
    if (b != std::string::npos) {
      item = item.substr(b);
      auto eq = item.find('=');
      if (eq != std::string::npos && item.compare(0, eq, name) == 0) {
        auto v = item.substr(eq + 1);
        while (!v.empty() && v.back() == ' ')
          v.pop_back();
        return v;
      }
    }
    pos = end + 1;
  }
  return {};
}

// Cookie value: "v1.<expiry seconds>.<32 hex nonce>.<64 hex HMAC>", the HMAC
// over "mibyan_ui|v1|<expiry>|<nonce>".
std::string ui_auth::valid_nonce(const std::string& value) const {
  if (value.size() > 256 || value.compare(0, 3, "v1.") != 0)
    return {};
  auto d1 = value.find('.', 3);
  if (d1 == std::string::npos)
    return {};
  auto d2 = value.find('.', d1 + 1);
  if (d2 == std::string::npos)
    return {};
  auto exp_text = value.substr(3, d1 - 3);
  auto nonce = value.substr(d1 + 1, d2 - d1 - 1);
  auto mac = value.substr(d2 + 1);
  if (exp_text.empty() || exp_text.size() > 18
      || exp_text.find_first_not_of("0123456789") != std::string::npos
      || nonce.size() != 32)
    return {};
  auto expected = hmac_sha256_hex(secret_,
                                  "mibyan_ui|v1|" + exp_text + "|" + nonce);
  if (expected.empty() || !proof_equal(expected, mac))
    return {};
  if (std::stoll(exp_text) <= now())
    return {};
  std::lock_guard<std::mutex> g{mtx_};
  if (revoked_.count(nonce))
    return {};
  return nonce;
}

std::string ui_auth::csrf_for(const std::string& nonce) const {
  return hmac_sha256_hex(secret_, "mibyan_ui|csrf|" + nonce);
}

std::string ui_auth::make_cookie(const std::string& value, int64_t max_age,
                                 bool tls) const {
  std::string c = std::string{cookie_name} + "=" + value
                  + "; Path=/; Max-Age=" + std::to_string(max_age)
                  + "; HttpOnly; SameSite=Strict";
  if (tls)
    c += "; Secure";
  return c;
}

bool ui_auth::bearer_given(const ui_request& r, std::string& given) const {
  const std::string prefix = "bearer ";
  if (r.authorization.size() < prefix.size()
      || strings::lower(r.authorization.substr(0, prefix.size())) != prefix)
    return false;
  given = r.authorization.substr(prefix.size());
  return true;
}

ui_verdict ui_auth::locked_out(const std::string& addr, int64_t t) {
  auto i = attempts_.find(addr);
  if (i == attempts_.end()) {
    if (attempts_.size() >= cfg_.max_tracked_addresses) {
      for (auto j = attempts_.begin(); j != attempts_.end();)
        j = t - j->second.window_start >= cfg_.failure_window_s
              ? attempts_.erase(j)
              : std::next(j);
      if (attempts_.size() >= cfg_.max_tracked_addresses) {
        auto v = deny(429, "too many wrong key attempts; retry later",
                      "too_many_attempts");
        v.retry_after_s = cfg_.failure_window_s;
        return v;
      }
    }
    return {};
  }
  if (t - i->second.window_start >= cfg_.failure_window_s) {
    attempts_.erase(i);
    return {};
  }
  if (i->second.failures >= cfg_.max_failures) {
    auto v = deny(429,
                  "too many wrong key attempts from this address; retry "
                  "later",
                  "too_many_attempts");
    v.retry_after_s = std::max<int64_t>(
      1, i->second.window_start + cfg_.failure_window_s - t);
    return v;
  }
  return {};
}

void ui_auth::record_failure(const std::string& addr, int64_t t) {
  auto& a = attempts_[addr];
  if (a.failures == 0)
    a.window_start = t;
  ++a.failures;
}

ui_verdict ui_auth::authorise(const ui_request& r, bool state_changing) {
  if (state_changing && !origin_ok(r.origin))
    return deny(403,
                "the request's Origin '" + r.origin
                  + "' is not this server (cross-site request refused)",
                "bad_origin");
  if (open())
    return {};
  std::string given;
  if (bearer_given(r, given)) {
    auto t = now();
    std::lock_guard<std::mutex> g{mtx_};
    if (auto v = locked_out(r.client_addr, t); !v.ok())
      return v;
    if (proof_equal(given, cfg_.key)) {
      attempts_.erase(r.client_addr);
      return {};
    }
    record_failure(r.client_addr, t);
    return deny(401, "wrong API key", "invalid_api_key");
  }
  auto nonce = valid_nonce(cookie_value(r.cookie, cookie_name));
  if (nonce.empty())
    return deny(401,
                "not logged in: POST the server key to /ui/api/login or send "
                "'Authorization: Bearer <key>'",
                "not_logged_in");
  if (state_changing && !proof_equal(r.csrf, csrf_for(nonce)))
    return deny(403,
                r.csrf.empty() ? "missing X-CSRF-Token header"
                               : "wrong X-CSRF-Token header",
                "bad_csrf_token");
  return {};
}

ui_auth::login_result ui_auth::login(const ui_request& r,
                                     const std::string& key_given) {
  login_result out;
  if (!origin_ok(r.origin)) {
    out.verdict = deny(403, "the request's Origin '" + r.origin
                              + "' is not this server",
                       "bad_origin");
    return out;
  }
  if (open()) {
    out.verdict = deny(400,
                       "this server has no key: the dashboard needs no login",
                       "no_login_needed");
    return out;
  }
  auto t = now();
  {
    std::lock_guard<std::mutex> g{mtx_};
    if (auto v = locked_out(r.client_addr, t); !v.ok()) {
      out.verdict = v;
      return out;
    }
    if (!proof_equal(key_given, cfg_.key)) {
      record_failure(r.client_addr, t);
      out.verdict = deny(401, "wrong key", "invalid_api_key");
      return out;
    }
    attempts_.erase(r.client_addr);
    // Revocations whose cookies have expired are dropped here.
    for (auto i = revoked_.begin(); i != revoked_.end();)
      i = i->second <= t ? revoked_.erase(i) : std::next(i);
  }
  auto nonce = random_hex(16);
  auto exp = std::to_string(t + cfg_.session_ttl_s);
  auto value = "v1." + exp + "." + nonce + "."
               + hmac_sha256_hex(secret_, "mibyan_ui|v1|" + exp + "|" + nonce);
  out.set_cookie = make_cookie(value, cfg_.session_ttl_s, r.tls);
  out.csrf = csrf_for(nonce);
  return out;
}

std::string ui_auth::logout(const ui_request& r) {
  auto value = cookie_value(r.cookie, cookie_name);
  if (auto nonce = valid_nonce(value); !nonce.empty()) {
    auto d1 = value.find('.', 3);
    auto exp = std::stoll(value.substr(3, d1 - 3));
    std::lock_guard<std::mutex> g{mtx_};
    revoked_[nonce] = exp;
  }
  return make_cookie("", 0, r.tls);
}

std::string ui_auth::whoami_json(const ui_request& r) {
  json::value v;
  v["auth_required"] = !open();
  if (open()) {
    v["logged_in"] = true;
    v["csrf"] = csrf_for("open");
  } else {
    // A bearer key is checked by authorise: a wrong one counts as an
    // attempt, so whoami cannot serve as an unlimited key oracle.
    std::string given;
    bool bearer = bearer_given(r, given) && authorise(r, false).ok();
    auto nonce = valid_nonce(cookie_value(r.cookie, cookie_name));
    v["logged_in"] = bearer || !nonce.empty();
    v["csrf"] = nonce.empty() ? std::string{} : csrf_for(nonce);
  }
  return v.dump();
}

const std::vector<std::pair<std::string, std::string>>&
ui_auth::security_headers() {
  static const std::vector<std::pair<std::string, std::string>> h{
    {"Content-Security-Policy",
     "default-src 'self'; script-src 'self'; style-src 'self'; img-src "
     "'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri "
     "'none'"},
    {"X-Content-Type-Options", "nosniff"},
    {"Referrer-Policy", "no-referrer"},
    {"X-Frame-Options", "DENY"},
  };
  return h;
}

} // namespace mibyan::serve
