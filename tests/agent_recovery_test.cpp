// Final-answer recovery through the real runtime against the scripted
// provider (docs/agent_loop.md, "Final answer recovery"): empty answers,
// reasoning-only answers, answers cut at the length limit and cut tool
// calls, each recovered when the model recovers and ended with its exit
// reason when recovery runs out.
#define BOOST_TEST_MODULE agent_recovery
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "agent/answer_recovery.hpp"
#include "tests/support/agent_fixture.hpp"

using namespace mibyan;
using namespace mibyan::test;

namespace {

std::string last_message_text(json::value& req) {
  auto& msgs = req["messages"].as_array();
  auto& c = msgs.back()["content"];
  return c.is_string() ? c.as_string() : c.dump();
}

int64_t max_tokens_of(json::value& req) {
  if (auto m = req.find("max_tokens"))
    return m->as_int();
  if (auto m = req.find("max_completion_tokens"))
    return m->as_int();
  return 0;
}

struct recovery_fixture : agent_fixture {
  recovery_fixture() { start(base_options()); }
};

} // namespace

BOOST_AUTO_TEST_CASE(strip_reasoning_tags_rules) {
  BOOST_TEST(strip_reasoning_tags("<think>x</think>  Hello ") == "Hello");
  BOOST_TEST(strip_reasoning_tags("<THINKING>a</THINKING>b") == "b");
  BOOST_TEST(strip_reasoning_tags("before <reasoning>never closed")
             == "before");
  BOOST_TEST(strip_reasoning_tags("<tool_call>{}</tool_call>").empty());
  BOOST_TEST(strip_reasoning_tags("plain text") == "plain text");
  BOOST_TEST(strip_reasoning_tags("tail of a thought</think>answer")
             == "answer");
}

BOOST_AUTO_TEST_CASE(recovery_steps_in_order) {
  answer_recovery r;
  using s = answer_recovery::step;
  BOOST_TEST((r.on_empty(true, false) == s::nudge));
  BOOST_TEST((r.on_empty(true, false) == s::prefill));
  BOOST_TEST((r.on_empty(true, false) == s::prefill));
  BOOST_TEST((r.on_empty(true, false) == s::retry));
  BOOST_TEST((r.on_empty(false, false) == s::retry));
  BOOST_TEST((r.on_empty(false, false) == s::retry));
  BOOST_TEST((r.on_empty(false, false) == s::give_up));
  BOOST_TEST((r.on_empty(false, true) == s::use_previous));
  answer_recovery len;
  BOOST_TEST(len.continue_after_length());
  BOOST_TEST(len.max_tokens() == 8192);
  BOOST_TEST(len.continue_after_length());
  BOOST_TEST(len.continue_after_length());
  BOOST_TEST(len.max_tokens() == 32768);
  BOOST_TEST(!len.continue_after_length());
}

BOOST_FIXTURE_TEST_SUITE(agent_recovery, recovery_fixture)

BOOST_AUTO_TEST_CASE(empty_answer_is_nudged_once_and_never_stored) {
  script(chat_completion(""));
  script(chat_completion("Here it is."));
  std::string sid;
  auto res = run(call("answer me", "recover-nudge"), &sid);
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "Here it is.");
  BOOST_CHECK_EQUAL(res["turn_exit_reason"].as_string(),
                    "text_response(finish_reason=stop)");
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  BOOST_CHECK(contains(last_message_text(reqs[1]), "last answer was empty"));
  auto store = open_store();
  auto msgs = store->load_messages(sid);
  BOOST_REQUIRE(msgs);
  BOOST_REQUIRE_EQUAL(msgs->size(), 2u);
  BOOST_CHECK_EQUAL((*msgs)[0].message.content, "answer me");
  BOOST_CHECK_EQUAL((*msgs)[1].message.content, "Here it is.");
}

BOOST_AUTO_TEST_CASE(empty_answers_exhaust_recovery) {
  script(chat_completion(""), 5);
  auto res = run(call("answer me"));
  BOOST_CHECK_EQUAL(res["exit_reason"].as_string(),
                    "empty_response_exhausted");
  BOOST_CHECK_EQUAL(res["turn_exit_reason"].as_string(),
                    "empty_response_exhausted");
  BOOST_CHECK(res["partial"].as_bool());
  BOOST_CHECK(contains(res["final_response"].as_string(), "empty answer"));
  // One nudge, then three plain retries.
  BOOST_CHECK_EQUAL(requests().size(), 5u);
}

