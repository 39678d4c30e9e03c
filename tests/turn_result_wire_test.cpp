// The typed turn data on the wire: a turn_result, a tool_event and a
// cluster turn survive CAF's binary serialisation with every member (the
// cluster sends them between nodes; the start-up self-test only round-trips
// default values). A bad buffer fails to load instead of crashing.
#define BOOST_TEST_MODULE turn_result_wire
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "caf/actor_system.hpp"
#include "caf/actor_system_config.hpp"
#include "caf/binary_deserializer.hpp"
#include "caf/binary_serializer.hpp"

#include "messages/type_ids.hpp"

using namespace mibyan;

namespace {

struct system_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};

  template <class T>
  std::vector<char> save(T x) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    auto err = sink(x);
    BOOST_REQUIRE_MESSAGE(!err, sys.render(err));
    return buf;
  }

  template <class T>
  T load(const std::vector<char>& buf) {
    T out;
    caf::binary_deserializer source{sys, buf};
    auto err = source(out);
    BOOST_REQUIRE_MESSAGE(!err, sys.render(err));
    return out;
  }
};

turn_result full_result() {
  turn_result r;
  r.started = true;
  r.config_error = true;
  r.final_response = "The answer.";
  r.last_reasoning = std::nullopt;
  chat_message a;
  a.role = "assistant";
  a.tool_calls.push_back(tool_call{"c1", "read_file", R"({"path":"a"})"});
  a.finish_reason = "tool_calls";
  a.timestamp_ms = 1700000000000;
  chat_message t;
  t.role = "tool";
  t.tool_call_id = "c1";
  t.tool_name = "read_file";
  t.content = std::string("bin\0ary", 7);
  r.messages = {a, t};
  r.api_calls = 3;
  r.max_iterations = 90;
  r.completed = true;
  r.partial = true;
  r.interrupted = true;
  r.interrupt_message = "stop";
  r.exit = turn_exit::guardrail_halt;
  r.exit_detail = "guardrail_halt";
  r.error = "halted";
  r.retryable = true;
  r.session_id = "s-1";
  r.provider = {"custom", "m", "http://127.0.0.1:1/v1", ""};
  r.usage.input_tokens = 11;
  r.usage.output_tokens = 7;
  r.usage.cost_usd = 0.25;
  r.usage.has_cost = true;
  r.last_prompt_tokens = 42;
  r.cleanup_errors = {"kernel did not stop"};
  r.pending_steer = "later";
  r.trajectory_error = "disk full";
  r.replayed = true;
  return r;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(wire, system_fixture)

BOOST_AUTO_TEST_CASE(a_turn_result_keeps_every_member) {
  auto in = full_result();
  auto out = load<turn_result>(save(in));
  BOOST_TEST(out.started);
  BOOST_TEST(out.config_error);
  BOOST_REQUIRE(out.final_response.has_value());
  BOOST_TEST(*out.final_response == "The answer.");
  BOOST_TEST(!out.last_reasoning.has_value());
  BOOST_REQUIRE_EQUAL(out.messages.size(), 2u);
  BOOST_TEST(out.messages[0].tool_calls.at(0).arguments == R"({"path":"a"})");
  BOOST_TEST(out.messages[0].timestamp_ms == 1700000000000);
  BOOST_TEST(out.messages[1].content == std::string("bin\0ary", 7));
  BOOST_TEST(out.messages[1].tool_name == "read_file");
  BOOST_TEST(out.api_calls == 3);
  BOOST_TEST(out.max_iterations == 90);
  BOOST_TEST(out.completed);
  BOOST_TEST(out.partial);
  BOOST_TEST(out.interrupted);
  BOOST_TEST(out.interrupt_message == "stop");
  BOOST_TEST((out.exit == turn_exit::guardrail_halt));
  BOOST_TEST(out.exit_detail == "guardrail_halt");
  BOOST_TEST(out.error == "halted");
  BOOST_TEST(out.retryable);
  BOOST_TEST(out.session_id == "s-1");
  BOOST_TEST(out.provider.provider == "custom");
  BOOST_TEST(out.provider.model == "m");
  BOOST_TEST(out.provider.base_url == "http://127.0.0.1:1/v1");
  BOOST_TEST(out.usage.input_tokens == 11);
  BOOST_TEST(out.usage.output_tokens == 7);
  BOOST_TEST(out.usage.has_cost);
  BOOST_TEST(out.usage.cost_usd == 0.25);
  BOOST_TEST(out.last_prompt_tokens == 42);
  BOOST_TEST(out.cleanup_errors == std::vector<std::string>{"kernel did not stop"},
             boost::test_tools::per_element());
  BOOST_TEST(out.pending_steer == "later");
  BOOST_TEST(out.trajectory_error == "disk full");
  BOOST_TEST(out.replayed);
}

BOOST_AUTO_TEST_CASE(the_optional_members_travel_both_ways) {
  turn_result in;
  in.last_reasoning = "";
  auto out = load<turn_result>(save(in));
  BOOST_TEST(!out.final_response.has_value());
  BOOST_REQUIRE(out.last_reasoning.has_value()); // empty, but present
  BOOST_TEST(out.last_reasoning->empty());
  BOOST_TEST(!out.started);
  BOOST_TEST((out.exit == turn_exit::completed));
  // A buffer that held a result with an answer does not leak it into the
  // next load: each load restores the optionals from the bytes.
  turn_result reused;
  reused.final_response = "stale";
  auto bytes = save(in);
  caf::binary_deserializer source{sys, bytes};
  BOOST_REQUIRE(!source(reused));
  BOOST_TEST(!reused.final_response.has_value());
}

BOOST_AUTO_TEST_CASE(a_tool_event_keeps_every_member) {
  tool_event in;
  in.what = tool_event::phase::end;
  in.call_id = "c9";
  in.tool = "terminal";
  in.args_json = R"({"command":"ls"})";
  in.result_json = R"({"output":"a"})";
  in.duration_us = 1234;
  in.depth = 1;
  in.tasks = 3;
  auto out = load<tool_event>(save(in));
  BOOST_TEST((out.what == tool_event::phase::end));
  BOOST_TEST(out.call_id == "c9");
  BOOST_TEST(out.tool == "terminal");
  BOOST_TEST(out.args_json == in.args_json);
  BOOST_TEST(out.result_json == in.result_json);
  BOOST_TEST(out.duration_us == 1234);
  BOOST_TEST(out.depth == 1);
  BOOST_TEST(out.tasks == 3);
}

BOOST_AUTO_TEST_CASE(a_cluster_turn_carries_its_provider_overrides) {
  cluster_turn in;
  in.session_id = "s";
  in.prompt = "p";
  in.provider = {"custom", "m", "http://x/v1", ""};
  in.max_iterations = 5;
  in.toolsets = {"file"};
  in.save_trajectory = true;
  in.turn_key = "k-1";
  in.stream_id = 77;
  auto out = load<cluster_turn>(save(in));
  BOOST_TEST(out.turn_key == "k-1");
  BOOST_TEST(out.stream_id == 77u);
  BOOST_TEST(out.provider.provider == "custom");
  BOOST_TEST(out.provider.model == "m");
  BOOST_TEST(out.provider.base_url == "http://x/v1");
  BOOST_TEST(out.max_iterations == 5);
  BOOST_TEST(out.save_trajectory);
}

BOOST_AUTO_TEST_CASE(a_forwarded_turn_event_carries_a_typed_tool_event) {
  cluster_turn_event in;
  in.stream_id = 5;
  in.seq = 9;
  in.kind = "tool";
  in.tool.what = tool_event::phase::end;
  in.tool.call_id = "c2";
  in.tool.tool = "read_file";
  in.tool.result_json = R"({"content":"x"})";
  in.tool.duration_us = 17;
  auto out = load<cluster_turn_event>(save(in));
  BOOST_TEST(out.stream_id == 5u);
  BOOST_TEST(out.seq == 9u);
  BOOST_TEST(out.kind == "tool");
  BOOST_TEST((out.tool.what == tool_event::phase::end));
  BOOST_TEST(out.tool.call_id == "c2");
  BOOST_TEST(out.tool.tool == "read_file");
  BOOST_TEST(out.tool.result_json == in.tool.result_json);
  BOOST_TEST(out.tool.duration_us == 17);
}

BOOST_AUTO_TEST_CASE(a_truncated_buffer_fails_to_load) {
  auto buf = save(full_result());
  for (size_t cut : {size_t{0}, size_t{1}, buf.size() / 2, buf.size() - 1}) {
    std::vector<char> part(buf.begin(), buf.begin() + cut);
    turn_result out;
    caf::binary_deserializer source{sys, part};
    BOOST_TEST(static_cast<bool>(source(out)), "cut at " << cut);
  }
}

BOOST_AUTO_TEST_SUITE_END()
