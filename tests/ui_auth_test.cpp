// The dashboard's security layer (serve/ui_auth.hpp, docs/serve.md
// "Dashboard"): the class itself with an injected clock, then over real
// HTTP against `mibyan serve` / `mibyan dashboard` child processes: Host
// check, login and its attempt limit, cookie, CSRF, security headers, the
// static files, and the refusal to start off loopback without a key.
#define BOOST_TEST_MODULE ui_auth
#include <boost/test/unit_test.hpp>

#include "serve/ui_assets.hpp"
#include "serve/ui_auth.hpp"
#include "tests/support/ui_client.hpp"

using namespace mibyan;
using namespace mibyan::test::ui;
using serve::ui_auth;
using serve::ui_auth_settings;
using serve::ui_request;

namespace {

struct clocked {
  int64_t now = 1'700'000'000;
  ui_auth make(const std::string& key, std::string listen = "127.0.0.1",
               std::vector<std::string> allowed = {}) {
    ui_auth_settings s;
    s.key = key;
    s.listen_host = std::move(listen);
    s.listen_port = 9119;
    s.allowed_hosts = std::move(allowed);
    s.now_s = [this] { return now; };
    return ui_auth{s};
  }
};

ui_request req(const std::string& cookie = {}, const std::string& csrf = {}) {
  ui_request r;
  r.method = "GET";
  r.host = "127.0.0.1:9119";
  r.client_addr = "10.0.0.1";
  r.cookie = cookie;
  r.csrf = csrf;
  return r;
}

// "mibyan_ui=VALUE" from a Set-Cookie value.
std::string cookie_pair(const std::string& set_cookie) {
  return set_cookie.substr(0, set_cookie.find(';'));
}

} // namespace

BOOST_AUTO_TEST_CASE(host_check_accepts_only_this_server) {
  clocked c;
  auto a = c.make("k");
  for (auto h : {"127.0.0.1:9119", "localhost:9119", "LOCALHOST:9119",
                 "[::1]:9119", "127.0.0.2:9119"})
    BOOST_CHECK_MESSAGE(a.check_host(h).ok(), h);
  for (auto h : {"evil.example:9119", "evil.example", "127.0.0.1:80",
                 "127.0.0.1:9118", "", "localhost:x", "[::1", "10.1.1.1:9119",
                 "localhost.evil.example:9119"}) {
    auto v = a.check_host(h);
    BOOST_CHECK_MESSAGE(v.status == 421, h);
    BOOST_CHECK_EQUAL(v.code, "bad_host");
  }
  auto b = c.make("k", "0.0.0.0", {"mibyan.lan", "box:8080"});
  BOOST_CHECK(b.check_host("10.1.1.1:9119").ok());
  BOOST_CHECK(b.check_host("mibyan.lan:9119").ok());
  BOOST_CHECK(b.check_host("Mibyan.LAN").ok());
  BOOST_CHECK(b.check_host("box:8080").ok());
  BOOST_CHECK(!b.check_host("box:9119").ok());
  // Off loopback, localhost is not this server's name.
  BOOST_CHECK(!b.check_host("localhost:9119").ok());
  BOOST_CHECK(!b.check_host("evil.example:9119").ok());
}

