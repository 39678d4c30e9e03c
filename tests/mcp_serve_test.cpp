#define BOOST_TEST_MODULE mcp_serve
#include <boost/test/unit_test.hpp>

// `mibyan mcp serve` end to end (docs/mcp.md, "Mibyan as an MCP server"),
// over stdio and Streamable HTTP, with real clients: the MCP Inspector CLI
// (@modelcontextprotocol/inspector --cli) and the MCP TypeScript SDK's
// Client (tests/node/mcp_serve_client.mjs), both from tests/node
// (scripts/install-test-deps.sh); and raw sockets and pipes for bad input.
// Without node or those packages the suite exits 77 (skipped), or fails
// under MIBYAN_REQUIRE_TEST_DATA=1.

#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>

#include "base/subprocess.hpp"
#include "storage/session_store.hpp"
#include "tests/support/mcp_serve_fixture.hpp"

using namespace mibyan;
using namespace std::chrono;
using namespace mibyan::test::serving;
using namespace mibyan::test::mcp_serving;

BOOST_TEST_GLOBAL_FIXTURE(npm_presence);

BOOST_FIXTURE_TEST_SUITE(mcp_serve, mcp_fixture)

BOOST_AUTO_TEST_CASE(inspector_cli_over_stdio) {
  inspector_checks({"-e", "MIBYAN_HOME=" + home.path(), "--cwd", work.path(),
                    test::mibyan_binary(), "mcp", "serve", "--page-size",
                    "4"});
}

