#define BOOST_TEST_MODULE http_approvals
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// Approvals and clarify questions over HTTP (docs/serve.md, "Approvals and
// questions over HTTP"; docs/approvals.md, "HTTP approvals"): a real
// `mibyan serve` process with the scripted provider behind it,
// whose model asks for `rm -rf ./build-output` in a temporary directory
// (never anything outside one) or asks a clarify question, answered (or
// not) through /v1/approvals and /v1/clarifications. The pending registry
// on its own and an embedding host's answers: pending_approvals_test.

#include <algorithm>
#include <filesystem>
#include <future>
#include <regex>
#include <set>

#include "runtime/pending_approvals.hpp"
#include "tests/support/agent_fixture.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/serve_fixture.hpp"
#include "tests/support/sse_watcher.hpp"
#include "tests/support/ui_client.hpp"

using namespace mibyan;
using namespace std::chrono;
using namespace mibyan::test::serving;
namespace fs = std::filesystem;

// -- over HTTP -------------------------------------------------------------------

namespace {

const std::regex approval_id_re{"apr_[0-9a-f]{32}"};
const std::regex clarify_id_re{"clr_[0-9a-f]{32}"};

std::string first_match(const std::string& text, const std::regex& re) {
  std::smatch m;
  return std::regex_search(text, m, re) ? m.str() : std::string{};
}

// A request written on its own connection; the response is read later.
struct open_request {
  int fd = -1;
  std::string got;

  open_request(uint16_t port, const std::string& body,
               const std::string& headers = {}) {
    fd = dial_loopback(port);
    send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                 "Connection: close\r\nContent-Type: application/json\r\n"
                   + headers + "Content-Length: "
                   + std::to_string(body.size()) + "\r\n\r\n" + body);
  }
  ~open_request() {
    if (fd >= 0)
      ::close(fd);
  }
  // Reads until `needle` has arrived (true) or the server closed / 60 s
  // passed (false).
  bool until(const std::string& needle, int seconds_ = 60) {
    return test::read_until(fd, got, needle, seconds_);
  }
  // The rest of the response, until the server closes.
  std::string rest() {
    got += read_all(fd, 120);
    return got;
  }
  void disconnect() {
    ::close(fd);
    fd = -1;
  }
};

std::string streamed_body(const std::string& prompt = "clean up") {
  return R"({"model":"m","stream":true,"messages":[{"role":"user","content":")"
         + prompt + "\"}]}";
}

std::string plain_body(const std::string& prompt = "clean up") {
  return R"({"model":"m","messages":[{"role":"user","content":")" + prompt
         + "\"}]}";
}

struct approvals_fixture : fixture {
  test::temp_dir work;

  approvals_fixture() { cwd = work.path(); }

  // A directory for the model to delete, with one file in it.
  std::string make_target(const std::string& name = "build-output") {
    work.write(name + "/artifact.o", "object code\n");
    return work / name;
  }

  // The model asks the terminal for `command` in the work directory.
  void script_command(const std::string& command) {
    json::value a;
    a["command"] = command;
    a["workdir"] = work.path();
    script(test::completion("", "terminal", a.dump()));
  }

  void script_clarify(const std::string& question) {
    json::value a;
    a["question"] = question;
    a["choices"] = json::array{json::value{"red"}, json::value{"blue"}};
    script(test::completion("", "clarify", a.dump()));
  }

  // Waits (bounded) until GET `path` lists `n` requests; returns them.
  json::value wait_pending(uint16_t port, const std::string& path,
                           size_t n = 1) {
    json::value data;
    auto deadline = steady_clock::now() + seconds{60};
    do {
      auto r = http(port, "GET", path);
      BOOST_REQUIRE_EQUAL(status_of(r), 200);
      data = body_of(r)["data"];
      if (data.size() >= n)
        break;
      std::this_thread::sleep_for(milliseconds{20});
    } while (steady_clock::now() < deadline);
    BOOST_REQUIRE_EQUAL(data.size(), n);
    return data;
  }

