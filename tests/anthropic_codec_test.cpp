#define BOOST_TEST_MODULE anthropic_codec
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "providers/anthropic_codec.hpp"
#include "providers/wire_format.hpp"
#include "base/json.hpp"

using namespace mibyan;

namespace {

json::value parse(const std::string& text) {
  auto r = json::parse(text);
  BOOST_REQUIRE_MESSAGE(r, r.error << ": " << text);
  return *r.v;
}

chat_message msg(std::string role, std::string content) {
  chat_message m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

chat_message tool_result(std::string id, std::string content) {
  auto m = msg("tool", std::move(content));
  m.tool_call_id = std::move(id);
  m.tool_name = "t";
  return m;
}

anthropic::request_options basic_options() {
  anthropic::request_options o;
  o.model = "claude-sonnet-5";
  return o;
}

std::string ev(const std::string& type, const std::string& json) {
  return "event: " + type + "\ndata: " + json + "\n\n";
}

std::string message_start(int input_tokens = 10) {
  return ev("message_start",
            R"({"type":"message_start","message":{"id":"msg_1","model":)"
            R"("claude-x","content":[],"usage":{"input_tokens":)"
              + std::to_string(input_tokens)
              + R"(,"output_tokens":1,"cache_read_input_tokens":5}}})");
}

std::string message_end(const std::string& stop, int output_tokens) {
  return ev("message_delta",
            R"({"type":"message_delta","delta":{"stop_reason":")" + stop
              + R"("},"usage":{"output_tokens":)"
              + std::to_string(output_tokens) + "}}")
         + ev("message_stop", R"({"type":"message_stop"})");
}

chat_response run_stream(const std::string& body, std::string* text = nullptr,
                         std::string* reasoning = nullptr) {
  anthropic::stream_accumulator acc;
  if (text != nullptr)
    acc.on_text([&](std::string_view s) { text->append(s); });
  if (reasoning != nullptr)
    acc.on_reasoning([&](std::string_view s) { reasoning->append(s); });
  acc.feed(body);
  return acc.finish();
}

} // namespace

// -- request -----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(system_goes_top_level_and_roles_translate) {
  chat_message a = msg("assistant", "checking");
  a.tool_calls.push_back({"toolu_01", "read", R"({"path":"x"})"});
  a.tool_calls.push_back({"call.odd/id", "list", "not json"});
  auto body = parse(anthropic::build_request(
    basic_options(),
    {msg("system", "rule one"), msg("user", "hi"), a,
     tool_result("toolu_01", "data"), tool_result("call.odd/id", ""),
     msg("system", "rule two"), msg("user", "")}));
  BOOST_TEST(body.get_string("system") == "rule one\n\nrule two");
  BOOST_TEST(body.get_bool("stream", false));
  BOOST_TEST(body.get_int("max_tokens", 0) == 128000);
  const auto& msgs = body.find("messages")->as_array();
  BOOST_REQUIRE(msgs.size() == 3u);
  BOOST_TEST(msgs[0].dump()
             == R"({"role":"user","content":[{"type":"text","text":"hi"}]})");
  const auto& blocks = msgs[1].find("content")->as_array();
  BOOST_REQUIRE(blocks.size() == 3u);
  BOOST_TEST(blocks[0].dump() == R"({"type":"text","text":"checking"})");
  BOOST_TEST(blocks[1].dump() == R"({"type":"tool_use","id":"toolu_01",)"
                                 R"("name":"read","input":{"path":"x"}})");
  BOOST_TEST(blocks[2].get_string("id") == "call_odd_id");
  BOOST_TEST(blocks[2].find("input")->dump() == "{}");
  // Both results in one user message, merged with the next user text.
  const auto& user = msgs[2].find("content")->as_array();
  BOOST_REQUIRE(user.size() == 3u);
  BOOST_TEST(user[0].dump() == R"({"type":"tool_result","tool_use_id":)"
                               R"("toolu_01","content":"data"})");
  BOOST_TEST(user[1].get_string("tool_use_id") == "call_odd_id");
  BOOST_TEST(user[1].get_string("content") == "(no output)");
  BOOST_TEST(user[2].get_string("text") == "(empty message)");
  BOOST_TEST(body.find("tools") == nullptr);
  BOOST_TEST(body.find("tool_choice") == nullptr);
  BOOST_TEST(body.find("thinking") == nullptr);
}