BOOST_AUTO_TEST_CASE(inspector_cli_over_http) {
  auto sp = start_http();
  inspector_checks({url(*sp), "--transport", "http"});
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(sdk_client_over_stdio) {
  for (auto s : {"tools", "progress", "elicit", "noelicit", "logging"})
    sdk(s, "stdio");
}

BOOST_AUTO_TEST_CASE(sdk_client_over_http) {
  auto sp = start_http();
  for (auto s : {"tools", "progress", "elicit", "noelicit", "logging",
                 "resume"})
    sdk(s, "http", sp.get());
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(sdk_client_with_a_key) {
  key = "mcp-serve-test-key-1";
  auto sp = start_http();
  sdk("tools", "http", sp.get());
  // Without the key, or with a near miss: 401 with a Bearer challenge.
  auto r = http(sp->port, "POST", "/mcp", init_body, json_headers);
  BOOST_CHECK_EQUAL(status_of(r), 401);
  BOOST_CHECK_EQUAL(header_value(r, "WWW-Authenticate"), "Bearer");
  BOOST_CHECK_EQUAL(status_of(http(sp->port, "POST", "/mcp", init_body,
                                   json_headers
                                     + "Authorization: Bearer "
                                       "mcp-serve-test-key-2\r\n")),
                    401);
  BOOST_CHECK_EQUAL(status_of(http(sp->port, "POST", "/mcp", init_body,
                                   json_headers + "Authorization: Bearer "
                                     + key + "\r\n")),
                    200);
}

BOOST_AUTO_TEST_CASE(off_loopback_without_a_key_is_refused) {
  test::process_options o;
  o.env["MIBYAN_HOME"] = home.path();
  o.unset = {"MIBYAN_SERVER_KEY", "MIBYAN_MCP_SERVE_KEY"};
  o.timeout_seconds = 60;
  auto r = test::run_mibyan({"mcp", "serve", "--listen", "0.0.0.0:0"}, o);
  BOOST_CHECK_EQUAL(r.exit_code, 2);
  BOOST_CHECK(contains(r.err, "without a key"));
  auto u = test::run_mibyan({"mcp", "serve", "--toolsets", "no_such_set"}, o);
  BOOST_CHECK_EQUAL(u.exit_code, 2);
  BOOST_CHECK(contains(u.err, "no_such_set"));
}

BOOST_AUTO_TEST_CASE(http_bad_input_gets_4xx_and_the_server_keeps_serving) {
  home.write("config.yaml", "server:\n  max_body_bytes: 4096\n");
  auto sp = start_http();
  auto port = sp->port;
  auto sid = raw_session(port);
  auto with_sid = json_headers + "Mcp-Session-Id: " + sid + "\r\n";
  const std::string ping = R"({"jsonrpc":"2.0","id":2,"method":"ping"})";
  // No session id: 400; an unknown one: 404.
  BOOST_CHECK_EQUAL(status_of(http(port, "POST", "/mcp", ping, json_headers)),
                    400);
  BOOST_CHECK_EQUAL(status_of(http(port, "POST", "/mcp", ping,
                                   json_headers
                                     + "Mcp-Session-Id: 0123456789abcdef01234"
                                       "56789abcdef\r\n")),
                    404);
  // A browser page from elsewhere (DNS rebinding): 403; loopback pages are
  // fine.
  BOOST_CHECK_EQUAL(status_of(http(port, "POST", "/mcp", ping,
                                   with_sid + "Origin: http://evil.example\r\n")),
                    403);
  BOOST_CHECK_EQUAL(status_of(http(port, "POST", "/mcp", ping,
                                   with_sid + "Origin: null\r\n")),
                    403);
  BOOST_CHECK_EQUAL(status_of(http(port, "POST", "/mcp", ping,
                                   with_sid
                                     + "Origin: http://localhost:6274\r\n")),
                    200);
  // Garbage, a batch, a non-JSON content type, an oversized body.
  auto garbage = http(port, "POST", "/mcp", "{nope", with_sid);
  BOOST_CHECK_EQUAL(status_of(garbage), 400);
  BOOST_CHECK(contains(garbage, "-32700"));
  BOOST_CHECK_EQUAL(status_of(http(port, "POST", "/mcp", "[" + ping + "]",
                                   with_sid)),
                    400);
  BOOST_CHECK_EQUAL(status_of(http(port, "POST", "/mcp", ping,
                                   "Content-Type: text/plain\r\nMcp-Session-Id: "
                                     + sid + "\r\n")),
                    415);
  BOOST_CHECK_EQUAL(status_of(http(port, "POST", "/mcp",
                                   std::string(8192, ' '), with_sid)),
                    413);
  // An unsupported protocol version header: 400; a supported one: fine.
  BOOST_CHECK_EQUAL(status_of(http(port, "POST", "/mcp", ping,
                                   with_sid
                                     + "MCP-Protocol-Version: 1999-01-01\r\n")),
                    400);
  BOOST_CHECK_EQUAL(status_of(http(port, "POST", "/mcp", ping,
                                   with_sid
                                     + "MCP-Protocol-Version: 2025-06-18\r\n")),
                    200);
  // An unknown method, a wrong path, a wrong verb, a GET without
  // Accept: text/event-stream.
  auto unknown = http(port, "POST", "/mcp",
                      R"({"jsonrpc":"2.0","id":3,"method":"no/such"})",
                      with_sid);
  BOOST_CHECK_EQUAL(status_of(unknown), 200);
  BOOST_CHECK(contains(unknown, "-32601"));
  BOOST_CHECK_EQUAL(status_of(http(port, "POST", "/other", ping, with_sid)),
                    404);
  BOOST_CHECK_EQUAL(status_of(http(port, "PUT", "/mcp", ping, with_sid)),
                    405);
  BOOST_CHECK_EQUAL(status_of(http(port, "GET", "/mcp", {},
                                   "Mcp-Session-Id: " + sid + "\r\n")),
                    406);
  // A request before initialize on a fresh session cannot exist over HTTP
  // (no session id); a second initialize on the session is refused.
  auto again = http(port, "POST", "/mcp", init_body, with_sid);
  BOOST_CHECK_EQUAL(status_of(again), 200); // a new session, not this one
  BOOST_CHECK(header_value(again, "Mcp-Session-Id") != sid);
  // Still serving.
  BOOST_CHECK_EQUAL(status_of(http(port, "POST", "/mcp", ping, with_sid)),
                    200);
  // DELETE ends the session; then it is 404 everywhere.
  BOOST_CHECK_EQUAL(status_of(http(port, "DELETE", "/mcp", {},
                                   "Mcp-Session-Id: " + sid + "\r\n")),
                    204);
  BOOST_CHECK_EQUAL(status_of(http(port, "POST", "/mcp", ping, with_sid)),
                    404);
  BOOST_CHECK_EQUAL(status_of(http(port, "DELETE", "/mcp", {},
                                   "Mcp-Session-Id: " + sid + "\r\n")),
                    404);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(http_client_disconnecting_mid_call_interrupts_it) {
  auto sp = start_http();
  auto port = sp->port;
  auto sid = raw_session(port);
  auto with_sid = json_headers + "Mcp-Session-Id: " + sid + "\r\n";
  int fd = dial_loopback(port);
  std::string body = R"({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"terminal","arguments":{"command":"sleep 57.125","timeout":120}}})";
  send_all(fd, "POST /mcp HTTP/1.1\r\nHost: x\r\n" + with_sid
                 + "Content-Length: " + std::to_string(body.size())
                 + "\r\n\r\n" + body);
  BOOST_REQUIRE(wait_until([] { return running("sleep [5]7.125"); }));
  // The id of a request still running cannot be used again.
  auto dup = http(port, "POST", "/mcp",
                  R"({"jsonrpc":"2.0","id":9,"method":"ping"})", with_sid);
  BOOST_CHECK_EQUAL(status_of(dup), 400);
  BOOST_CHECK(contains(dup, "-32600"));
  ::close(fd);
  BOOST_CHECK(wait_until([] { return !running("sleep [5]7.125"); }));
  BOOST_CHECK(wait_until([&] {
    return contains(test::slurp(home / "logs/mcp-serve.log"),
                    "the client left");
  }));
  // The session and the server serve on.
  auto r = http(port, "POST", "/mcp",
                R"({"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"read_file","arguments":{"path":")"
                  + tool_file + "\"}}}",
                with_sid);
  BOOST_CHECK_EQUAL(status_of(r), 200);
  BOOST_CHECK(contains(r, "MCP-SERVE-MARKER"));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(http_get_stream_carries_server_requests_and_replays) {
  auto sp = start_http();
  auto port = sp->port;
  auto elicit_init = init_body;
  elicit_init.replace(elicit_init.find("\"capabilities\":{}"),
                      std::string{"\"capabilities\":{}"}.size(),
                      "\"capabilities\":{\"elicitation\":{}}");
  auto r = http(port, "POST", "/mcp", elicit_init, json_headers);
  BOOST_REQUIRE_EQUAL(status_of(r), 200);
  auto sid = header_value(r, "Mcp-Session-Id");
  auto with_sid = json_headers + "Mcp-Session-Id: " + sid + "\r\n";
  auto open_get = [&](const std::string& extra) {
    int fd = dial_loopback(port);
    send_all(fd, "GET /mcp HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
                 "Mcp-Session-Id: " + sid + "\r\n" + extra + "\r\n");
    return fd;
  };
  auto post = [&](const std::string& body) {
    int fd = dial_loopback(port);
    send_all(fd, "POST /mcp HTTP/1.1\r\nHost: x\r\n" + with_sid
                   + "Content-Length: " + std::to_string(body.size())
                   + "\r\n\r\n" + body);
    return fd;
  };
  int get1 = open_get({});
  // Two calls run in the session: the approval the second one needs
  // belongs to no single request, so it goes out on the GET stream.
  int slow = post(R"({"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"terminal","arguments":{"command":"sleep 56.875","timeout":120}}})");
  BOOST_REQUIRE(wait_until([] { return running("sleep [5]6.875"); }));
  auto dir = work.write("get-stream/x", "x");
  int flagged = post(R"({"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"terminal","arguments":{"command":"rm -r )"
                     + work / "get-stream" + "\"}}}");
  std::string got;
  BOOST_REQUIRE_MESSAGE(test::read_until(get1, got, "elicitation/create", 60),
                        got);
  auto data = got.find("data: ", got.rfind("\nid: "));
  auto event_id = std::stoull(got.substr(got.rfind("\nid: ") + 5));
  auto request = json::parse(got.substr(data + 6,
                                        got.find('\n', data) - data - 6));
  BOOST_REQUIRE(request);
  BOOST_CHECK(contains(request.v->find("params")->get_string("message"),
                       "rm -r"));
  // The stream drops; a new GET with Last-Event-ID gets the event again.
  ::close(get1);
  int get2 = open_get("Last-Event-ID: " + std::to_string(event_id - 1)
                      + "\r\n");
  std::string again;
  BOOST_REQUIRE_MESSAGE(test::read_until(get2, again, "elicitation/create",
                                         30),
                        again);
  BOOST_CHECK(contains(again, "id: " + std::to_string(event_id) + "\n"));
  // Declined: the command is refused and the files stay.
  auto answer = http(port, "POST", "/mcp",
                     R"({"jsonrpc":"2.0","id":)"
                       + request.v->find("id")->dump()
                       + R"(,"result":{"action":"decline"}})",
                     with_sid);
  BOOST_CHECK_EQUAL(status_of(answer), 202);
  std::string reply;
  BOOST_CHECK_MESSAGE(test::read_until(flagged, reply, "BLOCKED", 60), reply);
  BOOST_CHECK(std::filesystem::exists(dir));
  ::close(flagged);
  ::close(get2);
  ::close(slow); // leaving the slow call interrupts it
  BOOST_CHECK(wait_until([] { return !running("sleep [5]6.875"); }));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(transcripts_are_read_only_resources) {
  {
    session_store_options so;
    so.dir = session_store::default_dir(home.path());
    auto store = session_store::open(so);
    BOOST_REQUIRE_MESSAGE(store, store.error);
    for (int i = 0; i < 5; ++i) {
      new_session ns;
      ns.id = "stored_" + std::to_string(i);
      ns.title = "talk " + std::to_string(i);
      ns.started_at_ms = 1700000000000 + i * 1000;
      BOOST_REQUIRE((*store)->create_session(ns));
      chat_message u{"user", "lighthouse question " + std::to_string(i), {},
                     "", "", "", "", 0};
      BOOST_REQUIRE((*store)->append_message(ns.id, u));
    }
  }
  auto sp = start_http();
  auto port = sp->port;
  auto sid = raw_session(port);
  auto with_sid = json_headers + "Mcp-Session-Id: " + sid + "\r\n";
  auto call = [&](const std::string& method, const std::string& params) {
    auto r = http(port, "POST", "/mcp",
                  R"({"jsonrpc":"2.0","id":5,"method":")" + method
                    + R"(","params":)" + params + "}",
                  with_sid);
    BOOST_REQUIRE_EQUAL(status_of(r), 200);
    auto body = r.substr(r.find("\r\n\r\n") + 4);
    auto parsed = json::parse(body);
    BOOST_REQUIRE_MESSAGE(parsed, body);
    return *parsed.v;
  };
  auto page1 = call("resources/list", "{}");
  auto& list1 = page1.find("result")->find("resources")->as_array();
  BOOST_REQUIRE_EQUAL(list1.size(), 4u);
  BOOST_CHECK_EQUAL(list1[0].get_string("uri"),
                    "mibyan://sessions/stored_4"); // newest first
  BOOST_CHECK_EQUAL(list1[0].get_string("title"), "talk 4");
  auto cursor = page1.find("result")->get_string("nextCursor");
  BOOST_REQUIRE(!cursor.empty());
  auto page2 = call("resources/list", R"({"cursor":")" + cursor + "\"}");
  BOOST_CHECK_EQUAL(page2.find("result")->find("resources")->size(), 1u);
  BOOST_CHECK(!page2.find("result")->find("nextCursor"));
  auto read = call("resources/read",
                   R"({"uri":"mibyan://sessions/stored_2"})");
  auto& contents = read.find("result")->find("contents")->as_array();
  BOOST_REQUIRE_EQUAL(contents.size(), 1u);
  BOOST_CHECK_EQUAL(contents[0].get_string("mimeType"), "application/json");
  BOOST_CHECK(contains(contents[0].get_string("text"),
                       "lighthouse question 2"));
  auto missing = call("resources/read",
                      R"({"uri":"mibyan://sessions/no_such"})");
  BOOST_CHECK_EQUAL(missing.find("error")->get_int("code", 0), -32002);
  auto foreign = call("resources/read", R"({"uri":"file:///etc/passwd"})");
  BOOST_CHECK_EQUAL(foreign.find("error")->get_int("code", 0), -32002);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(stdio_bad_input_gets_errors_and_eof_exits_cleanly) {
  home.write("config.yaml", "server:\n  max_body_bytes: 4096\n");
  test::process_options o;
  o.env["MIBYAN_HOME"] = home.path();
  o.timeout_seconds = 120;
  o.input =
    R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})" "\n"
    "this is not json\n"
    "\n"
    R"([{"jsonrpc":"2.0","id":2,"method":"ping"}])" "\n"
    + std::string(10000, 'x') + "\n"
    R"({"jsonrpc":"2.0","id":{"bad":1},"method":"ping"})" "\n"
    + init_body + "\n"
    R"({"jsonrpc":"2.0","method":"notifications/initialized"})" "\n"
    R"({"jsonrpc":"2.0","id":5,"method":"no/such/method"})" "\n"
    R"({"jsonrpc":"2.0","id":6,"result":{}})" "\n"
    R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"nope"}})" "\n"
    R"({"jsonrpc":"2.0","id":8,"method":"ping"})" "\r\n";
  auto r = test::run_mibyan({"mcp", "serve"}, o);
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  std::vector<json::value> lines;
  size_t start = 0;
  while (start < r.out.size()) {
    auto end = r.out.find('\n', start);
    auto line = r.out.substr(start, end - start);
    auto p = json::parse(line);
    BOOST_REQUIRE_MESSAGE(p, "stdout carries only JSON lines: " << line);
    lines.push_back(*p.v);
    start = end + 1;
  }
  auto code_of = [&](const json::value& id) {
    for (auto& l : lines)
      if (l.find("id") && *l.find("id") == id && l.find("error"))
        return l.find("error")->get_int("code", 0);
    return int64_t{0};
  };
  BOOST_CHECK_EQUAL(code_of(json::value{1}), -32600); // before initialize
  BOOST_CHECK_EQUAL(code_of(json::value{5}), -32601);
  BOOST_CHECK_EQUAL(code_of(json::value{7}), -32602);
  int nulls = 0, parse = 0, too_large = 0;
  for (auto& l : lines)
    if (l.find("id") && l.find("id")->is_null()) {
      ++nulls;
      auto code = l.find("error")->get_int("code", 0);
      parse += code == -32700;
      too_large += contains(l.find("error")->get_string("message"),
                            "too large");
    }
  BOOST_CHECK_EQUAL(nulls, 4); // garbage, batch, oversized, bad id
  BOOST_CHECK_EQUAL(parse, 1);
  BOOST_CHECK_EQUAL(too_large, 1);
  bool pong = false;
  for (auto& l : lines)
    if (l.find("id") && *l.find("id") == json::value{8} && l.find("result"))
      pong = true;
  BOOST_CHECK_MESSAGE(pong, r.out);
  BOOST_CHECK(contains(test::slurp(home / "logs/mcp-serve.log"),
                       "the client closed stdin"));
}

