// The MCP client's Streamable HTTP transport against a scripted server
// (tests/support/mcp_http_script_server.py): the GET stream carrying a
// server request and a tools/list_changed (re-registered in the registry
// and the server's toolset), a dropped response stream resumed with
// Last-Event-ID after the server's `retry`, DELETE on close, a stale
// session (404) initialized afresh, protocol version negotiation, the
// authorization hooks, and garbage / oversized events.
#define BOOST_TEST_MODULE mcp_http_transport
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "base/http_client.hpp"
#include "config/options.hpp"
#include "tests/support/mcp_servers.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait_until.hpp"
#include "tools/mcp/mcp_http.hpp"
#include "tools/mcp/mcp_session.hpp"
#include "tools/mcp/mcp_tools.hpp"
#include "tools/toolsets.hpp"

using namespace mibyan;
using mibyan::test::wait_until;
using namespace std::chrono_literals;

namespace {

using clock_type = std::chrono::steady_clock;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

struct fixture {
  test::temp_dir home;
  options cfg;
  http_client http;

  fixture() { cfg.home = home.path(); }

  mcp_server_options server(const test::scripted_http_server& srv) {
    BOOST_REQUIRE_MESSAGE(!srv.url().empty(), "the scripted server did not "
                                              "start");
    mcp_server_options sc;
    sc.name = "scripted";
    sc.transport = "http";
    sc.url = srv.url();
    sc.connect_timeout = 20;
    sc.timeout = 20;
    return sc;
  }

  // The server's request record.
  json::value log(const test::scripted_http_server& srv) {
    http_request req;
    req.url = srv.log_url();
    auto res = http.fetch(std::move(req));
    auto parsed = json::parse(res.body);
    BOOST_REQUIRE(parsed);
    return *parsed.v;
  }

  static std::vector<json::value> where(const json::value& log,
                                        const std::string& verb,
                                        const std::string& method = {}) {
    std::vector<json::value> out;
    for (auto& e : log.as_array())
      if (e.get_string("verb", "") == verb
          && (method.empty() || e.get_string("method", "") == method))
        out.push_back(e);
    return out;
  }

  json::value call(mcp_session& s, const char* tool) {
    json::value args = json::value::make_object();
    return s.call_tool(tool, args, nullptr, clock_type::now() + 30s,
                       home / "media");
  }
};

// A raw transport with its messages collected.
struct raw_client {
  std::unique_ptr<mcp_transport> t;
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<std::string> messages;
  std::string closed;

  explicit raw_client(mcp_http_settings s, http_client& http)
    : t(make_mcp_http_transport(std::move(s), http)) {
    mcp_transport::handlers h;
    h.on_message = [this](std::string m) {
      std::lock_guard<std::mutex> g{mtx};
      messages.push_back(std::move(m));
      cv.notify_all();
    };
    h.on_closed = [this](std::string why) {
      std::lock_guard<std::mutex> g{mtx};
      closed = why;
      cv.notify_all();
    };
    BOOST_REQUIRE(t->start(std::move(h), 10s).ok());
  }

  // The first message containing `part` (waits up to 20 s), or "".
  std::string wait_for(const std::string& part) {
    std::unique_lock<std::mutex> lock{mtx};
    std::string found;
    cv.wait_for(lock, 20s, [&] {
      for (auto& m : messages)
        if (contains(m, part)) {
          found = m;
          return true;
        }
      return false;
    });
    return found;
  }