BOOST_AUTO_TEST_CASE(login_cookie_csrf_and_logout) {
  clocked c;
  auto a = c.make("the-key");
  BOOST_CHECK(!a.open());
  auto r = req();
  r.tls = true;
  auto l = a.login(r, "the-key");
  BOOST_REQUIRE(l.verdict.ok());
  BOOST_CHECK(l.set_cookie.rfind("mibyan_ui=v1.", 0) == 0);
  for (auto attr : {"; HttpOnly", "; SameSite=Strict", "; Path=/",
                    "; Secure", "; Max-Age="})
    BOOST_CHECK_MESSAGE(contains(l.set_cookie, attr), l.set_cookie);
  auto plain = a.login(req(), "the-key");
  BOOST_CHECK(!contains(plain.set_cookie, "Secure"));
  BOOST_CHECK_EQUAL(l.csrf.size(), 64u);
  auto cookie = cookie_pair(l.set_cookie) + "; other=1";

  BOOST_CHECK(a.authorise(req(cookie), false).ok());
  BOOST_CHECK_EQUAL(a.authorise(req(), false).status, 401);
  // State-changing: the CSRF token of this cookie, nothing else.
  BOOST_CHECK(a.authorise(req(cookie, l.csrf), true).ok());
  BOOST_CHECK_EQUAL(a.authorise(req(cookie), true).status, 403);
  BOOST_CHECK_EQUAL(a.authorise(req(cookie), true).code, "bad_csrf_token");
  BOOST_CHECK_EQUAL(a.authorise(req(cookie, plain.csrf), true).status, 403);
  auto forged = l.csrf;
  forged[0] = forged[0] == 'a' ? 'b' : 'a';
  BOOST_CHECK_EQUAL(a.authorise(req(cookie, forged), true).status, 403);

  // whoami reports the token of the cookie.
  auto who = json::parse(a.whoami_json(req(cookie)));
  BOOST_REQUIRE(who);
  BOOST_CHECK(who.v->get_bool("auth_required", false));
  BOOST_CHECK(who.v->get_bool("logged_in", false));
  BOOST_CHECK_EQUAL(who.v->get_string("csrf", ""), l.csrf);
  auto anon = json::parse(a.whoami_json(req()));
  BOOST_CHECK(!anon.v->get_bool("logged_in", true));
  BOOST_CHECK_EQUAL(anon.v->get_string("csrf", "x"), "");

  // Tampering: any changed byte of the value, another expiry, another
  // server's secret.
  auto value = ui_auth::cookie_value(cookie, "mibyan_ui");
  for (size_t i = 0; i < value.size(); i += 7) {
    auto t = value;
    t[i] = t[i] == '1' ? '2' : '1';
    BOOST_CHECK_EQUAL(a.authorise(req("mibyan_ui=" + t), false).status, 401);
  }
  auto d1 = value.find('.', 3);
  auto longer = "v1.9" + value.substr(3);
  BOOST_CHECK_EQUAL(a.authorise(req("mibyan_ui=" + longer), false).status,
                    401);
  (void) d1;
  auto other = c.make("the-key");
  BOOST_CHECK_EQUAL(other.authorise(req(cookie), false).status, 401);

  // Logout revokes the cookie and clears it.
  auto cleared = a.logout(req(cookie));
  BOOST_CHECK(contains(cleared, "mibyan_ui=;"));
  BOOST_CHECK(contains(cleared, "Max-Age=0"));
  BOOST_CHECK_EQUAL(a.authorise(req(cookie), false).status, 401);
  BOOST_CHECK(a.authorise(req(cookie_pair(plain.set_cookie)), false).ok());
}

BOOST_AUTO_TEST_CASE(cookie_expires) {
  clocked c;
  auto a = c.make("k");
  auto l = a.login(req(), "k");
  auto cookie = cookie_pair(l.set_cookie);
  BOOST_CHECK(a.authorise(req(cookie), false).ok());
  c.now += 12 * 3600 + 1;
  BOOST_CHECK_EQUAL(a.authorise(req(cookie), false).status, 401);
}

BOOST_AUTO_TEST_CASE(wrong_keys_are_limited_per_address) {
  clocked c;
  auto a = c.make("k");
  for (int i = 0; i < 5; ++i)
    BOOST_CHECK_EQUAL(a.login(req(), "wrong").verdict.status, 401);
  auto v = a.login(req(), "k").verdict; // even the right key: locked
  BOOST_CHECK_EQUAL(v.status, 429);
  BOOST_CHECK(v.retry_after_s >= 1 && v.retry_after_s <= 60);
  // Bearer attempts count against the same address and are refused too.
  auto b = req();
  b.authorization = "Bearer k";
  BOOST_CHECK_EQUAL(a.authorise(b, false).status, 429);
  // Another address is not affected.
  auto other = req();
  other.client_addr = "10.0.0.2";
  BOOST_CHECK(a.login(other, "k").verdict.ok());
  other.authorization = "Bearer nope";
  BOOST_CHECK_EQUAL(a.authorise(other, false).status, 401);
  // The window ends.
  c.now += 61;
  BOOST_CHECK(a.login(req(), "k").verdict.ok());
  BOOST_CHECK(a.authorise(b, false).ok());
}

