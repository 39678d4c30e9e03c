#define BOOST_TEST_MODULE responses
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// The Responses API of `mibyan serve` (docs/serve.md, "Responses API"): the
// stock `openai` npm client (tests/node/responses_client.mjs) and raw
// sockets for bad input against a real `mibyan serve` child process with
// the scripted provider behind it; and the store's response records
// (storage/response_record.hpp) directly.

#include <set>

#include "serve/responses.hpp"
#include "storage/lmdb/lmdb_inspect.hpp"
#include "storage/session_store.hpp"
#include "tests/support/serve_fixture.hpp"
#include "tests/support/socket_read.hpp"
#include "tests/support/store_backends.hpp"

using namespace mibyan;
using namespace std::chrono;
using namespace mibyan::test::serving;

namespace {

struct responses_fixture : fixture {
  std::string state_file() { return home / "node-state.json"; }

  // Runs one scenario of tests/node/responses_client.mjs.
  void node_responses(const serve_process& sp, const std::string& scenario) {
    node_script(sp, "responses_client.mjs", scenario,
                {{"STATE_FILE", state_file()}});
  }

  // POST /v1/responses with `body`.
  std::string create(uint16_t port, const std::string& body) {
    return http(port, "POST", "/v1/responses", body);
  }
};

size_t count_source(const json::value& list, const std::string& source) {
  size_t n = 0;
  for (auto& s : list.as_array())
    if (s.get_string("source", "") == source)
      ++n;
  return n;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(responses, responses_fixture)

BOOST_AUTO_TEST_CASE(openai_client_creates_streams_chains_and_sees_tools) {
  auto sp = start();
  node_responses(*sp, "plain");
  node_responses(*sp, "streamed");
  node_responses(*sp, "chain");
  node_responses(*sp, "tools");
  node_responses(*sp, "failures");
  node_responses(*sp, "nostore");
  node_responses(*sp, "manual");
  node_responses(*sp, "errors");
  auto err = test::slurp(sp->err_path);
  BOOST_CHECK(contains(err, "POST /v1/responses 200"));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
  // store: false left nothing: no stateless session on disk.
  BOOST_CHECK_EQUAL(count_source(sessions_list(), "api-stateless"), 0u);
}

BOOST_AUTO_TEST_CASE(a_stored_response_survives_a_restart) {
  auto sp = start();
  node_responses(*sp, "chain");
  BOOST_REQUIRE_EQUAL(sp->stop(), 0);
  auto sp2 = start();
  node_responses(*sp2, "restarted");
}

BOOST_AUTO_TEST_CASE(deleting_a_session_deletes_its_responses) {
  auto sp = start();
  auto port = sp->port;
  script(reply("kept answer"));
  auto r = create(port, R"({"model":"m","input":"keep this"})");
  BOOST_REQUIRE_EQUAL(status_of(r), 200);
  auto obj = body_of(r);
  auto id = obj.get_string("id", "");
  auto sid = obj["mibyan"].get_string("session_id", "");
  BOOST_REQUIRE(!id.empty() && !sid.empty());
  BOOST_CHECK(contains(r, "X-Mibyan-Session: " + sid));
  BOOST_CHECK_EQUAL(status_of(http(port, "GET", "/v1/responses/" + id)), 200);
  BOOST_CHECK_EQUAL(status_of(http(port, "DELETE", "/v1/sessions/" + sid)),
                    200);
  check_error(http(port, "GET", "/v1/responses/" + id), 404,
              "response_not_found");
  check_error(create(port, R"({"input":"x","previous_response_id":")" + id
                             + "\"}"),
              404, "response_not_found");
  // DELETE of a response: 200 once, then 404.
  script(reply("second"));
  auto id2 = body_of(create(port, R"({"input":"two"})")).get_string("id", "");
  auto del = http(port, "DELETE", "/v1/responses/" + id2);
  BOOST_CHECK_EQUAL(status_of(del), 200);
  BOOST_CHECK(body_of(del).get_bool("deleted", false));
  check_error(http(port, "DELETE", "/v1/responses/" + id2), 404,
              "response_not_found");
}

BOOST_AUTO_TEST_CASE(bad_input_gets_4xx_and_the_server_keeps_serving) {
  auto sp = start("server:\n  max_body_bytes: 65536\n  max_messages: 4\n");
  auto port = sp->port;
  auto bad = [&](const std::string& body, const std::string& code,
                 const std::string& param = {}) {
    auto r = create(port, body);
    check_error(r, 400, code);
    if (!param.empty())
      BOOST_CHECK_EQUAL(body_of(r)["error"].get_string("param", ""), param);
  };
  bad("{\"input\": [", "invalid_request");
  bad("[1,2]", "invalid_request");
  bad(R"({"model":"m"})", "invalid_request", "input");
  bad(R"({"input":5})", "invalid_request", "input");
  bad(R"({"input":[]})", "invalid_request", "input");
  bad(R"({"input":"   "})", "invalid_request", "input");
  bad(R"({"input":[7]})", "invalid_request", "input[0]");
  bad(R"({"input":[{"role":"robot","content":"x"}]})", "invalid_request",
      "input[0].role");
  bad(R"({"input":[{"role":"user","content":{"a":1}}]})", "invalid_request",
      "input[0].content");
  bad(R"({"input":[{"role":"user","content":[{"type":"input_text"}]}]})",
      "invalid_request", "input[0].content[0].text");
  bad(R"({"input":[{"role":"assistant","content":"x"}]})", "invalid_request",
      "input");
  bad(R"({"input":[{"role":"user","content":[{"type":"input_file",)"
      R"("file_id":"f"}]}]})",
      "unsupported_parameter", "input[0].content[0].type");
  bad(R"({"input":[{"type":"function_call","call_id":"c","name":"f",)"
      R"("arguments":"{}"}]})",
      "unsupported_parameter", "input[0].type");
  bad(R"({"input":[{"type":"mibyan_tool_call","name":"f","result":"r"},)"
      R"({"role":"user","content":"x"}]})",
      "invalid_request", "input[0].call_id");
  bad(R"({"input":[{"type":"reasoning","summary":[]}]})",
      "unsupported_parameter", "input[0].type");
  bad(R"({"input":"x","tools":[{"type":"web_search_preview"}]})",
      "unsupported_parameter", "tools");
  bad(R"({"input":"x","tool_choice":"required"})", "unsupported_parameter",
      "tool_choice");
  bad(R"({"input":"x","max_output_tokens":100})", "unsupported_parameter",
      "max_output_tokens");
  bad(R"({"input":"x","max_output_tokens":"many"})", "invalid_request",
      "max_output_tokens");
  bad(R"({"input":"x","text":{"format":{"type":"json_object"}}})",
      "unsupported_parameter", "text.format");
  bad(R"({"input":"x","stream":"yes"})", "invalid_request", "stream");
  bad(R"({"input":"x","store":1})", "invalid_request", "store");
  bad(R"({"input":"x","instructions":[]})", "invalid_request",
      "instructions");
  bad(R"({"input":"x","metadata":{"k":1}})", "invalid_request", "metadata.k");
  bad(R"({"input":"x","previous_response_id":"chatcmpl-1"})",
      "invalid_request", "previous_response_id");
  bad(R"({"input":"x","previous_response_id":"resp_../../x"})",
      "invalid_request", "previous_response_id");
  bad(R"({"input":[{"role":"user","content":"1"},{"role":"user",)"
      R"("content":"2"},{"role":"user","content":"3"},{"role":"user",)"
      R"("content":"4"},{"role":"user","content":"5"}]})",
      "too_many_items", "input");
  check_error(create(port, R"({"input":"x","previous_response_id":"resp_)"
                             + std::string(48, 'a') + "\"}"),
              404, "response_not_found");
  check_error(create(port, R"({"model":"other","input":"x"})"), 404,
              "model_not_found");
  check_error(http(port, "POST", "/v1/responses", R"({"input":"x"})",
                   "Content-Type: text/plain\r\n"),
              415, "unsupported_media_type");
  // Methods and paths.
  check_error(http(port, "GET", "/v1/responses"), 405, "method_not_allowed");
  check_error(http(port, "PUT", "/v1/responses/resp_abc", "{}"), 405,
              "method_not_allowed");
  check_error(http(port, "POST", "/v1/responses/resp_abc", "{}"), 405,
              "method_not_allowed");
  check_error(http(port, "GET", "/v1/responses/resp_abc/input_items"), 404,
              "not_found");
  check_error(http(port, "GET", "/v1/responses/abc"), 400, "bad_response_id");
  check_error(http(port, "GET", "/v1/responses/resp_a%2Fb"), 400,
              "bad_response_id");
  check_error(http(port, "GET", "/v1/responses/resp_" + std::string(200, 'a')),
              400, "bad_response_id");
  check_error(http(port, "DELETE", "/v1/responses/resp_abc"), 404,
              "response_not_found");
  // An oversized body: 413, the connection closes, the server goes on.
  std::string huge = R"({"input":")" + std::string(70000, 'x') + "\"}";
  check_error(create(port, huge), 413, "body_too_large");
  BOOST_CHECK(provider_requests().empty()); // no turn ran
  BOOST_CHECK_EQUAL(status_of(http(port, "GET", "/health")), 200);
  script(reply("still serving"));
  auto ok = create(port, R"({"input":"hi"})");
  BOOST_CHECK_EQUAL(status_of(ok), 200);
  BOOST_CHECK(contains(ok, "still serving"));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(a_running_continuation_makes_the_next_one_branch) {
  auto sp = start();
  auto port = sp->port;
  script(reply("first"));
  auto first = body_of(create(port, R"({"input":"remember KESTREL"})"));
  auto id = first.get_string("id", "");
  auto sid = first["mibyan"].get_string("session_id", "");
  BOOST_REQUIRE(!id.empty() && !sid.empty());
  // The first continuation is slow; a second one from the same response
  // arrives while it runs.
  script(reply("slow continuation"), 1500);
  script(reply("parallel branch"));
  std::string r1, r2;
  std::thread t1([&] {
    r1 = create(port, R"({"input":"turn ONE","previous_response_id":")" + id
                        + "\"}");
  });
  wait_for_provider_requests(2);
  r2 = create(port, R"({"input":"turn TWO","previous_response_id":")" + id
                      + "\"}");
  t1.join();
  auto b1 = body_of(r1), b2 = body_of(r2);
  BOOST_CHECK(contains(r1, "slow continuation"));
  BOOST_CHECK(contains(r2, "parallel branch"));
  BOOST_CHECK_EQUAL(b1["mibyan"].get_string("session_id", ""), sid);
  BOOST_CHECK_NE(b2["mibyan"].get_string("session_id", ""), sid);
  // The branch holds the history up to the first response, not the
  // running turn's message.
  auto reqs = provider_requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 3u);
  auto branch = reqs[2].dump();
  BOOST_CHECK(contains(branch, "KESTREL") && contains(branch, "turn TWO"));
  BOOST_CHECK(!contains(branch, "turn ONE"));
  BOOST_CHECK(!contains(reqs[1].dump(), "turn TWO"));
}

