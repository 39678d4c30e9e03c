// The provider actor (actors/provider.hpp) against the scripted server:
// OpenAI and Anthropic answers and streams, retries, Retry-After and
// fallbacks, keys sent to their own host only, stalled streams,
// cancellation, concurrency, malformed requests, shutdown, and the
// settings built from options.
#define BOOST_TEST_MODULE provider_actor
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "caf/all.hpp"

#include "actors/provider.hpp"
#include "messages/type_ids.hpp"
#include "base/http_client.hpp"
#include "base/json.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/provider_fixture.hpp"
#include "tests/support/wait_until.hpp"

using namespace mibyan;
using namespace std::chrono;
using namespace mibyan::test::provider_cases;
using fixture = provider_fixture;

BOOST_FIXTURE_TEST_SUITE(provider_actor_tests, fixture)

BOOST_AUTO_TEST_CASE(openai_non_streaming_text) {
  script_json("/v1/chat/completions", 200, ok_body);
  auto out = run(spawn_custom(), make_request("r1", false));
  BOOST_REQUIRE_MESSAGE(out.resp, error_text(out.err));
  auto& r = *out.resp;
  BOOST_TEST(r.error == "");
  BOOST_TEST(r.content == "Hello there");
  BOOST_TEST(r.finish_reason == "stop");
  BOOST_TEST(r.usage.input_tokens == 12);
  BOOST_TEST(r.usage.output_tokens == 3);
  BOOST_TEST(r.http_status == 200);
  BOOST_TEST(r.provider == "custom");
  BOOST_TEST(r.attempts == 1);
  auto log = requests();
  BOOST_REQUIRE(log.size() == 1u);
  auto& req = log.as_array()[0];
  BOOST_TEST(req.get_string("method", "") == "POST");
  BOOST_TEST(req.get_string("path", "") == "/v1/chat/completions");
  BOOST_TEST(req["headers"].get_string("Authorization", "")
             == "Bearer sk-test-0123456789");
  auto body = json::parse(req.get_string("body", ""));
  BOOST_REQUIRE(body);
  BOOST_TEST(body.v->get_string("model", "") == "test-model");
  BOOST_TEST(!body.v->get_bool("stream", false));
  BOOST_TEST((*body.v)["messages"].size() == 2u);
}

BOOST_AUTO_TEST_CASE(streaming_tool_call_deltas_and_usage_on_last_chunk) {
  std::vector<std::string> chunks;
  chunks.push_back(oa_chunk(R"({"role":"assistant","content":"Let me "})"));
  chunks.push_back(oa_chunk(R"({"content":"look."})"));
  chunks.push_back(oa_chunk(
    R"({"tool_calls":[{"index":0,"id":"call_A1","type":"function",)"
    R"("function":{"name":"read_file","arguments":""}}]})"));
  std::string args0 = R"({"path": "src/main.cpp", "limit": 20})";
  for (size_t i = 0; i < args0.size(); i += 3)
    chunks.push_back(oa_chunk(
      R"({"tool_calls":[{"index":0,"function":{"arguments":)"
      + json::quote(args0.substr(i, 3)) + "}}]}"));
  chunks.push_back(oa_chunk(
    R"({"tool_calls":[{"index":1,"id":"call_B2","type":"function",)"
    R"("function":{"name":"search_files","arguments":""}}]})"));
  std::string args1 = R"({"pattern": "TODO|FIXME", "path": "."})";
  for (size_t i = 0; i < args1.size(); i += 2)
    chunks.push_back(oa_chunk(
      R"({"tool_calls":[{"index":1,"function":{"arguments":)"
      + json::quote(args1.substr(i, 2)) + "}}]}"));
  chunks.push_back(oa_chunk("{}", R"("tool_calls")",
                            R"({"prompt_tokens":100,"completion_tokens":42,)"
                            R"("total_tokens":142})"));
  chunks.push_back(sse("[DONE]"));
  BOOST_TEST_MESSAGE(chunks.size() << " chunks");
  script_stream("/v1/chat/completions", chunks, 2);
  auto req = make_request("r-tools", true);
  req.tools_json = R"([{"name":"read_file","description":"read",)"
                   R"("parameters":{"type":"object","properties":{}}},)"
                   R"({"name":"search_files","description":"search"}])";
  auto out = run(spawn_custom(), req);
  BOOST_REQUIRE_MESSAGE(out.resp, error_text(out.err));
  auto& r = *out.resp;
  BOOST_TEST(r.error == "");
  BOOST_TEST(r.content == "Let me look.");
  BOOST_TEST(r.finish_reason == "tool_calls");
  BOOST_REQUIRE(r.tool_calls.size() == 2u);
  BOOST_TEST(r.tool_calls[0].id == "call_A1");
  BOOST_TEST(r.tool_calls[0].name == "read_file");
  BOOST_TEST(r.tool_calls[0].arguments == args0);
  BOOST_TEST(r.tool_calls[1].id == "call_B2");
  BOOST_TEST(r.tool_calls[1].name == "search_files");
  BOOST_TEST(r.tool_calls[1].arguments == args1);
  BOOST_TEST(r.usage.input_tokens == 100);
  BOOST_TEST(r.usage.output_tokens == 42);
  BOOST_TEST(out.text("text") == "Let me look.");
  for (auto& d : out.deltas)
    BOOST_TEST(d.request_id == "r-tools");
  auto log = requests();
  BOOST_REQUIRE(log.size() == 1u);
  auto body = json::parse(log.as_array()[0].get_string("body", ""));
  BOOST_REQUIRE(body);
  BOOST_TEST(body.v->get_bool("stream", false));
  BOOST_TEST((*body.v)["stream_options"].get_bool("include_usage", false));
  BOOST_TEST((*body.v)["tools"].size() == 2u);
}

