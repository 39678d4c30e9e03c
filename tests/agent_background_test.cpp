// Background work through the CLI against the scripted provider
// (docs/agent_loop.md, "Background deliveries"; docs/tools.md,
// "delegate_task" and "Background processes"): a background child's
// summary reaches the parent's next turn (across `mibyan run`
// invocations), a child a dead process left running is reported as
// interrupted, status and cancel in `mibyan chat`, notify_on_complete,
// merged notices, a deleted parent session, the default child toolset and
// the parent's skill variables in a child.
//
// Parent and children share one scripted provider, so scripts carry a
// "match" text (tests/support/http_server.py): a parent's requests hold
// its prompt ("ASK-..."), a child's the subagent preamble.
#define BOOST_TEST_MODULE agent_background
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "base/json.hpp"
#include "storage/session_store.hpp"
#include "tests/support/background_fixture.hpp"

using namespace mibyan;
using namespace std::chrono;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

size_t count_of(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (auto p = s.find(part); p != std::string::npos;
       p = s.find(part, p + part.size()))
    ++n;
  return n;
}

using test::completion;

constexpr const char* child_match = "You are a subagent";

// A completion with several tool calls (ids call_1, call_2, ...).
std::string multi_call(const std::vector<std::pair<std::string, std::string>>&
                         calls) {
  json::value msg;
  msg["role"] = "assistant";
  msg["content"] = "";
  msg["tool_calls"] = json::value::make_array();
  int i = 0;
  for (auto& [name, args] : calls) {
    json::value c;
    c["id"] = "call_" + std::to_string(++i);
    c["type"] = "function";
    c["function"]["name"] = name;
    c["function"]["arguments"] = args;
    msg["tool_calls"].push_back(std::move(c));
  }
  json::value choice;
  choice["index"] = 0;
  choice["message"] = std::move(msg);
  choice["finish_reason"] = "tool_calls";
  json::value body;
  body["id"] = "x";
  body["object"] = "chat.completion";
  body["model"] = "m";
  body["choices"] = json::value::make_array();
  body["choices"].push_back(std::move(choice));
  return body.dump();
}

using fixture = test::background_fixture;

// The task id in a background delegate_task result (its first task).
std::string task_id_in(const std::string& result) {
  auto parsed = json::parse(result);
  BOOST_REQUIRE_MESSAGE(parsed && parsed.v->is_object(), result);
  auto& tasks = (*parsed.v)["tasks"];
  BOOST_REQUIRE_MESSAGE(tasks.is_array() && tasks.size() > 0, result);
  return tasks.as_array()[0].get_string("task_id");
}