BOOST_AUTO_TEST_CASE(a_running_response_is_in_progress) {
  auto sp = start();
  auto port = sp->port;
  script(reply("slow answer"), 4000); // longer than the checks below
  // A streamed request: its id is in the first event.
  int fd = test::dial_loopback(port);
  std::string body = R"({"input":"slow","stream":true})";
  test::send_all(fd, "POST /v1/responses HTTP/1.1\r\nHost: x\r\n"
                     "Connection: close\r\nContent-Type: application/json\r\n"
                     "Content-Length: " + std::to_string(body.size())
                       + "\r\n\r\n" + body);
  std::string head;
  test::read_until(fd, head, "response.in_progress", 30);
  auto at = head.find("\"id\":\"resp_");
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, head);
  auto id = head.substr(at + 6, 53);
  auto live = http(port, "GET", "/v1/responses/" + id);
  BOOST_CHECK_EQUAL(status_of(live), 200);
  BOOST_CHECK_EQUAL(body_of(live).get_string("status", ""), "in_progress");
  check_error(http(port, "DELETE", "/v1/responses/" + id), 409,
              "response_in_progress");
  check_error(create(port, R"({"input":"x","previous_response_id":")" + id
                             + "\"}"),
              409, "response_in_progress");
  auto rest = read_all(fd);
  ::close(fd);
  BOOST_CHECK(contains(head + rest, "event: response.completed"));
  // Ended: the stored object.
  auto done = body_of(http(port, "GET", "/v1/responses/" + id));
  BOOST_CHECK_EQUAL(done.get_string("status", ""), "completed");
  BOOST_CHECK(contains(done.dump(), "slow answer"));
}

