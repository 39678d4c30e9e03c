#define BOOST_TEST_MODULE openai_codec
#include <boost/test/unit_test.hpp>

#include <random>
#include <string>
#include <vector>

#include "providers/openai_codec.hpp"
#include "providers/tool_call_id.hpp"
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

std::string chunk(const std::string& delta_json,
                  const std::string& finish = "null",
                  const std::string& extra = "") {
  return "data: {\"id\":\"c1\",\"model\":\"m-1\",\"choices\":[{\"index\":0,"
         "\"delta\":" + delta_json + ",\"finish_reason\":" + finish + "}]"
         + extra + "}\n\n";
}

chat_response run_stream(const std::string& body,
                         std::string* text = nullptr,
                         std::string* reasoning = nullptr) {
  openai::stream_accumulator acc;
  if (text != nullptr)
    acc.on_text([&](std::string_view s) { text->append(s); });
  if (reasoning != nullptr)
    acc.on_reasoning([&](std::string_view s) { reasoning->append(s); });
  acc.feed(body);
  return acc.finish();
}

openai::request_options basic_options() {
  openai::request_options o;
  o.model = "test-model";
  return o;
}

} // namespace

// -- request -----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(request_has_model_messages_and_stream_options) {
  auto body = parse(openai::build_request(
    basic_options(), {msg("system", "be brief"), msg("user", "hi")}));
  BOOST_TEST(body.get_string("model") == "test-model");
  BOOST_TEST(body.get_bool("stream", false));
  BOOST_TEST(body.find("stream_options")->get_bool("include_usage", false));
  const auto& msgs = body.find("messages")->as_array();
  BOOST_REQUIRE(msgs.size() == 2u);
  BOOST_TEST(msgs[0].dump() == R"({"role":"system","content":"be brief"})");
  BOOST_TEST(msgs[1].dump() == R"({"role":"user","content":"hi"})");
  // Only the documented fields: no tools, tool_choice, limits, temperature.
  for (auto key : {"tools", "tool_choice", "max_tokens",
                   "max_completion_tokens", "temperature", "reasoning"})
    BOOST_TEST(body.find(key) == nullptr, key);
  auto no_stream = basic_options();
  no_stream.stream = false;
  auto b2 = parse(openai::build_request(no_stream, {msg("user", "x")}));
  BOOST_TEST(!b2.get_bool("stream", true));
  BOOST_TEST(b2.find("stream_options") == nullptr);
}

BOOST_AUTO_TEST_CASE(assistant_tool_calls_and_tool_results_on_the_wire) {
  chat_message a = msg("assistant", "");
  a.tool_calls.push_back({"call_1", "read_file", R"({"path":"a.txt"})"});
  a.tool_calls.push_back({"", "list", ""});
  a.reasoning = "thinking...";
  a.finish_reason = "tool_calls";
  a.timestamp_ms = 12345;
  chat_message t = msg("tool", "file body");
  t.tool_call_id = "call_1";
  t.tool_name = "read_file";
  auto body = parse(openai::build_request(basic_options(),
                                          {msg("user", "go"), a, t}));
  const auto& msgs = body.find("messages")->as_array();
  BOOST_REQUIRE(msgs.size() == 3u);
  const auto& wa = msgs[1];
  BOOST_TEST(wa.find("content")->is_null());
  BOOST_TEST(wa.find("reasoning") == nullptr);
  BOOST_TEST(wa.find("reasoning_content") == nullptr);
  BOOST_TEST(wa.find("finish_reason") == nullptr);
  BOOST_TEST(wa.find("timestamp_ms") == nullptr);
  const auto& calls = wa.find("tool_calls")->as_array();
  BOOST_REQUIRE(calls.size() == 2u);
  BOOST_TEST(calls[0].dump()
             == R"({"id":"call_1","type":"function","function":{"name":)"
                R"("read_file","arguments":"{\"path\":\"a.txt\"}"}})");
  // A missing id is generated deterministically; empty arguments are {}.
  BOOST_TEST(calls[1].get_string("id") == make_tool_call_id("list", "{}", 1));
  BOOST_TEST(calls[1].find("function")->get_string("arguments") == "{}");
  BOOST_TEST(msgs[2].dump() == R"({"role":"tool","tool_call_id":"call_1",)"
                               R"("name":"read_file","content":"file body"})");
  // Assistant text next to tool calls is kept as a string.
  a.content = "let me look";
  auto b2 = parse(openai::build_request(basic_options(), {a}));
  BOOST_TEST(b2.find("messages")->as_array()[0].get_string("content")
             == "let me look");
  // A plain assistant message has string content and no tool_calls key.
  auto b3 = parse(openai::build_request(basic_options(),
                                        {msg("assistant", "")}));
  const auto& plain = b3.find("messages")->as_array()[0];
  BOOST_TEST(plain.find("content")->is_string());
  BOOST_TEST(plain.find("tool_calls") == nullptr);
}

