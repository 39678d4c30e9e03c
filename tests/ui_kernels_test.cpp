#define BOOST_TEST_MODULE ui_kernels
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// The operator console's kernels and MCP endpoints (docs/serve.md,
// "Operator console") against a real `mibyan serve` child process: real
// execute_code kernels (sandboxed when bwrap works, as configured by
// default) and real MCP servers (tests/support/mcp_misbehaving_server.py).

#include <csignal>
#include <thread>

#include "tests/support/scripted_replies.hpp"
#include "tests/support/serve_fixture.hpp"
#include "tests/support/ui_client.hpp"
#include "tests/support/wait_until.hpp"

using namespace mibyan;
using mibyan::test::wait_until;
using namespace std::chrono;
using namespace mibyan::test::serving;

namespace {

// /ui/ paths need a Host header that names the server (serve/ui_auth.hpp).
std::string ui_http(uint16_t port, const std::string& method,
                    const std::string& path) {
  return mibyan::test::ui::request(port, method, path);
}

std::string chat_in(uint16_t port, const std::string& sid) {
  return http(port, "POST", "/v1/chat/completions", chat_body,
              "Content-Type: application/json\r\nX-Mibyan-Session: " + sid
                + "\r\n");
}

// One turn of `sid` that runs an execute_code cell.
void run_cell_turn(fixture& f, uint16_t port, const std::string& sid) {
  f.provider.script_chat(test::completion("", "execute_code",
                                          R"j({"code":"x = 41\nprint(x + 1)"})j"));
  f.provider.script_chat(reply("done"));
  auto r = chat_in(port, sid);
  BOOST_TEST_CONTEXT(r) { BOOST_REQUIRE_EQUAL(status_of(r), 200); }
}

// The kernel entries of `sid` in GET /ui/api/kernels.
std::vector<json::value> kernels_of(uint16_t port, const std::string& sid) {
  auto r = ui_http(port, "GET", "/ui/api/kernels");
  BOOST_REQUIRE_MESSAGE(status_of(r) == 200, r);
  std::vector<json::value> out;
  auto body = body_of(r);
  for (auto& k : body["data"].as_array())
    if (k.get_string("session_id", "") == sid)
      out.push_back(k);
  return out;
}

bool pid_alive(int64_t pid) {
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) == 0;
}

// Scripts run without a person here (docs/approvals.md).
const std::string kernel_config = "code_execution:\n"
                                  "  prestart_kernels: 0\n"
                                  "approvals:\n"
                                  "  unattended_mode: approve\n";

} // namespace

BOOST_FIXTURE_TEST_SUITE(ui_kernels, fixture)