BOOST_AUTO_TEST_CASE(a_slow_stream_gets_keep_alive_comments) {
  auto sp = start("server:\n  keepalive_s: 1\n");
  node_responses(*sp, "keepalive");
  script(reply("slow raw answer"), 2500);
  auto r = create(sp->port, R"({"input":"slow","stream":true})");
  BOOST_CHECK(contains(r, "text/event-stream"));
  BOOST_CHECK(contains(r, ": keep-alive\n\n"));
  BOOST_CHECK(contains(r, "event: response.completed\ndata: "));
  BOOST_CHECK(contains(r, "slow raw answer"));
}

namespace {

std::string with_key(const std::string& key) {
  return "Content-Type: application/json\r\nIdempotency-Key: " + key
         + "\r\n";
}

// The provider refuses once (400, not retried): that turn fails.
void script_refusal(responses_fixture& f) {
  f.provider.script(R"({"path":"/v1/chat/completions","status":400,)"
                    R"("body":"{\"error\":{\"message\":\"refused\"}}"})");
}

size_t count_user(const json::value& session, const std::string& text) {
  size_t n = 0;
  auto msgs = session.find("messages");
  BOOST_REQUIRE(msgs != nullptr && msgs->is_array());
  for (auto& m : msgs->as_array())
    n += m.get_string("role", "") == "user"
             && contains(m.get_string("content", ""), text)
           ? 1
           : 0;
  return n;
}

} // namespace

