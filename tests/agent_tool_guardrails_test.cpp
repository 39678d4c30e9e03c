#define BOOST_TEST_MODULE agent_tool_guardrails
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <map>
#include <optional>

#include "agent/turn_result.hpp"
#include "agent/tool_guardrails.hpp"
#include "base/json.hpp"
#include "runtime/runtime.hpp"
#include "tests/support/agent_fixture.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

namespace {

const std::string fail = R"({"error":"Could not find match for old_string"})";
const std::string ok = R"({"success":true})";

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

bool warned(const std::string& s) {
  return contains(s, "[tool-loop guardrail]");
}

} // namespace

BOOST_AUTO_TEST_CASE(call_key_ignores_member_order_and_spacing) {
  BOOST_TEST(guardrail_call_key("patch", R"({"a":1,"b":{"y":2,"x":[1,2]}})")
             == guardrail_call_key("patch", R"({ "b": {"x":[1, 2], "y":2}, "a": 1 })"));
  BOOST_TEST(guardrail_call_key("patch", R"({"a":1})")
             != guardrail_call_key("write_file", R"({"a":1})"));
  BOOST_TEST(guardrail_call_key("patch", R"({"a":1})")
             != guardrail_call_key("patch", R"({"a":2})"));
  BOOST_TEST(guardrail_call_key("x", "{not json").size() == 64u);
}

BOOST_AUTO_TEST_CASE(failure_detection) {
  BOOST_TEST(is_failed_tool_result(fail));
  BOOST_TEST(is_failed_tool_result(R"({"success":false,"diff":""})"));
  BOOST_TEST(is_failed_tool_result(R"({"status":"timeout"})"));
  BOOST_TEST(!is_failed_tool_result(R"({"output":"x","exit_code":1,"error":null})"));
  BOOST_TEST(!is_failed_tool_result(ok));
  BOOST_TEST(!is_failed_tool_result("plain text"));
  BOOST_TEST(!is_failed_tool_result(R"({"error":""})"));
}

BOOST_AUTO_TEST_CASE(identical_failures_warn_at_2_and_block_after_5) {
  tool_loop_guardrail_options o;
  o.hard_stop_enabled = true;
  tool_guardrails g{o};
  const std::string args = R"({"path":"a.txt"})";
  BOOST_TEST(!g.before_call("patch", args));
  BOOST_TEST(!warned(g.after_call("patch", args, fail)));
  auto second = g.after_call("patch", args, fail);
  BOOST_TEST(warned(second));
  BOOST_TEST(contains(second, "failed 2 times"));
  BOOST_TEST(second.rfind(fail, 0) == 0u); // appended, result kept
  for (int i = 3; i <= 5; ++i) {
    BOOST_TEST(!g.before_call("patch", args));
    g.after_call("patch", args, fail);
  }
  auto blocked = g.before_call("patch", R"({ "path": "a.txt" })");
  BOOST_REQUIRE(blocked);
  BOOST_TEST(contains(*blocked, "BLOCKED"));
  BOOST_TEST(is_failed_tool_result(*blocked));
  // Other arguments still run.
  BOOST_TEST(!g.before_call("patch", R"({"path":"b.txt"})"));
  BOOST_TEST(!g.halted());
}

BOOST_AUTO_TEST_CASE(same_tool_failures_warn_at_3_and_halt_at_8) {
  tool_loop_guardrail_options o;
  o.hard_stop_enabled = true;
  tool_guardrails g{o};
  auto args = [](int i) { return "{\"path\":\"f" + std::to_string(i) + "\"}"; };
  BOOST_TEST(!warned(g.after_call("patch", args(1), fail)));
  BOOST_TEST(!warned(g.after_call("patch", args(2), fail)));
  auto third = g.after_call("patch", args(3), fail);
  BOOST_TEST(warned(third));
  BOOST_TEST(contains(third, "patch has failed 3 times"));
  for (int i = 4; i <= 7; ++i)
    g.after_call("patch", args(i), fail);
  BOOST_TEST(!g.halted());
  g.after_call("patch", args(8), fail);
  BOOST_TEST(g.halted());
  BOOST_TEST(contains(g.halt_message(), "failed 8 times"));
  BOOST_TEST(contains(g.halt_message(), "Could not find match"));
}

BOOST_AUTO_TEST_CASE(success_resets_the_counts) {
  tool_loop_guardrail_options o;
  o.hard_stop_enabled = true;
  tool_guardrails g{o};
  for (int round = 0; round < 5; ++round) {
    g.after_call("patch", "{}", fail);
    g.after_call("patch", "{}", fail);
    BOOST_TEST(!warned(g.after_call("patch", "{}", ok)));
  }
  BOOST_TEST(!g.before_call("patch", "{}"));
  BOOST_TEST(!g.halted());
}