BOOST_AUTO_TEST_CASE(open_server_and_origin) {
  clocked c;
  auto a = c.make("");
  BOOST_CHECK(a.open());
  BOOST_CHECK(a.authorise(req(), true).ok());
  BOOST_CHECK_EQUAL(a.login(req(), "x").verdict.status, 400);
  auto r = req();
  r.origin = "http://evil.example";
  BOOST_CHECK_EQUAL(a.authorise(r, true).status, 403);
  BOOST_CHECK_EQUAL(a.authorise(r, true).code, "bad_origin");
  BOOST_CHECK(a.authorise(r, false).ok()); // reads are not cross-site writes
  r.origin = "null";
  BOOST_CHECK_EQUAL(a.authorise(r, true).status, 403);
  r.origin = "http://127.0.0.1:9119";
  BOOST_CHECK(a.authorise(r, true).ok());
  r.origin = "http://localhost:9119";
  BOOST_CHECK(a.authorise(r, true).ok());
}

BOOST_AUTO_TEST_CASE(security_headers_and_asset_table) {
  auto& h = ui_auth::security_headers();
  std::string csp;
  for (auto& [k, v] : h)
    if (k == "Content-Security-Policy")
      csp = v;
  BOOST_CHECK_EQUAL(csp,
                    "default-src 'self'; script-src 'self'; style-src "
                    "'self'; img-src 'self' data:; connect-src 'self'; "
                    "frame-ancestors 'none'; base-uri 'none'");
  BOOST_REQUIRE(serve::find_ui_asset(""));
  BOOST_CHECK_EQUAL(serve::find_ui_asset("")->path, "index.html");
  BOOST_REQUIRE(serve::find_ui_asset("app.js"));
  BOOST_CHECK(serve::find_ui_asset("app.js")->content_type.rfind(
                "text/javascript", 0)
              == 0);
  BOOST_CHECK(!serve::find_ui_asset("../CMakeLists.txt"));
  BOOST_CHECK(serve::etag_matches("W/\"a\", \"b\"", "\"b\""));
  BOOST_CHECK(!serve::etag_matches("\"a\"", "\"b\""));
}

// -- over HTTP ----------------------------------------------------------------

