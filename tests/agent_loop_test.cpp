#define BOOST_TEST_MODULE agent_loop
#include <boost/test/unit_test.hpp>


#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "agent/turn_result.hpp"
#include "base/json.hpp"
#include "runtime/runtime.hpp"
#include "storage/session_store.hpp"
#include "tests/support/agent_fixture.hpp"
#include "tests/support/agent_loop_fixture.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/scripted_flood.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait_until.hpp"

using namespace mibyan;
using namespace std::chrono;
using namespace mibyan::test::agent_loop;

BOOST_FIXTURE_TEST_SUITE(agent_loop, fixture)

BOOST_AUTO_TEST_CASE(plain_answer) {
  script(completion("Hello there."));
  std::string sid;
  auto res = run(call("hi"), &sid);
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "Hello there.");
  BOOST_CHECK(res["completed"].as_bool());
  BOOST_CHECK(!res["failed"].as_bool());
  BOOST_CHECK_EQUAL(res["api_calls"].as_int(), 1);
  BOOST_CHECK_EQUAL(res["turn_exit_reason"].as_string(),
                    "text_response(finish_reason=stop)");
  BOOST_CHECK_EQUAL(res["provider"].as_string(), "custom");
  BOOST_CHECK_EQUAL(res["input_tokens"].as_int(), 10);
  BOOST_CHECK(!sid.empty());
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 1u);
  auto& msgs = reqs[0]["messages"];
  BOOST_REQUIRE_EQUAL(msgs.size(), 2u);
  BOOST_CHECK_EQUAL(msgs.as_array()[0]["role"].as_string(), "system");
  BOOST_CHECK(contains(content_of(msgs.as_array()[0]), "Mibyan"));
  BOOST_CHECK_EQUAL(msgs.as_array()[1]["role"].as_string(), "user");
  BOOST_CHECK_EQUAL(content_of(msgs.as_array()[1]), "hi");
  BOOST_CHECK(reqs[0].find("tools") != nullptr);
  BOOST_CHECK(contains(reqs[0]["tools"].dump(), "read_file"));
}

BOOST_AUTO_TEST_CASE(one_tool_round_and_persistence) {
  auto file = work.write("notes.txt", "alpha beta gamma\n");
  script(completion("", {{"call_a", "read_file", args_json("path", file)}}));
  script(completion("The file says alpha beta gamma."));
  std::string sid;
  auto res = run(call("read my notes"), &sid);
  BOOST_CHECK_EQUAL(res["final_response"].as_string(),
                    "The file says alpha beta gamma.");
  BOOST_CHECK_EQUAL(res["api_calls"].as_int(), 2);
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  auto tools = with_role(reqs[1], "tool");
  BOOST_REQUIRE_EQUAL(tools.size(), 1u);
  BOOST_CHECK_EQUAL(tools[0]["tool_call_id"].as_string(), "call_a");
  BOOST_CHECK(contains(content_of(tools[0]), "alpha beta gamma"));
  // The system prompt is byte-identical across iterations.
  BOOST_CHECK_EQUAL(reqs[0]["messages"].as_array()[0].dump(),
                    reqs[1]["messages"].as_array()[0].dump());
  // Persisted in order: user, assistant(tool_calls), tool, assistant.
  session_info info;
  auto msgs = stored(sid, &info);
  // Usage was written for both model calls.
  BOOST_CHECK_EQUAL(info.api_call_count, 2);
  BOOST_CHECK_EQUAL(info.tokens.input_tokens, 20);
  BOOST_CHECK_EQUAL(info.tokens.output_tokens, 10);
  BOOST_REQUIRE_EQUAL(msgs.size(), 4u);
  BOOST_CHECK_EQUAL(msgs[0].message.role, "user");
  BOOST_CHECK_EQUAL(msgs[0].message.content, "read my notes");
  BOOST_CHECK_EQUAL(msgs[1].message.role, "assistant");
  BOOST_REQUIRE_EQUAL(msgs[1].message.tool_calls.size(), 1u);
  BOOST_CHECK_EQUAL(msgs[1].message.tool_calls[0].id, "call_a");
  BOOST_CHECK_EQUAL(msgs[2].message.role, "tool");
  BOOST_CHECK_EQUAL(msgs[2].message.tool_call_id, "call_a");
  BOOST_CHECK_EQUAL(msgs[3].message.role, "assistant");
  BOOST_CHECK_EQUAL(msgs[3].message.content,
                    "The file says alpha beta gamma.");
}