BOOST_AUTO_TEST_CASE(orphans_are_removed_and_same_roles_merged) {
  chat_message a = msg("assistant", "");
  a.tool_calls.push_back({"used", "f", "{}"});
  a.tool_calls.push_back({"unanswered", "g", "{}"});
  chat_message lone = msg("assistant", "");
  lone.tool_calls.push_back({"nobody", "h", "{}"});
  std::string system;
  auto msgs = anthropic::encode_messages(
    {msg("user", "a"), msg("user", "b"), a, tool_result("used", "ok"),
     tool_result("stray", "x"), lone, msg("assistant", "")},
    basic_options(), system);
  BOOST_TEST(system == "");
  const auto& arr = msgs.as_array();
  BOOST_REQUIRE(arr.size() == 4u);
  BOOST_TEST(arr[0].find("content")->size() == 2u); // "a" + "b"
  const auto& ab = arr[1].find("content")->as_array();
  BOOST_REQUIRE(ab.size() == 1u);
  BOOST_TEST(ab[0].get_string("id") == "used");
  const auto& results = arr[2].find("content")->as_array();
  BOOST_REQUIRE(results.size() == 1u);
  BOOST_TEST(results[0].get_string("tool_use_id") == "used");
  // The lone call lost its tool_use and merged with the empty assistant.
  BOOST_TEST(arr[3].get_string("role") == "assistant");
  BOOST_TEST(arr[3].find("content")->dump()
             == R"x([{"type":"text","text":"(empty)"},)x"
                R"x({"type":"text","text":"(empty)"}])x");
}

BOOST_AUTO_TEST_CASE(tools_and_tool_choice) {
  auto o = basic_options();
  o.tools = parse(R"([{"name":"b","description":"B","parameters":{
      "type":"object","properties":{"x":{"type":"integer"}}}},
    {"type":"function","function":{"name":"a"}},
    {"name":"b","description":"dup"}])");
  auto body = parse(anthropic::build_request(o, {msg("user", "x")}));
  const auto& tools = body.find("tools")->as_array();
  BOOST_REQUIRE(tools.size() == 2u);
  BOOST_TEST(tools[0].dump() == R"({"name":"a","input_schema":)"
                                R"({"type":"object","properties":{}}})");
  BOOST_TEST(tools[1].get_string("description") == "B");
  BOOST_TEST(tools[1].find("input_schema")->find("properties")->size() == 1u);
  BOOST_TEST(body.find("tool_choice")->dump() == R"({"type":"auto"})");
  o.tool_choice = "required";
  BOOST_TEST(parse(anthropic::build_request(o, {})).find("tool_choice")->dump()
             == R"({"type":"any"})");
  o.tool_choice = "b";
  BOOST_TEST(parse(anthropic::build_request(o, {})).find("tool_choice")->dump()
             == R"({"type":"tool","name":"b"})");
  o.tool_choice = "none";
  auto none = parse(anthropic::build_request(o, {}));
  BOOST_TEST(none.find("tools") == nullptr);
  BOOST_TEST(none.find("tool_choice") == nullptr);
}

BOOST_AUTO_TEST_CASE(max_tokens_thinking_and_temperature) {
  auto o = basic_options();
  o.max_tokens = 1000;
  o.temperature = 0.5;
  o.stream = false;
  auto plain = parse(anthropic::build_request(o, {}));
  BOOST_TEST(plain.get_int("max_tokens", 0) == 1000);
  BOOST_TEST(plain.find("temperature")->as_double() == 0.5);
  BOOST_TEST(plain.find("stream") == nullptr);
  o.max_tokens = 0;
  o.context_length = 32000;
  BOOST_TEST(parse(anthropic::build_request(o, {})).get_int("max_tokens", 0)
             == 31999);
  // Current models: adaptive thinking + effort.
  o.reasoning_effort = "high";
  auto adaptive = parse(anthropic::build_request(o, {}));
  BOOST_TEST(adaptive.find("thinking")->dump()
             == R"({"type":"adaptive","display":"summarized"})");
  BOOST_TEST(adaptive.find("output_config")->dump() == R"({"effort":"high"})");
  // Legacy models: a budget, temperature 1, max_tokens >= budget + 4096.
  o.model = "claude-3-7-sonnet-20250219";
  o.max_tokens = 2000;
  o.context_length = 0;
  auto legacy = parse(anthropic::build_request(o, {}));
  BOOST_TEST(legacy.find("thinking")->dump()
             == R"({"type":"enabled","budget_tokens":16000})");
  BOOST_TEST(legacy.find("temperature")->as_double() == 1.0);
  BOOST_TEST(legacy.get_int("max_tokens", 0) == 16000 + 4096);
  BOOST_TEST(legacy.find("output_config") == nullptr);
  // Haiku: no thinking at all.
  o.model = "claude-haiku-4-5-20251001";
  auto haiku = parse(anthropic::build_request(o, {}));
  BOOST_TEST(haiku.find("thinking") == nullptr);
  BOOST_TEST(haiku.find("temperature")->as_double() == 0.5);
}

