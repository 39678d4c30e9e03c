#define BOOST_TEST_MODULE serve
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// `mibyan serve` end to end (docs/serve.md): the stock `openai` npm client
// (tests/node/serve_client.mjs, installed by scripts/install-test-deps.sh)
// and raw sockets for bad input, against a real `mibyan serve` child process
// with the scripted provider server behind it.

#include <algorithm>

#include "tests/support/serve_fixture.hpp"

using namespace mibyan;
using namespace std::chrono;
using namespace mibyan::test::serving;

BOOST_FIXTURE_TEST_SUITE(serve, fixture)

BOOST_AUTO_TEST_CASE(openai_client_answers_streams_and_runs_tools) {
  auto sp = start();
  node(*sp, "answers");
  node(*sp, "tools");
  node(*sp, "session");
  node(*sp, "concurrent");
  node(*sp, "failures");
  auto err = test::slurp(sp->err_path);
  BOOST_CHECK(contains(err, "POST /v1/chat/completions 200"));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(openai_client_wrong_key_is_authentication_error) {
  key = "serve-test-key-123";
  auto sp = start();
  node(*sp, "auth");
  // The raw check: no header and a near-miss key are both 401.
  check_error(http(sp->port, "GET", "/v1/models"), 401, "invalid_api_key");
  check_error(http(sp->port, "GET", "/v1/models", {},
                   "Authorization: Bearer serve-test-key-124\r\n"),
              401, "invalid_api_key");
  BOOST_CHECK_EQUAL(status_of(http(sp->port, "GET", "/v1/models", {},
                                   "Authorization: Bearer " + key + "\r\n")),
                    200);
  BOOST_CHECK_EQUAL(status_of(http(sp->port, "GET", "/health")), 200);
}

BOOST_AUTO_TEST_CASE(openai_client_gets_429_over_max_concurrent_turns) {
  auto sp = start("server:\n  max_concurrent_turns: 1\n");
  node(*sp, "limit");
}

BOOST_AUTO_TEST_CASE(bad_input_gets_4xx_and_the_server_keeps_serving) {
  auto sp = start("server:\n  max_body_bytes: 65536\n  header_timeout: 1\n"
                  "  body_timeout: 1\n");
  auto port = sp->port;
  // Malformed JSON.
  check_error(http(port, "POST", "/v1/chat/completions", "{\"messages\": ["),
              400, "invalid_request");
  // Wrong content type.
  check_error(http(port, "POST", "/v1/chat/completions", chat_body,
                   "Content-Type: text/plain\r\n"),
              415, "unsupported_media_type");
  // No messages.
  check_error(http(port, "POST", "/v1/chat/completions", R"({"model":"m"})"),
              400, "invalid_request");
  // Unknown model.
  check_error(http(port, "POST", "/v1/chat/completions",
                   R"({"model":"gpt-nope","messages":[{"role":"user","content":"x"}]})"),
              404, "model_not_found");
  // A body over server.max_body_bytes.
  std::string big = R"({"model":"m","messages":[{"role":"user","content":")"
                    + std::string(100000, 'a') + "\"}]}";
  check_error(http(port, "POST", "/v1/chat/completions", big), 413,
              "body_too_large");
  // A header flood (64 KiB of headers; the limit is 16 KiB).
  std::string flood;
  for (int i = 0; i < 1024; ++i)
    flood += "X-Flood-" + std::to_string(i) + ": " + std::string(50, 'f')
             + "\r\n";
  check_error(http(port, "POST", "/v1/chat/completions", chat_body,
                   "Content-Type: application/json\r\n" + flood),
              431, "header_too_large");
  // Slow loris: half a request head, then nothing. The server answers
  // others meanwhile and drops the slow client after header_timeout.
  int slow = dial_loopback(port);
  send_all(slow, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n");
  BOOST_CHECK_EQUAL(status_of(http(port, "GET", "/health")), 200);
  BOOST_CHECK(closed_by_server(slow, 60));
  ::close(slow);
  // Asio closes the socket when the deadline fires, then the read
  // completes: the access line may trail the close a little.
  bool logged = false;
  for (int i = 0; i < 1000 && !logged; ++i) {
    logged = contains(test::slurp(sp->err_path), " 408 ");
    if (!logged)
      std::this_thread::sleep_for(milliseconds{10});
  }
  BOOST_CHECK_MESSAGE(logged, test::slurp(sp->err_path));
  // A slow body is dropped too.
  int slow_body = dial_loopback(port);
  send_all(slow_body, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                      "Content-Type: application/json\r\n"
                      "Content-Length: 1000\r\n\r\n{\"mess");
  BOOST_CHECK_EQUAL(status_of(http(port, "GET", "/health")), 200);
  BOOST_CHECK(closed_by_server(slow_body, 60));
  ::close(slow_body);
  // Unknown path, wrong method, bad session header.
  check_error(http(port, "GET", "/v1/nothing"), 404, "not_found");
  check_error(http(port, "GET", "/v1/chat/completions"), 405,
              "method_not_allowed");
  check_error(http(port, "POST", "/v1/chat/completions", chat_body,
                   "Content-Type: application/json\r\n"
                   "X-Mibyan-Session: ../../etc\r\n"),
              400, "bad_session_id");
  // Garbage instead of HTTP.
  {
    int fd = dial_loopback(port);
    send_all(fd, "\x01\x02 not http at all\r\n\r\n");
    auto r = read_all(fd);
    ::close(fd);
    BOOST_CHECK(r.empty() || status_of(r) == 400);
  }
  // After all that the server still answers, and a real turn works.
  BOOST_CHECK_EQUAL(status_of(http(port, "GET", "/health")), 200);
  script(reply("still here"));
  auto ok = http(port, "POST", "/v1/chat/completions", chat_body);
  BOOST_CHECK_EQUAL(status_of(ok), 200);
  BOOST_CHECK(contains(ok, "still here"));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(non_loopback_without_key_is_refused) {
  auto r = test::run_mibyan({"serve", "--listen", "0.0.0.0:0", "--provider",
                             "custom", "--base-url", provider.url("/v1"),
                             "--model", "m"},
                            [&] {
                              test::process_options o;
                              o.env["MIBYAN_HOME"] = home.path();
                              o.unset = {"MIBYAN_SERVER_KEY"};
                              o.timeout_seconds = 30;
                              return o;
                            }());
  BOOST_CHECK_EQUAL(r.exit_code, 2);
  BOOST_CHECK(contains(r.err, "without a key"));
  BOOST_CHECK_EQUAL(std::count(r.err.begin(), r.err.end(), '\n'), 1);
  BOOST_CHECK(r.out.empty());
  auto flag = test::run_mibyan({"serve", "--key", "x"}, [&] {
    test::process_options o;
    o.env["MIBYAN_HOME"] = home.path();
    return o;
  }());
  BOOST_CHECK_EQUAL(flag.exit_code, 2);
}

BOOST_AUTO_TEST_CASE(server_options_are_bounded_and_the_key_is_masked) {
  test::process_options o;
  o.env["MIBYAN_HOME"] = home.path();
  o.unset = {"MIBYAN_SERVER_KEY"};
  o.timeout_seconds = 30;
  home.write("config.yaml", "server:\n  max_concurrent_turns: 0\n");
  auto low = test::run_mibyan({"serve", "--listen", "127.0.0.1:0"}, o);
  BOOST_CHECK_EQUAL(low.exit_code, 2);
  BOOST_CHECK(contains(low.err, "max_concurrent_turns"));
  home.write("config.yaml", "server:\n  max_body_bytes: 99999999999\n");
  auto high = test::run_mibyan({"serve", "--listen", "127.0.0.1:0"}, o);
  BOOST_CHECK_EQUAL(high.exit_code, 2);
  BOOST_CHECK(contains(high.err, "must be between 1024 and 1073741824"));
  home.write("config.yaml", "server:\n  key: topsecret-serve-key\n");
  auto show = test::run_mibyan({"config", "show"}, o);
  BOOST_CHECK_EQUAL(show.exit_code, 0);
  BOOST_CHECK(!contains(show.out, "topsecret-serve-key"));
  BOOST_CHECK(contains(show.out, "max_concurrent_turns"));
}

BOOST_AUTO_TEST_CASE(one_session_is_served_in_order_and_sessions_endpoints) {
  auto sp = start();
  auto port = sp->port;
  script(reply("first answer"), 400);
  script(reply("second answer"));
  const std::string h = "Content-Type: application/json\r\n"
                        "X-Mibyan-Session: ordered-1\r\n";
  std::string r1, r2;
  std::thread t1([&] {
    r1 = http(port, "POST", "/v1/chat/completions",
              R"({"model":"m","messages":[{"role":"user","content":"one"}]})",
              h);
  });
  wait_for_provider_requests(1);
  std::thread t2([&] {
    r2 = http(port, "POST", "/v1/chat/completions",
              R"({"model":"m","messages":[{"role":"user","content":"two"}]})",
              h);
  });
  t1.join();
  t2.join();
  BOOST_CHECK(contains(r1, "first answer"));
  BOOST_CHECK(contains(r2, "second answer"));
  BOOST_CHECK(contains(r1, "X-Mibyan-Session: ordered-1"));
  // The second turn started after the first ended: its provider call
  // carries the first answer.
  auto reqs = provider_requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  BOOST_CHECK(contains(reqs[1].dump(), "first answer"));
  BOOST_CHECK(!contains(reqs[0].dump(), "two"));
  // Sessions endpoints: list, show, search, delete.
  auto list = http(port, "GET", "/v1/sessions");
  BOOST_CHECK_EQUAL(status_of(list), 200);
  BOOST_CHECK(contains(list, "ordered-1"));
  auto show = body_of(http(port, "GET", "/v1/sessions/ordered-1"));
  BOOST_CHECK_EQUAL(show.get_string("id", ""), "ordered-1");
  BOOST_CHECK_EQUAL(show["messages"].size(), 4u);
  auto found = body_of(http(port, "GET", "/v1/sessions/search?q=first%20answer"));
  BOOST_CHECK_GE(found.get_int("total", 0), 1);
  check_error(http(port, "GET", "/v1/sessions/search"), 400, "missing_query");
  BOOST_CHECK_EQUAL(status_of(http(port, "DELETE", "/v1/sessions/ordered-1")),
                    200);
  check_error(http(port, "GET", "/v1/sessions/ordered-1"), 404,
              "session_not_found");
  check_error(http(port, "DELETE", "/v1/sessions/ordered-1"), 404,
              "session_not_found");
}

BOOST_AUTO_TEST_CASE(idle_kept_sessions_are_closed_and_reloaded) {
  auto sp = start("server:\n  session_idle_timeout: 1\n");
  const std::string h = "Content-Type: application/json\r\n"
                        "X-Mibyan-Session: idle-1\r\n";
  script(reply("first"));
  auto r1 = http(sp->port, "POST", "/v1/chat/completions",
                 R"({"model":"m","messages":[{"role":"user","content":"one"}]})",
                 h);
  BOOST_CHECK(contains(r1, "first"));
  bool closed = false;
  for (int i = 0; i < 3000 && !closed; ++i) {
    closed = contains(test::slurp(sp->err_path), "closed idle session idle-1");
    if (!closed)
      std::this_thread::sleep_for(milliseconds{10});
  }
  BOOST_REQUIRE(closed);
  script(reply("second"));
  auto r2 = http(sp->port, "POST", "/v1/chat/completions",
                 R"({"model":"m","messages":[{"role":"user","content":"two"}]})",
                 h);
  BOOST_CHECK(contains(r2, "second"));
  // The reloaded conversation still has the first turn.
  auto reqs = provider_requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  BOOST_CHECK(contains(reqs[1].dump(), "\"content\":\"first\""));
}

BOOST_AUTO_TEST_CASE(client_disconnect_interrupts_the_turn) {
  auto sp = start();
  script(reply("too late"), 8000);
  int fd = dial_loopback(sp->port);
  send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
               "Content-Type: application/json\r\n"
               "X-Mibyan-Session: gone-1\r\nContent-Length: "
               + std::to_string(chat_body.size()) + "\r\n\r\n" + chat_body);
  wait_for_provider_requests(1);
  ::close(fd);
  // The turn is interrupted (logged) and the user message is persisted.
  bool interrupted = false;
  for (int i = 0; i < 1000 && !interrupted; ++i) {
    interrupted = contains(test::slurp(sp->err_path),
                           "the HTTP client disconnected");
    if (!interrupted)
      std::this_thread::sleep_for(milliseconds{10});
  }
  BOOST_CHECK_MESSAGE(interrupted, test::slurp(sp->err_path));
  auto show = http(sp->port, "GET", "/v1/sessions/gone-1");
  BOOST_CHECK(contains(show, "\"content\":\"hi\""));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(sigterm_interrupts_running_turns_and_exits_0) {
  auto sp = start();
  script(reply("never"), 20000);
  std::string r;
  std::thread t([&] {
    r = http(sp->port, "POST", "/v1/chat/completions", chat_body,
             "Content-Type: application/json\r\n"
             "X-Mibyan-Session: term-1\r\n");
  });
  wait_for_provider_requests(1);
  auto status = sp->stop(SIGTERM);
  BOOST_CHECK_MESSAGE(status == 0, "exit status " << status << "; stderr:\n"
                                     << test::slurp(sp->err_path));
  t.join();
  // Interrupted, not waited out: the client got the interrupted answer.
  check_error(r, 503, "turn_interrupted");
  // Persisted: a new server shows the session with the user message.
  auto sp2 = start();
  auto show = http(sp2->port, "GET", "/v1/sessions/term-1");
  BOOST_CHECK(contains(show, "\"content\":\"hi\""));
}

BOOST_AUTO_TEST_SUITE_END()
