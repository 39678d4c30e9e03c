#define BOOST_TEST_MODULE openai_chat
#include <boost/test/unit_test.hpp>

// The OpenAI wire format of `mibyan serve` (serve/openai_chat) and its
// Beast-free helpers (serve/routes): parsing, system folding, history,
// response shapes, target parsing, the constant-time key compare.

#include "base/json.hpp"
#include "serve/http_server.hpp"
#include "serve/openai_chat.hpp"
#include "serve/routes.hpp"

using namespace mibyan;

namespace {

std::string parse_error(const std::string& body) {
  chat_completion_request r;
  return parse_chat_completion(body, r, 1000).error;
}

} // namespace

BOOST_AUTO_TEST_CASE(last_user_message_is_the_prompt_and_the_rest_history) {
  chat_completion_request r;
  auto err = parse_chat_completion(
    R"({"model":"m","stream":true,"stream_options":{"include_usage":true},
        "messages":[{"role":"system","content":"Be brief."},
                    {"role":"user","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}]},
                    {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}}]},
                    {"role":"tool","tool_call_id":"c1","name":"read_file","content":"A"},
                    {"role":"assistant","content":"Read it."},
                    {"role":"user","content":"Again"}]})",
    r, 1000).error;
  BOOST_REQUIRE_EQUAL(err, "");
  BOOST_CHECK(r.stream);
  BOOST_CHECK(r.include_usage);
  BOOST_CHECK_EQUAL(r.prompt, "Again");
  // The history is typed chat messages (what the runtime stores).
  auto& h = r.history;
  BOOST_REQUIRE_EQUAL(h.size(), 4u);
  BOOST_CHECK_EQUAL(h[0].role, "user");
  // The client's system text leads the first user message.
  BOOST_CHECK_EQUAL(h[0].content, "Be brief.\n\nHi there");
  BOOST_REQUIRE_EQUAL(h[1].tool_calls.size(), 1u);
  BOOST_CHECK_EQUAL(h[1].tool_calls[0].name, "read_file");
  BOOST_CHECK_EQUAL(h[1].tool_calls[0].arguments, R"({"path":"a"})");
  BOOST_CHECK_EQUAL(h[2].tool_call_id, "c1");
  BOOST_CHECK_EQUAL(h[2].tool_name, "read_file");
  BOOST_CHECK_EQUAL(h[3].content, "Read it.");
}

BOOST_AUTO_TEST_CASE(system_text_folds_into_a_single_prompt) {
  chat_completion_request r;
  BOOST_REQUIRE_EQUAL(
    parse_chat_completion(R"({"messages":[{"role":"system","content":"S"},
                                          {"role":"user","content":"U"}]})",
                          r, 1000)
      .error,
    "");
  BOOST_CHECK_EQUAL(r.prompt, "S\n\nU");
  BOOST_CHECK(r.history.empty());
}

BOOST_AUTO_TEST_CASE(bad_requests_have_clear_messages) {
  BOOST_CHECK(parse_error("{").find("not valid JSON") != std::string::npos);
  BOOST_CHECK(parse_error("[]").find("JSON object") != std::string::npos);
  BOOST_CHECK(parse_error(R"({"model":"m"})").find("'messages' is required")
              != std::string::npos);
  BOOST_CHECK(parse_error(R"({"messages":[]})").find("non-empty")
              != std::string::npos);
  BOOST_CHECK(parse_error(R"({"messages":[{"role":"assistant","content":"x"}]})")
                .find("role 'user'")
              != std::string::npos);
  BOOST_CHECK(parse_error(R"({"messages":[{"role":"wizard","content":"x"}]})")
                .find("unknown role")
              != std::string::npos);
  BOOST_CHECK(parse_error(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})")
                .find("only text")
              != std::string::npos);
  BOOST_CHECK(parse_error(R"({"messages":[{"role":"user","content":"  "}]})")
                .find("empty")
              != std::string::npos);
  BOOST_CHECK(parse_error(R"({"stream":"yes","messages":[{"role":"user","content":"x"}]})")
                .find("'stream'")
              != std::string::npos);
  BOOST_CHECK(parse_error(R"({"messages":[{"role":"tool","content":"x"},{"role":"user","content":"x"}]})")
                .find("tool_call_id")
              != std::string::npos);
}

BOOST_AUTO_TEST_CASE(too_many_messages_is_its_own_code) {
  auto body = [](int n) {
    std::string b = R"({"model":"m","messages":[)";
    for (int i = 0; i < n; ++i)
      b += std::string(i ? "," : "") + R"({"role":"user","content":"x"})";
    return b + "]}";
  };
  chat_completion_request r;
  auto over = parse_chat_completion(body(11), r, 10);
  BOOST_CHECK(over.code == status_code::resource_exhausted);
  BOOST_CHECK(over.error.find("server.max_messages") != std::string::npos);
  BOOST_CHECK(r.prompt.empty() && r.history.empty());
  BOOST_CHECK(parse_chat_completion(body(10), r, 10).ok());
  BOOST_CHECK_EQUAL(r.prompt, "x");
  // Malformed JSON stays an invalid request.
  BOOST_CHECK(parse_chat_completion("{\"messages\": [", r, 10).code
              == status_code::invalid_argument);
}