BOOST_AUTO_TEST_CASE(thinking_styles_by_model) {
  using anthropic::thinking_style;
  using anthropic::thinking_style_for;
  BOOST_TEST((thinking_style_for("claude-3-7-sonnet-latest")
              == thinking_style::legacy));
  BOOST_TEST((thinking_style_for("claude-sonnet-4-20250514")
              == thinking_style::legacy));
  BOOST_TEST((thinking_style_for("claude-opus-4-1-20250805")
              == thinking_style::legacy));
  BOOST_TEST((thinking_style_for("anthropic/claude-opus-4.1")
              == thinking_style::legacy));
  BOOST_TEST((thinking_style_for("claude-sonnet-4") == thinking_style::legacy));
  BOOST_TEST((thinking_style_for("claude-sonnet-4-5")
              == thinking_style::adaptive));
  BOOST_TEST((thinking_style_for("claude-opus-4-6")
              == thinking_style::adaptive));
  BOOST_TEST((thinking_style_for("claude-sonnet-5")
              == thinking_style::adaptive));
  BOOST_TEST((thinking_style_for("claude-haiku-4-5") == thinking_style::none));
}

BOOST_AUTO_TEST_CASE(prompt_caching_breakpoints_and_extras) {
  auto o = basic_options();
  o.cache_control = true;
  o.cache_ttl_1h = true;
  o.echo_reasoning = true;
  o.extra_body = parse(R"({"metadata":{"user_id":"u"}})");
  chat_message a = msg("assistant", "answer");
  a.reasoning = "because";
  auto body = parse(anthropic::build_request(
    o, {msg("system", "sys"), msg("user", "1"), msg("assistant", "2"),
        msg("user", "3"), a}));
  BOOST_TEST(body.find("system")->dump()
             == R"([{"type":"text","text":"sys","cache_control":)"
                R"({"type":"ephemeral","ttl":"1h"}}])");
  const auto& msgs = body.find("messages")->as_array();
  BOOST_REQUIRE(msgs.size() == 4u);
  BOOST_TEST(msgs[0].find("content")->as_array()[0].find("cache_control")
             == nullptr);
  for (size_t i = 1; i < 4; ++i)
    BOOST_TEST(msgs[i].find("content")->as_array().back().find(
                 "cache_control")
               != nullptr);
  const auto& last = msgs[3].find("content")->as_array();
  BOOST_REQUIRE(last.size() == 2u);
  BOOST_TEST(last[0].dump() == R"({"type":"thinking","thinking":"because"})");
  BOOST_TEST(body.find("metadata")->dump() == R"({"user_id":"u"})");
}

// -- non-streaming responses -------------------------------------------------