std::string bg_args(const std::string& goal) {
  json::value a;
  a["goal"] = goal;
  a["background"] = true;
  return a.dump();
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(agent_background, fixture)

// The summary of a background child arrives at the start of the parent's
// next turn, in a later `mibyan run` of the same session, exactly once;
// the child was offered the default toolsets only.
BOOST_AUTO_TEST_CASE(run_resume_delivers_the_summary_once) {
  script("ASK-ONE", completion("", "delegate_task",
                               bg_args("count the GOAL-APPLES")));
  // The child answers once the parent's turn is over: the run waits for
  // it before it exits.
  script(child_match, completion("CHILD-SUMMARY: 7 apples"), "apples");
  script("ASK-ONE", completion("Started it."));
  std::thread releaser([&] {
    wait_for([&] { return requests_with("ASK-ONE").size() == 2; }, 60);
    release("apples");
  });
  auto r1 = test::run_mibyan(run_args("bg-1", "ASK-ONE"), env());
  releaser.join();
  BOOST_CHECK_EQUAL(r1.exit_code, 0);
  BOOST_CHECK_EQUAL(r1.out, "Started it.\n");
  // The call returned at once with the task id.
  auto parent = requests_with("ASK-ONE");
  BOOST_REQUIRE_EQUAL(parent.size(), 2u);
  auto started = tool_result(parent[1], "call_1");
  BOOST_CHECK(contains(started, "\"status\":\"running\""));
  auto id = task_id_in(started);
  BOOST_CHECK(contains(id, "bg-1::child::"));
  // The child: the default toolsets (terminal, file, web), not the
  // parent's whole set.
  auto child = requests_with("GOAL-APPLES");
  json::value* child_req = nullptr;
  for (auto& r : child)
    if (contains(r["messages"].dump(), child_match))
      child_req = &r;
  BOOST_REQUIRE(child_req != nullptr);
  auto tools = (*child_req)["tools"].dump();
  for (auto* t : {"\"terminal\"", "\"process\"", "\"read_file\"",
                  "\"write_file\"", "\"patch\"", "\"search_files\"",
                  "\"web_search\"", "\"web_extract\""})
    BOOST_CHECK_MESSAGE(contains(tools, t), t);
  for (auto* t : {"\"execute_code\"", "\"todo\"", "\"skills_list\"",
                  "\"session_search\"", "\"delegate_task\"", "\"memory\""})
    BOOST_CHECK_MESSAGE(!contains(tools, t), t);
  BOOST_CHECK(contains(parent[0]["tools"].dump(), "\"execute_code\""));
  // Stored: the child's session, ended, with its summary.
  auto kids = background_children("bg-1");
  BOOST_REQUIRE_EQUAL(kids.size(), 1u);
  BOOST_CHECK_EQUAL(kids[0].id, id);
  BOOST_CHECK_EQUAL(kids[0].end_reason, "delegation_done");

  script("ASK-TWO", completion("Noted the apples."));
  auto r2 = test::run_mibyan(run_args("bg-1", "ASK-TWO"), env());
  BOOST_CHECK_EQUAL(r2.exit_code, 0);
  auto two = requests_with("ASK-TWO");
  BOOST_REQUIRE_EQUAL(two.size(), 1u);
  // The notice comes before the new prompt (stored as its own message).
  auto last = last_user(two[0]);
  auto at = last.find("[background task " + id + ": ok]");
  BOOST_CHECK_MESSAGE(at != std::string::npos, last);
  BOOST_CHECK_LT(at, last.find("ASK-TWO"));
  BOOST_CHECK(contains(last, "CHILD-SUMMARY: 7 apples"));
  BOOST_CHECK(contains(last, "GOAL-APPLES"));
  {
    auto store = open_store();
    auto msgs = store->load_messages("bg-1");
    BOOST_REQUIRE(msgs);
    size_t n = msgs->size();
    BOOST_REQUIRE_GE(n, 3u);
    BOOST_CHECK(contains((*msgs)[n - 3].message.content,
                         "[background task " + id + ": ok]"));
    BOOST_CHECK_EQUAL((*msgs)[n - 2].message.content, "ASK-TWO");
  }

  // Delivered once: the third run sees it in the history only.
  script("ASK-THREE", completion("Fine."));
  auto r3 = test::run_mibyan(run_args("bg-1", "ASK-THREE"), env());
  BOOST_CHECK_EQUAL(r3.exit_code, 0);
  auto three = requests_with("ASK-THREE");
  BOOST_REQUIRE_EQUAL(three.size(), 1u);
  BOOST_CHECK_EQUAL(count_of(three[0]["messages"].dump(),
                             "[background task " + id),
                    1u);
}

// A child still running when its process dies is reported as interrupted
// at the next turn (and ended so in the store); a child whose provider
// fails is reported as failed.
BOOST_AUTO_TEST_CASE(dead_process_and_failed_provider) {
  write_config("agent:\n  api_max_retries: 1\n");
  script("ASK-ONE", multi_call({{"delegate_task", bg_args("never ends")},
                                {"delegate_task", bg_args("will fail")}}));
  // First child request: held until the test is over; second: an error.
  script(child_match, completion("never sent"), "forever");
  script(child_match, R"({"error":{"message":"bad request for PROVIDER-FAIL"}})",
         {}, 400);
  script("ASK-ONE", completion("Both started."));
  std::atomic<int> run1{-1};
  auto o = env();
  o.on_started = [&](int pid) { run1 = pid; };
  std::thread t([&] { test::run_mibyan(run_args("bg-2", "ASK-ONE"), o); });
  // A failed requirement below must not leave the thread joinable.
  struct joiner {
    std::thread& t;
    std::atomic<int>& pid;
    ~joiner() {
      if (!t.joinable())
        return;
      if (pid > 0)
        ::kill(pid, SIGKILL);
      t.join();
    }
  } guard{t, run1};
  // Both children asked, and the failed one ended: kill the process now.
  BOOST_REQUIRE(wait_for([&] {
    auto kids = background_children("bg-2");
    size_t ended = 0;
    for (auto& k : kids)
      ended += k.ended_at_ms != 0;
    return kids.size() == 2 && ended == 1
           && requests_with(child_match).size() == 2;
  }));
  BOOST_REQUIRE_GT(run1.load(), 0);
  ::kill(run1.load(), SIGKILL);
  t.join();
  std::string open_id;
  for (auto& k : background_children("bg-2"))
    if (k.ended_at_ms == 0)
      open_id = k.id;
  BOOST_REQUIRE(!open_id.empty());

  script("ASK-TWO", completion("Understood."));
  auto r2 = test::run_mibyan(run_args("bg-2", "ASK-TWO"), env());
  BOOST_CHECK_EQUAL(r2.exit_code, 0);
  auto two = requests_with("ASK-TWO");
  BOOST_REQUIRE_EQUAL(two.size(), 1u);
  auto msgs = two[0]["messages"].dump();
  BOOST_CHECK_MESSAGE(
    contains(msgs, "[background task " + open_id + ": interrupted]"), msgs);
  BOOST_CHECK(contains(msgs, "stopped before it finished"));
  BOOST_CHECK(contains(msgs, ": error]"));
  BOOST_CHECK_MESSAGE(contains(msgs, "PROVIDER-FAIL"), msgs);
  // The dead child is ended in the store now.
  BOOST_CHECK(wait_for([&] {
    for (auto& k : background_children("bg-2"))
      if (k.id == open_id)
        return k.end_reason == "interrupted";
    return false;
  }));
  release("forever");
}

// In `mibyan chat`: status and cancel of a running child, errors for an
// unknown or ended task, and a finished child announced while the prompt
// waits and delivered at the next turn.
BOOST_AUTO_TEST_CASE(chat_status_cancel_and_announcement) {
  script("ASK-ONE", completion("", "delegate_task", bg_args("slow job")));
  script(child_match, completion("never sent"), "slow");
  script("ASK-ONE", completion("started slow"));
  chat_proc c;
  spawn(args("chat"), c, "chat");
  send_line(c, "ASK-ONE");
  BOOST_REQUIRE(wait_output("chat", "started slow"));
  auto one = requests_with("ASK-ONE");
  BOOST_REQUIRE_EQUAL(one.size(), 2u);
  auto id = task_id_in(tool_result(one[1], "call_1"));

  json::value st;
  st["action"] = "status";
  st["id"] = id;
  script("ASK-TWO", completion("", "delegate_task", st.dump()));
  script("ASK-TWO", completion("status checked"));
  send_line(c, "ASK-TWO");
  BOOST_REQUIRE(wait_output("chat", "status checked"));
  auto two = requests_with("ASK-TWO");
  BOOST_REQUIRE_EQUAL(two.size(), 2u);
  auto status = last_result(two[1]);
  BOOST_CHECK_MESSAGE(contains(status, "\"status\":\"running\""), status);
  BOOST_CHECK(contains(status, "slow job"));

  json::value cancel;
  cancel["action"] = "cancel";
  cancel["id"] = id;
  script("ASK-THREE", completion("", "delegate_task", cancel.dump()));
  script("ASK-THREE", completion("cancelled it"));
  send_line(c, "ASK-THREE");
  BOOST_REQUIRE(wait_output("chat", "cancelled it"));
  auto three = requests_with("ASK-THREE");
  BOOST_REQUIRE_EQUAL(three.size(), 2u);
  BOOST_CHECK(contains(last_result(three[1]),
                       "\"status\":\"cancelled\""));
  BOOST_CHECK(wait_for([&] {
    for (auto& k : background_children(id.substr(0, id.find("::"))))
      if (k.id == id)
        return k.end_reason == "cancelled";
    return false;
  }));

  // Cancel again: it ended. Status of an unknown id. A bad action.
  json::value unknown;
  unknown["action"] = "status";
  unknown["id"] = "no-such-task";
  json::value bad;
  bad["action"] = "explode";
  script("ASK-FOUR", multi_call({{"delegate_task", cancel.dump()},
                                 {"delegate_task", unknown.dump()},
                                 {"delegate_task", bad.dump()}}));
  script("ASK-FOUR", completion("errors seen"));
  send_line(c, "ASK-FOUR");
  BOOST_REQUIRE(wait_output("chat", "errors seen"));
  auto four = requests_with("ASK-FOUR");
  BOOST_REQUIRE_EQUAL(four.size(), 2u);
  auto again = last_result(four[1], 0);
  BOOST_CHECK_MESSAGE(contains(again, "already ended (cancelled)"), again);
  BOOST_CHECK(contains(last_result(four[1], 1),
                       "no background task 'no-such-task'"));
  BOOST_CHECK(contains(last_result(four[1], 2),
                       "unknown action 'explode'"));

  // A fast child: announced, then delivered at the next turn.
  script("ASK-FIVE", completion("", "delegate_task", bg_args("fast job")));
  script(child_match, completion("FAST-SUMMARY all done"));
  script("ASK-FIVE", completion("started fast"));
  send_line(c, "ASK-FIVE");
  BOOST_REQUIRE(wait_output("chat", "started fast"));
  BOOST_REQUIRE_MESSAGE(wait_output("chat", "FAST-SUMMARY all done"),
                        output("chat"));
  auto out = output("chat");
  BOOST_CHECK_MESSAGE(contains(out, "[background] task "), out);
  auto fast_id = task_id_in(last_result(requests_with("ASK-FIVE")[1]));
  script("ASK-SIX", completion("six"));
  send_line(c, "ASK-SIX");
  BOOST_REQUIRE(wait_output("chat", "six"));
  auto six = requests_with("ASK-SIX");
  BOOST_REQUIRE_EQUAL(six.size(), 1u);
  auto msgs = six[0]["messages"].dump();
  BOOST_CHECK(contains(msgs, "[background task " + fast_id + ": ok]"));
  BOOST_CHECK(contains(msgs, "FAST-SUMMARY all done"));
  // The cancelled task sends no notice.
  BOOST_CHECK(!contains(msgs, "[background task " + id));
  BOOST_CHECK_EQUAL(finish(c), 0);
  release("slow");
}

// terminal(background, notify_on_complete): the exit status and output
// tail reach the next turn; many at once are merged beyond
// delegation.max_pending_notices.
BOOST_AUTO_TEST_CASE(notify_on_complete_and_merged_notices) {
  write_config("delegation:\n  max_pending_notices: 2\n");
  auto term = [](const std::string& cmd) {
    json::value a;
    a["command"] = cmd;
    a["background"] = true;
    a["notify_on_complete"] = true;
    return a.dump();
  };
  script("ASK-ONE", completion("", "terminal",
                               term("echo NOTIFY-OUT-1; exit 3")));
  script("ASK-ONE", completion("launched"));
  chat_proc c;
  spawn(args("chat"), c, "chat");
  send_line(c, "ASK-ONE");
  BOOST_REQUIRE(wait_output("chat", "launched"));
  auto one = requests_with("ASK-ONE");
  BOOST_REQUIRE_EQUAL(one.size(), 2u);
  auto started = tool_result(one[1], "call_1");
  BOOST_CHECK_MESSAGE(contains(started, "no need to poll"), started);
  BOOST_REQUIRE_MESSAGE(wait_output("chat", "exited with code 3"),
                        output("chat"));
  BOOST_CHECK(contains(output("chat"), "[background] process proc_"));
  script("ASK-TWO", completion("seen"));
  send_line(c, "ASK-TWO");
  BOOST_REQUIRE(wait_output("chat", "seen"));
  auto two = requests_with("ASK-TWO");
  BOOST_REQUIRE_EQUAL(two.size(), 1u);
  auto notice = last_user(two[0]);
  BOOST_CHECK_MESSAGE(contains(notice, "[background process proc_"), notice);
  BOOST_CHECK(contains(notice, ": exited 3]"));
  BOOST_CHECK(contains(notice, "NOTIFY-OUT-1"));

  // Four at once, two kept: the oldest three merged into one message.
  script("ASK-THREE", multi_call({{"terminal", term("echo MANY-1")},
                                  {"terminal", term("echo MANY-2")},
                                  {"terminal", term("echo MANY-3")},
                                  {"terminal", term("echo MANY-4")}}));
  script("ASK-THREE", completion("four launched"));
  send_line(c, "ASK-THREE");
  BOOST_REQUIRE(wait_output("chat", "four launched"));
  BOOST_REQUIRE(wait_for([&] {
    return count_of(output("chat"), "[background] process") == 5;
  }));
  script("ASK-FOUR", completion("merged seen"));
  send_line(c, "ASK-FOUR");
  BOOST_REQUIRE(wait_output("chat", "merged seen"));
  auto four = requests_with("ASK-FOUR");
  BOOST_REQUIRE_EQUAL(four.size(), 1u);
  // One merged message (the oldest three), then the newest whole, then the
  // prompt.
  auto last = last_user(four[0]);
  auto merged_at = last.find("[background: 3 events");
  BOOST_REQUIRE_MESSAGE(merged_at != std::string::npos, last);
  BOOST_CHECK_EQUAL(count_of(last, "[background process proc_"), 4u);
  BOOST_CHECK_EQUAL(count_of(last, "The background process you started"), 1u);
  BOOST_CHECK(contains(last, "MANY-"));
  BOOST_CHECK_LT(last.rfind("[background process proc_"), last.find("ASK-FOUR"));
  BOOST_CHECK_EQUAL(finish(c), 0);
}

// The parent session deleted while its background child runs: the child's
// end is announced, its own session keeps the summary, the chat goes on.
BOOST_AUTO_TEST_CASE(parent_deleted_while_a_child_runs) {
  script("ASK-ONE", completion("", "delegate_task", bg_args("orphan job")));
  script(child_match, completion("ORPHAN-SUMMARY kept"), "orphan");
  script("ASK-ONE", completion("orphan started"));
  chat_proc c;
  auto a = args("chat");
  a.insert(a.end(), {"--session", "bg-del"});
  spawn(a, c, "chat");
  send_line(c, "ASK-ONE");
  BOOST_REQUIRE(wait_output("chat", "orphan started"));
  BOOST_REQUIRE(wait_for([&] { return requests_with(child_match).size() == 1; }));
  auto kids = background_children("bg-del");
  BOOST_REQUIRE_EQUAL(kids.size(), 1u);
  auto child_id = kids[0].id;
  auto del = test::run_mibyan({"sessions", "delete", "bg-del"}, env());
  BOOST_REQUIRE_MESSAGE(del.exit_code == 0, del.err);
  release("orphan");
  BOOST_REQUIRE_MESSAGE(wait_output("chat", "ORPHAN-SUMMARY kept"),
                        output("chat"));
  // Nothing stored is lost: the child's session holds its summary.
  BOOST_CHECK(wait_for([&] {
    auto store = open_store();
    auto msgs = store->load_messages(child_id);
    return msgs && !msgs->empty()
           && contains(msgs->back().message.content, "ORPHAN-SUMMARY kept");
  }));
  // The next turn fails clearly (its session is gone); the chat goes on.
  send_line(c, "ASK-TWO");
  BOOST_CHECK(wait_for([&] {
    return contains(test::slurp(home / "chat.err"), "bg-del");
  }));
  BOOST_CHECK_EQUAL(finish(c), 0);
}

// Named toolsets narrow a child further, and never beyond the parent's;
// bad toolsets and the background limit are refused with clear errors.
BOOST_AUTO_TEST_CASE(child_toolsets_and_limits) {
  write_config("delegation:\n  max_background_children: 1\n");
  json::value named;
  named["goal"] = "use only files";
  named["toolsets"] = json::value::make_array();
  named["toolsets"].push_back("file");
  named["toolsets"].push_back("web");
  json::value bogus;
  bogus["goal"] = "x";
  bogus["toolsets"] = json::value::make_array();
  bogus["toolsets"].push_back("nope");
  json::value two_bg;
  two_bg["tasks"] = json::value::make_array();
  two_bg["tasks"].push_back("first");
  two_bg["tasks"].push_back("second");
  two_bg["background"] = true;
  script("ASK-ONE", multi_call({{"delegate_task", bogus.dump()},
                                {"delegate_task", two_bg.dump()}}));
  script("ASK-ONE", completion("", "delegate_task", named.dump()));
  script(child_match, completion("files only"));
  script("ASK-ONE", completion("done"));
  auto a = args("run");
  // The parent has no web tools: the child cannot get them either.
  a.insert(a.end(), {"--toolsets", "terminal,file,delegation", "--session",
                     "bg-sets", "ASK-ONE"});
  auto r = test::run_mibyan(a, env());
  BOOST_CHECK_MESSAGE(r.exit_code == 0, r.err);
  auto one = requests_with("ASK-ONE");
  BOOST_REQUIRE_EQUAL(one.size(), 3u);
  BOOST_CHECK(contains(tool_result(one[1], "call_1"),
                       "unknown toolset 'nope'"));
  auto limit = tool_result(one[1], "call_2");
  BOOST_CHECK_MESSAGE(contains(limit, "at most 1 background subagents"),
                      limit);
  BOOST_CHECK(background_children("bg-sets").empty());
  json::value* child = nullptr;
  auto all = requests();
  for (auto& q : all)
    if (contains(q["messages"].dump(), child_match))
      child = &q;
  BOOST_REQUIRE(child != nullptr);
  auto tools = (*child)["tools"].dump();
  BOOST_CHECK(contains(tools, "\"read_file\""));
  BOOST_CHECK(!contains(tools, "\"terminal\""));
  BOOST_CHECK(!contains(tools, "\"web_search\""));
}

// A child inherits the parent's active skill variables: the variable a
// skill the parent viewed requires reaches the child's terminal.
BOOST_AUTO_TEST_CASE(child_inherits_skill_variables) {
  namespace fs = std::filesystem;
  fs::create_directories(home / "skills/envskill");
  std::ofstream(home / "skills/envskill/SKILL.md")
    << "---\nname: envskill\ndescription: Needs a token\n"
       "required_environment_variables:\n  - BGTEST_API_TOKEN\n---\n"
       "Use the token.\n";
  json::value view;
  view["name"] = "envskill";
  json::value cmd;
  cmd["command"] = "if [ -n \"$BGTEST_API_TOKEN\" ]; then echo TOKEN-PRESENT; "
                   "else echo TOKEN-ABSENT; fi";
  script("ASK-ONE", completion("", "skill_view", view.dump()));
  script("ASK-ONE", completion("", "delegate_task",
                               R"({"goal":"check the token"})"));
  script(child_match, completion("", "terminal", cmd.dump()));
  script(child_match, completion("checked"));
  script("ASK-ONE", completion("done"));
  auto o = env();
  o.env["BGTEST_API_TOKEN"] = "value-for-the-test";
  auto r = test::run_mibyan(run_args("bg-skill", "ASK-ONE"), o);
  BOOST_CHECK_MESSAGE(r.exit_code == 0, r.err);
  auto child = requests_with(child_match);
  BOOST_REQUIRE_EQUAL(child.size(), 2u);
  auto out = tool_result(child[1], "call_1");
  BOOST_CHECK_MESSAGE(contains(out, "TOKEN-PRESENT"), out);
}

// Many children at once: one merged message keeps every task's marker,
// so a later process delivers none of them again.
BOOST_AUTO_TEST_CASE(many_children_are_merged_and_never_delivered_twice) {
  write_config("delegation:\n  max_background_children: 64\n"
               "  max_pending_notices: 2\n");
  json::value many;
  many["background"] = true;
  many["tasks"] = json::value::make_array();
  for (int i = 0; i < 55; ++i)
    many["tasks"].push_back(json::value{"job number " + std::to_string(i)});
  script("ASK-ONE", completion("", "delegate_task", many.dump()));
  script(child_match, completion("child summary"), {}, 200, 55);
  script("ASK-ONE", completion("all started"));
  auto r1 = test::run_mibyan(run_args("bg-many", "ASK-ONE"), env());
  BOOST_REQUIRE_MESSAGE(r1.exit_code == 0, r1.err);
  BOOST_REQUIRE_EQUAL(background_children("bg-many").size(), 55u);
  script("ASK-", completion("ok"), {}, 200, 2);
  auto r2 = test::run_mibyan(run_args("bg-many", "ASK-TWO"), env());
  BOOST_CHECK_EQUAL(r2.exit_code, 0);
  auto two = requests_with("ASK-TWO");
  BOOST_REQUIRE_EQUAL(two.size(), 1u);
  auto last = last_user(two[0]);
  BOOST_CHECK_EQUAL(count_of(last, "[background task bg-many::child::"), 55u);
  BOOST_CHECK(contains(last, "[background: 54 events"));
  BOOST_CHECK_EQUAL(count_of(last, "The background subagent you started"),
                    1u);
  auto r3 = test::run_mibyan(run_args("bg-many", "ASK-THREE"), env());
  BOOST_CHECK_EQUAL(r3.exit_code, 0);
  auto three = requests_with("ASK-THREE");
  BOOST_REQUIRE_EQUAL(three.size(), 1u);
  BOOST_CHECK_EQUAL(count_of(three[0]["messages"].dump(),
                             "[background task bg-many::child::"),
                    55u);
}

BOOST_AUTO_TEST_SUITE_END()