  // The content of the last tool message of provider request `i`.
  std::string tool_result(size_t i) {
    auto reqs = provider_requests();
    BOOST_REQUIRE_GT(reqs.size(), i);
    std::string out;
    for (auto& m : reqs[i]["messages"].as_array())
      if (m.get_string("role", "") == "tool")
        out = m.get_string("content", "");
    return out;
  }

  std::string answer(uint16_t port, const std::string& id,
                     const std::string& body,
                     const std::string& kind = "approvals") {
    return http(port, "POST", "/v1/" + kind + "/" + id, body);
  }
};

const std::string pending_config
  = "approvals:\n  http: pending\n  timeout: 60\n";

} // namespace

BOOST_FIXTURE_TEST_SUITE(over_http, approvals_fixture)

BOOST_AUTO_TEST_CASE(approve_once_on_the_stream_runs_the_command) {
  auto target = make_target();
  auto sp = start(pending_config);
  script_command("rm -rf ./build-output");
  script(test::completion("Deleted build-output."));
  open_request req(sp->port, streamed_body());
  BOOST_REQUIRE_MESSAGE(req.until("approval_required"), req.got);
  // The event carries the id and the details; GET lists the same.
  auto id = first_match(req.got.substr(req.got.find("approval_required")),
                        approval_id_re);
  BOOST_REQUIRE(!id.empty());
  auto listed = wait_pending(sp->port, "/v1/approvals");
  auto& a = listed.as_array()[0];
  BOOST_CHECK_EQUAL(a.get_string("id", ""), id);
  BOOST_CHECK_EQUAL(a.get_string("command", ""), "rm -rf ./build-output");
  BOOST_CHECK(contains(a["descriptions"].dump(), "recursive rm"));
  BOOST_CHECK_EQUAL(a["choices"].dump(),
                    R"(["once","session","always","deny"])");
  BOOST_CHECK_GT(a.get_int("expires_at_ms", 0), a.get_int("created_at_ms", 0));
  BOOST_CHECK(!a.get_string("session_id", "").empty());
  // ?session= filters.
  BOOST_CHECK_EQUAL(
    body_of(http(sp->port, "GET", "/v1/approvals?session=nobody"))["data"]
      .size(),
    0u);
  BOOST_CHECK(fs::exists(target)); // nothing ran before the answer
  auto r = answer(sp->port, id, R"({"choice":"once"})");
  BOOST_CHECK_EQUAL(status_of(r), 200);
  BOOST_CHECK_EQUAL(body_of(r).get_string("choice", ""), "once");
  BOOST_CHECK_EQUAL(body_of(r).get_string("id", ""), id);
  auto all = req.rest();
  BOOST_CHECK(contains(all, "approval_resolved"));
  BOOST_CHECK(contains(all, "Deleted build-output."));
  BOOST_CHECK(contains(all, "data: [DONE]"));
  BOOST_CHECK(!fs::exists(target));
  BOOST_CHECK(contains(tool_result(1), "\"exit_code\":0"));
  // Answered: gone from the list; a second answer is a conflict.
  BOOST_CHECK_EQUAL(body_of(http(sp->port, "GET", "/v1/approvals"))["data"]
                      .size(),
                    0u);
  check_error(answer(sp->port, id, R"({"choice":"deny"})"), 409,
              "approval_ended");
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(the_live_view_shows_the_approval_and_its_end) {
  // The dashboard's live stream (GET /ui/api/live) carries the pending
  // set's events of every session: "approval" with approval_required when
  // the command waits, then approval_resolved with the outcome.
  auto target = make_target();
  auto sp = start(pending_config);
  test::sse_watcher live(sp->port);
  BOOST_REQUIRE_MESSAGE(live.wait_event("snapshot"), live.raw);
  script_command("rm -rf ./build-output");
  script(test::completion("Kept it."));
  open_request req(sp->port, plain_body());
  BOOST_REQUIRE_MESSAGE(live.wait_event("approval"), live.raw);
  auto id = wait_pending(sp->port, "/v1/approvals").as_array()[0]
              .get_string("id", "");
  BOOST_CHECK(contains(live.raw, "approval_required"));
  BOOST_CHECK(contains(live.raw, id));
  BOOST_CHECK(contains(live.raw, "rm -rf ./build-output"));
  BOOST_CHECK_EQUAL(status_of(answer(sp->port, id, R"({"choice":"deny"})")),
                    200);
  BOOST_CHECK(contains(req.rest(), "Kept it."));
  BOOST_REQUIRE_MESSAGE(live.wait_event("turn_end"), live.raw);
  BOOST_CHECK(contains(live.raw, "approval_resolved"));
  BOOST_CHECK(fs::exists(target));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(deny_goes_on_with_the_denial) {
  auto target = make_target();
  auto sp = start(pending_config);
  script_command("rm -rf ./build-output");
  script(test::completion("I was not allowed to delete it."));
  open_request req(sp->port, plain_body()); // not streamed: GET only
  auto id = wait_pending(sp->port, "/v1/approvals").as_array()[0]
              .get_string("id", "");
  BOOST_CHECK_EQUAL(status_of(answer(sp->port, id, R"({"choice":"deny"})")),
                    200);
  auto all = req.rest();
  BOOST_CHECK_EQUAL(status_of(all), 200);
  BOOST_CHECK(contains(all, "I was not allowed to delete it."));
  BOOST_CHECK(fs::exists(target));
  auto result = tool_result(1);
  BOOST_CHECK(contains(result, "blocked"));
  BOOST_CHECK(contains(result, "NOT consent"));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(no_answer_in_time_is_a_deny) {
  auto target = make_target();
  auto sp = start("approvals:\n  http: pending\n  timeout: 1\n");
  script_command("rm -rf ./build-output");
  script(test::completion("Timed out, nothing deleted."));
  open_request req(sp->port, streamed_body());
  BOOST_REQUIRE(req.until("approval_required"));
  auto id = first_match(req.got, approval_id_re);
  auto all = req.rest();
  BOOST_CHECK(contains(all, R"("outcome":"timeout")"));
  BOOST_CHECK(contains(all, "Timed out, nothing deleted."));
  BOOST_CHECK(fs::exists(target));
  BOOST_CHECK(contains(tool_result(1), "NOT consent"));
  check_error(answer(sp->port, id, R"({"choice":"once"})"), 409,
              "approval_ended");
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(a_session_grant_covers_the_next_command_of_the_session) {
  auto first = make_target("build-output");
  auto second = make_target("build-output2");
  auto sp = start(pending_config);
  const std::string session = "X-Mibyan-Session: grants-1\r\n";
  script_command("rm -rf ./build-output");
  script(test::completion("First gone."));
  {
    open_request req(sp->port, plain_body(), session);
    auto a = wait_pending(sp->port, "/v1/approvals").as_array()[0];
    BOOST_CHECK_EQUAL(a.get_string("session_id", ""), "grants-1");
    BOOST_CHECK_EQUAL(
      status_of(answer(sp->port, a.get_string("id", ""),
                       R"({"choice":"session"})")),
      200);
    BOOST_CHECK(contains(req.rest(), "First gone."));
  }
  BOOST_CHECK(!fs::exists(first));
  // Same session, same pattern: no question this time.
  script_command("rm -rf ./build-output2");
  script(test::completion("Second gone."));
  auto r = http(sp->port, "POST", "/v1/chat/completions", plain_body(),
                "Content-Type: application/json\r\n" + session);
  BOOST_CHECK(contains(r, "Second gone."));
  BOOST_CHECK(!fs::exists(second));
  // Another session is asked again (and denied by its timeout-free deny).
  auto third = make_target("build-output3");
  script_command("rm -rf ./build-output3");
  script(test::completion("Third kept."));
  {
    open_request req(sp->port, plain_body(),
                     "X-Mibyan-Session: grants-2\r\n");
    auto a = wait_pending(sp->port, "/v1/approvals").as_array()[0];
    BOOST_CHECK_EQUAL(a.get_string("session_id", ""), "grants-2");
    answer(sp->port, a.get_string("id", ""), R"({"choice":"deny"})");
    BOOST_CHECK(contains(req.rest(), "Third kept."));
  }
  BOOST_CHECK(fs::exists(third));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(an_always_grant_writes_the_allowlist) {
  auto first = make_target("build-output");
  auto sp = start(pending_config);
  script_command("rm -rf ./build-output");
  script(test::completion("Gone for good."));
  {
    open_request req(sp->port, plain_body());
    auto id = wait_pending(sp->port, "/v1/approvals").as_array()[0]
                .get_string("id", "");
    BOOST_CHECK_EQUAL(status_of(answer(sp->port, id,
                                       R"({"choice":"always"})")),
                      200);
    BOOST_CHECK(contains(req.rest(), "Gone for good."));
  }
  BOOST_CHECK(!fs::exists(first));
  // Written to config.yaml as the terminal prompt does.
  auto cfg = home.read("config.yaml");
  BOOST_CHECK_MESSAGE(contains(cfg, "command_allowlist")
                        && contains(cfg, "recursive rm"),
                      cfg);
  BOOST_CHECK(contains(cfg, "http: pending")); // the rest is kept
  // Any session now: no question.
  auto second = make_target("build-output2");
  script_command("rm -rf ./build-output2");
  script(test::completion("Also gone."));
  auto r = http(sp->port, "POST", "/v1/chat/completions", plain_body());
  BOOST_CHECK(contains(r, "Also gone."));
  BOOST_CHECK(!fs::exists(second));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(bad_answers_get_clear_errors_and_change_nothing) {
  auto target = make_target();
  key = "approvals-key";
  auto sp = start(pending_config);
  const std::string auth = "Authorization: Bearer approvals-key\r\n";
  const std::string json_auth = "Content-Type: application/json\r\n" + auth;
  // The key guards these endpoints as every /v1 endpoint (or the
  // dashboard's cookie, below).
  check_error(http(sp->port, "GET", "/v1/approvals"), 401, "not_logged_in");
  check_error(http(sp->port, "POST", "/v1/approvals/apr_" + std::string(32, 'a'),
                   R"({"choice":"once"})"),
              401, "not_logged_in");
  check_error(http(sp->port, "GET", "/v1/approvals", {},
                   "Authorization: Bearer wrong\r\n"),
              401, "invalid_api_key");
  script_command("rm -rf ./build-output");
  script(test::completion("Still here."));
  open_request req(sp->port, plain_body(), auth);
  json::value data;
  for (int i = 0; i < 3000 && data.size() == 0; ++i) {
    data = body_of(http(sp->port, "GET", "/v1/approvals", {}, auth))["data"];
    if (data.size() == 0)
      std::this_thread::sleep_for(milliseconds{20});
  }
  BOOST_REQUIRE_EQUAL(data.size(), 1u);
  auto id = data.as_array()[0].get_string("id", "");
  auto post = [&](const std::string& path, const std::string& body,
                  const std::string& headers) {
    return http(sp->port, "POST", path, body, headers);
  };
  // Unknown (well-formed) ids: 404; malformed ids: 400.
  check_error(post("/v1/approvals/apr_" + std::string(32, '0'),
                   R"({"choice":"once"})", json_auth),
              404, "approval_not_found");
  for (const auto& bad : std::vector<std::string>{
         "nope", "apr_123", "clr_" + id.substr(4),
         "apr_" + std::string(32, 'G'), id + "0", id + "/x"})
    check_error(post("/v1/approvals/" + bad, R"({"choice":"once"})",
                     json_auth),
                400, "invalid_id");
  // An approval id is not a clarification id.
  check_error(post("/v1/clarifications/" + id, R"({"answer":"x"})",
                   json_auth),
              400, "invalid_id");
  // Malformed bodies: 400.
  for (auto body : {"", "not json", "[]", "{", "\"once\""})
    check_error(post("/v1/approvals/" + id, body, json_auth), 400,
                "invalid_request");
  for (auto body : {"{}", R"({"choice":1})", R"({"choice":"yes"})",
                    R"({"choice":"timeout"})", R"({"choice":"ONCE"})",
                    R"({"choice":null})"})
    check_error(post("/v1/approvals/" + id, body, json_auth), 400,
                "invalid_choice");
  // Wrong content type, wrong methods.
  check_error(post("/v1/approvals/" + id, R"({"choice":"once"})",
                   "Content-Type: text/plain\r\n" + auth),
              415, "unsupported_media_type");
  check_error(http(sp->port, "GET", "/v1/approvals/" + id, {}, auth), 405,
              "method_not_allowed");
  check_error(http(sp->port, "POST", "/v1/approvals", R"({"choice":"once"})",
                   json_auth),
              405, "method_not_allowed");
  check_error(http(sp->port, "DELETE", "/v1/approvals/" + id, {}, auth), 405,
              "method_not_allowed");
  check_error(http(sp->port, "GET", "/v1/approvalsx", {}, auth), 404,
              "not_found");
  // None of it answered: still pending, the command not run.
  BOOST_CHECK_EQUAL(
    body_of(http(sp->port, "GET", "/v1/approvals", {}, auth))["data"].size(),
    1u);
  BOOST_CHECK(fs::exists(target));
  // The real answer; then a second one is a conflict.
  BOOST_CHECK_EQUAL(status_of(post("/v1/approvals/" + id,
                                   R"({"choice":"deny"})", json_auth)),
                    200);
  auto again = post("/v1/approvals/" + id, R"({"choice":"once"})", json_auth);
  BOOST_CHECK_EQUAL(status_of(again), 409);
  auto code = body_of(again)["error"].get_string("code", "");
  BOOST_CHECK_MESSAGE(code == "already_answered" || code == "approval_ended",
                      again);
  BOOST_CHECK(contains(req.rest(), "Still here."));
  BOOST_CHECK(fs::exists(target));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(the_dashboard_cookie_with_its_csrf_token_may_answer) {
  auto target = make_target();
  key = "approvals-key";
  auto sp = start(pending_config);
  namespace ui = test::ui;
  // Logged in to the dashboard: the cookie and the CSRF token.
  auto login = ui::request(sp->port, "POST", "/ui/api/login",
                           R"({"key":"approvals-key"})");
  BOOST_REQUIRE_EQUAL(status_of(login), 200);
  auto set_cookie = ui::header_of(login, "Set-Cookie");
  auto cookie = "Cookie: " + set_cookie.substr(0, set_cookie.find(';'))
                + "\r\n";
  auto csrf = body_of(login).get_string("csrf", "");
  BOOST_REQUIRE(!csrf.empty());
  script_command("rm -rf ./build-output");
  script(test::completion("Answered from the dashboard."));
  open_request req(sp->port, plain_body(),
                   "Authorization: Bearer approvals-key\r\n");
  json::value data;
  for (int i = 0; i < 3000 && data.size() == 0; ++i) {
    auto r = ui::request(sp->port, "GET", "/v1/approvals", {}, cookie);
    BOOST_REQUIRE_EQUAL(status_of(r), 200); // the cookie reads
    data = body_of(r)["data"];
    if (data.size() == 0)
      std::this_thread::sleep_for(milliseconds{20});
  }
  BOOST_REQUIRE_EQUAL(data.size(), 1u);
  auto path = "/v1/approvals/" + data.as_array()[0].get_string("id", "");
  // An answer by cookie needs the token; a foreign Origin is refused.
  check_error(ui::request(sp->port, "POST", path, R"({"choice":"once"})",
                          cookie),
              403, "bad_csrf_token");
  check_error(ui::request(sp->port, "POST", path, R"({"choice":"once"})",
                          cookie + "X-CSRF-Token: forged\r\n"),
              403, "bad_csrf_token");
  check_error(ui::request(sp->port, "POST", path, R"({"choice":"once"})",
                          cookie + "X-CSRF-Token: " + csrf
                            + "\r\nOrigin: http://evil.example\r\n"),
              403, "bad_origin");
  BOOST_CHECK(fs::exists(target));
  auto ok = ui::request(sp->port, "POST", path, R"({"choice":"once"})",
                        cookie + "X-CSRF-Token: " + csrf + "\r\n");
  BOOST_CHECK_EQUAL(status_of(ok), 200);
  BOOST_CHECK(contains(req.rest(), "Answered from the dashboard."));
  BOOST_CHECK(!fs::exists(target));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(with_http_off_the_command_is_denied_as_before) {
  auto target = make_target();
  auto sp = start(); // approvals.http: off by default
  script_command("rm -rf ./build-output");
  script(test::completion("No channel, kept."));
  auto r = http(sp->port, "POST", "/v1/chat/completions", streamed_body());
  BOOST_CHECK(contains(r, "No channel, kept."));
  BOOST_CHECK(!contains(r, "approval_required"));
  BOOST_CHECK(fs::exists(target));
  auto result = tool_result(1);
  BOOST_CHECK(contains(result, "approvals.unattended_mode"));
  auto list = body_of(http(sp->port, "GET", "/v1/approvals"));
  BOOST_CHECK(!list.get_bool("enabled", true));
  BOOST_CHECK_EQUAL(list["data"].size(), 0u);
  check_error(answer(sp->port, "apr_" + std::string(32, '1'),
                     R"({"choice":"once"})"),
              404, "approval_not_found");
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(a_client_that_leaves_cancels_the_wait) {
  auto target = make_target();
  auto sp = start(pending_config);
  script_command("rm -rf ./build-output");
  std::string id;
  {
    open_request req(sp->port, streamed_body());
    BOOST_REQUIRE(req.until("approval_required"));
    id = first_match(req.got, approval_id_re);
    req.disconnect();
  }
  // The wait ends at once (not after approvals.timeout = 60 s): the list
  // empties and the id has ended.
  auto deadline = steady_clock::now() + seconds{30};
  json::value data;
  do {
    data = body_of(http(sp->port, "GET", "/v1/approvals"))["data"];
    if (data.size() == 0)
      break;
    std::this_thread::sleep_for(milliseconds{20});
  } while (steady_clock::now() < deadline);
  BOOST_CHECK_EQUAL(data.size(), 0u);
  check_error(answer(sp->port, id, R"({"choice":"once"})"), 409,
              "approval_ended");
  BOOST_CHECK(fs::exists(target));
  // Logged by the waiting call as it ends.
  deadline = steady_clock::now() + seconds{30};
  while (!contains(test::slurp(sp->err_path), id + " ended: cancelled")
         && steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds{20});
  BOOST_CHECK(contains(test::slurp(sp->err_path), id + " ended: cancelled"));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(clarify_is_answered_over_http) {
  auto sp = start("clarify:\n  http: pending\n");
  script_clarify("Which colour?");
  script(test::completion("You chose blue."));
  open_request req(sp->port, streamed_body("paint it"));
  BOOST_REQUIRE(req.until("clarify_required"));
  auto id = first_match(req.got, clarify_id_re);
  BOOST_REQUIRE(!id.empty());
  auto q = wait_pending(sp->port, "/v1/clarifications").as_array()[0];
  BOOST_CHECK_EQUAL(q.get_string("id", ""), id);
  BOOST_CHECK_EQUAL(q.get_string("question", ""), "Which colour?");
  BOOST_CHECK_EQUAL(q["choices"].dump(), R"(["red","blue"])");
  BOOST_CHECK_EQUAL(q.get_int("expires_at_ms", 0)
                      - q.get_int("created_at_ms", 0),
                    600000); // clarify.timeout
  // Approvals stay off here.
  BOOST_CHECK(!body_of(http(sp->port, "GET", "/v1/approvals"))
                 .get_bool("enabled", true));
  check_error(answer(sp->port, id, R"({"answer":""})", "clarifications"), 400,
              "invalid_answer");
  check_error(answer(sp->port, id, R"({"answer":7})", "clarifications"), 400,
              "invalid_answer");
  check_error(answer(sp->port, "clr_" + std::string(32, '0'),
                     R"({"answer":"x"})", "clarifications"),
              404, "clarification_not_found");
  auto r = answer(sp->port, id, R"({"answer":"blue, please"})",
                  "clarifications");
  BOOST_CHECK_EQUAL(status_of(r), 200);
  BOOST_CHECK_EQUAL(body_of(r).get_string("answer", ""), "blue, please");
  auto all = req.rest();
  BOOST_CHECK(contains(all, "clarify_resolved"));
  BOOST_CHECK(contains(all, "You chose blue."));
  BOOST_CHECK(contains(tool_result(1), "blue, please"));
  auto again = answer(sp->port, id, R"({"answer":"red"})", "clarifications");
  check_error(again, 409, "clarification_ended");
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(an_unanswered_question_times_out) {
  auto sp = start("clarify:\n  http: pending\n  timeout: 1\n");
  script_clarify("Which colour?");
  script(test::completion("No answer, I picked red."));
  auto r = http(sp->port, "POST", "/v1/chat/completions", plain_body());
  BOOST_CHECK(contains(r, "No answer, I picked red."));
  auto result = tool_result(1);
  BOOST_CHECK(contains(result, "gave no answer"));
  BOOST_CHECK(contains(result, "\"user_response\":\"\""));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(keep_alive_covers_a_long_tool_call_and_a_pending_wait) {
  auto target = make_target();
  auto sp = start("server:\n  keepalive_s: 1\n"
                  "approvals:\n  http: pending\n  timeout: 3\n");
  // A long tool call (not flagged): comments between its start and end.
  script_command("sleep 3");
  script(test::completion("Slept."));
  auto r = http(sp->port, "POST", "/v1/chat/completions", streamed_body());
  auto start = r.find("\"tool_start\"");
  auto end = r.find("\"tool_end\"");
  BOOST_REQUIRE(start != std::string::npos && end != std::string::npos);
  auto ka = r.find(": keep-alive\n\n", start);
  BOOST_CHECK_MESSAGE(ka != std::string::npos && ka < end, r);
  // A pending approval left to time out: comments while it waits.
  script_command("rm -rf ./build-output");
  script(test::completion("Waited."));
  r = http(sp->port, "POST", "/v1/chat/completions", streamed_body());
  auto asked = r.find("approval_required");
  auto resolved = r.find("approval_resolved");
  BOOST_REQUIRE(asked != std::string::npos && resolved != std::string::npos);
  ka = r.find(": keep-alive\n\n", asked);
  BOOST_CHECK_MESSAGE(ka != std::string::npos && ka < resolved, r);
  BOOST_CHECK(contains(r, "Waited."));
  BOOST_CHECK(fs::exists(target));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(the_openai_client_streams_a_turn_with_an_approval) {
  auto target = make_target();
  auto sp = start(pending_config);
  // The node scenario scripts the provider itself (its tool call names
  // TOOL_DIR, the work directory) and approves once over HTTP.
  home.write("work_dir.txt", work.path());
  node(*sp, "approval");
  BOOST_CHECK(!fs::exists(target));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_SUITE_END()