// docs/serve.md, "Idempotent responses".
BOOST_AUTO_TEST_CASE(an_idempotency_key_replays_the_stored_response) {
  auto sp = start();
  auto port = sp->port;
  script(reply("the answer, once"));
  const std::string body = R"({"input":"pay order 42"})";
  auto r1 = http(port, "POST", "/v1/responses", body, with_key("order-42"));
  BOOST_REQUIRE_EQUAL(status_of(r1), 200);
  auto b1 = body_of(r1);
  auto id = b1.get_string("id", "");
  auto sid = b1["mibyan"].get_string("session_id", "");
  BOOST_REQUIRE(!id.empty() && !sid.empty());
  BOOST_CHECK(!b1["mibyan"].get_bool("replayed", false));
  BOOST_CHECK(contains(b1.dump(), "the answer, once"));
  BOOST_CHECK_EQUAL(provider_requests().size(), 1u);
  // Sent again: the same response object, no model call.
  auto r2 = http(port, "POST", "/v1/responses", body, with_key("order-42"));
  BOOST_REQUIRE_EQUAL(status_of(r2), 200);
  auto b2 = body_of(r2);
  BOOST_CHECK_EQUAL(b2.get_string("id", ""), id);
  BOOST_CHECK(b2["mibyan"].get_bool("replayed", false));
  BOOST_CHECK_EQUAL(b2["output"].dump(), b1["output"].dump());
  BOOST_CHECK(contains(r2, "X-Mibyan-Session: " + sid));
  // Streamed: the stored response's events.
  auto r3 = http(port, "POST", "/v1/responses",
                 R"({"input":"pay order 42","stream":true})",
                 with_key("order-42"));
  BOOST_CHECK(contains(r3, "text/event-stream"));
  BOOST_CHECK(contains(r3, "event: response.created"));
  BOOST_CHECK(contains(r3, "event: response.output_text.delta"));
  BOOST_CHECK(contains(r3, "event: response.completed"));
  BOOST_CHECK(contains(r3, "the answer, once"));
  BOOST_CHECK(contains(r3, id));
  BOOST_CHECK_EQUAL(provider_requests().size(), 1u);
  // The session holds the prompt once; GET finds the response.
  auto session = body_of(http(port, "GET", "/v1/sessions/" + sid));
  BOOST_CHECK_EQUAL(count_user(session, "pay order 42"), 1u);
  BOOST_CHECK_EQUAL(status_of(http(port, "GET", "/v1/responses/" + id)), 200);
  // Another key is another turn.
  script(reply("a second order"));
  auto r4 = body_of(
    http(port, "POST", "/v1/responses", body, with_key("order-43")));
  BOOST_CHECK_NE(r4.get_string("id", ""), id);
  BOOST_CHECK(contains(r4.dump(), "a second order"));
  BOOST_CHECK_EQUAL(provider_requests().size(), 2u);
  // Malformed keys: 400 bad_idempotency_key, nothing runs.
  check_error(http(port, "POST", "/v1/responses", body, with_key("a b")), 400,
              "bad_idempotency_key");
  check_error(http(port, "POST", "/v1/responses", body,
                   with_key(std::string(201, 'k'))),
              400, "bad_idempotency_key");
  check_error(http(port, "POST", "/v1/responses", body,
                   with_key("caf\xc3\xa9")),
              400, "bad_idempotency_key");
  BOOST_CHECK_EQUAL(provider_requests().size(), 2u);
  // store: false keeps nothing to replay: the key is ignored.
  script(reply("stateless"), 0, 2);
  auto s1 = body_of(http(port, "POST", "/v1/responses",
                         R"({"input":"x","store":false})", with_key("ns")));
  auto s2 = body_of(http(port, "POST", "/v1/responses",
                         R"({"input":"x","store":false})", with_key("ns")));
  BOOST_CHECK_NE(s1.get_string("id", ""), s2.get_string("id", ""));
  BOOST_CHECK_EQUAL(provider_requests().size(), 4u);
  // A key whose first attempt still runs: 409, nothing runs twice.
  script(reply("slow keyed"), 3000);
  std::string slow;
  std::thread t([&] {
    slow = http(port, "POST", "/v1/responses", R"({"input":"slow"})",
                with_key("slow-1"));
  });
  wait_for_provider_requests(5);
  auto busy = http(port, "POST", "/v1/responses", R"({"input":"slow"})",
                   with_key("slow-1"));
  check_error(busy, 409, "response_in_progress");
  BOOST_CHECK(contains(busy, "Retry-After: 1"));
  t.join();
  BOOST_CHECK(contains(slow, "slow keyed"));
  BOOST_CHECK_EQUAL(provider_requests().size(), 5u);
  // A restarted server (the store) still replays it.
  BOOST_REQUIRE_EQUAL(sp->stop(), 0);
  auto sp2 = start();
  auto r5 = body_of(
    http(sp2->port, "POST", "/v1/responses", body, with_key("order-42")));
  BOOST_CHECK_EQUAL(r5.get_string("id", ""), id);
  BOOST_CHECK(r5["mibyan"].get_bool("replayed", false));
}