BOOST_AUTO_TEST_CASE(streamed_reasoning_field) {
  std::vector<std::string> chunks{
    oa_chunk(R"({"role":"assistant","reasoning_content":"Think"})"),
    oa_chunk(R"({"reasoning_content":"ing hard."})"),
    oa_chunk(R"({"reasoning":" More."})"),
    oa_chunk(R"({"content":"Answer: 4"})"),
    oa_chunk("{}", R"("stop")", R"({"prompt_tokens":9,"completion_tokens":7})"),
    sse("[DONE]")};
  script_stream("/v1/chat/completions", chunks);
  auto out = run(spawn_custom(), make_request("r-reason", true));
  BOOST_REQUIRE_MESSAGE(out.resp, error_text(out.err));
  BOOST_TEST(out.resp->reasoning == "Thinking hard. More.");
  BOOST_TEST(out.resp->content == "Answer: 4");
  BOOST_TEST(out.text("reasoning") == "Thinking hard. More.");
  BOOST_TEST(out.text("text") == "Answer: 4");
  BOOST_REQUIRE(!out.deltas.empty());
  BOOST_TEST(out.deltas.front().kind == "reasoning");
  BOOST_TEST(out.deltas.back().kind == "text");
}

BOOST_AUTO_TEST_CASE(rate_limit_without_retry_after_is_retried) {
  script_json("/v1/chat/completions", 429,
              R"({"error":{"message":"Rate limit reached","type":"rate"}})");
  script_json("/v1/chat/completions", 200, ok_body);
  auto out = run(spawn_custom(), make_request("r429", false));
  BOOST_REQUIRE_MESSAGE(out.resp, error_text(out.err));
  BOOST_TEST(out.resp->error == "");
  BOOST_TEST(out.resp->content == "Hello there");
  BOOST_TEST(out.resp->attempts == 2);
  BOOST_TEST(requests().size() == 2u);
  // Scaled backoff: (2 s + 0.5 * 0.5 * 2 s) * 0.01 = 25 ms.
  BOOST_TEST(out.secs >= 0.025);
  BOOST_TEST(out.secs < 1.0);
}

BOOST_AUTO_TEST_CASE(retry_after_is_honoured) {
  json::value headers;
  headers["Retry-After"] = "1";
  script_json("/v1/chat/completions", 429,
              R"({"error":{"message":"slow down"}})", 1, headers);
  script_json("/v1/chat/completions", 200, ok_body);
  auto out = run(spawn_custom(), make_request("r-ra", false));
  BOOST_REQUIRE_MESSAGE(out.resp, error_text(out.err));
  BOOST_TEST(out.resp->content == "Hello there");
  BOOST_TEST(out.resp->attempts == 2);
  BOOST_TEST_MESSAGE("elapsed " << out.secs << " s");
  BOOST_TEST(out.secs >= 0.95);
  BOOST_TEST(out.secs < 2.5);
}