BOOST_AUTO_TEST_CASE(parallel_calls_in_model_order) {
  auto a = work.write("a.txt", "first file\n");
  auto b = work.write("b.txt", "second file\n");
  auto c = work.write("c.txt", "third file\n");
  script(completion("", {{"call_1", "read_file", args_json("path", b)},
                         {"call_2", "read_file", args_json("path", a)},
                         {"call_3", "read_file", args_json("path", c)}}));
  script(completion("read three"));
  auto res = run(call("read them"));
  BOOST_CHECK(res["completed"].as_bool());
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  auto tools = with_role(reqs[1], "tool");
  BOOST_REQUIRE_EQUAL(tools.size(), 3u);
  BOOST_CHECK_EQUAL(tools[0]["tool_call_id"].as_string(), "call_1");
  BOOST_CHECK(contains(content_of(tools[0]), "second file"));
  BOOST_CHECK_EQUAL(tools[1]["tool_call_id"].as_string(), "call_2");
  BOOST_CHECK(contains(content_of(tools[1]), "first file"));
  BOOST_CHECK_EQUAL(tools[2]["tool_call_id"].as_string(), "call_3");
  BOOST_CHECK(contains(content_of(tools[2]), "third file"));
}

BOOST_AUTO_TEST_CASE(execute_code_keeps_state_and_refunds) {
  script(completion("", {{"call_x", "execute_code",
                          args_json("code", "x = 41")}}));
  script(completion("", {{"call_y", "execute_code",
                          args_json("code", "print(x + 1)")}}));
  script(completion("x + 1 is 42"));
  auto c = call("compute");
  // Batches of only execute_code give their iteration back, so three
  // model calls fit into a budget of two.
  c.max_iterations = 2;
  auto res = run(c);
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "x + 1 is 42");
  BOOST_CHECK(res["completed"].as_bool());
  BOOST_CHECK_EQUAL(res["api_calls"].as_int(), 3);
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 3u);
  auto tools = with_role(reqs[2], "tool");
  BOOST_REQUIRE_EQUAL(tools.size(), 2u);
  BOOST_CHECK_EQUAL(tools[1]["tool_call_id"].as_string(), "call_y");
  BOOST_CHECK_MESSAGE(contains(content_of(tools[1]), "42"),
                      content_of(tools[1]));
}

BOOST_AUTO_TEST_CASE(streaming_with_split_tool_call_deltas) {
  auto file = work.write("s.txt", "streamed content\n");
  auto full = args_json("path", file);
  auto third = full.size() / 3;
  auto chunk = [](const std::string& json_text) {
    return "data: " + json_text + "\n\n";
  };
  auto tc_delta = [&](bool first, const std::string& arg_part) {
    json::value tc;
    tc["index"] = 0;
    if (first) {
      tc["id"] = "call_s";
      tc["type"] = "function";
      tc["function"]["name"] = "read_file";
    }
    tc["function"]["arguments"] = arg_part;
    json::value d;
    d["choices"] = json::value::make_array();
    json::value ch;
    ch["index"] = 0;
    ch["delta"]["tool_calls"] = json::value::make_array();
    ch["delta"]["tool_calls"].push_back(std::move(tc));
    d["choices"].push_back(std::move(ch));
    return d.dump();
  };
  std::string finish_tc = R"({"choices":[{"index":0,"delta":{},)"
                          R"("finish_reason":"tool_calls"}]})";
  // Event boundaries fall inside JSON text on purpose.
  std::string all = chunk(tc_delta(true, full.substr(0, third)))
                    + chunk(tc_delta(false, full.substr(third, third)))
                    + chunk(tc_delta(false, full.substr(2 * third)))
                    + chunk(finish_tc) + "data: [DONE]\n\n";
  std::vector<std::string> pieces;
  for (size_t i = 0; i < all.size(); i += 37)
    pieces.push_back(all.substr(i, 37));
  script_stream(pieces);
  auto text_delta = [&](const std::string& t, const std::string& finish) {
    json::value ch;
    ch["index"] = 0;
    ch["delta"] = json::value::make_object();
    if (!t.empty())
      ch["delta"]["content"] = t;
    if (!finish.empty())
      ch["finish_reason"] = finish;
    json::value d;
    d["choices"] = json::value::make_array();
    d["choices"].push_back(std::move(ch));
    return chunk(d.dump());
  };
  script_stream({text_delta("All ", ""), text_delta("done.", ""),
                 text_delta("", "stop"), "data: [DONE]\n\n"});
  auto c = call("stream it");
  c.stream = true;
  std::string text;
  c.on_delta = [&](const std::string& kind, const std::string& t) {
    if (kind == "text")
      text += t;
  };
  auto res = run(c);
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "All done.");
  BOOST_CHECK_EQUAL(text, "All done.");
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  BOOST_CHECK(reqs[0]["stream"].as_bool());
  auto tools = with_role(reqs[1], "tool");
  BOOST_REQUIRE_EQUAL(tools.size(), 1u);
  BOOST_CHECK_EQUAL(tools[0]["tool_call_id"].as_string(), "call_s");
  BOOST_CHECK(contains(content_of(tools[0]), "streamed content"));
}