BOOST_AUTO_TEST_CASE(reasoning_echo_and_developer_role) {
  auto o = basic_options();
  o.model = "deepseek-reasoner";
  o.echo_reasoning_content = true;
  chat_message a = msg("assistant", "4");
  a.reasoning = "2+2";
  auto body = parse(openai::build_request(o, {msg("system", "s"), a}));
  const auto& msgs = body.find("messages")->as_array();
  BOOST_TEST(msgs[0].get_string("role") == "system");
  BOOST_TEST(msgs[1].get_string("reasoning_content") == "2+2");
  for (auto model : {"gpt-5.1", "openai/gpt-5-mini", "codex-mini"}) {
    o.model = model;
    auto b = parse(openai::build_request(o, {msg("system", "s")}));
    BOOST_TEST(b.find("messages")->as_array()[0].get_string("role")
                 == "developer",
               model);
  }
}

BOOST_AUTO_TEST_CASE(tools_are_wrapped_sorted_and_deduplicated) {
  auto o = basic_options();
  o.tools = parse(R"([
    {"name":"zeta","description":"last","parameters":{"type":"object",
      "properties":{"a":{"type":"string"}},"required":["a"]}},
    {"type":"function","function":{"name":"alpha","description":"first",
      "parameters":{"type":"object","properties":{}}}},
    {"name":"empty"},
    {"name":"zeta","description":"duplicate"},
    {"description":"nameless"},
    42
  ])");
  auto body = parse(openai::build_request(o, {msg("user", "x")}));
  const auto& tools = body.find("tools")->as_array();
  BOOST_REQUIRE(tools.size() == 3u);
  BOOST_TEST(tools[0].get_string("type") == "function");
  BOOST_TEST(tools[0].find("function")->get_string("name") == "alpha");
  BOOST_TEST(tools[1].find("function")->get_string("name") == "empty");
  BOOST_TEST(tools[1].find("function")->find("parameters")->dump()
             == R"({"type":"object","properties":{}})");
  BOOST_TEST(tools[2].find("function")->get_string("description") == "last");
  BOOST_TEST(tools[2].find("function")->find("parameters")->find("required")
               ->size()
             == 1u);
  BOOST_TEST(body.find("tool_choice") == nullptr);
  // Not an array: no tools key.
  o.tools = parse(R"({"name":"x"})");
  BOOST_TEST(parse(openai::build_request(o, {})).find("tools") == nullptr);
}

// The provider renders its tools once per tool list and passes the text
// (request_options::tools_json): the body must be byte for byte the one
// built from the tools themselves, whatever else the request carries.
BOOST_AUTO_TEST_CASE(pre_rendered_tools_give_the_same_bytes) {
  auto tools = parse(R"([
    {"name":"zeta","description":"last \"quoted\"","parameters":{
      "type":"object","properties":{"a":{"type":"string"}}}},
    {"type":"function","function":{"name":"alpha","description":"first",
      "parameters":{"type":"object","properties":{}}}},
    {"name":"empty"}
  ])");
  auto rendered = openai::render_tools(tools);
  BOOST_TEST(!rendered.empty());
  BOOST_TEST(openai::render_tools(parse("[]")).empty());
  BOOST_TEST(openai::render_tools(parse("null")).empty());
  std::vector<chat_message> history{msg("system", "s"), msg("user", "x"),
                                    msg("assistant", "y")};
  for (int variant = 0; variant < 32; ++variant) {
    auto o = basic_options();
    o.stream = (variant & 1) != 0;
    if ((variant & 2) != 0)
      o.max_tokens = 777;
    if ((variant & 4) != 0)
      o.temperature = 0.5;
    if ((variant & 8) != 0)
      o.reasoning_effort = "low";
    if ((variant & 16) != 0)
      o.extra_body = parse(R"({"tools":[],"service_tier":"flex"})");
    o.tools = tools;
    auto from_tools = openai::build_request(o, history);
    o.tools = json::value{};
    o.tools_json = rendered;
    BOOST_TEST(openai::build_request(o, history) == from_tools,
               "variant " << variant);
    // No tools either way: no "tools" member.
    o.tools_json.clear();
    auto none = openai::build_request(o, history);
    BOOST_TEST((none.find("\"tools\"") == std::string::npos) == (variant < 16));
  }
}