BOOST_AUTO_TEST_CASE(idempotent_repeats_warn_at_2_and_block_after_5) {
  tool_loop_guardrail_options o;
  o.hard_stop_enabled = true;
  tool_guardrails g{o};
  const std::string args = R"({"pattern":"x"})";
  const std::string same = R"({"matches":[],"total_count":0})";
  BOOST_TEST(!warned(g.after_call("search_files", args, same)));
  BOOST_TEST(warned(g.after_call("search_files", args, same)));
  // A different result starts over.
  BOOST_TEST(!warned(g.after_call("search_files", args, R"({"total_count":1})")));
  for (int i = 0; i < 5; ++i)
    g.after_call("search_files", args, same);
  BOOST_TEST(g.before_call("search_files", args).has_value());
  // Not for tools with effects: terminal repeats are never blocked.
  for (int i = 0; i < 6; ++i)
    BOOST_TEST(!warned(g.after_call("terminal", "{}", R"({"output":"x"})")));
  BOOST_TEST(!g.before_call("terminal", "{}"));
}

BOOST_AUTO_TEST_CASE(defaults_warn_but_never_block) {
  tool_guardrails g{tool_loop_guardrail_options{}};
  for (int i = 0; i < 20; ++i) {
    BOOST_TEST(!g.before_call("patch", "{}"));
    g.after_call("patch", "{}", fail);
  }
  BOOST_TEST(!g.halted());
  tool_loop_guardrail_options quiet;
  quiet.warnings_enabled = false;
  tool_guardrails q{quiet};
  for (int i = 0; i < 5; ++i)
    BOOST_TEST(q.after_call("patch", "{}", fail) == fail);
}

// -- through the agent loop ----------------------------------------------------

namespace {

// A Chat Completions response body with one call `call_x` of `tool`
// (none when empty); tests/support/scripted_replies.hpp.
std::string completion(const std::string& content, const std::string& tool,
                       const std::string& arguments) {
  if (tool.empty())
    return test::chat_completion(content);
  return test::chat_completion(content, {{"call_x", tool, arguments}});
}

struct loop_fixture : test::agent_fixture {
  test::temp_dir work;

  ~loop_fixture() { rt.reset(); } // before the work dir goes

  void start(bool hard_stop) {
    options opts;
    opts.home = home.path();
    opts.agent.api_max_retries = 1;
    opts.code_execution.prestart_kernels = 0;
    opts.tool_loop_guardrails.hard_stop_enabled = hard_stop;
    agent_fixture::start(std::move(opts));
  }

  json::value run() { return agent_fixture::run(call("fix the file")); }

  // Tool message contents of the last chat request.
  std::vector<std::string> last_tool_results() {
    auto log = json::parse(server.requests());
    BOOST_REQUIRE(log);
    std::vector<std::string> out;
    for (auto& r : log.v->as_array()) {
      if (!contains(r.get_string("path"), "/chat/completions"))
        continue;
      auto body = json::parse(r.get_string("body"));
      BOOST_REQUIRE(body);
      out.clear();
      for (auto& m : (*body.v)["messages"].as_array())
        if (m.get_string("role") == "tool")
          out.push_back(m.get_string("content"));
    }
    return out;
  }

  std::string failing_patch() const {
    json::value a;
    a["mode"] = "replace";
    a["path"] = work.path() + "/missing.txt";
    a["old_string"] = "a";
    a["new_string"] = "b";
    return a.dump();
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(hard_stop_halts_the_turn, loop_fixture) {
  start(true);
  script(completion("", "patch", failing_patch()), 8);
  script(completion("should not be reached", "", ""), 1);
  auto res = run();
  BOOST_TEST(res.get_string("exit_reason") == "guardrail_halt", res.dump());
  BOOST_TEST(contains(res.get_string("final_response"), "failed 8 times"));
  BOOST_TEST(res["api_calls"].as_int() == 8);
  auto tools = last_tool_results();
  BOOST_REQUIRE_EQUAL(tools.size(), 7u);
  BOOST_TEST(!warned(tools[0]));
  BOOST_TEST(warned(tools[1]));
  BOOST_TEST(!contains(tools[4], "BLOCKED"));
  BOOST_TEST(contains(tools[5], "BLOCKED"));
}

BOOST_FIXTURE_TEST_CASE(warnings_only_by_default, loop_fixture) {
  start(false);
  script(completion("", "patch", failing_patch()), 6);
  script(completion("giving up", "", ""), 1);
  auto res = run();
  BOOST_TEST(res.get_string("exit_reason") != "guardrail_halt");
  BOOST_TEST(res.get_string("final_response") == "giving up");
  auto tools = last_tool_results();
  BOOST_REQUIRE_EQUAL(tools.size(), 6u);
  BOOST_TEST(!warned(tools[0]));
  for (size_t i = 1; i < tools.size(); ++i)
    BOOST_TEST(warned(tools[i]));
  BOOST_TEST(!contains(tools[5], "BLOCKED"));
}