BOOST_AUTO_TEST_CASE(json_response_blocks_map_to_fields) {
  auto r = anthropic::parse_response(200, R"({"id":"msg","type":"message",
    "model":"claude-x","content":[
      {"type":"thinking","thinking":"a","signature":"sig"},
      {"type":"text","text":"Hello "},
      {"type":"server_tool_use","id":"srv","name":"web_search","input":{}},
      {"type":"text","text":"world"},
      {"type":"thinking","thinking":"b"},
      {"type":"tool_use","id":"toolu_1","name":"f","input":{"x":[1,2]}}],
    "stop_reason":"tool_use","usage":{"input_tokens":12,"output_tokens":34,
      "cache_read_input_tokens":5,"cache_creation_input_tokens":6}})");
  BOOST_TEST(r.error == "");
  BOOST_TEST(r.content == "Hello world");
  BOOST_TEST(r.reasoning == "a\n\nb");
  BOOST_REQUIRE(r.tool_calls.size() == 1u);
  BOOST_TEST(r.tool_calls[0].id == "toolu_1");
  BOOST_TEST(r.tool_calls[0].arguments == R"({"x":[1,2]})");
  BOOST_TEST(r.finish_reason == "tool_calls");
  BOOST_TEST(r.model == "claude-x");
  BOOST_TEST(r.usage.input_tokens == 12);
  BOOST_TEST(r.usage.output_tokens == 34);
  BOOST_TEST(r.usage.cache_read_tokens == 5);
  BOOST_TEST(r.usage.cache_write_tokens == 6);
}

BOOST_AUTO_TEST_CASE(stop_reasons_map) {
  BOOST_TEST(anthropic::map_stop_reason("end_turn") == "stop");
  BOOST_TEST(anthropic::map_stop_reason("stop_sequence") == "stop");
  BOOST_TEST(anthropic::map_stop_reason("tool_use") == "tool_calls");
  BOOST_TEST(anthropic::map_stop_reason("max_tokens") == "length");
  BOOST_TEST(anthropic::map_stop_reason("model_context_window_exceeded")
             == "length");
  BOOST_TEST(anthropic::map_stop_reason("refusal") == "content_filter");
  BOOST_TEST(anthropic::map_stop_reason("pause_turn") == "pause_turn");
}

BOOST_AUTO_TEST_CASE(json_errors_and_empty_content) {
  auto overloaded = anthropic::parse_response(
    529, R"({"type":"error","error":{"type":"overloaded_error",)"
         R"("message":"Overloaded"}})");
  BOOST_TEST(overloaded.error == "HTTP 529: Overloaded [overloaded_error]");
  BOOST_TEST(overloaded.retryable);
  auto auth = anthropic::parse_response(
    401, R"({"type":"error","error":{"type":"authentication_error",)"
         R"("message":"invalid x-api-key"}})");
  BOOST_TEST(!auth.retryable);
  auto in_body = anthropic::parse_response(
    200, R"({"type":"error","error":{"type":"api_error","message":"oops"}})");
  BOOST_TEST(in_body.error == "provider error: oops [api_error]");
  BOOST_TEST(in_body.retryable);
  auto empty_end = anthropic::parse_response(
    200, R"({"content":[],"stop_reason":"end_turn"})");
  BOOST_TEST(empty_end.error == "");
  BOOST_TEST(empty_end.finish_reason == "stop");
  auto empty_len = anthropic::parse_response(
    200, R"({"content":[],"stop_reason":"max_tokens"})");
  BOOST_TEST(empty_len.error.find("empty response") == 0u);
  BOOST_TEST(empty_len.retryable);
  auto no_content = anthropic::parse_response(200, R"({"id":"x"})");
  BOOST_TEST(no_content.error.find("no content list") != std::string::npos);
  auto bad = anthropic::parse_response(200, "{\"content\": [");
  BOOST_TEST(bad.error.find("invalid JSON") == 0u);
  auto not_obj = anthropic::parse_response(200, "\"text\"");
  BOOST_TEST(!not_obj.error.empty());
}