BOOST_AUTO_TEST_CASE(limits_temperature_reasoning_and_extra_body) {
  auto o = basic_options();
  o.max_tokens = 512;
  o.temperature = 0.25;
  o.reasoning_effort = "high";
  o.extra_body = parse(R"({"provider":{"order":["a"]},"stream":false,
                          "service_tier":"flex"})");
  auto body = parse(openai::build_request(o, {msg("user", "x")}));
  BOOST_TEST(body.get_int("max_tokens", 0) == 512);
  BOOST_TEST(body.find("temperature")->as_double() == 0.25);
  BOOST_TEST(body.find("reasoning")->dump()
             == R"({"enabled":true,"effort":"high"})");
  BOOST_TEST(body.find("provider")->dump() == R"({"order":["a"]})");
  BOOST_TEST(body.get_string("service_tier") == "flex");
  BOOST_TEST(!body.get_bool("stream", true)); // extra body wins
  o.max_completion_tokens = true;
  auto b2 = parse(openai::build_request(o, {}));
  BOOST_TEST(b2.find("max_tokens") == nullptr);
  BOOST_TEST(b2.get_int("max_completion_tokens", 0) == 512);
}

BOOST_AUTO_TEST_CASE(max_completion_tokens_rule) {
  using openai::wants_max_completion_tokens;
  BOOST_TEST(wants_max_completion_tokens("https://api.openai.com/v1", "x"));
  BOOST_TEST(wants_max_completion_tokens(
    "https://my.openai.azure.com/openai/deployments/d", "x"));
  BOOST_TEST(wants_max_completion_tokens("https://api.githubcopilot.com",
                                         "x"));
  BOOST_TEST(wants_max_completion_tokens("http://localhost:8000/v1",
                                         "gpt-4o-mini"));
  BOOST_TEST(wants_max_completion_tokens("", "openai/gpt-4.1"));
  BOOST_TEST(wants_max_completion_tokens("", "gpt-5"));
  BOOST_TEST(wants_max_completion_tokens("", "o3-mini"));
  BOOST_TEST(!wants_max_completion_tokens("https://openrouter.ai/api/v1",
                                          "anthropic/claude-sonnet-4.5"));
  BOOST_TEST(!wants_max_completion_tokens("https://api.openai.com.evil.io",
                                          "llama"));
  BOOST_TEST(!wants_max_completion_tokens("", "ollama"));
}

// -- non-streaming responses -------------------------------------------------

BOOST_AUTO_TEST_CASE(json_response_with_text_reasoning_and_usage) {
  auto r = openai::parse_response(200, R"({"model":"m","choices":[{"index":0,
    "message":{"role":"assistant","content":"Hello","reasoning_content":"hm"},
    "finish_reason":"stop"}],"usage":{"prompt_tokens":10,
    "completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4},
    "completion_tokens_details":{"reasoning_tokens":2}}})");
  BOOST_TEST(r.error == "");
  BOOST_TEST(r.content == "Hello");
  BOOST_TEST(r.reasoning == "hm");
  BOOST_TEST(r.finish_reason == "stop");
  BOOST_TEST(r.model == "m");
  BOOST_TEST(r.http_status == 200);
  BOOST_TEST(r.usage.input_tokens == 10);
  BOOST_TEST(r.usage.output_tokens == 3);
  BOOST_TEST(r.usage.cache_read_tokens == 4);
  BOOST_TEST(r.usage.reasoning_tokens == 2);
  BOOST_TEST(!r.usage.has_cost); // no usage.cost: unknown, not 0
}