BOOST_AUTO_TEST_CASE(malformed_arguments_get_an_error_result) {
  script(completion("", {{"call_bad", "read_file", R"({"path": "/x)"}}));
  script(completion("sorry, fixed"));
  auto res = run(call("go"));
  BOOST_CHECK(res["completed"].as_bool());
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "sorry, fixed");
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  auto tools = with_role(reqs[1], "tool");
  BOOST_REQUIRE_EQUAL(tools.size(), 1u);
  BOOST_CHECK_EQUAL(tools[0]["tool_call_id"].as_string(), "call_bad");
  auto text = content_of(tools[0]);
  BOOST_CHECK_MESSAGE(contains(text, "error") && contains(text, "JSON"),
                      text);
}

BOOST_AUTO_TEST_CASE(unknown_tool_lists_valid_tools) {
  script(completion("", {{"call_u", "frobnicate_widgets", "{}"}}));
  script(completion("ok"));
  auto res = run(call("go"));
  BOOST_CHECK(res["completed"].as_bool());
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  auto tools = with_role(reqs[1], "tool");
  BOOST_REQUIRE_EQUAL(tools.size(), 1u);
  auto text = content_of(tools[0]);
  BOOST_CHECK_MESSAGE(contains(text, "does not exist"), text);
  BOOST_CHECK(contains(text, "read_file"));
  BOOST_CHECK(contains(text, "frobnicate_widgets"));
}

BOOST_AUTO_TEST_CASE(three_bad_rounds_end_the_turn_as_partial) {
  script(completion("", {{"", "nonexistent_tool_zz", "{}"}}), 3);
  auto res = run(call("go"));
  BOOST_CHECK(res["partial"].as_bool());
  BOOST_CHECK(!res["completed"].as_bool());
  BOOST_CHECK_EQUAL(res["exit_reason"].as_string(), "invalid_tool_calls");
  BOOST_CHECK(contains(res["error"].as_string(), "nonexistent_tool_zz"));
  BOOST_CHECK_EQUAL(requests().size(), 3u);
}

BOOST_AUTO_TEST_CASE(budget_exhaustion_makes_one_tool_free_summary) {
  auto file = work.write("loop.txt", "again\n");
  script(completion("", {{"call_1", "read_file", args_json("path", file)}}));
  script(completion("", {{"call_2", "read_file", args_json("path", file)}}));
  script(completion("Summary: I read the file twice."));
  auto c = call("loop");
  c.max_iterations = 2;
  auto res = run(c);
  BOOST_CHECK_EQUAL(res["turn_exit_reason"].as_string(),
                    "max_iterations_reached(2/2)");
  BOOST_CHECK_EQUAL(res["final_response"].as_string(),
                    "Summary: I read the file twice.");
  BOOST_CHECK_EQUAL(res["api_calls"].as_int(), 3);
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 3u);
  BOOST_CHECK(reqs[0].find("tools") != nullptr);
  BOOST_CHECK(reqs[2].find("tools") == nullptr);
  auto users = with_role(reqs[2], "user");
  BOOST_REQUIRE(!users.empty());
  BOOST_CHECK(contains(content_of(users.back()), "iteration limit"));
  // Every call got exactly one result.
  auto tools = with_role(reqs[2], "tool");
  BOOST_CHECK_EQUAL(tools.size(), 2u);
}

BOOST_AUTO_TEST_CASE(empty_summary_is_retried_once) {
  auto file = work.write("once.txt", "x\n");
  script(completion("", {{"call_1", "read_file", args_json("path", file)}}));
  script(completion("   "));
  script(completion("Second try: done one read."));
  auto c = call("loop");
  c.max_iterations = 1;
  auto res = run(c);
  BOOST_CHECK_EQUAL(res["final_response"].as_string(),
                    "Second try: done one read.");
  BOOST_CHECK_EQUAL(res["turn_exit_reason"].as_string(),
                    "max_iterations_reached(1/1)");
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 3u);
  BOOST_CHECK(reqs[1].find("tools") == nullptr);
  BOOST_CHECK(reqs[2].find("tools") == nullptr);
}