// -- streaming ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(stream_with_thinking_text_and_tool_use) {
  std::string body = message_start();
  body += ev("ping", R"({"type": "ping"})");
  body += ev("content_block_start",
             R"({"type":"content_block_start","index":0,"content_block":)"
             R"({"type":"thinking","thinking":"","signature":""}})");
  body += ev("content_block_delta",
             R"({"type":"content_block_delta","index":0,"delta":)"
             R"({"type":"thinking_delta","thinking":"Let me "}})");
  body += ev("content_block_delta",
             R"({"type":"content_block_delta","index":0,"delta":)"
             R"({"type":"thinking_delta","thinking":"check."}})");
  body += ev("content_block_delta",
             R"({"type":"content_block_delta","index":0,"delta":)"
             R"({"type":"signature_delta","signature":"abc"}})");
  body += ev("content_block_stop",
             R"({"type":"content_block_stop","index":0    })");
  body += ev("content_block_start",
             R"({"type":"content_block_start","index":1,"content_block":)"
             R"({"type":"text","text":""}})");
  body += ev("content_block_delta",
             R"({"type":"content_block_delta","index":1,"delta":)"
             R"({"type":"text_delta","text":"I'll look."}})");
  body += ev("content_block_stop",
             R"({"type":"content_block_stop","index":1})");
  body += ev("content_block_start",
             R"({"type":"content_block_start","index":2,"content_block":)"
             R"({"type":"tool_use","id":"toolu_9","name":"read","input":{}}})");
  for (auto piece : {"", "{\"pa", "th\": ", "\"a.txt\"}"})
    body += ev("content_block_delta",
               R"({"type":"content_block_delta","index":2,"delta":)"
               R"({"type":"input_json_delta","partial_json":)"
                 + json::quote(piece) + "}}");
  body += ev("content_block_stop",
             R"({"type":"content_block_stop","index":2})");
  body += message_end("tool_use", 42);
  std::string text;
  std::string reasoning;
  auto r = run_stream(body, &text, &reasoning);
  BOOST_TEST(r.error == "");
  BOOST_TEST(r.content == "I'll look.");
  BOOST_TEST(text == "I'll look.");
  BOOST_TEST(r.reasoning == "Let me check.");
  BOOST_TEST(reasoning == "Let me check.");
  BOOST_REQUIRE(r.tool_calls.size() == 1u);
  BOOST_TEST(r.tool_calls[0].id == "toolu_9");
  BOOST_TEST(r.tool_calls[0].name == "read");
  BOOST_TEST(r.tool_calls[0].arguments == R"({"path": "a.txt"})");
  BOOST_TEST(r.finish_reason == "tool_calls");
  BOOST_TEST(r.model == "claude-x");
  BOOST_TEST(r.usage.input_tokens == 10);
  BOOST_TEST(r.usage.output_tokens == 42); // message_delta updates
  BOOST_TEST(r.usage.cache_read_tokens == 5);
}

BOOST_AUTO_TEST_CASE(tool_use_without_deltas_uses_the_start_input) {
  std::string body = message_start();
  body += ev("content_block_start",
             R"({"type":"content_block_start","index":0,"content_block":)"
             R"({"type":"tool_use","id":"t","name":"noargs","input":{}}})");
  body += ev("content_block_delta",
             R"({"type":"content_block_delta","index":0,"delta":)"
             R"({"type":"input_json_delta","partial_json":""}})");
  body += message_end("tool_use", 3);
  auto r = run_stream(body);
  BOOST_REQUIRE(r.tool_calls.size() == 1u);
  BOOST_TEST(r.tool_calls[0].arguments == "{}");
}

BOOST_AUTO_TEST_CASE(several_thinking_blocks_are_separated) {
  std::string body = message_start();
  for (int i = 0; i < 2; ++i) {
    body += ev("content_block_start",
               R"({"type":"content_block_start","index":)" + std::to_string(i)
                 + R"(,"content_block":{"type":"thinking","thinking":""}})");
    body += ev("content_block_delta",
               R"({"type":"content_block_delta","index":)" + std::to_string(i)
                 + R"(,"delta":{"type":"thinking_delta","thinking":"t)"
                 + std::to_string(i) + "\"}}");
  }
  body += ev("content_block_start",
             R"({"type":"content_block_start","index":2,"content_block":)"
             R"({"type":"redacted_thinking","data":"xyz"}})");
  body += message_end("end_turn", 3);
  std::string reasoning;
  auto r = run_stream(body, nullptr, &reasoning);
  BOOST_TEST(r.error == "");
  BOOST_TEST(r.reasoning == "t0\n\nt1");
  BOOST_TEST(reasoning == r.reasoning);
  BOOST_TEST(r.content == "");
  BOOST_TEST(r.finish_reason == "stop");
}