BOOST_AUTO_TEST_CASE(openrouter_usage_cost_is_read) {
  auto r = openai::parse_response(200, R"({"model":"m","choices":[{"index":0,
    "message":{"role":"assistant","content":"x"},"finish_reason":"stop"}],
    "usage":{"prompt_tokens":10,"completion_tokens":3,"cost":0.00123}})");
  BOOST_TEST(r.usage.has_cost);
  BOOST_TEST(r.usage.cost_usd == 0.00123, boost::test_tools::tolerance(1e-12));
  auto bad = openai::parse_response(200, R"({"choices":[{"message":{
    "content":"x"}}],"usage":{"prompt_tokens":1,"cost":"free"}})");
  BOOST_TEST(!bad.usage.has_cost);
  auto negative = openai::parse_response(200, R"({"choices":[{"message":{
    "content":"x"}}],"usage":{"prompt_tokens":1,"cost":-1}})");
  BOOST_TEST(!negative.usage.has_cost);
  // Streamed: the cost comes with the usage of the last chunk.
  std::string body = chunk(R"({"role":"assistant","content":"hi"})");
  body += chunk("{}", "\"stop\"",
                R"(,"usage":{"prompt_tokens":5,"completion_tokens":1,"cost":0.5})");
  body += "data: [DONE]\n\n";
  auto s = run_stream(body);
  BOOST_TEST(s.usage.has_cost);
  BOOST_TEST(s.usage.cost_usd == 0.5);
}

BOOST_AUTO_TEST_CASE(json_response_with_tool_calls_and_odd_shapes) {
  auto r = openai::parse_response(200, R"({"choices":[{"message":{
    "content":[{"type":"text","text":"a"},"b",{"type":"thinking",
      "thinking":[{"type":"text","text":"t"}]}],
    "tool_calls":[{"id":7,"type":"function","function":{"name":"f",
      "arguments":{"x":1}}},{"function":{"name":"g","arguments":""}}]},
    "finish_reason":3}]})");
  BOOST_TEST(r.error == "");
  BOOST_TEST(r.content == "ab");
  BOOST_TEST(r.reasoning == "t");
  BOOST_REQUIRE(r.tool_calls.size() == 2u);
  BOOST_TEST(r.tool_calls[0].id == "7");
  BOOST_TEST(r.tool_calls[0].arguments == R"({"x":1})");
  BOOST_TEST(r.tool_calls[1].id == make_tool_call_id("g", "{}", 1));
  BOOST_TEST(r.tool_calls[1].arguments == "{}");
  BOOST_TEST(r.finish_reason == "3");
  // null finish reason -> stop; content object flattened.
  auto r2 = openai::parse_response(200, R"({"choices":[{"message":{
    "content":{"type":"text","text":"obj"}},"finish_reason":null}]})");
  BOOST_TEST(r2.content == "obj");
  BOOST_TEST(r2.finish_reason == "stop");
}

BOOST_AUTO_TEST_CASE(refusal_becomes_content_filter) {
  auto r = openai::parse_response(200, R"({"choices":[{"message":{
    "content":null,"refusal":"I can't"},"finish_reason":"stop"}]})");
  BOOST_TEST(r.error == "");
  BOOST_TEST(r.content == "I can't");
  BOOST_TEST(r.finish_reason == "content_filter");
}

BOOST_AUTO_TEST_CASE(invalid_bodies_are_retryable_errors) {
  auto no_choices = openai::parse_response(200, R"({"id":"x"})");
  BOOST_TEST(no_choices.error.find("no choices") != std::string::npos);
  BOOST_TEST(no_choices.retryable);
  auto empty_choices = openai::parse_response(200, R"({"choices":[]})");
  BOOST_TEST(!empty_choices.error.empty());
  auto bad = openai::parse_response(200, "{\"choices\":[");
  BOOST_TEST(bad.error.find("invalid JSON") != std::string::npos);
  // A complete 2xx body that does not parse would fail the same way again.
  BOOST_TEST(!bad.retryable);
  auto html = openai::parse_response(200, "<html>gateway</html>");
  BOOST_TEST(html.error.find("<html>gateway</html>") != std::string::npos);
  auto arr = openai::parse_response(200, "[1,2]");
  BOOST_TEST(arr.error.find("array") != std::string::npos);
  auto empty = openai::parse_response(200, "");
  BOOST_TEST(!empty.error.empty());
  std::string binary(300, '\xff');
  auto bin = openai::parse_response(200, binary);
  BOOST_TEST(!bin.error.empty());
  BOOST_TEST(json::sanitize_utf8(bin.error) == bin.error);
}