BOOST_AUTO_TEST_CASE(response_shapes) {
  completion_usage u{5, 2, 7};
  json::value ext;
  ext["session_id"] = "s";
  auto body = json::parse(completion_body("id1", 10, "m", "hi", "stop", u, ext));
  BOOST_REQUIRE(body);
  auto& v = *body.v;
  BOOST_CHECK_EQUAL(v.get_string("object", ""), "chat.completion");
  BOOST_CHECK_EQUAL(v["choices"].as_array()[0]["message"].get_string("content", ""),
                    "hi");
  BOOST_CHECK_EQUAL(v["usage"].get_int("total_tokens", 0), 7);
  BOOST_CHECK_EQUAL(v["mibyan"].get_string("session_id", ""), "s");
  auto ev = chunk_event("id1", 10, "m", json::value{}, "", json::value{});
  BOOST_CHECK_EQUAL(ev.rfind("data: {", 0), 0u);
  BOOST_CHECK_EQUAL(ev.substr(ev.size() - 2), "\n\n");
  auto chunk = json::parse(ev.substr(6));
  BOOST_REQUIRE(chunk);
  BOOST_CHECK((*chunk.v)["choices"].as_array()[0]["finish_reason"].is_null());
  BOOST_CHECK((*chunk.v)["choices"].as_array()[0]["delta"].is_object());
  BOOST_CHECK(chunk.v->find("mibyan") == nullptr);
  auto usage = json::parse(
    chunk_event("id1", 10, "m", json::value{}, "", json::value{}, &u).substr(6));
  BOOST_CHECK_EQUAL((*usage.v)["choices"].size(), 0u);
  auto err = json::parse(error_body("bad", "invalid_request_error", ""));
  BOOST_CHECK_EQUAL((*err.v)["error"].get_string("message", ""), "bad");
  BOOST_CHECK((*err.v)["error"]["code"].is_null());
}

BOOST_AUTO_TEST_CASE(targets_ids_and_keys) {
  std::string path;
  std::map<std::string, std::string> q;
  serve::split_target("/v1/sessions/search?q=hello%20world+again&limit=5&x",
                      path, q);
  BOOST_CHECK_EQUAL(path, "/v1/sessions/search");
  BOOST_CHECK_EQUAL(q["q"], "hello world again");
  size_t limit = 0;
  BOOST_CHECK(serve::parse_limit(q, limit));
  BOOST_CHECK_EQUAL(limit, 5u);
  q["limit"] = "0";
  BOOST_CHECK(!serve::parse_limit(q, limit));
  q["limit"] = "5000";
  BOOST_CHECK(!serve::parse_limit(q, limit));
  BOOST_CHECK(serve::valid_session_id("20261201_150929_4e607b"));
  BOOST_CHECK(!serve::valid_session_id(""));
  BOOST_CHECK(!serve::valid_session_id("../x"));
  BOOST_CHECK(!serve::valid_session_id(std::string(129, 'a')));
  BOOST_CHECK(serve::completion_id() != serve::completion_id());
  BOOST_CHECK(constant_time_equal("key", "key"));
  BOOST_CHECK(!constant_time_equal("key", "kez"));
  BOOST_CHECK(!constant_time_equal("key", "key2"));
  BOOST_CHECK(!constant_time_equal("", "k"));
}

BOOST_AUTO_TEST_CASE(turn_outcomes_map_to_replies) {
  turn_result not_started;
  not_started.error = "no provider";
  auto a = serve::summarize_turn(not_started, "s");
  BOOST_CHECK(!a.ok);
  BOOST_CHECK(a.not_started);
  BOOST_CHECK_EQUAL(a.message, "no provider");
  turn_result done;
  done.started = true;
  done.final_response = "hi";
  done.usage.input_tokens = 2;
  done.usage.cache_read_tokens = 1;
  done.usage.output_tokens = 2;
  done.api_calls = 2;
  done.exit_detail = "text_response(finish_reason=stop)";
  done.completed = true;
  auto b = serve::summarize_turn(done, "s");
  BOOST_CHECK(b.ok);
  BOOST_CHECK_EQUAL(b.answer, "hi");
  BOOST_CHECK_EQUAL(b.usage.prompt_tokens, 3);
  BOOST_CHECK_EQUAL(b.usage.cached_tokens, 1);
  BOOST_CHECK_EQUAL(b.usage.total_tokens, 5);
  BOOST_CHECK_EQUAL(b.ext.get_string("turn_exit_reason", ""),
                    "text_response(finish_reason=stop)");
  BOOST_CHECK_EQUAL(b.ext.get_int("api_calls", 0), 2);
  turn_result stopped;
  stopped.started = true;
  stopped.interrupted = true;
  auto c = serve::summarize_turn(stopped, "s");
  BOOST_CHECK(!c.ok);
  BOOST_CHECK(c.interrupted);
  BOOST_CHECK_EQUAL(c.message, "the turn was interrupted");
}