BOOST_AUTO_TEST_CASE(kernels_are_listed_reset_and_stopped) {
  auto sp = start(kernel_config);
  auto p = sp->port;
  auto empty = ui_http(p, "GET", "/ui/api/kernels");
  BOOST_CHECK_EQUAL(status_of(empty), 200);
  BOOST_TEST(body_of(empty)["data"].dump() == "[]");
  run_cell_turn(*this, p, "k-1");
  auto ks = kernels_of(p, "k-1");
  BOOST_REQUIRE_EQUAL(ks.size(), 1u);
  auto& k = ks[0];
  BOOST_TEST_CONTEXT(k.dump()) {
    auto pid = k.get_int("pid", 0);
    BOOST_TEST(pid_alive(pid));
    BOOST_TEST(k.get_int("rss_bytes", 0) > 1024 * 1024); // a Python process
    BOOST_TEST(k.get_int("cells", 0) == 1);
    BOOST_TEST(k.get_string("mode", "") == "project");
    auto sb = k.get_string("sandbox", "");
    BOOST_TEST((sb == "bwrap" || sb == "none"));
    BOOST_TEST(k.get_string("node", "x") == "");
    BOOST_TEST(k.get_int("uptime_s", -1) >= 0);
    BOOST_TEST(!k.get_bool("busy", true));
  }
  auto pid = k.get_int("pid", 0);
  // Reset: the kernel dies, the session stays; the next cell starts a new
  // kernel (the variable is gone).
  auto rr = ui_http(p, "POST", "/ui/api/kernels/k-1/reset");
  BOOST_TEST_CONTEXT(rr) {
    BOOST_CHECK_EQUAL(status_of(rr), 200);
    BOOST_TEST(body_of(rr).get_bool("reset", false));
  }
  BOOST_TEST(wait_until([&] { return kernels_of(p, "k-1").empty(); }));
  BOOST_TEST(wait_until([&] { return !pid_alive(pid); }));
  run_cell_turn(*this, p, "k-1");
  ks = kernels_of(p, "k-1");
  BOOST_REQUIRE_EQUAL(ks.size(), 1u);
  BOOST_TEST(ks[0].get_int("pid", 0) != pid);
  // The conversation survived the reset: the provider saw the first turn.
  auto reqs = provider_requests();
  BOOST_TEST(contains(reqs.back().dump(), "\"content\":\"done\""));
  // Stop: kernels and conversation closed.
  pid = ks[0].get_int("pid", 0);
  auto st = ui_http(p, "POST", "/ui/api/kernels/k-1/stop");
  BOOST_TEST_CONTEXT(st) {
    BOOST_CHECK_EQUAL(status_of(st), 200);
    BOOST_TEST(body_of(st).get_bool("stopped", false));
  }
  BOOST_TEST(wait_until([&] { return kernels_of(p, "k-1").empty(); }));
  BOOST_TEST(wait_until([&] { return !pid_alive(pid); }));
  // Now unknown to the kernels endpoints.
  check_error(ui_http(p, "POST", "/ui/api/kernels/k-1/reset"), 404,
              "kernel_not_found");
  check_error(ui_http(p, "POST", "/ui/api/kernels/k-1/stop"), 404,
              "kernel_not_found");
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(kernel_bad_input_gets_clear_4xx) {
  auto sp = start(kernel_config);
  auto p = sp->port;
  check_error(ui_http(p, "POST", "/ui/api/kernels/nobody/reset"), 404,
              "kernel_not_found");
  check_error(ui_http(p, "POST", "/ui/api/kernels/nobody/stop"), 404,
              "kernel_not_found");
  check_error(ui_http(p, "GET", "/ui/api/kernels/nobody/reset"), 405,
              "method_not_allowed");
  check_error(ui_http(p, "POST", "/ui/api/kernels"), 405, "method_not_allowed");
  check_error(ui_http(p, "POST", "/ui/api/kernels/a%2Fb/reset"), 400,
              "bad_session_id");
  check_error(ui_http(p, "POST", "/ui/api/kernels/x/explode"), 404, "not_found");
  check_error(ui_http(p, "POST", "/ui/api/kernels/x/reset/again"), 404,
              "not_found");
  check_error(ui_http(p, "GET", "/ui/api/kernelsx"), 404, "not_found");
  // Without MCP servers: an empty list, and reconnect finds nothing.
  auto m = ui_http(p, "GET", "/ui/api/mcp");
  BOOST_CHECK_EQUAL(status_of(m), 200);
  BOOST_TEST(body_of(m)["data"].dump() == "[]");
  check_error(ui_http(p, "POST", "/ui/api/mcp/none/reconnect"), 404,
              "mcp_server_not_found");
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(operator_endpoints_need_the_key_and_the_csrf_token) {
  key = "the-server-key";
  auto sp = start(kernel_config);
  auto p = sp->port;
  namespace ui = mibyan::test::ui;
  for (auto path : {"/ui/api/kernels", "/ui/api/live/turns", "/ui/api/mcp",
                    "/ui/api/cluster", "/ui/api/live"})
    check_error(ui::request(p, "GET", path), 401, "not_logged_in");
  auto bearer = "Authorization: Bearer the-server-key\r\n";
  auto k = ui::request(p, "GET", "/ui/api/kernels", {}, bearer);
  BOOST_CHECK_MESSAGE(status_of(k) == 200, k);
  // The dashboard's cookie: a POST needs the CSRF token as well.
  auto login = ui::request(p, "POST", "/ui/api/login",
                           R"({"key":"the-server-key"})");
  BOOST_REQUIRE_MESSAGE(status_of(login) == 200, login);
  auto set = ui::header_of(login, "Set-Cookie");
  auto cookie = "Cookie: " + set.substr(0, set.find(';')) + "\r\n";
  auto csrf = body_of(login).get_string("csrf", "");
  BOOST_CHECK_EQUAL(status_of(ui::request(p, "GET", "/ui/api/kernels", {},
                                          cookie)),
                    200);
  for (auto path : {"/ui/api/kernels/s1/reset", "/ui/api/kernels/s1/stop",
                    "/ui/api/live/s1/interrupt", "/ui/api/mcp/m/reconnect"}) {
    auto no_token = ui::request(p, "POST", path, "{}", cookie);
    BOOST_CHECK_MESSAGE(status_of(no_token) == 403, path << ": " << no_token);
    auto forged = ui::request(p, "POST", path, "{}",
                              cookie + "X-CSRF-Token: " + std::string(64, '0')
                                + "\r\n");
    BOOST_CHECK_MESSAGE(status_of(forged) == 403, path << ": " << forged);
    // With the token the request is authorised (and the target unknown).
    auto ok = ui::request(p, "POST", path, "{}",
                          cookie + "X-CSRF-Token: " + csrf + "\r\n");
    BOOST_CHECK_MESSAGE(status_of(ok) == 404, path << ": " << ok);
  }
  // A Host that does not name the server is refused (DNS rebinding).
  auto rebound = ui::request(p, "GET", "/ui/api/kernels", {}, bearer,
                             "evil.example:" + std::to_string(p));
  BOOST_CHECK_MESSAGE(status_of(rebound) == 421, rebound);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(mcp_servers_are_listed_and_reconnected) {
  auto script = test::test_source_dir()
                + "/support/mcp_misbehaving_server.py";
  auto sp = start(kernel_config
                  + "mcp_servers:\n"
                    "  good:\n"
                    "    command: python3\n"
                    "    args: [\"" + script + "\", good]\n"
                    "  broken:\n"
                    "    command: python3\n"
                    "    args: [\"-c\", \"import sys; "
                    "sys.stderr.write('no db\\\\n'); sys.exit(2)\"]\n"
                    "    connect_timeout: 10\n");
  auto p = sp->port;
  auto r = ui_http(p, "GET", "/ui/api/mcp");
  BOOST_REQUIRE_MESSAGE(status_of(r) == 200, r);
  auto data = body_of(r)["data"];
  BOOST_REQUIRE_MESSAGE(data.size() == 2u, data.dump());
  json::value good, broken;
  for (auto& s : data.as_array())
    (s.get_string("name", "") == "good" ? good : broken) = s;
  BOOST_TEST_CONTEXT(data.dump()) {
    BOOST_TEST(good.get_string("state", "") == "connected");
    BOOST_TEST(contains(good["tools"].dump(), "mcp__good__echo"));
    BOOST_TEST(good["last_error"].is_null());
    BOOST_TEST(broken.get_string("state", "") == "failed");
    BOOST_TEST(contains(broken.get_string("last_error", ""), "no db"));
  }
  auto ok = ui_http(p, "POST", "/ui/api/mcp/good/reconnect");
  BOOST_TEST_CONTEXT(ok) {
    BOOST_CHECK_EQUAL(status_of(ok), 200);
    BOOST_TEST(body_of(ok).get_string("state", "") == "connected");
    BOOST_TEST(contains(body_of(ok)["tools"].dump(), "mcp__good__echo"));
  }
  auto bad = ui_http(p, "POST", "/ui/api/mcp/broken/reconnect");
  check_error(bad, 502, "mcp_reconnect_failed");
  BOOST_TEST(contains(bad, "no db"));
  check_error(ui_http(p, "POST", "/ui/api/mcp/nope/reconnect"), 404,
              "mcp_server_not_found");
  check_error(ui_http(p, "GET", "/ui/api/mcp/good/reconnect"), 405,
              "method_not_allowed");
  check_error(ui_http(p, "POST", "/ui/api/mcp"), 405, "method_not_allowed");
  check_error(ui_http(p, "POST", "/ui/api/mcp/good/restart"), 404, "not_found");
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_SUITE_END()