BOOST_AUTO_TEST_CASE(http_errors_carry_the_provider_message) {
  auto r429 = openai::parse_response(
    429, R"({"error":{"message":"Rate limit reached","type":"requests",
            "code":"rate_limit_exceeded"}})");
  BOOST_TEST(r429.error.rfind("HTTP 429: Rate limit reached", 0) == 0);
  BOOST_TEST(r429.retryable);
  BOOST_TEST(r429.http_status == 429);
  auto r500 = openai::parse_response(500, "Internal Server Error");
  BOOST_TEST(r500.error == "HTTP 500: Internal Server Error");
  BOOST_TEST(r500.retryable);
  auto r503 = openai::parse_response(503, "");
  BOOST_TEST(r503.error == "HTTP 503: empty response body");
  BOOST_TEST(r503.retryable);
  auto r400 = openai::parse_response(400, R"({"error":"bad thing"})");
  BOOST_TEST(r400.error == "HTTP 400: bad thing");
  BOOST_TEST(!r400.retryable);
  auto r422 = openai::parse_response(
    422, R"({"detail":[{"msg":"extra inputs are not permitted"}]})");
  BOOST_TEST(r422.error.find("extra inputs are not permitted")
             != std::string::npos);
  BOOST_TEST(!r422.retryable);
  auto r408 = openai::parse_response(408, R"({"message":"timeout"})");
  BOOST_TEST(r408.error == "HTTP 408: timeout");
  BOOST_TEST(r408.retryable);
  // An error object in a 200 body.
  auto in_body = openai::parse_response(
    200, R"({"error":{"message":"upstream overloaded","code":502}})");
  BOOST_TEST(in_body.error.find("upstream overloaded") != std::string::npos);
  BOOST_TEST(in_body.retryable);
  // Long bodies are cut.
  std::string big(100000, 'x');
  auto huge = openai::parse_response(502, big);
  BOOST_TEST(huge.error.size() < 400u);
}

// -- streaming ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(tool_call_arguments_split_across_many_deltas) {
  // docs/providers.md, "Streaming" acceptance: many argument deltas, usage on the final
  // chunk.
  std::string args
    = R"({"path":"/tmp/a b.txt","limit":100,"deep":{"x":[1,2]}})";
  std::string body = chunk(R"({"role":"assistant","content":null})");
  body += chunk(R"({"tool_calls":[{"index":0,"id":"call_A","type":"function",)"
                R"("function":{"name":"read_file","arguments":""}}]})");
  for (char c : args) {
    std::string piece(1, c);
    body += chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":)"
                  + json::quote(piece) + "}}]}");
  }
  body += chunk("{}", "\"tool_calls\"",
                R"(,"usage":{"prompt_tokens":50,"completion_tokens":20})");
  body += "data: [DONE]\n\n";
  auto r = run_stream(body);
  BOOST_TEST(r.error == "");
  BOOST_REQUIRE(r.tool_calls.size() == 1u);
  BOOST_TEST(r.tool_calls[0].id == "call_A");
  BOOST_TEST(r.tool_calls[0].name == "read_file");
  BOOST_TEST(r.tool_calls[0].arguments == args);
  BOOST_TEST(r.finish_reason == "tool_calls");
  BOOST_TEST(r.usage.input_tokens == 50);
  BOOST_TEST(r.usage.output_tokens == 20);
  BOOST_TEST(r.model == "m-1");
}