BOOST_AUTO_TEST_CASE(server_errors_exhaust_retries_then_fallback_answers) {
  script_json("/v1/chat/completions", 500,
              R"({"error":{"message":"internal boom"}})", 3);
  script_json("/fb/v1/chat/completions", 200, ok_body);
  auto s = settings(endpoint("custom", "/v1"));
  s.fallbacks.push_back(endpoint("ollama", "/fb/v1", "", "fb-model"));
  auto out = run(spawn(s), make_request("r500", false));
  BOOST_REQUIRE_MESSAGE(out.resp, error_text(out.err));
  BOOST_TEST(out.resp->error == "");
  BOOST_TEST(out.resp->content == "Hello there");
  BOOST_TEST(out.resp->provider == "ollama");
  BOOST_TEST(out.resp->attempts == 4);
  auto log = requests();
  BOOST_REQUIRE(log.size() == 4u);
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(log.as_array()[i].get_string("path", "")
               == "/v1/chat/completions");
  auto& last = log.as_array()[3];
  BOOST_TEST(last.get_string("path", "") == "/fb/v1/chat/completions");
  BOOST_TEST(json::parse(last.get_string("body", "")).v->get_string("model",
                                                                     "")
             == "fb-model");
  // The main provider's key never goes to the fallback.
  BOOST_TEST(!last["headers"].find("Authorization"));
}

BOOST_AUTO_TEST_CASE(exhausted_retries_without_fallback_report_the_error) {
  script_json("/v1/chat/completions", 503,
              R"({"error":{"message":"overloaded right now"}})", 3);
  auto out = run(spawn_custom(), make_request("r503", false));
  BOOST_REQUIRE_MESSAGE(out.resp, error_text(out.err));
  auto& r = *out.resp;
  BOOST_TEST_MESSAGE(r.error);
  BOOST_TEST(contains(r.error, "API call failed after 3 attempts"));
  BOOST_TEST(contains(r.error, "overloaded right now"));
  BOOST_TEST(r.http_status == 503);
  BOOST_TEST(r.retryable);
  BOOST_TEST(r.attempts == 3);
  BOOST_TEST(requests().size() == 3u);
}

BOOST_AUTO_TEST_CASE(unauthorized_is_not_retried) {
  script_json("/v1/chat/completions", 401,
              R"({"error":{"message":"Incorrect API key provided: sk-te***",)"
              R"("type":"invalid_request_error","code":"invalid_api_key"}})",
              5);
  auto out = run(spawn_custom(), make_request("r401", false));
  BOOST_REQUIRE_MESSAGE(out.resp, error_text(out.err));
  auto& r = *out.resp;
  BOOST_TEST_MESSAGE(r.error);
  BOOST_TEST(contains(r.error, "Incorrect API key provided"));
  BOOST_TEST(r.http_status == 401);
  BOOST_TEST(!r.retryable);
  BOOST_TEST(r.attempts == 1);
  BOOST_TEST(requests().size() == 1u);
}

BOOST_AUTO_TEST_CASE(not_found_goes_to_fallback_but_bad_request_does_not) {
  script_json("/v1/chat/completions", 404,
              R"({"error":{"message":"model not found"}})");
  script_json("/fb/v1/chat/completions", 200, ok_body);
  auto s = settings(endpoint("custom", "/v1"));
  s.fallbacks.push_back(endpoint("llamacpp", "/fb/v1", "", "fb-model"));
  auto p = spawn(s);
  auto out = run(p, make_request("r404", false));
  BOOST_REQUIRE_MESSAGE(out.resp, error_text(out.err));
  BOOST_TEST(out.resp->error == "");
  BOOST_TEST(out.resp->provider == "llamacpp");
  BOOST_TEST(out.resp->attempts == 2);
  server.reset();
  script_json("/v1/chat/completions", 400,
              R"({"error":{"message":"messages: field required"}})");
  auto bad = run(p, make_request("r400", false));
  BOOST_REQUIRE(bad.resp);
  BOOST_TEST(contains(bad.resp->error, "messages: field required"));
  BOOST_TEST(bad.resp->provider == "custom");
  BOOST_TEST(bad.resp->http_status == 400);
  BOOST_TEST(requests().size() == 1u);
}

BOOST_AUTO_TEST_CASE(failing_fallback_reports_both_providers) {
  script_json("/v1/chat/completions", 500,
              R"({"error":{"message":"main down"}})", 3);
  script_json("/fb/v1/chat/completions", 401,
              R"({"error":{"message":"fallback says no"}})");
  auto s = settings(endpoint("custom", "/v1"));
  s.fallbacks.push_back(endpoint("vllm", "/fb/v1", "", "fb-model"));
  auto out = run(spawn(s), make_request("r-both", false));
  BOOST_REQUIRE(out.resp);
  BOOST_TEST_MESSAGE(out.resp->error);
  BOOST_TEST(contains(out.resp->error, "fallback says no"));
  BOOST_TEST(contains(out.resp->error, "main down"));
  BOOST_TEST(out.resp->provider == "vllm");
  BOOST_TEST(out.resp->attempts == 4);
}

