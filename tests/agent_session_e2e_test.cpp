// One scripted multi-turn session through the real runtime against the
// scripted provider (docs/tools.md, "Agent tools" and "delegate_task";
// docs/agent_loop.md, "Context compression"): across several turns of one
// session the model writes memory, creates and views a skill, writes a todo
// plan, searches an earlier session, delegates to a child, then crosses the
// compression threshold and goes on in a child session, where a new runtime
// still reads the plan. The assertions are on the real effects: files under
// MIBYAN_HOME, the stored sessions and their chain, and the tool results.
#define BOOST_TEST_MODULE agent_session_e2e
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tests/support/agent_fixture.hpp"
#include "tests/support/process.hpp"

using namespace mibyan;
using namespace mibyan::test;
namespace fs = std::filesystem;

namespace {

std::string with_prompt_tokens(const std::string& body, int64_t n) {
  auto j = json::parse(body);
  BOOST_REQUIRE(j);
  (*j.v)["usage"]["prompt_tokens"] = n;
  return j.v->dump();
}

// The content of the tool message answering `call_id` in a turn result.
std::string tool_result(json::value& res, const std::string& call_id) {
  for (auto& m : res["messages"].as_array())
    if (m["role"].as_string() == "tool"
        && m.get_string("tool_call_id") == call_id)
      return m["content"].as_string();
  BOOST_FAIL("no result for " + call_id);
  return {};
}

// Every call id of the stored session has exactly one result, and every
// result answers a call.
void check_stored_pairing(session_store& store, const std::string& sid) {
  auto msgs = store.load_messages(sid);
  BOOST_REQUIRE_MESSAGE(msgs, sid);
  std::map<std::string, int> calls, results;
  for (auto& m : *msgs) {
    for (auto& c : m.message.tool_calls)
      ++calls[c.id];
    if (m.message.role == "tool")
      ++results[m.message.tool_call_id];
  }
  BOOST_CHECK_MESSAGE(calls == results, "unpaired tool calls in " << sid);
  for (auto& [id, n] : calls)
    BOOST_CHECK_MESSAGE(n == 1, sid << ": " << id);
}

const char* skill_md =
  "---\n"
  "name: herd-count\n"
  "description: How to count walrus herds\n"
  "---\n"
  "# Herd count\nCount tusks, divide by two.\n";

} // namespace

BOOST_FIXTURE_TEST_SUITE(agent_session_e2e, agent_fixture)