BOOST_AUTO_TEST_CASE(parallel_calls_names_assigned_ids_and_index_reuse) {
  std::string body;
  // Two calls by index, interleaved; the name is resent in full.
  body += chunk(R"({"tool_calls":[{"index":1,"id":"b","function":{"name":"g",)"
                R"("arguments":"{\"y\""}}]})");
  body += chunk(R"({"tool_calls":[{"index":0,"id":"a","function":{"name":"f",)"
                R"("arguments":"{}"}}]})");
  body += chunk(R"({"tool_calls":[{"index":1,"function":{"name":"g",)"
                R"("arguments":":2}"}}]})");
  // A server reusing index 0 for a new call with a new id; integer id.
  body += chunk(R"({"tool_calls":[{"index":0,"id":9,"function":{"name":"h",)"
                R"("arguments":"{\"z\":3}"}}]})");
  // Missing index -> 0 (continues the last slot at index 0).
  body += chunk(R"({"tool_calls":[{"function":{"arguments":""}}]})",
                "\"tool_calls\"");
  body += "data: [DONE]\n\n";
  auto r = run_stream(body);
  BOOST_TEST(r.error == "");
  BOOST_REQUIRE(r.tool_calls.size() == 3u);
  BOOST_TEST(r.tool_calls[0].id == "a");
  BOOST_TEST(r.tool_calls[0].name == "f");
  BOOST_TEST(r.tool_calls[1].id == "9");
  BOOST_TEST(r.tool_calls[1].name == "h");
  BOOST_TEST(r.tool_calls[1].arguments == R"({"z":3})");
  BOOST_TEST(r.tool_calls[2].id == "b");
  BOOST_TEST(r.tool_calls[2].name == "g");
  BOOST_TEST(r.tool_calls[2].arguments == R"({"y":2})");
}

BOOST_AUTO_TEST_CASE(text_callback_stops_once_a_tool_call_starts) {
  std::string body = chunk(R"({"reasoning_content":"think "})");
  body += chunk(R"({"reasoning":"more"})");
  body += chunk(R"({"content":"Hel"})");
  body += chunk(R"({"content":"lo"})");
  body += chunk(R"({"tool_calls":[{"index":0,"id":"c","function":{"name":"f",)"
                R"("arguments":"{}"}}]})");
  body += chunk(R"({"content":" after"})", "\"tool_calls\"");
  body += "data: [DONE]\n\n";
  std::string text;
  std::string reasoning;
  auto r = run_stream(body, &text, &reasoning);
  BOOST_TEST(r.content == "Hello after");
  BOOST_TEST(text == "Hello");
  BOOST_TEST(r.reasoning == "think more");
  BOOST_TEST(reasoning == "think more");
}

BOOST_AUTO_TEST_CASE(reasoning_details_are_only_a_fallback) {
  std::string with_plain = chunk(
    R"({"reasoning":"abc","reasoning_details":[{"type":"reasoning.text",)"
    R"("text":"abc"}]})", "\"stop\"");
  BOOST_TEST(run_stream(with_plain + "data: [DONE]\n\n").reasoning == "abc");
  std::string only_details = chunk(
    R"({"content":"x","reasoning_details":[{"type":"reasoning.summary",)"
    R"("summary":"sum"},{"type":"reasoning.encrypted","data":"zzz"}]})",
    "\"stop\"");
  BOOST_TEST(run_stream(only_details).reasoning == "sum");
}

BOOST_AUTO_TEST_CASE(usage_on_any_chunk_and_x_groq) {
  std::string body = chunk(R"({"content":"a"})", "null",
                           R"(,"usage":{"prompt_tokens":1,)"
                           R"("completion_tokens":1})");
  body += chunk(R"({"content":"b"})", "\"stop\"",
                R"(,"x_groq":{"usage":{"prompt_tokens":7,)"
                R"("completion_tokens":2}})");
  auto r = run_stream(body);
  BOOST_TEST(r.error == "");
  BOOST_TEST(r.usage.input_tokens == 7);
  BOOST_TEST(r.usage.output_tokens == 2);
  // Empty choices carry model and usage.
  std::string b2 = chunk(R"({"content":"a"})", "\"stop\"");
  b2 += R"(data: {"choices":[],"model":"late","usage":{"prompt_tokens":3,)"
        R"("completion_tokens":4}})" "\n\n";
  auto r2 = run_stream(b2);
  BOOST_TEST(r2.model == "late");
  BOOST_TEST(r2.usage.output_tokens == 4);
}