BOOST_AUTO_TEST_CASE(results_reach_the_client_redacted) {
  const std::string token = "ghp_" + std::string(36, 'k');
  auto secret_file = work.write("secret.txt", "token " + token + "\n");
  stdio_server srv{home.path(), work.path()};
  srv.send(init_body + "\n"
           R"({"jsonrpc":"2.0","method":"notifications/initialized"})" "\n"
           R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":")"
           + secret_file + "\"}}}\n"
           R"x({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"print(open('secret.txt').read())"}}})x"
           "\n");
  BOOST_REQUIRE(srv.wait_for("\"id\":2,\"result\""));
  BOOST_REQUIRE(srv.wait_for("\"id\":3,\"result\""));
  BOOST_CHECK_MESSAGE(!contains(srv.out, token), srv.out);
  BOOST_CHECK(contains(srv.out, "ghp_[REDACTED]"));
  BOOST_CHECK_EQUAL(srv.finish(), 0);
}

BOOST_AUTO_TEST_CASE(stdio_client_leaving_mid_call_ends_cleanly) {
  stdio_server srv{home.path(), work.path()};
  srv.send(init_body + "\n"
    R"({"jsonrpc":"2.0","method":"notifications/initialized"})" "\n"
    R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"terminal","arguments":{"command":"sleep 57.375","timeout":120}}})" "\n");
  BOOST_REQUIRE(wait_until([] { return running("sleep [5]7.375"); }));
  // Closing stdin mid-call: the call is interrupted, the process exits 0.
  BOOST_CHECK_EQUAL(srv.finish(), 0);
  BOOST_CHECK(wait_until([] { return !running("sleep [5]7.375"); }));
  // The initialize response, and nothing for the abandoned call.
  BOOST_CHECK(contains(srv.out, "\"id\":1"));
  BOOST_CHECK(!contains(srv.out, "\"id\":2"));
}