BOOST_AUTO_TEST_CASE(one_session_uses_every_agent_tool_and_compresses) {
  auto opts = base_options();
  opts.model.context_length = 40000; // threshold 34000 tokens
  opts.compression.protect_first_n = 1;
  opts.compression.protect_last_n = 2;
  start(opts);
  const std::string main_id = "e2e-main";

  // An earlier, different session for session_search to find.
  script(chat_completion("Walruses migrate north along the ice in spring."));
  run(call("Tell me about the walrus migration", "e2e-earlier"));

  // Turn 1: memory, a new skill, the skill viewed, a plan.
  json::value mem, skill, plan;
  mem["action"] = "add";
  mem["target"] = "memory";
  mem["content"] = "Project codename is BLUEFIN.";
  skill["action"] = "create";
  skill["name"] = "herd-count";
  skill["category"] = "field";
  skill["content"] = skill_md;
  plan["todos"] = json::value::make_array();
  for (auto [id, what, st] : {std::tuple{"1", "survey the herds", "in_progress"},
                              std::tuple{"2", "write the report", "pending"}}) {
    json::value t;
    t["id"] = id;
    t["content"] = what;
    t["status"] = st;
    plan["todos"].push_back(std::move(t));
  }
  script(chat_completion("", {{"c_mem", "memory", mem.dump()}}));
  script(chat_completion("", {{"c_skill", "skill_manage", skill.dump()}}));
  script(chat_completion("", {{"c_view", "skill_view",
                               one_arg("name", "herd-count")}}));
  script(chat_completion("", {{"c_todo", "todo", plan.dump()}}));
  script(chat_completion("Set up: noted, skill made, plan written."));
  auto r1 = run(call("Set up the walrus survey", main_id));
  BOOST_CHECK_EQUAL(r1["final_response"].as_string(),
                    "Set up: noted, skill made, plan written.");
  BOOST_CHECK(contains(tool_result(r1, "c_mem"), "\"success\":true"));
  BOOST_CHECK(contains(tool_result(r1, "c_skill"), "\"success\":true"));
  BOOST_CHECK(contains(tool_result(r1, "c_view"), "Count tusks, divide by two."));
  BOOST_CHECK(contains(tool_result(r1, "c_todo"), "\"in_progress\":1"));

  // Turn 2: search the earlier session.
  script(chat_completion("", {{"c_search", "session_search",
                               one_arg("query", "walrus migration")}}));
  script(chat_completion("We talked about the spring migration."));
  auto r2 = run(call("What did we say about walruses before?", main_id));
  {
    auto text = tool_result(r2, "c_search");
    auto parsed = json::parse(text);
    BOOST_REQUIRE_MESSAGE(parsed, text);
    auto& s = *parsed.v;
    BOOST_REQUIRE_EQUAL(s.get_int("count", 0), 1); // the current one excluded
    auto& hit = s.find("results")->as_array()[0];
    BOOST_CHECK_EQUAL(hit.get_string("session_id"), "e2e-earlier");
    BOOST_CHECK(contains(hit.dump(), "migrate north along the ice"));
  }

  // Turn 3: delegate to a child.
  script(chat_completion("", {{"c_deleg", "delegate_task",
                               one_arg("goal", "count the walrus herds")}}));
  script(chat_completion("child: 12 herds counted"));
  script(chat_completion("The child counted 12 herds."));
  auto r3 = run(call("Delegate the herd count", main_id));
  BOOST_CHECK_EQUAL(r3["final_response"].as_string(),
                    "The child counted 12 herds.");
  BOOST_CHECK(contains(tool_result(r3, "c_deleg"), "child: 12 herds counted"));

  // Turn 4: the plan is updated, the provider reports a prompt over the
  // threshold, the middle is summarised and the turn ends in a new session.
  json::value done;
  done["merge"] = true;
  done["todos"] = json::value::make_array();
  {
    json::value t;
    t["id"] = "1";
    t["content"] = "survey the herds";
    t["status"] = "completed";
    done["todos"].push_back(std::move(t));
  }
  script(with_prompt_tokens(
    chat_completion("", {{"c_todo2", "todo", done.dump()}}), 36000));
  script(chat_completion("SUMMARY: survey set up, 12 herds counted."));
  script(chat_completion("Survey done; the report is next."));
  std::string new_id;
  auto r4 = run(call("Mark the survey done", main_id), &new_id);
  BOOST_CHECK_EQUAL(r4["final_response"].as_string(),
                    "Survey done; the report is next.");
  BOOST_REQUIRE_NE(new_id, main_id);
  BOOST_REQUIRE(!new_id.empty());

  // Turn 5, in a new runtime (a new process would do the same): the
  // compressed session is resumed and the plan is read back.
  rt.reset();
  start(opts);
  script(chat_completion("", {{"c_read", "todo", "{}"}}));
  script(chat_completion("One item left: the report."));
  std::string last_id;
  auto r5 = run(call("What is left?", new_id), &last_id);
  BOOST_CHECK_EQUAL(last_id, new_id);
  {
    auto parsed = json::parse(tool_result(r5, "c_read"));
    BOOST_REQUIRE(parsed);
    auto& t = *parsed.v;
    BOOST_REQUIRE_EQUAL(t.find("todos")->size(), 2u);
    BOOST_CHECK_EQUAL(t.find("summary")->get_int("completed", -1), 1);
    BOOST_CHECK_EQUAL(t.find("summary")->get_int("pending", -1), 1);
    BOOST_CHECK(contains(t.dump(), "write the report"));
  }

  // The provider saw: 1 + 5 + 2 + 3 + 3 + 2 requests; the summary request
  // was tool-free; the child was offered no delegate_task.
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 16u);
  BOOST_CHECK(contains(reqs[9].dump(), "count the walrus herds"));
  BOOST_CHECK(!contains(reqs[9]["tools"].dump(), "\"delegate_task\""));
  BOOST_CHECK(reqs[12].find("tools") == nullptr);
  BOOST_CHECK(contains(reqs[13]["messages"].dump(), "SUMMARY: survey set up"));

  // Memory and the skill are on disk.
  BOOST_CHECK(contains(home.read("memories/MEMORY.md"),
                       "Project codename is BLUEFIN."));
  BOOST_CHECK(fs::is_regular_file(home.path()
                                  + "/skills/field/herd-count/SKILL.md"));
  BOOST_CHECK_EQUAL(home.read("skills/field/herd-count/SKILL.md"), skill_md);

  // The store: the chain, the child, and every call paired in every session.
  auto store = open_store();
  auto old_info = store->get_session(main_id);
  auto new_info = store->get_session(new_id);
  BOOST_REQUIRE(old_info && new_info);
  BOOST_CHECK_EQUAL(new_info->parent_session_id, main_id);
  BOOST_CHECK_EQUAL(old_info->end_reason, "compression");
  auto list = store->list_sessions(1000, 0);
  BOOST_REQUIRE(list);
  std::vector<session_info> kids;
  for (auto& s : *list) {
    check_stored_pairing(*store, s.id);
    if (s.parent_session_id == main_id && s.id != new_id)
      kids.push_back(s);
  }
  BOOST_CHECK_EQUAL(list->size(), 4u); // earlier, main, child, continuation
  BOOST_REQUIRE_EQUAL(kids.size(), 1u);
  BOOST_CHECK_EQUAL(kids[0].source, "delegate");
  {
    auto msgs = store->load_messages(kids[0].id);
    BOOST_REQUIRE(msgs && msgs->size() == 2u);
    BOOST_CHECK(contains((*msgs)[0].message.content, "count the walrus herds"));
    BOOST_CHECK_EQUAL((*msgs)[1].message.content, "child: 12 herds counted");
  }
  {
    auto msgs = store->load_messages(new_id);
    BOOST_REQUIRE(msgs);
    BOOST_CHECK_EQUAL(msgs->back().message.content,
                      "One item left: the report.");
  }
  store.reset();

  // The CLI shows the chain.
  process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  auto shown = run_mibyan({"sessions", "show", main_id, "--json"}, po);
  BOOST_REQUIRE_EQUAL(shown.exit_code, 0);
  auto j = json::parse(shown.out);
  BOOST_REQUIRE_MESSAGE(j, shown.out.substr(0, 400));
  BOOST_CHECK_EQUAL((*j.v)["children"].size(), 2u);
  BOOST_CHECK(contains((*j.v)["children"].dump(), "\"" + new_id + "\""));
  BOOST_CHECK(contains((*j.v)["children"].dump(), "\"" + kids[0].id + "\""));
  shown = run_mibyan({"sessions", "show", main_id}, po);
  BOOST_CHECK(contains(shown.out, "continued in: " + new_id));
  BOOST_CHECK(contains(shown.out, "subagent: " + kids[0].id));
  shown = run_mibyan({"sessions", "show", new_id}, po);
  BOOST_CHECK_EQUAL(shown.exit_code, 0);
  BOOST_CHECK_MESSAGE(
    contains(shown.out, "chain: " + main_id + " -> " + new_id + " (this)"),
    shown.out.substr(0, 400));
}

BOOST_AUTO_TEST_SUITE_END()