BOOST_AUTO_TEST_CASE(a_key_whose_turn_failed_resumes_it_when_sent_again) {
  auto sp = start();
  auto port = sp->port;
  // A continuation that fails: the response says failed; the user message
  // is stored. Sent again with the same key, the turn resumes in the same
  // session (not a branch) without storing the message twice.
  script(reply("first answer"));
  auto first = body_of(create(port, R"({"input":"remember HERON"})"));
  auto prev = first.get_string("id", "");
  auto sid = first["mibyan"].get_string("session_id", "");
  BOOST_REQUIRE(!prev.empty() && !sid.empty());
  const std::string body =
    R"({"input":"which bird?","previous_response_id":")" + prev + "\"}";
  script_refusal(*this);
  auto failed = body_of(
    http(port, "POST", "/v1/responses", body, with_key("bird-1")));
  BOOST_CHECK_EQUAL(failed.get_string("status", ""), "failed");
  BOOST_CHECK_EQUAL(failed["mibyan"].get_string("session_id", ""), sid);
  script(reply("HERON"));
  auto again = body_of(
    http(port, "POST", "/v1/responses", body, with_key("bird-1")));
  BOOST_CHECK_EQUAL(again.get_string("status", ""), "completed");
  BOOST_CHECK_EQUAL(again.get_string("id", ""), failed.get_string("id", ""));
  BOOST_CHECK(!again["mibyan"].get_bool("replayed", false));
  BOOST_CHECK(contains(again.dump(), "HERON"));
  BOOST_CHECK_EQUAL(again["mibyan"].get_string("session_id", ""), sid);
  auto session = body_of(http(port, "GET", "/v1/sessions/" + sid));
  BOOST_CHECK_EQUAL(count_user(session, "which bird?"), 1u);
  // The model saw the history once and the question once.
  auto last = provider_requests().back().dump();
  BOOST_CHECK(contains(last, "remember HERON"));
  // Now answered: a third send replays it.
  auto third = body_of(
    http(port, "POST", "/v1/responses", body, with_key("bird-1")));
  BOOST_CHECK(third["mibyan"].get_bool("replayed", false));
  BOOST_CHECK(contains(third.dump(), "HERON"));
  BOOST_CHECK_EQUAL(provider_requests().size(), 3u);
}