BOOST_AUTO_TEST_CASE(key_goes_to_its_own_host_only) {
  // A cloud key in the environment, a custom endpoint: no key is sent.
  ::setenv("OPENAI_API_KEY", "sk-cloud-secret-000001", 1);
  options opts;
  opts.model.provider = "custom";
  opts.model.base_url = server.url("/v1");
  opts.model.default_model = "local-model";
  auto s = make_provider_settings(opts);
  s.retry.backoff_scale = 0.01;
  BOOST_REQUIRE_MESSAGE(s.main.ok(), s.main.error);
  script_json("/v1/chat/completions", 200, ok_body, 2);
  auto p = spawn(s);
  auto out = run(p, make_request("r-nokey", false));
  BOOST_REQUIRE(out.resp);
  BOOST_TEST(out.resp->error == "");
  // The custom endpoint's own variable is used.
  ::setenv("CUSTOM_API_KEY", "sk-custom-own-00001", 1);
  auto s2 = make_provider_settings(opts);
  auto out2 = run(spawn(s2), make_request("r-ownkey", false));
  BOOST_REQUIRE(out2.resp);
  auto log = requests();
  BOOST_REQUIRE(log.size() == 2u);
  BOOST_TEST(!log.as_array()[0]["headers"].find("Authorization"));
  BOOST_TEST(log.as_array()[1]["headers"].get_string("Authorization", "")
             == "Bearer sk-custom-own-00001");
  BOOST_TEST(!contains(server.requests(), "sk-cloud-secret"));
  // The cloud provider pointed at another host refuses to start.
  opts.model.provider = "openai";
  auto s3 = make_provider_settings(opts);
  BOOST_TEST(!s3.main.ok());
  auto out3 = run(spawn(s3), make_request("r-cloud", false));
  BOOST_TEST(!out3.resp);
  BOOST_TEST(is_ec(out3.err, ec::config_invalid));
  BOOST_TEST(contains(error_text(out3.err), "only ever sent to"));
  // Anthropic wire format: x-api-key and anthropic-version, no Bearer.
  script_json("/anthropic/v1/messages", 200,
              R"({"id":"m","type":"message","role":"assistant",)"
              R"("model":"claude-test","content":[{"type":"text",)"
              R"("text":"hi"}],"stop_reason":"end_turn",)"
              R"("usage":{"input_tokens":3,"output_tokens":1}})");
  auto out4 = run(spawn(settings(endpoint("anthropic", "/anthropic/v1",
                                          "sk-ant-explicit-0001"))),
                  make_request("r-ant", false));
  BOOST_REQUIRE(out4.resp);
  BOOST_TEST(out4.resp->content == "hi");
  log = requests();
  BOOST_REQUIRE(log.size() == 3u);
  auto& h = log.as_array()[2]["headers"];
  BOOST_TEST(h.get_string("x-api-key", "") == "sk-ant-explicit-0001");
  BOOST_TEST(h.get_string("anthropic-version", "") == "2023-06-01");
  BOOST_TEST(!h.find("Authorization"));
}

BOOST_AUTO_TEST_CASE(missing_key_fails_before_any_request) {
  options opts;
  opts.home = "/tmp/mibyan-test-home";
  opts.model.provider = "openrouter";
  opts.model.default_model = "some/model";
  auto s = make_provider_settings(opts);
  BOOST_TEST(!s.main.ok());
  BOOST_TEST(!s.main.value); // no endpoint to send anything to
  auto out = run(spawn(s), make_request("r-nokey", false));
  BOOST_TEST(!out.resp);
  BOOST_TEST(is_ec(out.err, ec::config_invalid));
  auto text = error_text(out.err);
  BOOST_TEST_MESSAGE(text);
  BOOST_TEST(contains(text, "OPENROUTER_API_KEY"));
  BOOST_TEST(contains(text, "/tmp/mibyan-test-home/.env"));
  BOOST_TEST(out.secs < 0.5);
  BOOST_TEST(requests().size() == 0u);
}