BOOST_AUTO_TEST_CASE(malformed_json_chunk_is_a_clear_error) {
  std::string body = chunk(R"({"content":"ok"})");
  body += "data: {\"choices\":[{\"delta\":{\"content\":\"x\"\n\n";
  body += chunk(R"({"content":"ignored"})", "\"stop\"");
  auto r = run_stream(body);
  BOOST_TEST(r.error.find("malformed JSON in stream chunk 2") == 0u,
             r.error);
  BOOST_TEST(r.retryable);
  BOOST_TEST(r.content == "ok"); // later chunks were not used
  auto scalar = run_stream("data: 42\n\n");
  BOOST_TEST(scalar.error.find("not a JSON object") != std::string::npos);
  std::string junk;
  std::mt19937 rng{3};
  for (int i = 0; i < 50000; ++i)
    junk += static_cast<char>(rng() & 0xff);
  auto garbage = run_stream("data: " + junk + "\n\n");
  BOOST_TEST(!garbage.error.empty());
}

BOOST_AUTO_TEST_CASE(empty_and_cut_streams_are_errors) {
  auto nothing = run_stream("");
  BOOST_TEST(nothing.error.find("empty stream") == 0u);
  BOOST_TEST(nothing.retryable);
  auto only_comments = run_stream(": keep-alive\n\n: again\n\n");
  BOOST_TEST(only_comments.error.find("empty stream") == 0u);
  auto only_done = run_stream("data: [DONE]\n\n");
  BOOST_TEST(only_done.error.find("empty stream") == 0u);
  auto role_only = run_stream(chunk(R"({"role":"assistant","content":""})")
                              + "data: [DONE]\n\n");
  BOOST_TEST(!role_only.error.empty());
  // Text but neither a finish reason nor [DONE]: the connection dropped.
  auto cut = run_stream(chunk(R"({"content":"partial ans"})"));
  BOOST_TEST(cut.error.find("without a finish reason") != std::string::npos);
  BOOST_TEST(cut.retryable);
  BOOST_TEST(cut.content == "partial ans");
  // [DONE] without a finish reason is accepted (some routers omit it).
  auto done = run_stream(chunk(R"({"content":"x"})") + "data: [DONE]\n\n");
  BOOST_TEST(done.error == "");
  BOOST_TEST(done.finish_reason == "");
  // An unterminated final event is still used.
  auto tail = run_stream(chunk(R"({"content":"x"})") +
                         R"(data: {"choices":[{"delta":{},)"
                         R"("finish_reason":"stop"}]})");
  BOOST_TEST(tail.error == "");
  BOOST_TEST(tail.finish_reason == "stop");
}

BOOST_AUTO_TEST_CASE(truncated_tool_arguments) {
  std::string start = chunk(
    R"({"tool_calls":[{"index":0,"id":"c","function":{"name":"write",)"
    R"("arguments":"{\"content\":\"abc"}}]})");
  // Dropped mid-call without a finish reason: no calls, finish = length.
  auto dropped = run_stream(start);
  BOOST_TEST(dropped.error == "");
  BOOST_TEST(dropped.tool_calls.empty());
  BOOST_TEST(dropped.finish_reason == "length");
  // With a finish reason the provider did not truncate: the calls are kept
  // verbatim and the finish reason is the provider's, so the agent loop can
  // answer the bad call with the parser's error instead of ending the turn.
  auto finished = run_stream(start + chunk("{}", "\"tool_calls\""));
  BOOST_TEST(finished.error == "");
  BOOST_REQUIRE(finished.tool_calls.size() == 1u);
  BOOST_TEST(finished.tool_calls[0].arguments == R"({"content":"abc)");
  BOOST_TEST(finished.finish_reason == "tool_calls");
}