BOOST_AUTO_TEST_CASE(stream_errors) {
  std::string overloaded = message_start();
  overloaded += ev("error", R"({"type":"error","error":{"type":)"
                            R"("overloaded_error","message":"Overloaded"}})");
  auto r = run_stream(overloaded);
  BOOST_TEST(r.error == "stream error: Overloaded [overloaded_error]");
  BOOST_TEST(r.retryable);
  auto invalid = run_stream(ev("error", R"({"type":"error","error":{"type":)"
                                        R"("invalid_request_error",)"
                                        R"("message":"bad"}})"));
  BOOST_TEST(!invalid.retryable);
  auto empty = run_stream("");
  BOOST_TEST(empty.error.find("empty stream") == 0u);
  BOOST_TEST(empty.retryable);
  auto pings = run_stream(": c\n\n");
  BOOST_TEST(!pings.error.empty());
  // Cut after some text: no stop_reason.
  std::string cut = message_start();
  cut += ev("content_block_start",
            R"({"type":"content_block_start","index":0,"content_block":)"
            R"({"type":"text","text":"Hel"}})");
  auto c = run_stream(cut);
  BOOST_TEST(c.error.find("without a stop_reason") != std::string::npos);
  BOOST_TEST(c.retryable);
  BOOST_TEST(c.content == "Hel");
  // Cut inside tool input: no calls, finish = length.
  std::string cut_tool = message_start();
  cut_tool += ev("content_block_start",
                 R"({"type":"content_block_start","index":0,)"
                 R"("content_block":{"type":"tool_use","id":"t","name":"w",)"
                 R"("input":{}}})");
  cut_tool += ev("content_block_delta",
                 R"({"type":"content_block_delta","index":0,"delta":)"
                 R"({"type":"input_json_delta","partial_json":"{\"a\": "}})");
  auto ct = run_stream(cut_tool);
  BOOST_TEST(ct.error == "");
  BOOST_TEST(ct.tool_calls.empty());
  BOOST_TEST(ct.finish_reason == "length");
  // The same bad input under a real stop reason is the model's mistake, not
  // a truncation: the call is kept as sent with the provider's finish reason.
  auto bad_input = run_stream(
    cut_tool
    + ev("content_block_stop", R"({"type":"content_block_stop","index":0})")
    + message_end("tool_use", 5));
  BOOST_TEST(bad_input.error == "");
  BOOST_REQUIRE(bad_input.tool_calls.size() == 1u);
  BOOST_TEST(bad_input.tool_calls[0].arguments == "{\"a\": ");
  BOOST_TEST(bad_input.finish_reason == "tool_calls");
  // Malformed JSON in an event.
  auto bad = run_stream(message_start() + "event: content_block_start\n"
                                          "data: {\"type\": \n\n");
  BOOST_TEST(bad.error.find("malformed JSON in stream event 2") == 0u,
             bad.error);
  BOOST_TEST(bad.retryable);
  // A stream that stops with max_tokens before any block.
  auto no_blocks = run_stream(message_start() + message_end("max_tokens", 0));
  BOOST_TEST(no_blocks.error.find("empty response") == 0u);
  // stop_sequence before any output is a valid empty answer.
  auto stop_seq = run_stream(message_start() +
                             message_end("stop_sequence", 0));
  BOOST_TEST(stop_seq.error == "");
  BOOST_TEST(stop_seq.finish_reason == "stop");
}

BOOST_AUTO_TEST_CASE(decoder_dispatches_anthropic_bodies) {
  auto r = parse_body(wire_format::anthropic, 200, "application/json",
                      R"({"content":[{"type":"text","text":"hi"}],)"
                      R"("stop_reason":"end_turn"})");
  BOOST_TEST(r.content == "hi");
  std::string stream = message_start();
  stream += ev("content_block_start",
               R"({"type":"content_block_start","index":0,"content_block":)"
               R"({"type":"text","text":""}})");
  stream += ev("content_block_delta",
               R"({"type":"content_block_delta","index":0,"delta":)"
               R"({"type":"text_delta","text":"streamed"}})");
  stream += message_end("end_turn", 2);
  auto s = parse_body(wire_format::anthropic, 200, "text/event-stream",
                      "\xEF\xBB\xBF" + stream);
  BOOST_TEST(s.error == "");
  BOOST_TEST(s.content == "streamed");
  auto err = parse_body(wire_format::anthropic, 400, "application/json",
                        "not json at all");
  BOOST_TEST(err.error == "HTTP 400: not json at all");
}