BOOST_AUTO_TEST_CASE(stalled_stream_times_out_and_is_retried) {
  // First response: one chunk, then silence (the next chunk would come
  // after 5 s). Second response: a complete stream.
  script_stream("/v1/chat/completions",
                {oa_chunk(R"({"role":"assistant","content":"partial"})"),
                 oa_chunk(R"({"content":" never"})"), sse("[DONE]")},
                5000);
  script_stream("/v1/chat/completions", text_stream("ok"));
  auto s = settings(endpoint("custom", "/v1"));
  s.stream_idle_timeout = milliseconds{300};
  auto out = run(spawn(s), make_request("r-stale", true));
  BOOST_REQUIRE_MESSAGE(out.resp, error_text(out.err));
  BOOST_TEST(out.resp->error == "");
  BOOST_TEST(out.resp->content == "ok");
  BOOST_TEST(out.resp->attempts == 2);
  BOOST_TEST_MESSAGE("elapsed " << out.secs << " s");
  BOOST_TEST(out.secs >= 0.3);
  BOOST_TEST(out.secs < 2.0);
  // The sink saw the partial text, then a restart, then the new text.
  BOOST_REQUIRE(out.deltas.size() >= 3u);
  BOOST_TEST(out.deltas[0].text == "partial");
  BOOST_TEST(out.deltas[1].kind == "restart");
  BOOST_TEST(out.text("text") == "partialok");
  BOOST_TEST(requests().size() == 2u);
}

BOOST_AUTO_TEST_CASE(stale_stream_exhausting_retries_fails) {
  script_stream("/v1/chat/completions",
                {oa_chunk(R"({"role":"assistant","content":"x"})"),
                 sse("[DONE]")},
                3000, 2);
  auto s = settings(endpoint("custom", "/v1"));
  s.stream_idle_timeout = milliseconds{200};
  s.retry.max_attempts = 2;
  auto out = run(spawn(s), make_request("r-stale2", true));
  BOOST_REQUIRE(out.resp);
  BOOST_TEST_MESSAGE(out.resp->error);
  BOOST_TEST(contains(out.resp->error, "stream stalled"));
  BOOST_TEST(contains(out.resp->error, "after 2 attempts"));
  BOOST_TEST(out.resp->attempts == 2);
  BOOST_TEST(out.secs < 2.0);
}

BOOST_AUTO_TEST_CASE(cancellation_mid_stream) {
  std::vector<std::string> chunks;
  chunks.push_back(oa_chunk(R"({"role":"assistant","content":"tick "})"));
  for (int i = 0; i < 50; ++i)
    chunks.push_back(oa_chunk(R"({"content":"tick "})"));
  chunks.push_back(sse("[DONE]"));
  script_stream("/v1/chat/completions", chunks, 100);
  auto p = spawn_custom();
  caf::scoped_actor self{*sys};
  auto req = make_request("r-cancel", true);
  req.sink = caf::actor_cast<caf::actor>(self.ptr());
  auto handle = self->request(p, seconds{30}, complete_atom_v, req);
  // Wait for the first fragment, then cancel.
  bool got_delta = false;
  self->receive(
    [&](delta_atom, const std::string&, const std::string&,
        const std::string&) { got_delta = true; },
    caf::after(seconds{5}) >> [] {});
  BOOST_REQUIRE(got_delta);
  auto t0 = steady_clock::now();
  caf::anon_send(p, cancel_atom_v, std::string{"r-cancel"});
  caf::error err;
  bool answered = false;
  handle.receive([&](chat_response&) { answered = true; },
                 [&](caf::error& e) { err = std::move(e); });
  auto secs = duration<double>(steady_clock::now() - t0).count();
  BOOST_TEST(!answered);
  BOOST_TEST(is_ec(err, ec::interrupted));
  BOOST_TEST(contains(error_text(err), "cancelled"));
  BOOST_TEST_MESSAGE("cancel answered in " << secs << " s");
  BOOST_TEST(secs < 1.0);
  // The transfer is gone from the client, and the server notices the
  // closed connection on its next write.
  auto deadline = steady_clock::now() + seconds{3};
  while (http->active() != 0 && steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds{10});
  BOOST_TEST(http->active() == 0u);
  bool aborted = false;
  while (!aborted && steady_clock::now() < deadline) {
    auto log = requests();
    aborted = log.size() == 1u
              && log.as_array()[0].get_bool("aborted", false);
    if (!aborted)
      std::this_thread::sleep_for(milliseconds{50});
  }
  BOOST_TEST(aborted);
  // Cancelling an unknown or finished request is harmless.
  caf::anon_send(p, cancel_atom_v, std::string{"r-cancel"});
  caf::anon_send(p, cancel_atom_v, std::string{"nope"});
  script_json("/v1/chat/completions", 200, ok_body);
  auto again = run(p, make_request("r-after", false));
  BOOST_REQUIRE(again.resp);
  BOOST_TEST(again.resp->content == "Hello there");
}