BOOST_AUTO_TEST_CASE(interrupt_mid_tool) {
  json::value targs;
  // The marker tells the test the command runs.
  auto marker = work.path() + "/tool-started";
  targs["command"] = "touch '" + marker + "'; sleep 30";
  script(completion("", {{"call_sleep", "terminal", targs.dump()}}));
  std::string sid = "interrupt-test-1";
  std::optional<turn_result> out;
  auto t0 = steady_clock::now();
  std::thread th([&] { out = rt->run_turn(call("sleep", sid)); });
  // Interrupted while the command runs.
  BOOST_REQUIRE(test::wait_until(
    [&] { return ::access(marker.c_str(), F_OK) == 0; }));
  rt->interrupt(sid, "stop now");
  th.join();
  auto secs = duration<double>(steady_clock::now() - t0).count();
  BOOST_CHECK_LT(secs, 5.0);
  BOOST_REQUIRE(out);
  BOOST_REQUIRE_MESSAGE(out->started, out->error);
  auto parsed = json::parse(turn_result_json(*out).dump());
  BOOST_REQUIRE(parsed);
  auto& res = *parsed.v;
  BOOST_CHECK(res["interrupted"].as_bool());
  BOOST_CHECK(res["partial"].as_bool());
  BOOST_CHECK(!res["completed"].as_bool());
  BOOST_CHECK_EQUAL(res["exit_reason"].as_string(), "interrupted_by_user");
  BOOST_CHECK_EQUAL(res["interrupt_message"].as_string(), "stop now");
  auto& msgs = res["messages"];
  size_t results = 0;
  for (auto& m : msgs.as_array()) {
    if (m["role"].as_string() != "tool")
      continue;
    ++results;
    BOOST_CHECK_EQUAL(m["tool_call_id"].as_string(), "call_sleep");
    BOOST_CHECK(contains(content_of(m), "cancelled"));
  }
  BOOST_CHECK_EQUAL(results, 1u);
  // The tail is closed with an assistant message.
  BOOST_CHECK_EQUAL(msgs.as_array().back()["role"].as_string(), "assistant");
  BOOST_CHECK_EQUAL(requests().size(), 1u);
  // The session goes on.
  script(completion("awake"));
  auto next = run(call("again", sid));
  BOOST_CHECK_EQUAL(next["final_response"].as_string(), "awake");
}

BOOST_AUTO_TEST_CASE(interrupt_during_provider_call) {
  script(completion("late"), 1, 10000);
  std::string sid = "interrupt-test-2";
  std::optional<turn_result> out;
  auto t0 = steady_clock::now();
  std::thread th([&] { out = rt->run_turn(call("wait", sid)); });
  for (int i = 0; i < 200 && requests().empty(); ++i)
    std::this_thread::sleep_for(milliseconds{20});
  rt->interrupt(sid, "never mind");
  th.join();
  BOOST_CHECK_LT(duration<double>(steady_clock::now() - t0).count(), 5.0);
  BOOST_REQUIRE(out && out->started);
  auto parsed = json::parse(turn_result_json(*out).dump());
  BOOST_REQUIRE(parsed);
  BOOST_CHECK((*parsed.v)["interrupted"].as_bool());
  BOOST_CHECK_EQUAL((*parsed.v)["exit_reason"].as_string(),
                    "interrupted_by_user");
}

BOOST_AUTO_TEST_CASE(turns_of_one_session_are_serialised) {
  script(completion("first answer"), 1, 300);
  script(completion("second answer"));
  std::string sid = "serial-1";
  std::optional<json::value> r1;
  std::thread th([&] {
    auto o = rt->run_turn(call("one", sid));
    auto p = json::parse(turn_result_json(o).dump());
    if (p)
      r1 = *p.v;
  });
  for (int i = 0; i < 200 && requests().empty(); ++i)
    std::this_thread::sleep_for(milliseconds{10});
  auto r2 = run(call("two", sid));
  th.join();
  BOOST_REQUIRE(r1);
  BOOST_CHECK_EQUAL((*r1)["final_response"].as_string(), "first answer");
  BOOST_CHECK_EQUAL(r2["final_response"].as_string(), "second answer");
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  // The second turn saw the first one's messages.
  auto users = with_role(reqs[1], "user");
  BOOST_REQUIRE_EQUAL(users.size(), 2u);
  BOOST_CHECK_EQUAL(content_of(users[0]), "one");
  BOOST_CHECK(contains(reqs[1]["messages"].dump(), "first answer"));
}

BOOST_AUTO_TEST_CASE(sessions_run_concurrently) {
  script(completion("slow answer"), 2, 1000);
  auto t0 = steady_clock::now();
  std::optional<turn_result> a, b;
  std::thread ta([&] { a = rt->run_turn(call("one", "conc-a")); });
  std::thread tb([&] { b = rt->run_turn(call("two", "conc-b")); });
  ta.join();
  tb.join();
  auto secs = duration<double>(steady_clock::now() - t0).count();
  BOOST_CHECK_LT(secs, 1.9);
  BOOST_REQUIRE(a && b);
  BOOST_CHECK(a->final_response.value_or("") == "slow answer");
  BOOST_CHECK(b->final_response.value_or("") == "slow answer");
  BOOST_CHECK_EQUAL(a->session_id, "conc-a");
  BOOST_CHECK_EQUAL(b->session_id, "conc-b");
}

BOOST_AUTO_TEST_SUITE_END()