BOOST_FIXTURE_TEST_CASE(http_login_csrf_host_and_headers, fixture) {
  key = "http-key-1";
  auto sp = start();
  auto p = sp->port;

  // Static files: headers, types, ETag, 304, 404, no traversal.
  auto index = request(p, "GET", "/ui/");
  BOOST_CHECK_EQUAL(status_of(index), 200);
  BOOST_CHECK(header_of(index, "Content-Type").rfind("text/html", 0) == 0);
  BOOST_CHECK(contains(header_of(index, "Content-Security-Policy"),
                       "script-src 'self'"));
  BOOST_CHECK_EQUAL(header_of(index, "X-Content-Type-Options"), "nosniff");
  BOOST_CHECK_EQUAL(header_of(index, "Referrer-Policy"), "no-referrer");
  auto etag = header_of(index, "ETag");
  BOOST_REQUIRE(!etag.empty());
  auto again = request(p, "GET", "/ui/index.html", {},
                       "If-None-Match: " + etag + "\r\n");
  BOOST_CHECK_EQUAL(status_of(again), 304);
  BOOST_CHECK(raw_body(again).empty());
  auto js = request(p, "GET", "/ui/app.js");
  BOOST_CHECK_EQUAL(status_of(js), 200);
  BOOST_CHECK(header_of(js, "Content-Type").rfind("text/javascript", 0)
              == 0);
  for (auto path : {"/ui/nope.js", "/ui/../CMakeLists.txt",
                    "/ui/%2e%2e/CMakeLists.txt", "/ui/..%2fserve/ui_auth.cpp",
                    "/ui//etc/passwd"})
    BOOST_CHECK_MESSAGE(status_of(request(p, "GET", path)) == 404, path);
  BOOST_CHECK_EQUAL(status_of(request(p, "GET", "/ui")), 308);

  // DNS rebinding: another name is refused on every /ui/ path.
  for (auto path : {"/ui/", "/ui/api/whoami", "/ui/api/sessions"}) {
    auto r = request(p, "GET", path, {}, {}, "evil.example:" + std::to_string(p));
    check_error(r, 421, "bad_host");
    BOOST_CHECK(!header_of(r, "Content-Security-Policy").empty());
  }
  check_error(request(p, "GET", "/ui/", {}, {}, "-"), 421, "bad_host");
  BOOST_CHECK_EQUAL(status_of(request(p, "GET", "/ui/", {}, {},
                                      "localhost:" + std::to_string(p))),
                    200);

  // Without a login the API is closed; whoami says so.
  check_error(request(p, "GET", "/ui/api/sessions"), 401, "not_logged_in");
  auto who = body_of(request(p, "GET", "/ui/api/whoami"));
  BOOST_CHECK(who.get_bool("auth_required", false));
  BOOST_CHECK(!who.get_bool("logged_in", true));

  // Wrong keys: 401 five times, then 429 with Retry-After, even for the
  // right key, from that address only.
  for (int i = 0; i < 5; ++i)
    check_error(request(p, "POST", "/ui/api/login", R"({"key":"nope"})"), 401,
                "invalid_api_key");
  auto limited = request(p, "POST", "/ui/api/login", R"({"key":"http-key-1"})");
  check_error(limited, 429, "too_many_attempts");
  BOOST_CHECK(std::stoi(header_of(limited, "Retry-After")) >= 1);
  check_error(request(p, "POST", "/ui/api/login", "not json", {}, {},
                      "127.0.0.2"),
              400, "bad_request");

  // Login from another address.
  auto ok = request(p, "POST", "/ui/api/login", R"({"key":"http-key-1"})", {},
                    {}, "127.0.0.3");
  BOOST_REQUIRE_EQUAL(status_of(ok), 200);
  auto set = header_of(ok, "Set-Cookie");
  BOOST_CHECK(contains(set, "HttpOnly"));
  BOOST_CHECK(contains(set, "SameSite=Strict"));
  BOOST_CHECK(!contains(set, "Secure")); // no TLS here
  auto csrf = body_of(ok).get_string("csrf", "");
  BOOST_REQUIRE_EQUAL(csrf.size(), 64u);
  auto cookie = "Cookie: " + set.substr(0, set.find(';')) + "\r\n";
  auto whoami = body_of(request(p, "GET", "/ui/api/whoami", {}, cookie));
  BOOST_CHECK(whoami.get_bool("logged_in", false));
  BOOST_CHECK_EQUAL(whoami.get_string("csrf", ""), csrf);
  BOOST_CHECK_EQUAL(status_of(request(p, "GET", "/ui/api/sessions", {},
                                      cookie)),
                    200);
  // The bearer key works on the same endpoints (not from the locked
  // address).
  BOOST_CHECK_EQUAL(status_of(request(p, "GET", "/ui/api/sessions", {},
                                      "Authorization: Bearer http-key-1\r\n",
                                      {}, "127.0.0.3")),
                    200);
  check_error(request(p, "GET", "/ui/api/sessions", {},
                      "Authorization: Bearer http-key-1\r\n"),
              429, "too_many_attempts");

  // A state-changing request by cookie needs the CSRF token.
  check_error(request(p, "DELETE", "/ui/api/sessions/nosuch", {}, cookie),
              403, "bad_csrf_token");
  check_error(request(p, "DELETE", "/ui/api/sessions/nosuch", {},
                      cookie + "X-CSRF-Token: " + std::string(64, 'a')
                        + "\r\n"),
              403, "bad_csrf_token");
  check_error(request(p, "DELETE", "/ui/api/sessions/nosuch", {},
                      cookie + "X-CSRF-Token: " + csrf + "\r\n"),
              404, "session_not_found");
  check_error(request(p, "DELETE", "/ui/api/sessions/nosuch", {},
                      cookie + "X-CSRF-Token: " + csrf
                        + "\r\nOrigin: http://evil.example\r\n"),
              403, "bad_origin");

  // A tampered cookie is not logged in.
  auto bad = cookie;
  auto at = bad.find("mibyan_ui=v1.") + 14;
  bad[at] = bad[at] == '9' ? '8' : '9';
  check_error(request(p, "GET", "/ui/api/sessions", {}, bad), 401,
              "not_logged_in");

  // Logout (CSRF needed) ends the cookie.
  check_error(request(p, "POST", "/ui/api/logout", "{}", cookie), 403,
              "bad_csrf_token");
  auto out = request(p, "POST", "/ui/api/logout", "{}",
                     cookie + "X-CSRF-Token: " + csrf + "\r\n");
  BOOST_CHECK_EQUAL(status_of(out), 200);
  BOOST_CHECK(contains(header_of(out, "Set-Cookie"), "Max-Age=0"));
  check_error(request(p, "GET", "/ui/api/sessions", {}, cookie), 401,
              "not_logged_in");
  BOOST_CHECK_EQUAL(sp->stop(SIGTERM), 0);
}