BOOST_AUTO_TEST_CASE(cancellation_during_retry_wait) {
  json::value headers;
  headers["Retry-After"] = "5";
  script_json("/v1/chat/completions", 429, R"({"error":"wait"})", 1, headers);
  auto p = spawn_custom();
  caf::scoped_actor self{*sys};
  auto handle = self->request(p, seconds{30}, complete_atom_v,
                              make_request("r-wait", false));
  // Wait until the 429 was served and its transfer ended, then cancel
  // during the 5 s wait (sim_conversation_test covers the same in
  // simulated time).
  BOOST_REQUIRE(test::wait_until([&] {
    return requests().size() >= 1u && http->active() == 0;
  }));
  auto t0 = steady_clock::now();
  caf::anon_send(p, cancel_atom_v, std::string{"r-wait"});
  caf::error err;
  handle.receive([](chat_response&) {},
                 [&](caf::error& e) { err = std::move(e); });
  BOOST_TEST(is_ec(err, ec::interrupted));
  BOOST_TEST(duration<double>(steady_clock::now() - t0).count() < 1.0);
  std::this_thread::sleep_for(milliseconds{200});
  BOOST_TEST(requests().size() == 1u);
}

BOOST_AUTO_TEST_CASE(anthropic_native_stream_with_tool_use) {
  std::vector<std::string> chunks{
    anthropic_event("message_start",
                    R"({"type":"message_start","message":{"id":"msg_1",)"
                    R"("type":"message","role":"assistant","content":[],)"
                    R"("model":"claude-test","stop_reason":null,)"
                    R"("usage":{"input_tokens":50,"output_tokens":1}}})"),
    anthropic_event("content_block_start",
                    R"({"type":"content_block_start","index":0,)"
                    R"("content_block":{"type":"text","text":""}})"),
    anthropic_event("content_block_delta",
                    R"({"type":"content_block_delta","index":0,)"
                    R"("delta":{"type":"text_delta","text":"Reading "}})"),
    anthropic_event("content_block_delta",
                    R"({"type":"content_block_delta","index":0,)"
                    R"("delta":{"type":"text_delta","text":"it."}})"),
    anthropic_event("content_block_stop",
                    R"({"type":"content_block_stop","index":0})"),
    anthropic_event("content_block_start",
                    R"({"type":"content_block_start","index":1,)"
                    R"("content_block":{"type":"tool_use","id":"toolu_01X",)"
                    R"("name":"read_file","input":{}}})")};
  std::string args = R"({"path": "a.txt", "offset": 3})";
  for (size_t i = 0; i < args.size(); i += 4)
    chunks.push_back(anthropic_event(
      "content_block_delta",
      R"({"type":"content_block_delta","index":1,"delta":)"
      R"({"type":"input_json_delta","partial_json":)"
        + json::quote(args.substr(i, 4)) + "}}"));
  chunks.push_back(anthropic_event(
    "content_block_stop", R"({"type":"content_block_stop","index":1})"));
  chunks.push_back(anthropic_event(
    "message_delta", R"({"type":"message_delta","delta":{"stop_reason":)"
                     R"("tool_use"},"usage":{"output_tokens":30}})"));
  chunks.push_back(anthropic_event("message_stop",
                                   R"({"type":"message_stop"})"));
  script_stream("/anthropic/v1/messages", chunks, 2);
  auto p = spawn(settings(endpoint("anthropic", "/anthropic/v1",
                                   "sk-ant-explicit-0001", "claude-test")));
  auto req = make_request("r-ant", true);
  req.tools_json = R"([{"name":"read_file","description":"read a file",)"
                   R"("parameters":{"type":"object","properties":)"
                   R"({"path":{"type":"string"}}}}])";
  auto out = run(p, req);
  BOOST_REQUIRE_MESSAGE(out.resp, error_text(out.err));
  auto& r = *out.resp;
  BOOST_TEST(r.error == "");
  BOOST_TEST(r.content == "Reading it.");
  BOOST_TEST(r.finish_reason == "tool_calls");
  BOOST_REQUIRE(r.tool_calls.size() == 1u);
  BOOST_TEST(r.tool_calls[0].id == "toolu_01X");
  BOOST_TEST(r.tool_calls[0].name == "read_file");
  auto parsed = json::parse(r.tool_calls[0].arguments);
  BOOST_REQUIRE(parsed);
  BOOST_TEST(parsed.v->get_string("path", "") == "a.txt");
  BOOST_TEST(parsed.v->get_int("offset", 0) == 3);
  BOOST_TEST(r.usage.input_tokens == 50);
  BOOST_TEST(r.usage.output_tokens == 30);
  BOOST_TEST(r.provider == "anthropic");
  BOOST_TEST(out.text("text") == "Reading it.");
  auto log = requests();
  BOOST_REQUIRE(log.size() == 1u);
  auto& q = log.as_array()[0];
  BOOST_TEST(q.get_string("path", "") == "/anthropic/v1/messages");
  BOOST_TEST(q["headers"].get_string("x-api-key", "")
             == "sk-ant-explicit-0001");
  auto body = json::parse(q.get_string("body", ""));
  BOOST_REQUIRE(body);
  BOOST_TEST(body.v->get_string("system", "") == "You are terse.");
  BOOST_TEST(body.v->get_bool("stream", false));
  BOOST_TEST((*body.v)["tools"].as_array()[0].find("input_schema") != nullptr);
}