  void initialize() {
    BOOST_REQUIRE(t->send(R"({"jsonrpc":"2.0","id":1,"method":"initialize",)"
                          R"("params":{"protocolVersion":"2025-11-25",)"
                          R"("capabilities":{},"clientInfo":{"name":"t",)"
                          R"("version":"1"}}})")
                    .ok());
    auto init = wait_for(R"("id":1)");
    BOOST_REQUIRE_MESSAGE(contains(init, "protocolVersion"), init);
    t->set_protocol_version("2025-11-25");
    BOOST_REQUIRE(
      t->send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})")
        .ok());
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(get_stream_carries_requests_and_list_changed,
                        fixture) {
  test::scripted_http_server srv;
  auto sc = server(srv);
  sc.root_dirs = {home.path()};
  cfg.mcp_servers = {sc};
  mcp_manager mgr{cfg, &http};
  mgr.start();
  auto s = mgr.find("scripted");
  BOOST_REQUIRE_MESSAGE((s->current_state() == mcp_session::state::connected),
                        s->last_error());
  tool_registry reg;
  mgr.register_tools(reg);
  BOOST_TEST(reg.find("mcp__scripted__echo") != nullptr);
  BOOST_TEST(reg.find("mcp__scripted__fresh") == nullptr);
  const tool* echo = reg.find("mcp__scripted__echo");

  // A server request on the GET stream (roots/list), answered by POST.
  BOOST_REQUIRE(wait_until([&] { return !where(log(srv), "GET").empty(); }));
  auto r = call(*s, "ask_roots");
  BOOST_TEST(contains(r.dump(), "file://" + home.path()), r.dump());

  // tools/list_changed on the GET stream: listed again and re-registered.
  r = call(*s, "grow");
  BOOST_TEST(contains(r.dump(), "grown"), r.dump());
  BOOST_REQUIRE(wait_until([&] {
    return reg.find("mcp__scripted__fresh") != nullptr;
  }));
  auto names = mgr.server_tools().at("scripted");
  BOOST_TEST((std::find(names.begin(), names.end(), "mcp__scripted__fresh")
              != names.end()));
  // An unchanged tool stays the same object (a running call keeps it).
  BOOST_TEST(reg.find("mcp__scripted__echo") == echo);
  // The server's toolset has the new tool.
  toolset_catalog cat;
  auto set = cat.expand(reg, {"mcp-scripted"});
  BOOST_REQUIRE(set);
  BOOST_TEST((std::find(set->begin(), set->end(), "mcp__scripted__fresh")
              != set->end()));
  // The GET stream carried the session id and the negotiated version.
  auto gets = where(log(srv), "GET");
  BOOST_TEST(!gets.front().get_string("session", "").empty());
  BOOST_TEST(gets.front().get_string("version", "") == "2025-11-25");
  mgr.shutdown();
}

BOOST_FIXTURE_TEST_CASE(dropped_stream_resumes_after_retry, fixture) {
  test::scripted_http_server srv;
  BOOST_REQUIRE(!srv.url().empty());
  mcp_http_settings hs;
  hs.server = "raw";
  hs.url = srv.url();
  std::mutex wm;
  std::vector<std::pair<std::string, std::chrono::milliseconds>> waits;
  hs.on_reconnect_wait = [&](const std::string& what,
                             std::chrono::milliseconds d) {
    std::lock_guard<std::mutex> g{wm};
    waits.emplace_back(what, d);
  };
  raw_client c{hs, http};
  c.initialize();
  BOOST_REQUIRE(c.t->send(R"({"jsonrpc":"2.0","id":2,"method":"tools/call",)"
                          R"("params":{"name":"resumable","arguments":{}}})")
                  .ok());
  auto reply = c.wait_for(R"("id":2)");
  BOOST_TEST(contains(reply, "resumed reply"), reply);
  {
    // The server's `retry: 50` decided the wait before resuming.
    std::lock_guard<std::mutex> g{wm};
    BOOST_REQUIRE(!waits.empty());
    BOOST_TEST(waits.front().first == "resume");
    BOOST_TEST(waits.front().second.count() == 50);
  }
  // The resuming GET named the priming event.
  bool resumed = false;
  for (auto& e : where(log(srv), "GET"))
    resumed = resumed || !e.get_string("last_event_id", "").empty();
  BOOST_TEST(resumed);
  c.t->close();
  BOOST_TEST(c.closed.empty()); // close() reports nothing
}

BOOST_FIXTURE_TEST_CASE(close_deletes_the_session, fixture) {
  test::scripted_http_server srv;
  mcp_session s{server(srv), cfg, &http};
  BOOST_REQUIRE(s.connect().ok());
  auto sid = where(log(srv), "GET").empty()
               ? std::string{}
               : where(log(srv), "GET").front().get_string("session", "");
  s.close();
  auto del = where(log(srv), "DELETE");
  BOOST_REQUIRE(del.size() == 1u);
  BOOST_TEST(!del.front().get_string("session", "").empty());
  if (!sid.empty())
    BOOST_TEST(del.front().get_string("session", "") == sid);
}

BOOST_FIXTURE_TEST_CASE(stale_session_is_initialized_again, fixture) {
  test::scripted_http_server srv;
  mcp_session s{server(srv), cfg, &http};
  BOOST_REQUIRE(s.connect().ok());
  auto r = call(s, "expire");
  BOOST_TEST(contains(r.dump(), "expired"), r.dump());
  // The server answers 404 for the old session: a new one, same call.
  json::value args;
  args["text"] = "again";
  r = s.call_tool("echo", args, nullptr, clock_type::now() + 30s,
                  home / "media");
  BOOST_TEST(r.get_string("result", "") == "echo: again", r.dump());
  auto inits = where(log(srv), "POST", "initialize");
  BOOST_TEST(inits.size() == 2u);
  BOOST_TEST(inits.back().get_string("session", "") == ""); // none sent
  s.close();
}

BOOST_FIXTURE_TEST_CASE(version_negotiation, fixture) {
  {
    test::scripted_http_server srv;
    mcp_session s{server(srv), cfg, &http};
    BOOST_REQUIRE(s.connect().ok());
    BOOST_TEST(s.protocol_version() == "2025-11-25");
    s.close();
  }
  {
    // An older server: Mibyan follows it, the header names it.
    test::scripted_http_server srv{{"--version", "2025-06-18"}};
    mcp_session s{server(srv), cfg, &http};
    BOOST_REQUIRE_MESSAGE(s.connect().ok(), s.last_error());
    BOOST_TEST(s.protocol_version() == "2025-06-18");
    auto r = call(s, "echo");
    BOOST_TEST(contains(r.dump(), "echo:"), r.dump());
    auto lg = log(srv);
    auto init = where(lg, "POST", "initialize");
    BOOST_TEST(init.front().get_string("version", "") == ""); // not yet
    for (auto& e : where(lg, "POST", "tools/call"))
      BOOST_TEST(e.get_string("version", "") == "2025-06-18");
    s.close();
  }
  {
    test::scripted_http_server srv{{"--version", "1999-01-01"}};
    mcp_session s{server(srv), cfg, &http};
    auto st = s.connect();
    BOOST_TEST(!st.ok());
    BOOST_TEST(contains(st.error, "1999-01-01"), st.error);
    BOOST_TEST(contains(st.error, "does not support"), st.error);
  }
}

BOOST_FIXTURE_TEST_CASE(authorization_hooks, fixture) {
  test::scripted_http_server srv{{"--token", "t2"}};
  BOOST_REQUIRE(!srv.url().empty());
  std::mutex am;
  std::string token = "t1";
  std::vector<std::pair<int, std::string>> asked;
  mcp_http_settings hs;
  hs.server = "raw";
  hs.url = srv.url();
  hs.auth.bearer = [&] {
    std::lock_guard<std::mutex> g{am};
    return token;
  };
  hs.auth.on_unauthorized = [&](int status, const std::string& www) {
    std::lock_guard<std::mutex> g{am};
    asked.emplace_back(status, www);
    token = "t2"; // "refreshed"
    return true;
  };
  {
    raw_client c{hs, http};
    c.initialize(); // 401 first, then sent again with t2
    {
      std::lock_guard<std::mutex> g{am};
      BOOST_REQUIRE(asked.size() == 1u);
      BOOST_TEST(asked.front().first == 401);
      BOOST_TEST(contains(asked.front().second, "resource_metadata="),
                 asked.front().second);
    }
    auto inits = where(log(srv), "POST", "initialize");
    BOOST_REQUIRE(inits.size() == 2u);
    BOOST_TEST(inits[0].get_string("auth", "") == "Bearer t1");
    BOOST_TEST(inits[1].get_string("auth", "") == "Bearer t2");
    c.t->close();
  }
  // A hook that cannot help: the request fails with the status.
  hs.auth.bearer = [] { return std::string{"wrong"}; };
  hs.auth.on_unauthorized = [](int, const std::string&) { return false; };
  raw_client c{hs, http};
  BOOST_REQUIRE(c.t->send(R"({"jsonrpc":"2.0","id":1,"method":"initialize",)"
                          R"("params":{}})")
                  .ok());
  auto reply = c.wait_for(R"("id":1)");
  BOOST_TEST(contains(reply, "401"), reply);
  BOOST_TEST(contains(reply, "not authorized"), reply);
  c.t->close();
}

BOOST_FIXTURE_TEST_CASE(garbage_and_oversized_events_fail_the_call, fixture) {
  test::scripted_http_server srv;
  auto sc = server(srv);
  sc.max_message_bytes = 1 << 20;
  mcp_session s{sc, cfg, &http};
  BOOST_REQUIRE(s.connect().ok());
  auto r = call(s, "garbage");
  BOOST_TEST(contains(r.get_string("error", ""), "invalid JSON"), r.dump());
  r = call(s, "huge");
  BOOST_TEST(contains(r.get_string("error", ""), "1048576"), r.dump());
  // The connection survived both.
  json::value args;
  args["text"] = "still here";
  r = s.call_tool("echo", args, nullptr, clock_type::now() + 30s,
                  home / "media");
  BOOST_TEST(r.get_string("result", "") == "echo: still here", r.dump());
  BOOST_TEST(where(log(srv), "POST", "initialize").size() == 1u);
  s.close();
}

BOOST_FIXTURE_TEST_CASE(no_get_stream_is_fine, fixture) {
  test::scripted_http_server srv{{"--no-get"}};
  mcp_session s{server(srv), cfg, &http};
  BOOST_REQUIRE(s.connect().ok());
  json::value args;
  args["text"] = "plain";
  auto r = s.call_tool("echo", args, nullptr, clock_type::now() + 30s,
                       home / "media");
  BOOST_TEST(r.get_string("result", "") == "echo: plain", r.dump());
  // One GET, answered 405, and no retries (by the next call's round trip).
  BOOST_REQUIRE(wait_until([&] { return !where(log(srv), "GET").empty(); }));
  r = s.call_tool("echo", args, nullptr, clock_type::now() + 30s,
                  home / "media");
  BOOST_TEST(r.get_string("result", "") == "echo: plain", r.dump());
  BOOST_TEST(where(log(srv), "GET").size() == 1u);
  s.close();
}

BOOST_FIXTURE_TEST_CASE(get_stream_resumes_with_last_event_id, fixture) {
  test::scripted_http_server srv{{"--get-drop"}};
  auto sc = server(srv);
  sc.root_dirs = {home.path()};
  mcp_session s{sc, cfg, &http};
  BOOST_REQUIRE(s.connect().ok());
  BOOST_REQUIRE(wait_until([&] { return !where(log(srv), "GET").empty(); }));
  // The list_changed arrives, then the server ends the GET connection.
  auto r = call(s, "grow");
  BOOST_REQUIRE(wait_until([&] {
    auto tools = s.tools();
    return std::any_of(tools.begin(), tools.end(),
                       [](const mcp_tool_info& t) { return t.name == "fresh"; });
  }));
  // The next server request travels the resumed stream.
  r = call(s, "ask_roots");
  BOOST_TEST(contains(r.dump(), "file://" + home.path()), r.dump());
  bool resumed = false;
  for (auto& e : where(log(srv), "GET"))
    resumed = resumed || !e.get_string("last_event_id", "").empty();
  BOOST_TEST(resumed);
  s.close();
}