BOOST_AUTO_TEST_CASE(reasoning_only_answers_are_prefilled_then_exhausted) {
  script(chat_completion("<think>I am pondering the question</think>"), 7);
  auto res = run(call("think hard"));
  BOOST_CHECK_EQUAL(res["exit_reason"].as_string(),
                    "empty_response_exhausted");
  BOOST_CHECK_EQUAL(res["turn_exit_reason"].as_string(),
                    "empty_response_exhausted(reasoning_only)");
  BOOST_CHECK(contains(res["final_response"].as_string(), "reasoning only"));
  auto reqs = requests();
  // nudge, 2 prefills, 3 retries.
  BOOST_REQUIRE_EQUAL(reqs.size(), 7u);
  BOOST_CHECK(contains(last_message_text(reqs[2]),
                       "I am pondering the question"));
  BOOST_CHECK_EQUAL(reqs[2]["messages"].as_array().back()["role"].as_string(),
                    "assistant");
}

BOOST_AUTO_TEST_CASE(length_cut_answer_is_continued_and_joined) {
  script(chat_completion("The first half, ", {}, "length"));
  script(chat_completion("and the second half."));
  auto res = run(call("write a lot"));
  BOOST_CHECK_EQUAL(res["final_response"].as_string(),
                    "The first half, and the second half.");
  BOOST_CHECK_EQUAL(res["turn_exit_reason"].as_string(),
                    "text_response(finish_reason=stop)");
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  BOOST_CHECK(contains(last_message_text(reqs[1]), "Continue exactly"));
  BOOST_CHECK_EQUAL(max_tokens_of(reqs[0]), 0);
  BOOST_CHECK_EQUAL(max_tokens_of(reqs[1]), 8192);
}

BOOST_AUTO_TEST_CASE(length_continuations_run_out) {
  script(chat_completion("one ", {}, "length"));
  script(chat_completion("two ", {}, "length"));
  script(chat_completion("three ", {}, "length"));
  script(chat_completion("four", {}, "length"));
  auto res = run(call("write forever"));
  BOOST_CHECK_EQUAL(res["exit_reason"].as_string(), "truncated");
  BOOST_CHECK_EQUAL(res["turn_exit_reason"].as_string(),
                    "truncated(length_continuations_exhausted)");
  BOOST_CHECK(res["partial"].as_bool());
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "one two three four");
  BOOST_CHECK(contains(res["error"].as_string(),
                       "Response truncated due to output length limit"));
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 4u);
  BOOST_CHECK_EQUAL(max_tokens_of(reqs[3]), 32768);
}

BOOST_AUTO_TEST_CASE(cut_tool_call_is_retried_then_not_executed) {
  script(chat_completion("", {{"call_t", "read_file", R"({"path": "/et)"}},
                         "length"),
         5);
  auto res = run(call("read it"));
  BOOST_CHECK_EQUAL(res["exit_reason"].as_string(), "truncated");
  BOOST_CHECK_EQUAL(res["turn_exit_reason"].as_string(),
                    "truncated(tool_call)");
  BOOST_CHECK(contains(res["error"].as_string(), "not executed"));
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 5u);
  BOOST_CHECK_EQUAL(max_tokens_of(reqs[1]), 8192);
  BOOST_CHECK_EQUAL(max_tokens_of(reqs[4]), 32768);
  // No tool ran: no tool message in the transcript.
  for (auto& m : res["messages"].as_array())
    BOOST_CHECK(m["role"].as_string() != "tool");
}

BOOST_AUTO_TEST_CASE(cut_tool_call_recovers_on_retry) {
  temp_dir work;
  script(chat_completion("", {{"call_t", "read_file", R"({"path": "/et)"}},
                         "length"));
  script(chat_completion("", {{"call_t", "search_files",
                               one_arg("pattern", "nothing-here")}}));
  script(chat_completion("Nothing found."));
  auto res = run(call("look"));
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "Nothing found.");
  BOOST_CHECK_EQUAL(requests().size(), 3u);
}

BOOST_AUTO_TEST_SUITE_END()