// A configured MCP server whose tool list changes at run time: the
// runtime re-registers its tools, the registry change reaches `mibyan mcp
// serve` (watch_tools), which tells its own client with
// notifications/tools/list_changed; the next tools/list has the new tool.
BOOST_AUTO_TEST_CASE(list_changed_of_a_configured_mcp_server_reaches_the_client) {
  home.write("config.yaml",
             "mcp_servers:\n  bad:\n    command: python3\n    args: [\""
               + test::test_source_dir()
               + "/support/mcp_misbehaving_server.py\", grow]\n");
  stdio_server srv{home.path(), work.path(), {"--page-size", "1000"}};
  srv.send(init_body + "\n"
    R"({"jsonrpc":"2.0","method":"notifications/initialized"})" "\n"
    R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})" "\n");
  BOOST_REQUIRE_MESSAGE(srv.wait_for("\"id\":2,"), srv.out);
  BOOST_REQUIRE_MESSAGE(contains(srv.out, "mcp__bad__grow"), srv.out);
  BOOST_CHECK(!contains(srv.out, "mcp__bad__fresh"));
  srv.send(R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp__bad__grow","arguments":{}}})" "\n");
  BOOST_REQUIRE_MESSAGE(srv.wait_for("notifications/tools/list_changed"),
                        srv.out);
  BOOST_REQUIRE(srv.wait_for("\"id\":3,"));
  srv.send(R"({"jsonrpc":"2.0","id":4,"method":"tools/list"})" "\n");
  BOOST_REQUIRE_MESSAGE(srv.wait_for("\"id\":4,"), srv.out);
  auto listed = srv.out.substr(srv.out.find("\"id\":4,"));
  BOOST_CHECK_MESSAGE(contains(listed, "mcp__bad__fresh"), listed);
  BOOST_CHECK_EQUAL(srv.finish(), 0);
}