BOOST_AUTO_TEST_CASE(concurrent_requests_overlap) {
  constexpr int n = 20;
  constexpr int delay_ms = 700;
  script_json("/v1/chat/completions", 200, ok_body, n,
              json::value::make_object(), delay_ms);
  auto p = spawn_custom();
  caf::scoped_actor self{*sys};
  using handle_type = decltype(self->request(p, seconds{30}, complete_atom_v,
                                             chat_request{}));
  std::vector<handle_type> handles;
  auto t0 = steady_clock::now();
  for (int i = 0; i < n; ++i)
    handles.push_back(self->request(p, seconds{30}, complete_atom_v,
                                    make_request("c" + std::to_string(i),
                                                 false)));
  int ok = 0;
  for (auto& h : handles)
    h.receive(
      [&](chat_response& r) { ok += r.content == "Hello there" ? 1 : 0; },
      [&](caf::error& e) { BOOST_TEST_MESSAGE(error_text(e)); });
  auto secs = duration<double>(steady_clock::now() - t0).count();
  BOOST_TEST_MESSAGE(n << " requests in " << secs << " s (one takes "
                       << delay_ms / 1000.0 << " s)");
  BOOST_TEST(ok == n);
  BOOST_TEST(secs < 2 * delay_ms / 1000.0);
  BOOST_TEST(requests().size() == static_cast<size_t>(n));
}

BOOST_AUTO_TEST_CASE(transport_errors_are_retried_then_reported) {
  // Nothing listens on port 9 of 127.0.0.1 (discard; closed here).
  options opts;
  auto s = settings(resolve_endpoint({"custom", "http://127.0.0.1:9/v1", "m",
                                      ""}, opts));
  s.retry.max_attempts = 2;
  auto out = run(spawn(s), make_request("r-refused", false));
  BOOST_REQUIRE(out.resp);
  BOOST_TEST_MESSAGE(out.resp->error);
  BOOST_TEST(contains(out.resp->error, "transport error"));
  BOOST_TEST(contains(out.resp->error, "after 2 attempts"));
  BOOST_TEST(out.resp->http_status == 0);
  BOOST_TEST(out.resp->attempts == 2);
}

BOOST_AUTO_TEST_CASE(empty_stream_is_retried) {
  script_stream("/v1/chat/completions", {sse("[DONE]")});
  script_stream("/v1/chat/completions", text_stream("fine"));
  auto out = run(spawn_custom(), make_request("r-empty", true));
  BOOST_REQUIRE_MESSAGE(out.resp, error_text(out.err));
  BOOST_TEST(out.resp->error == "");
  BOOST_TEST(out.resp->content == "fine");
  BOOST_TEST(out.resp->attempts == 2);
}

