// The mapping of Mibyan's tool events onto ACP session/update payloads
// (acp/acp_updates.hpp, docs/acp.md "Tools as ACP updates").
#define BOOST_TEST_MODULE acp_updates
#include <boost/test/unit_test.hpp>

#include "acp/acp_updates.hpp"

using namespace mibyan;

namespace {

json::value parse(const std::string& text) {
  auto p = json::parse(text);
  BOOST_REQUIRE(p);
  return *p.v;
}

} // namespace

BOOST_AUTO_TEST_CASE(kinds_follow_the_tools) {
  BOOST_CHECK_EQUAL(acp_tool_kind("read_file"), "read");
  BOOST_CHECK_EQUAL(acp_tool_kind("write_file"), "edit");
  BOOST_CHECK_EQUAL(acp_tool_kind("patch"), "edit");
  BOOST_CHECK_EQUAL(acp_tool_kind("search_files"), "search");
  BOOST_CHECK_EQUAL(acp_tool_kind("terminal"), "execute");
  BOOST_CHECK_EQUAL(acp_tool_kind("execute_code"), "execute");
  BOOST_CHECK_EQUAL(acp_tool_kind("web_extract"), "fetch");
  BOOST_CHECK_EQUAL(acp_tool_kind("todo"), "think");
  BOOST_CHECK_EQUAL(acp_tool_kind("mcp__x__y"), "other");
}