// notifications/cancelled stops that call only: another call of the same
// MCP session running at the same time completes.
BOOST_AUTO_TEST_CASE(cancelling_one_call_leaves_the_others_of_the_session) {
  stdio_server srv{home.path(), work.path()};
  srv.send(init_body + "\n"
    R"({"jsonrpc":"2.0","method":"notifications/initialized"})" "\n"
    R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"terminal","arguments":{"command":"sleep 57.625","timeout":120}}})" "\n"
    R"x({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"terminal","arguments":{"command":"while [ ! -f go.flag ]; do sleep 0.0625; done; echo survivor-$((6*7))","timeout":120}}})x" "\n");
  BOOST_REQUIRE(wait_until([] { return running("sleep [5]7.625"); }));
  BOOST_REQUIRE(wait_until([] { return running("go[.]flag"); }));
  srv.send(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"changed my mind"}})" "\n");
  BOOST_CHECK(wait_until([] { return !running("sleep [5]7.625"); }));
  // The other call is still running; now it may finish.
  BOOST_CHECK(running("go[.]flag"));
  work.write("go.flag", "");
  BOOST_REQUIRE_MESSAGE(srv.wait_for("\"id\":3,\"result\""), srv.out);
  BOOST_CHECK_MESSAGE(contains(srv.out, "survivor-42"), srv.out);
  BOOST_CHECK_MESSAGE(!contains(srv.out, "interrupted"), srv.out);
  BOOST_CHECK_EQUAL(srv.finish(), 0);
  // No response for the cancelled request.
  BOOST_CHECK_MESSAGE(!contains(srv.out, "\"id\":2,"), srv.out);
}

BOOST_AUTO_TEST_CASE(stdio_sigterm_mid_call_ends_cleanly) {
  stdio_server srv{home.path(), work.path()};
  srv.send(init_body + "\n"
    R"({"jsonrpc":"2.0","method":"notifications/initialized"})" "\n"
    R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"terminal","arguments":{"command":"sleep 57.625","timeout":120}}})" "\n");
  BOOST_REQUIRE(wait_until([] { return running("sleep [5]7.625"); }));
  BOOST_REQUIRE(::kill(srv.pid, SIGTERM) == 0);
  int status = 0;
  BOOST_REQUIRE(wait_until([&] {
    return ::waitpid(srv.pid, &status, WNOHANG) == srv.pid;
  }));
  srv.pid = -1;
  BOOST_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  BOOST_CHECK(wait_until([] { return !running("sleep [5]7.625"); }));
}

BOOST_AUTO_TEST_SUITE_END()