// -- the wire format (serve/responses.hpp) ------------------------------------

namespace {

// The events of an SSE text: (type, data); checks the framing.
std::vector<std::pair<std::string, json::value>>
events_of(const std::string& sse) {
  std::vector<std::pair<std::string, json::value>> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    auto end = sse.find("\n\n", pos);
    BOOST_REQUIRE(end != std::string::npos);
    auto block = sse.substr(pos, end - pos);
    pos = end + 2;
    auto nl = block.find('\n');
    BOOST_REQUIRE(block.rfind("event: ", 0) == 0 && nl != std::string::npos);
    BOOST_REQUIRE(block.compare(nl + 1, 6, "data: ") == 0);
    auto data = json::parse(block.substr(nl + 7));
    BOOST_REQUIRE(data);
    auto type = block.substr(7, nl - 7);
    BOOST_CHECK_EQUAL(data.v->get_string("type", ""), type);
    out.emplace_back(type, *data.v);
  }
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(builder_orders_items_and_numbers_events) {
  json::value echo;
  echo["store"] = false;
  echo["previous_response_id"] = "resp_prev";
  response_builder b{"resp_abc", 7, "m", echo, true};
  response_builder quiet{"resp_abc", 7, "m", echo, false};
  std::string sse;
  auto both = [&](auto f) {
    sse += f(b);
    BOOST_CHECK(f(quiet).empty());
  };
  both([](response_builder& x) { return x.start(); });
  both([](response_builder& x) { return x.text("Hel"); });
  both([](response_builder& x) { return x.text("lo"); });
  both([](response_builder& x) { return x.restart(); }); // voids "Hello"
  both([](response_builder& x) { return x.text("Again"); });
  auto event = [](tool_event::phase what, const char* id, const char* tool,
                  const char* text, int64_t us) {
    tool_event e;
    e.what = what;
    e.call_id = id;
    e.tool = tool;
    (what == tool_event::phase::start ? e.args_json : e.result_json) = text;
    e.duration_us = us;
    return e;
  };
  both([&](response_builder& x) {
    return x.tool(event(tool_event::phase::start, "c1", "execute_code", "{}",
                        0));
  });
  both([&](response_builder& x) {
    return x.tool(event(tool_event::phase::end, "c1", "execute_code",
                        R"({"output":"42"})", 7));
  });
  both([&](response_builder& x) { // an end without a start
    return x.tool(event(tool_event::phase::end, "c2", "read_file", "r", 1));
  });
  response_end end;
  end.answer = "Final";
  end.usage.prompt_tokens = 5;
  end.usage.completion_tokens = 2;
  end.usage.total_tokens = 7;
  both([&](response_builder& x) { return x.finish(end); });

  auto evs = events_of(sse);
  for (size_t i = 0; i < evs.size(); ++i)
    BOOST_CHECK_EQUAL(evs[i].second.get_int("sequence_number", -1),
                      static_cast<int64_t>(i));
  BOOST_REQUIRE_GE(evs.size(), 3u);
  BOOST_CHECK_EQUAL(evs[0].first, "response.created");
  BOOST_CHECK_EQUAL(evs[1].first, "response.in_progress");
  BOOST_CHECK_EQUAL(evs.back().first, "response.completed");

  auto o = b.object();
  BOOST_CHECK(o == quiet.object());
  BOOST_CHECK_EQUAL(o.get_string("status", ""), "completed");
  BOOST_CHECK_EQUAL(o.get_string("previous_response_id", ""), "resp_prev");
  BOOST_CHECK(!o.get_bool("store", true));
  BOOST_CHECK_EQUAL(o["usage"].get_int("total_tokens", 0), 7);
  auto& out = o["output"].as_array();
  BOOST_REQUIRE_EQUAL(out.size(), 5u);
  auto text_of = [](const json::value& item) {
    return item.find("content")->as_array()[0].get_string("text", "");
  };
  BOOST_CHECK_EQUAL(out[0].get_string("status", ""), "incomplete");
  BOOST_CHECK_EQUAL(text_of(out[0]), "Hello");
  BOOST_CHECK_EQUAL(out[1].get_string("status", ""), "completed");
  BOOST_CHECK_EQUAL(text_of(out[1]), "Again");
  BOOST_CHECK_EQUAL(out[2].get_string("type", ""), "mibyan_tool_call");
  BOOST_CHECK_EQUAL(out[2].get_string("result", ""), R"({"output":"42"})");
  BOOST_CHECK_EQUAL(out[2].get_int("duration_us", 0), 7);
  BOOST_CHECK_EQUAL(out[3].get_string("call_id", ""), "c2");
  BOOST_CHECK_EQUAL(out[3].get_string("status", ""), "completed");
  BOOST_CHECK_EQUAL(text_of(out[4]), "Final");
  // Item ids are unique; the deltas name their item.
  std::set<std::string> ids;
  for (auto& item : out)
    BOOST_CHECK(ids.insert(item.get_string("id", "")).second);
  for (auto& [type, d] : evs)
    if (type == "response.output_text.delta")
      BOOST_CHECK(ids.count(d.get_string("item_id", "")) == 1);
}

BOOST_AUTO_TEST_CASE(builder_ends_a_failed_turn_with_its_running_tools) {
  response_builder b{"resp_f", 1, "m", json::value{}, true};
  std::string sse = b.start();
  sse += b.text("partial");
  tool_event start;
  start.call_id = "t";
  start.tool = "terminal";
  start.args_json = "{}";
  sse += b.tool(start);
  response_end end;
  end.status = "failed";
  end.error = "the provider kept failing";
  sse += b.finish(end);
  auto evs = events_of(sse);
  BOOST_CHECK_EQUAL(evs.back().first, "response.failed");
  auto o = b.object();
  BOOST_CHECK_EQUAL(o["error"].get_string("code", ""), "server_error");
  BOOST_CHECK_EQUAL(o["error"].get_string("message", ""),
                    "the provider kept failing");
  auto& out = o["output"].as_array();
  BOOST_REQUIRE_EQUAL(out.size(), 2u);
  BOOST_CHECK_EQUAL(out[0].get_string("status", ""), "completed");
  BOOST_CHECK_EQUAL(out[1].get_string("status", ""), "incomplete");
  response_builder c{"resp_i", 1, "m", json::value{}, false};
  c.text("cut");
  end.status = "incomplete";
  end.error = "interrupted";
  c.finish(end);
  auto oc = c.object();
  BOOST_CHECK_EQUAL(oc["incomplete_details"].get_string("reason", ""),
                    "interrupted");
  BOOST_CHECK(oc["error"].is_null());
  BOOST_CHECK_EQUAL(oc["output"].as_array()[0].get_string("status", ""),
                    "incomplete");
}

BOOST_AUTO_TEST_SUITE_END()

// -- the store's response records, on every backend ----------------------------

BOOST_AUTO_TEST_SUITE(response_records)

MIBYAN_STORE_TEST_CASE(store_keeps_responses_with_their_session,
                       test::store_fixture) {
  store.reset();
  auto o = base;
  o.map_size = uint64_t{64} << 20;
  {
    auto st = session_store::open(o);
    BOOST_REQUIRE_MESSAGE(st, st.error);
    auto& s = **st;
    new_session ns;
    ns.id = "sess-a";
    BOOST_REQUIRE(s.create_session(ns));
    auto last = s.last_message_id("sess-a");
    BOOST_REQUIRE(last);
    BOOST_CHECK_EQUAL(*last, 0u);
    chat_message m;
    m.role = "user";
    m.content = "hello";
    auto a1 = s.append_message("sess-a", m);
    m.role = "assistant";
    auto a2 = s.append_message("sess-a", m);
    BOOST_REQUIRE(a1 && a2);
    // Another session's later message does not count.
    ns.id = "sess-b";
    BOOST_REQUIRE(s.create_session(ns));
    BOOST_REQUIRE(s.append_message("sess-b", m));
    BOOST_REQUIRE(s.append_message("sess-a-longer-id", m).code
                  == status_code::not_found);
    last = s.last_message_id("sess-a");
    BOOST_REQUIRE(last);
    BOOST_CHECK_EQUAL(*last, a2->id);
    BOOST_CHECK(s.last_message_id("nope").code == status_code::not_found);

    stored_response r;
    r.id = "resp_1";
    r.session_id = "sess-a";
    r.last_message_id = a2->id;
    r.created_at_ms = 42;
    r.object_json = R"({"id":"resp_1"})";
    BOOST_REQUIRE(s.put_response(r));
    r.id = "resp_2";
    BOOST_REQUIRE(s.put_response(r));
    r.id = "resp_3";
    r.session_id = "sess-b";
    BOOST_REQUIRE(s.put_response(r));
    r.id = "resp_4";
    r.session_id = "missing";
    BOOST_CHECK(s.put_response(r).code == status_code::not_found);
    r.id = "bad id";
    BOOST_CHECK(s.put_response(r).code == status_code::invalid_argument);
    BOOST_CHECK(s.get_response("resp_x/y").code
                == status_code::invalid_argument);
    BOOST_CHECK(s.get_response("resp_4").code == status_code::not_found);
  }
  {
    // Durable: a new open reads them back; deleting a session deletes its
    // responses and only those.
    auto st = session_store::open(o);
    BOOST_REQUIRE_MESSAGE(st, st.error);
    auto& s = **st;
    auto got = s.get_response("resp_1");
    BOOST_REQUIRE_MESSAGE(got, got.error);
    BOOST_CHECK_EQUAL(got->session_id, "sess-a");
    BOOST_CHECK_EQUAL(got->created_at_ms, 42);
    BOOST_CHECK_EQUAL(got->object_json, R"({"id":"resp_1"})");
    BOOST_REQUIRE(s.delete_session("sess-a"));
    BOOST_CHECK(s.get_response("resp_1").code == status_code::not_found);
    BOOST_CHECK(s.get_response("resp_2").code == status_code::not_found);
    BOOST_CHECK(s.get_response("resp_3"));
    BOOST_REQUIRE(s.delete_response("resp_3"));
    BOOST_CHECK(s.delete_response("resp_3").code == status_code::not_found);
    BOOST_CHECK(s.get_response("resp_3").code == status_code::not_found);
    BOOST_CHECK(s.verify(true));
    if (!is_lmdb())
      return;
    // LMDB only (the record is written through LMDB): verify sees a
    // response whose session is gone.
    stored_response orphan;
    orphan.id = "resp_orphan";
    orphan.session_id = "gone";
    BOOST_REQUIRE(lmdb_inspect::write(
      s, {{lmdb_inspect::change::kind::put, "responses", orphan.id,
           encode_response(orphan)}}));
    auto v = s.verify(false);
    BOOST_CHECK(!v);
    BOOST_CHECK_MESSAGE(contains(v.error, "resp_orphan"), v.error);
  }
}

BOOST_AUTO_TEST_CASE(response_records_refuse_unknown_versions) {
  stored_response r;
  r.id = "resp_9";
  r.session_id = "s";
  r.last_message_id = 300;
  r.created_at_ms = -5;
  r.object_json = "{}";
  auto bytes = encode_response(r);
  stored_response back;
  BOOST_REQUIRE(decode_response(bytes, back));
  BOOST_CHECK_EQUAL(back.last_message_id, 300u);
  BOOST_CHECK_EQUAL(back.created_at_ms, -5);
  BOOST_CHECK_EQUAL(back.object_json, "{}");
  auto newer = bytes;
  newer[0] = 2;
  BOOST_CHECK(!decode_response(newer, back));
  BOOST_CHECK(!decode_response(bytes.substr(0, bytes.size() - 1), back));
  BOOST_CHECK(!decode_response({}, back));
}

BOOST_AUTO_TEST_SUITE_END()