BOOST_AUTO_TEST_CASE(malformed_requests_are_refused) {
  auto p = spawn_custom();
  auto no_id = make_request("", false);
  auto out = run(p, no_id);
  BOOST_TEST(is_ec(out.err, ec::invalid_request));
  auto bad_tools = make_request("r-tools", false);
  bad_tools.tools_json = R"({"name": "not an array"})";
  out = run(p, bad_tools);
  BOOST_TEST(is_ec(out.err, ec::invalid_request));
  BOOST_TEST(contains(error_text(out.err), "JSON array"));
  bad_tools.tools_json = "[{broken";
  out = run(p, bad_tools);
  BOOST_TEST(is_ec(out.err, ec::invalid_request));
  // No model anywhere.
  auto s = settings(endpoint("custom", "/v1", "", ""));
  auto out2 = run(spawn(s), make_request("r-nomodel", false));
  BOOST_TEST(is_ec(out2.err, ec::invalid_request));
  BOOST_TEST(contains(error_text(out2.err), "model"));
  BOOST_TEST(requests().size() == 0u);
  // The same id twice while the first is in flight.
  script_json("/v1/chat/completions", 200, ok_body, 1,
              json::value::make_object(), 500);
  caf::scoped_actor self{*sys};
  auto first = self->request(p, seconds{30}, complete_atom_v,
                             make_request("dup", false));
  auto second = self->request(p, seconds{30}, complete_atom_v,
                              make_request("dup", false));
  caf::error dup_err;
  second.receive([](chat_response&) {},
                 [&](caf::error& e) { dup_err = std::move(e); });
  BOOST_TEST(is_ec(dup_err, ec::invalid_request));
  bool first_ok = false;
  first.receive([&](chat_response& r) { first_ok = r.error.empty(); },
                [](caf::error&) {});
  BOOST_TEST(first_ok);
  // A request model overrides the default model.
  script_json("/v1/chat/completions", 200, ok_body);
  auto req = make_request("r-model", false);
  req.model = "other-model";
  req.max_tokens = 77;
  run(p, req);
  auto log = requests();
  auto body = json::parse(log.as_array().back().get_string("body", ""));
  BOOST_TEST(body.v->get_string("model", "") == "other-model");
  BOOST_TEST(body.v->get_int("max_tokens", 0) == 77);
}

BOOST_AUTO_TEST_CASE(shutdown_answers_calls_in_flight) {
  script_json("/v1/chat/completions", 200, ok_body, 1,
              json::value::make_object(), 3000);
  auto p = spawn_custom();
  caf::scoped_actor self{*sys};
  auto handle = self->request(p, seconds{30}, complete_atom_v,
                              make_request("r-down", false));
  // In flight: the server holds the request (it answers after 3 s).
  BOOST_REQUIRE(test::wait_until([&] { return requests().size() >= 1u; }));
  auto t0 = steady_clock::now();
  caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
  caf::error err;
  handle.receive([](chat_response&) {},
                 [&](caf::error& e) { err = std::move(e); });
  BOOST_TEST(static_cast<bool>(err));
  BOOST_TEST_MESSAGE("shutdown answer: " << caf::to_string(err));
  BOOST_TEST(duration<double>(steady_clock::now() - t0).count() < 1.0);
  auto deadline = steady_clock::now() + seconds{2};
  while (http->active() != 0 && steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds{10});
  BOOST_TEST(http->active() == 0u);
}

BOOST_AUTO_TEST_CASE(settings_from_options) {
  options opts;
  opts.model.provider = "ollama";
  opts.model.default_model = "qwen";
  opts.model.fallback_provider = "llamacpp";
  opts.agent.api_max_retries = 5;
  opts.provider.request_timeout = 60;
  opts.provider.stream_idle_timeout = 7;
  opts.provider.connect_timeout = 3;
  auto s = make_provider_settings(opts, "explicit-key-0001");
  BOOST_REQUIRE(s.main.ok());
  BOOST_TEST(s.main->api_key == "explicit-key-0001");
  BOOST_REQUIRE(s.fallbacks.size() == 1u);
  BOOST_REQUIRE(s.fallbacks[0].ok());
  BOOST_TEST(s.fallbacks[0]->provider == "llamacpp");
  BOOST_TEST(s.fallbacks[0]->api_key.empty());
  BOOST_TEST(s.retry.max_attempts == 5);
  BOOST_TEST(s.request_timeout.count() == 60000);
  BOOST_TEST(s.stream_idle_timeout.count() == 7000);
  BOOST_TEST(s.connect_timeout.count() == 3000);
  opts.model.fallback_provider.clear();
  BOOST_TEST(make_provider_settings(opts).fallbacks.empty());
}

BOOST_AUTO_TEST_SUITE_END()
