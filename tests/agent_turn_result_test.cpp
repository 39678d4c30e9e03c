#define BOOST_TEST_MODULE agent_turn_result
#include <boost/test/unit_test.hpp>

#include <string>

#include "agent/turn_result.hpp"

using namespace mibyan;

BOOST_AUTO_TEST_CASE(exit_names_round_trip) {
  const char* names[] = {"completed", "interrupted_by_user",
                         "budget_exhausted", "max_iterations_reached",
                         "guardrail_halt", "empty_response_exhausted",
                         "invalid_tool_calls", "truncated", "provider_error",
                         "error"};
  for (auto name : names) {
    turn_exit x = turn_exit::error;
    BOOST_TEST(from_string(name, x), name);
    BOOST_TEST(std::string{to_string(x)} == name);
  }
  turn_exit x = turn_exit::truncated;
  BOOST_TEST(!from_string("nope", x));
  BOOST_TEST(!from_string("", x));
  BOOST_TEST(!from_string("Completed", x));
  BOOST_TEST((x == turn_exit::truncated));
}

BOOST_AUTO_TEST_CASE(detailed_exit_texts) {
  BOOST_TEST(text_response_reason("stop")
             == "text_response(finish_reason=stop)");
  BOOST_TEST(text_response_reason("")
             == "text_response(finish_reason=unknown)");
  BOOST_TEST(max_iterations_reason(90, 90) == "max_iterations_reached(90/90)");
  turn_result r;
  r.exit = turn_exit::budget_exhausted;
  BOOST_TEST(turn_exit_reason(r) == "budget_exhausted");
  r.exit_detail = max_iterations_reason(3, 3);
  BOOST_TEST(turn_exit_reason(r) == "max_iterations_reached(3/3)");
}

BOOST_AUTO_TEST_CASE(completed_rule) {
  turn_result r;
  r.max_iterations = 10;
  r.api_calls = 4;
  BOOST_TEST(!compute_completed(r));  // no final response
  r.final_response = "answer";
  BOOST_TEST(compute_completed(r));
  r.failed = true;
  BOOST_TEST(!compute_completed(r));
  r.failed = false;
  r.api_calls = 10;
  r.exit = turn_exit::max_iterations_reached;
  BOOST_TEST(!compute_completed(r));  // at the cap, not a text response
  r.exit = turn_exit::completed;
  BOOST_TEST(compute_completed(r));   // text response on the last call
}

BOOST_AUTO_TEST_CASE(json_shape_of_a_completed_turn) {
  turn_result r;
  r.final_response = "The answer is 42.";
  r.last_reasoning = "thought";
  r.api_calls = 2;
  r.max_iterations = 90;
  r.completed = true;
  r.exit_detail = text_response_reason("stop");
  r.session_id = "s1";
  r.provider.model = "m";
  r.provider.provider = "openai";
  r.provider.base_url = "http://127.0.0.1:1/v1";
  r.usage.input_tokens = 100;
  r.usage.output_tokens = 20;
  r.usage.cache_read_tokens = 50;
  r.usage.cache_write_tokens = 5;
  r.usage.reasoning_tokens = 7;
  r.last_prompt_tokens = 155;
  chat_message user;
  user.role = "user";
  user.content = "q";
  chat_message call;
  call.role = "assistant";
  call.tool_calls.push_back(tool_call{"c1", "read_file", R"({"path":"a"})"});
  call.finish_reason = "tool_calls";
  call.reasoning = "r";
  chat_message res;
  res.role = "tool";
  res.tool_call_id = "c1";
  res.tool_name = "read_file";
  res.content = "{}";
  res.timestamp_ms = 1700000000000;
  r.messages = {user, call, res};
  auto j = turn_result_json(r);
  BOOST_TEST(j.get_string("final_response") == "The answer is 42.");
  BOOST_TEST(j.get_string("last_reasoning") == "thought");
  BOOST_TEST(j.get_int("api_calls", -1) == 2);
  BOOST_TEST(j.get_bool("completed", false));
  BOOST_TEST(!j.get_bool("failed", true));
  BOOST_TEST(!j.get_bool("partial", true));
  BOOST_TEST(!j.get_bool("interrupted", true));
  BOOST_TEST(j.get_string("turn_exit_reason")
             == "text_response(finish_reason=stop)");
  BOOST_TEST(j.get_string("exit_reason") == "completed");
  BOOST_TEST(j.get_string("session_id") == "s1");
  BOOST_TEST(j.get_string("provider") == "openai");
  BOOST_TEST(j.get_int("prompt_tokens", -1) == 155);
  BOOST_TEST(j.get_int("completion_tokens", -1) == 20);
  BOOST_TEST(j.get_int("total_tokens", -1) == 175);
  BOOST_TEST(j.get_int("reasoning_tokens", -1) == 7);
  BOOST_TEST(j.get_int("cache_read_tokens", -1) == 50);
  BOOST_TEST(j.get_int("last_prompt_tokens", -1) == 155);
  BOOST_TEST(j.find("error")->is_null());
  BOOST_TEST(j.find("interrupt_message") == nullptr);
  BOOST_TEST(j.find("cleanup_errors") == nullptr);
  BOOST_TEST(j.find("pending_steer") == nullptr);
  BOOST_TEST(j.find("retryable") == nullptr);
  BOOST_TEST(j.find("replayed") == nullptr);
  auto* msgs = j.find("messages");
  BOOST_REQUIRE(msgs != nullptr);
  BOOST_REQUIRE(msgs->size() == 3u);
  auto& m1 = msgs->as_array()[1];
  BOOST_TEST(m1.get_string("role") == "assistant");
  BOOST_TEST(m1.get_string("finish_reason") == "tool_calls");
  BOOST_TEST(m1.get_string("reasoning") == "r");
  BOOST_TEST(m1.find("tool_call_id") == nullptr);
  auto& c = m1.find("tool_calls")->as_array().at(0);
  BOOST_TEST(c.get_string("id") == "c1");
  BOOST_TEST(c.get_string("type") == "function");
  BOOST_TEST(c.find("function")->get_string("name") == "read_file");
  BOOST_TEST(c.find("function")->get_string("arguments")
             == R"({"path":"a"})");
  auto& m2 = msgs->as_array()[2];
  BOOST_TEST(m2.get_string("tool_call_id") == "c1");
  BOOST_TEST(m2.get_string("name") == "read_file");
  BOOST_TEST(m2.get_int("timestamp_ms", 0) == 1700000000000);
  BOOST_TEST(msgs->as_array()[0].find("tool_calls") == nullptr);
  // The output is valid JSON text.
  BOOST_TEST(json::parse(j.dump()).v.has_value());
}