BOOST_AUTO_TEST_CASE(dashboard_refuses_non_loopback_without_key) {
  test::temp_dir home;
  test::process_options o;
  o.env["MIBYAN_HOME"] = home.path();
  o.unset = {"MIBYAN_SERVER_KEY"};
  o.timeout_seconds = 60;
  auto r = test::run_mibyan({"dashboard", "--listen", "0.0.0.0:0"}, o);
  BOOST_CHECK_EQUAL(r.exit_code, 2);
  BOOST_CHECK(r.out.empty());
  BOOST_CHECK_MESSAGE(std::count(r.err.begin(), r.err.end(), '\n') == 1
                        && contains(r.err, "refusing to listen on 0.0.0.0"),
                      r.err);
  auto s = test::run_mibyan({"serve", "--listen", "0.0.0.0:0"}, o);
  BOOST_CHECK_EQUAL(s.exit_code, 2);
  BOOST_CHECK(contains(s.err, "refusing to listen on 0.0.0.0"));
}

BOOST_AUTO_TEST_CASE(dashboard_prints_ready_line_and_serves_ui) {
  test::temp_dir home;
  auto sp = start_node(home.path(), {"dashboard", "--listen", "127.0.0.1:0"},
                       "", "mibyan dashboard listening on http://127.0.0.1:");
  auto index = request(sp->port, "GET", "/ui/");
  BOOST_CHECK_EQUAL(status_of(index), 200);
  BOOST_CHECK(contains(raw_body(index), "<script type=\"module\""));
  // Open on loopback without a key.
  auto who = body_of(request(sp->port, "GET", "/ui/api/whoami"));
  BOOST_CHECK(!who.get_bool("auth_required", true));
  BOOST_CHECK(who.get_bool("logged_in", false));
  BOOST_CHECK_EQUAL(status_of(request(sp->port, "GET", "/ui/api/sessions")),
                    200);
  BOOST_CHECK_EQUAL(sp->stop(SIGTERM), 0);
}

BOOST_FIXTURE_TEST_CASE(allowed_hosts_from_the_config, fixture) {
  auto sp = start("server:\n  allowed_hosts: [mibyan.test, \"other.test:1\"]\n");
  auto p = sp->port;
  BOOST_CHECK_EQUAL(status_of(request(p, "GET", "/ui/", {}, {},
                                      "mibyan.test:" + std::to_string(p))),
                    200);
  BOOST_CHECK_EQUAL(status_of(request(p, "GET", "/ui/", {}, {},
                                      "other.test:1")),
                    200);
  check_error(request(p, "GET", "/ui/", {}, {},
                      "other.test:" + std::to_string(p)),
              421, "bad_host");
  check_error(request(p, "GET", "/ui/api/whoami", {}, {}, "evil.example"),
              421, "bad_host");
  // The API outside /ui/ is not Host-checked (clients name servers freely).
  BOOST_CHECK_EQUAL(status_of(request(p, "GET", "/v1/models", {}, {},
                                      "evil.example")),
                    200);
  BOOST_CHECK_EQUAL(sp->stop(SIGTERM), 0);
}