BOOST_AUTO_TEST_CASE(a_started_terminal_call_shows_its_command) {
  auto u = acp_tool_call("c1", "terminal",
                         parse(R"({"command":"ls -la\necho hi"})"));
  BOOST_CHECK_EQUAL(u.get_string("sessionUpdate"), "tool_call");
  BOOST_CHECK_EQUAL(u.get_string("toolCallId"), "c1");
  BOOST_CHECK_EQUAL(u.get_string("status"), "in_progress");
  BOOST_CHECK_EQUAL(u.get_string("kind"), "execute");
  BOOST_CHECK_EQUAL(u.get_string("title"), "`ls -la ...`");
  auto text = u["content"].as_array().at(0)["content"].get_string("text");
  BOOST_CHECK(text.find("$ ls -la\necho hi") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(file_calls_have_locations) {
  auto u = acp_tool_call("c2", "read_file",
                         parse(R"({"path":"/w/a.txt","offset":40})"));
  BOOST_REQUIRE_EQUAL(u["locations"].size(), 1u);
  BOOST_CHECK_EQUAL(u["locations"].as_array()[0].get_string("path"),
                    "/w/a.txt");
  BOOST_CHECK_EQUAL(u["locations"].as_array()[0].get_int("line", 0), 40);
  auto p = acp_tool_call(
    "c3", "patch",
    parse(R"({"mode":"patch","patch":"*** Begin Patch\n*** Update File: a.c\n@@\n-x\n+y\n*** Add File: b.c\n+z\n*** End Patch"})"));
  BOOST_CHECK_EQUAL(p["locations"].size(), 2u);
  BOOST_CHECK_EQUAL(p.get_string("title"), "Edit a.c and 1 more");
}

BOOST_AUTO_TEST_CASE(ends_are_completed_or_failed) {
  json::value args = parse(R"({"command":"false"})");
  auto ok = acp_tool_call_done("c1", "terminal", args,
                               R"({"output":"hi\n","exit_code":0,"error":""})",
                               {});
  BOOST_CHECK_EQUAL(ok.get_string("status"), "completed");
  BOOST_CHECK(ok.dump().find("hi") != std::string::npos);
  auto bad = acp_tool_call_done("c1", "terminal", args,
                                R"({"error":"denied by the user"})", {});
  BOOST_CHECK_EQUAL(bad.get_string("status"), "failed");
  BOOST_CHECK(bad.dump().find("denied by the user") != std::string::npos);
  auto obj = acp_tool_call_done("c1", "mcp__a__b", {}, R"({"error":{"x":1}})",
                                {});
  BOOST_CHECK_EQUAL(obj.get_string("status"), "failed");
  auto not_json = acp_tool_call_done("c1", "x", {}, "plain text", {});
  BOOST_CHECK_EQUAL(not_json.get_string("status"), "completed");
}

BOOST_AUTO_TEST_CASE(edits_carry_diffs) {
  std::vector<acp_file_diff> diffs(2);
  diffs[0].path = "/w/a.txt";
  diffs[0].has_old = true;
  diffs[0].old_text = "a\n";
  diffs[0].new_text = "b\n";
  diffs[1].path = "/w/new.txt";
  diffs[1].new_text = "n\n";
  auto u = acp_tool_call_done("p1", "patch", parse(R"({"path":"a.txt"})"),
                              R"({"success":true,"diff":"-a\n+b\n"})", diffs);
  int seen = 0;
  for (auto& c : u["content"].as_array()) {
    if (c.get_string("type") != "diff")
      continue;
    ++seen;
    if (c.get_string("path") == "/w/a.txt") {
      BOOST_CHECK_EQUAL(c.get_string("oldText"), "a\n");
      BOOST_CHECK_EQUAL(c.get_string("newText"), "b\n");
    } else {
      BOOST_CHECK(c["oldText"].is_null());
    }
  }
  BOOST_CHECK_EQUAL(seen, 2);
  BOOST_CHECK_EQUAL(u["locations"].size(), 2u);
}

BOOST_AUTO_TEST_CASE(todo_becomes_a_plan) {
  auto plan = acp_plan_from_todo(parse(
    R"({"todos":[{"id":"1","content":"a","status":"completed"},
                 {"id":"2","content":"b","status":"cancelled"},
                 {"id":"3","content":"c","status":"in_progress"}]})"));
  BOOST_CHECK_EQUAL(plan.get_string("sessionUpdate"), "plan");
  BOOST_REQUIRE_EQUAL(plan["entries"].size(), 2u);
  BOOST_CHECK_EQUAL(plan["entries"].as_array()[1].get_string("status"),
                    "in_progress");
  BOOST_CHECK_EQUAL(plan["entries"].as_array()[1].get_string("priority"),
                    "medium");
  BOOST_CHECK(acp_plan_from_todo(parse(R"({"error":"x"})")).is_null());
}

BOOST_AUTO_TEST_CASE(fences_outgrow_backticks_in_the_output) {
  auto u = acp_tool_call_done("c", "terminal", parse(R"({"command":"cat x"})"),
                              R"({"output":"```\ninside\n```","exit_code":1})",
                              {});
  auto text = u["content"].as_array().at(0)["content"].get_string("text");
  BOOST_CHECK(text.rfind("````", 0) == 0);
  BOOST_CHECK(text.find("exit code 1") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(stop_reasons_follow_the_turn_result) {
  auto reason = [](const turn_result& result) {
    std::string error, final_text;
    auto r = acp_stop_reason(result, error, final_text);
    return r.empty() ? "error: " + error : r;
  };
  auto result = [](turn_exit exit, std::string detail = {}) {
    turn_result r;
    r.started = true;
    r.exit = exit;
    r.exit_detail = std::move(detail);
    return r;
  };
  auto answered = result(turn_exit::completed);
  answered.final_response = "hi";
  auto interrupted = result(turn_exit::interrupted_by_user);
  interrupted.interrupted = true;
  auto at_cap = result(turn_exit::max_iterations_reached);
  at_cap.final_response = "x";
  auto failed = result(turn_exit::provider_error);
  failed.failed = true;
  failed.error = "HTTP 500";
  turn_result not_started;
  not_started.error = "no provider";
  const std::pair<turn_result, const char*> cases[] = {
    {answered, "end_turn"},
    {interrupted, "cancelled"},
    {at_cap, "max_turn_requests"},
    {result(turn_exit::budget_exhausted), "max_turn_requests"},
    {result(turn_exit::truncated), "max_tokens"},
    {result(turn_exit::completed,
            "text_response(finish_reason=content_filter)"),
     "refusal"},
    {failed, "error: HTTP 500"},
    {not_started, "error: no provider"},
  };
  for (auto& [res, expected] : cases)
    BOOST_CHECK_EQUAL(reason(res), std::string{expected});
  std::string error, final_text;
  auto done = result(turn_exit::completed);
  done.final_response = "the answer";
  auto r = acp_stop_reason(done, error, final_text);
  BOOST_CHECK_EQUAL(r, "end_turn");
  BOOST_CHECK_EQUAL(final_text, "the answer");
}
