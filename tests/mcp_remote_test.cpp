// The MCP client over Streamable HTTP and legacy SSE against the real
// @modelcontextprotocol/server-everything, through the runtime's
// curl-multi client: handshake (with Mcp-Session-Id), listing, results,
// a large result, timeout with cancellation, interruption, ping.
#define BOOST_TEST_MODULE mcp_remote
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "base/http_client.hpp"
#include "config/options.hpp"
#include "tests/support/mcp_servers.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait_until.hpp"
#include "tools/mcp/mcp_session.hpp"
#include "tools/mcp/mcp_tools.hpp"

using namespace mibyan;
using namespace std::chrono_literals;
using mibyan::test::mcp_npm_presence;
BOOST_TEST_GLOBAL_FIXTURE(mcp_npm_presence);

namespace {

using clock_type = std::chrono::steady_clock;

json::value args_of(const char* text) {
  return *json::parse(text).v;
}

// The same call set over either remote transport.
void exercise(const std::string& mode, const std::string& transport) {
  test::everything_http_server server{mode};
  BOOST_REQUIRE_MESSAGE(!server.url().empty(), "server-everything " + mode
                                                 + " did not start");
  test::temp_dir home;
  options cfg;
  cfg.home = home.path();
  http_client http;
  mcp_server_options sc;
  sc.name = "remote-everything";
  sc.transport = transport;
  sc.url = server.url();
  sc.connect_timeout = 30;
  sc.timeout = 60;
  cfg.mcp_servers = {sc};
  mcp_manager mgr{cfg, &http};
  mgr.start();
  auto s = mgr.find("remote-everything");
  BOOST_REQUIRE_MESSAGE((s->current_state() == mcp_session::state::connected),
                        s->last_error());
  tool_registry reg;
  mgr.register_tools(reg);
  BOOST_TEST(reg.find("mcp__remote_everything__echo") != nullptr);
  auto media = home / "media";
  auto call = [&](mcp_session& x, const char* tool, const char* args,
                  const std::atomic<bool>* cancel = nullptr) {
    return x.call_tool(tool, args_of(args), cancel, clock_type::now() + 60s,
                       media);
  };
  auto r = call(*s, "echo", R"({"message":"over the wire"})");
  BOOST_TEST(r.get_string("result", "") == "Echo: over the wire", r.dump());
  r = call(*s, "get-sum", R"({"a":1,"b":2})");
  BOOST_TEST(r.get_string("result", "").find('3') != std::string::npos,
             r.dump());
  r = call(*s, "get-structured-content", R"({"location":"Chicago"})");
  BOOST_TEST(r.find("structuredContent") != nullptr, r.dump());
  // A large result: 200 KB echoed back.
  std::string big(200000, 'q');
  json::value a;
  a["message"] = big;
  r = s->call_tool("echo", a, nullptr, clock_type::now() + 60s, media);
  BOOST_TEST(r.get_string("result", "").size() == big.size() + 6);
  // A JSON-RPC error (unknown tool) is an error result, not a crash.
  r = call(*s, "no-such-tool", "{}");
  BOOST_TEST(r.find("error") != nullptr, r.dump());
  BOOST_TEST(s->ping(10s).ok());

  // Timeout (the server gets notifications/cancelled), then still usable.
  auto quick_cfg = sc;
  quick_cfg.timeout = 1;
  mcp_session quick{quick_cfg, cfg, &http};
  BOOST_REQUIRE(quick.connect().ok());
  r = call(quick, "trigger-long-running-operation",
           R"({"duration":20,"steps":20})");
  BOOST_TEST(r.get_string("error", "").find("timed out") != std::string::npos,
             r.dump());
  r = call(quick, "echo", R"({"message":"still here"})");
  BOOST_TEST(r.get_string("result", "") == "Echo: still here", r.dump());

  // Interruption.
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    mibyan::test::wait_until([&] { return s->active_calls() > 0; });
    cancel = true;
  });
  r = call(*s, "trigger-long-running-operation",
           R"({"duration":30,"steps":30})", &cancel);
  canceller.join();
  BOOST_TEST(r.get_string("error", "").find("interrupted") != std::string::npos,
             r.dump());
  r = call(*s, "echo", R"({"message":"after"})");
  BOOST_TEST(r.get_string("result", "") == "Echo: after", r.dump());
  quick.close();
  mgr.shutdown();
}

// The server dies during a call: the call fails at once, and the next call
// reaches the restarted server with a new session.
void crash_and_reconnect(const std::string& mode, const std::string& transport) {
  auto server = std::make_unique<test::everything_http_server>(mode);
  BOOST_REQUIRE(!server->url().empty());
  auto url = server->url();
  auto port = server->port();
  test::temp_dir home;
  options cfg;
  cfg.home = home.path();
  http_client http;
  mcp_server_options sc;
  sc.name = "remote";
  sc.transport = transport;
  sc.url = url;
  sc.connect_timeout = 30;
  sc.timeout = 60;
  mcp_session s{sc, cfg, &http};
  BOOST_REQUIRE(s.connect().ok());
  json::value r;
  std::thread caller([&] {
    r = s.call_tool("trigger-long-running-operation",
                    args_of(R"({"duration":30,"steps":30})"), nullptr,
                    clock_type::now() + 60s, home / "m");
  });
  while (s.active_calls() == 0)
    std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(300ms);
  server.reset(); // SIGKILL
  caller.join();
  BOOST_TEST(r.get_string("error", "").find("unavailable") != std::string::npos,
             r.dump());
  server = std::make_unique<test::everything_http_server>(mode, port);
  BOOST_REQUIRE(!server->url().empty());
  r = s.call_tool("echo", args_of(R"({"message":"back"})"), nullptr,
                  clock_type::now() + 60s, home / "m");
  BOOST_TEST(r.get_string("result", "") == "Echo: back", r.dump());
  s.close();
}

} // namespace

BOOST_AUTO_TEST_CASE(streamable_http_crash_and_reconnect) {
  crash_and_reconnect("streamableHttp", "http");
}

BOOST_AUTO_TEST_CASE(sse_crash_and_reconnect) {
  crash_and_reconnect("sse", "sse");
}

BOOST_AUTO_TEST_CASE(streamable_http) {
  exercise("streamableHttp", "http");
}

BOOST_AUTO_TEST_CASE(legacy_sse) {
  exercise("sse", "sse");
}

BOOST_AUTO_TEST_CASE(unreachable_url_fails_within_connect_timeout) {
  test::temp_dir home;
  options cfg;
  cfg.home = home.path();
  http_client http;
  mcp_server_options sc;
  sc.name = "nowhere";
  sc.transport = "http";
  sc.url = "http://127.0.0.1:1/mcp";
  sc.connect_timeout = 5;
  mcp_session s{sc, cfg, &http};
  auto st = s.connect();
  BOOST_TEST(!st.ok());
  BOOST_TEST((s.current_state() == mcp_session::state::failed));
  // A call then reports the server as unreachable, and after three
  // failures the breaker answers without trying.
  json::value r;
  for (int i = 0; i < 4; ++i)
    r = s.call_tool("echo", json::value::make_object(), nullptr,
                    clock_type::now() + 10s, home / "m");
  BOOST_TEST(r.get_string("error", "").find("consecutive failures")
               != std::string::npos,
             r.dump());
}