BOOST_AUTO_TEST_CASE(json_shape_of_an_interrupted_partial_turn) {
  turn_result r;
  r.interrupted = true;
  r.partial = true;
  r.exit = turn_exit::interrupted_by_user;
  r.error = "Operation interrupted.";
  r.cleanup_errors = {"kernel did not stop"};
  r.pending_steer = "also check x";
  auto j = turn_result_json(r);
  BOOST_TEST(j.find("final_response")->is_null());
  BOOST_TEST(j.find("last_reasoning")->is_null());
  BOOST_TEST(j.get_bool("interrupted", false));
  BOOST_TEST(j.get_bool("partial", false));
  BOOST_TEST(!j.get_bool("completed", true));
  BOOST_TEST(j.get_string("turn_exit_reason") == "interrupted_by_user");
  BOOST_TEST(j.get_string("error") == "Operation interrupted.");
  BOOST_TEST(j.get_string("interrupt_message", "x") == "");
  BOOST_TEST(j.find("cleanup_errors")->size() == 1u);
  BOOST_TEST(j.get_string("pending_steer") == "also check x");
  BOOST_TEST(j.find("messages")->is_array());
  BOOST_TEST(j.find("messages")->size() == 0u);
}

BOOST_AUTO_TEST_CASE(binary_content_still_gives_valid_json) {
  turn_result r;
  r.final_response = std::string("\xff\xfe bad \x01", 8);
  chat_message m;
  m.role = "tool";
  m.content = std::string("\x80\x81", 2);
  r.messages.push_back(m);
  auto text = turn_result_json(r).dump();
  BOOST_TEST(json::parse(text).v.has_value());
}

BOOST_AUTO_TEST_CASE(a_transient_provider_failure_is_marked_retryable) {
  turn_result r;
  r.failed = true;
  r.exit = turn_exit::provider_error;
  r.error = "API call failed after 3 attempts on 'custom': transport error";
  r.retryable = true;
  auto j = turn_result_json(r);
  BOOST_TEST(j.get_bool("retryable", false));
  BOOST_TEST(j.get_string("exit_reason") == "provider_error");
}

BOOST_AUTO_TEST_CASE(a_replayed_turn_says_so) {
  turn_result r;
  r.final_response = "answered once";
  r.replayed = true;
  auto j = turn_result_json(r);
  BOOST_TEST(j.get_bool("replayed", false));
  BOOST_TEST(j.get_string("final_response") == "answered once");
}

BOOST_AUTO_TEST_CASE(tool_events_render_as_the_edges_show_them) {
  tool_event start;
  start.call_id = "c1";
  start.tool = "delegate_task";
  start.args_json = R"({"goal":"x"})";
  start.tasks = 2;
  auto s = tool_event_json(start);
  BOOST_TEST(std::string{tool_event_kind(start)} == "tool_start");
  BOOST_TEST(s.get_string("id") == "c1");
  BOOST_TEST(s.get_string("name") == "delegate_task");
  BOOST_TEST(s.get_string("arguments") == R"({"goal":"x"})");
  BOOST_TEST(s.get_int("tasks", 0) == 2);
  BOOST_TEST(s.find("depth") == nullptr);
  BOOST_TEST(s.find("result") == nullptr);
  tool_event end;
  end.what = tool_event::phase::end;
  end.call_id = "c2";
  end.tool = "read_file";
  end.result_json = R"({"content":"a"})";
  end.duration_us = 1500;
  end.depth = 1;
  auto e = tool_event_json(end);
  BOOST_TEST(std::string{tool_event_kind(end)} == "tool_end");
  BOOST_TEST(e.get_string("result") == R"({"content":"a"})");
  BOOST_TEST(e.get_int("duration_us", 0) == 1500);
  BOOST_TEST(e.get_int("depth", 0) == 1);
  BOOST_TEST(e.find("arguments") == nullptr);
  BOOST_TEST(e.find("tasks") == nullptr);
}