BOOST_AUTO_TEST_CASE(mid_stream_errors) {
  std::string body = chunk(R"({"content":"a"})");
  body += R"(data: {"error":{"message":"Overloaded","type":"server_error"}})"
          "\n\n";
  body += chunk(R"({"content":"b"})", "\"stop\"");
  body += "data: [DONE]\n\n";
  auto r = run_stream(body);
  BOOST_TEST(r.error == "stream error: Overloaded [server_error]");
  BOOST_TEST(r.retryable);
  auto groq = run_stream(chunk(R"({"content":"a"})")
                         + "event: error\ndata: {\"error\":{\"message\":"
                           "\"bad tool\",\"status_code\":400}}\n\n");
  BOOST_TEST(groq.error.find("bad tool") != std::string::npos);
  BOOST_TEST(!groq.retryable);
  auto bare = run_stream("event: error\ndata: {\"message\":\"boom\"}\n\n");
  BOOST_TEST(bare.error == "stream error: boom");
  auto str = run_stream("data: {\"error\":\"quota exceeded\"}\n\n");
  BOOST_TEST(str.error == "stream error: quota exceeded");
}

BOOST_AUTO_TEST_CASE(oversized_event_is_an_error) {
  openai::stream_accumulator acc{1024};
  acc.feed("data: " + std::string(5000, 'x'));
  auto r = acc.finish();
  BOOST_TEST(r.error.find("SSE line longer than 1024") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(legacy_function_call_and_message_instead_of_delta) {
  std::string body
    = chunk(R"({"function_call":{"name":"f","arguments":"{\"a\""}})");
  body += chunk(R"({"function_call":{"arguments":":1}"}})",
                "\"function_call\"");
  auto r = run_stream(body);
  BOOST_REQUIRE(r.tool_calls.size() == 1u);
  BOOST_TEST(r.tool_calls[0].name == "f");
  BOOST_TEST(r.tool_calls[0].arguments == R"({"a":1})");
  BOOST_TEST(r.tool_calls[0].id == make_tool_call_id("f", R"({"a":1})", 0));
  auto msg_only = run_stream(
    R"(data: {"choices":[{"message":{"content":"whole"},)"
    R"("finish_reason":"stop"}]})"
    "\n\n");
  BOOST_TEST(msg_only.content == "whole");
}

BOOST_AUTO_TEST_CASE(streaming_request_answered_with_json) {
  auto r = parse_body(wire_format::openai, 200, "text/event-stream",
                      R"({"choices":[{"message":{"content":"hi"},)"
                      R"("finish_reason":"stop"}]})");
  BOOST_TEST(r.error == "");
  BOOST_TEST(r.content == "hi");
  auto sse_as_json = parse_body(wire_format::openai, 200, "application/json",
                                chunk(R"({"content":"yo"})", "\"stop\""));
  BOOST_TEST(sse_as_json.content == "yo");
  auto empty = parse_body(wire_format::openai, 200, "application/json", "");
  BOOST_TEST(!empty.error.empty());
  auto empty_sse = parse_body(wire_format::openai, 200,
                              "text/event-stream", "  \n");
  BOOST_TEST(empty_sse.error.find("empty stream") == 0u);
  auto err = parse_body(wire_format::openai, 429, "text/event-stream",
                        R"({"error":{"message":"slow down"}})");
  BOOST_TEST(err.error == "HTTP 429: slow down");
  BOOST_TEST(err.retryable);
  response_decoder capped{wire_format::openai, 200, "application/json", 16};
  capped.feed(R"({"choices":[{"message":{"content":"too long"}}]})");
  auto c = capped.finish();
  BOOST_TEST(c.error.find("exceeds 16 bytes") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(tool_call_ids_are_deterministic) {
  BOOST_TEST(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb924"
                               "27ae41e4649b934ca495991b7852b855");
  BOOST_TEST(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223"
                                  "b00361a396177a9cb410ff61f20015ad");
  std::string million(1000000, 'a');
  BOOST_TEST(sha256_hex(million) == "cdc76e5c9914fb9281a1c7e284d73e67"
                                    "f1809a48a497200e046d39ccc7112cd0");
  // call_ + first 12 hex of sha256("square_root:{}:0")
  BOOST_TEST(make_tool_call_id("square_root", "{}", 0) == "call_c8b21d8d5738");
  BOOST_TEST(make_tool_call_id("f", "{}", 0)
             != make_tool_call_id("f", "{}", 1));
  BOOST_TEST(sanitize_tool_call_id("toolu_01.a/b c", 0) == "toolu_01_a_b_c");
  BOOST_TEST(sanitize_tool_call_id("", 3) == "tool_3");
}
