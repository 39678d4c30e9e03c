// delegate_task through the real runtime against the scripted provider:
// children run in parallel as child sessions, with their own budget,
// kernels and processes, and stop when the parent is interrupted
// (docs/tools.md, "delegate_task").
#define BOOST_TEST_MODULE agent_delegate
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <dirent.h>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/turn_result.hpp"
#include "tests/support/agent_fixture.hpp"

using namespace mibyan;
using namespace mibyan::test;
using namespace std::chrono;

namespace {

std::string delegate_args(const std::vector<std::string>& goals) {
  json::value a;
  a["tasks"] = json::value::make_array();
  for (auto& g : goals) {
    json::value t;
    t["goal"] = g;
    a["tasks"].push_back(std::move(t));
  }
  return a.dump();
}

// The delegate_task result in the turn's messages (parsed).
json::value delegate_result(json::value& res) {
  for (auto& m : res["messages"].as_array())
    if (m["role"].as_string() == "tool"
        && m.get_string("name") == "delegate_task") {
      auto text = m["content"].as_string();
      // Large results carry an untrusted-content wrapper; the JSON is
      // inside it.
      auto b = text.find('{');
      auto e = text.rfind('}');
      BOOST_REQUIRE(b != std::string::npos && e != std::string::npos);
      auto parsed = json::parse(text.substr(b, e - b + 1));
      BOOST_REQUIRE_MESSAGE(parsed, text);
      return *parsed.v;
    }
  BOOST_FAIL("no delegate_task result");
  return {};
}

std::vector<session_info> children_of(session_store& store,
                                      const std::string& parent) {
  std::vector<session_info> out;
  auto list = store.list_sessions(1000, 0);
  BOOST_REQUIRE(list);
  for (auto& s : *list)
    if (s.parent_session_id == parent)
      out.push_back(s);
  return out;
}

// Pids of processes whose command line contains `needle`.
std::vector<pid_t> processes_with(const std::string& needle) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr)
    return out;
  while (auto* e = ::readdir(d)) {
    pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0 || pid == ::getpid())
      continue;
    std::ifstream in("/proc/" + std::string{e->d_name} + "/cmdline");
    std::stringstream ss;
    ss << in.rdbuf();
    auto cmd = ss.str();
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(needle) != std::string::npos)
      out.push_back(pid);
  }
  ::closedir(d);
  return out;
}

bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0)
    return errno != ESRCH;
  // A zombie is gone for our purposes.
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  auto p = stat.rfind(')');
  return p == std::string::npos || p + 2 >= stat.size() || stat[p + 2] != 'Z';
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(agent_delegate, agent_fixture)

BOOST_AUTO_TEST_CASE(three_children_run_in_parallel) {
  start(base_options());
  script(chat_completion("", {{"call_d", "delegate_task",
                               delegate_args({"count the apples",
                                              "count the pears",
                                              "count the plums"})}}));
  // Each child answers after a pause; run one after another they would
  // not overlap.
  script(chat_completion("child summary: 7 found"), 3, 700);
  script(chat_completion("All three counted."));
  std::string sid = "deleg-parallel";
  auto res = run(call("count the fruit", sid));
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "All three counted.");
  auto d = delegate_result(res);
  BOOST_REQUIRE_EQUAL(d["results"].size(), 3u);
  std::set<int64_t> indexes;
  for (auto& r : d["results"].as_array()) {
    BOOST_CHECK_EQUAL(r["status"].as_string(), "ok");
    BOOST_CHECK_EQUAL(r["summary"].as_string(), "child summary: 7 found");
    BOOST_CHECK_EQUAL(r["api_calls"].as_int(), 1);
    indexes.insert(r["task_index"].as_int());
  }
  BOOST_CHECK_EQUAL(indexes.size(), 3u);
  // The children were offered neither delegation, clarify nor memory.
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 5u);
  for (size_t i = 1; i <= 3; ++i) {
    auto tools = reqs[i]["tools"].dump();
    BOOST_CHECK(!contains(tools, "\"delegate_task\""));
    BOOST_CHECK(contains(tools, "\"terminal\""));
    auto first_user = reqs[i]["messages"].as_array()[1]["content"].dump();
    BOOST_CHECK(contains(first_user, "count the"));
    // A child sees its goal, not the parent's conversation.
    BOOST_CHECK(!contains(reqs[i]["messages"].dump(), "count the fruit"));
  }
  BOOST_CHECK(contains(reqs[0]["tools"].dump(), "\"delegate_task\""));
  // Child sessions are stored under the parent, and their turns overlap:
  // every child started before any child finished.
  auto store = open_store();
  auto kids = children_of(*store, sid);
  BOOST_REQUIRE_EQUAL(kids.size(), 3u);
  int64_t latest_start = 0;
  int64_t earliest_end = INT64_MAX;
  for (auto& k : kids) {
    BOOST_CHECK_EQUAL(k.source, "delegate");
    auto msgs = store->load_messages(k.id);
    BOOST_REQUIRE(msgs);
    BOOST_REQUIRE_EQUAL(msgs->size(), 2u);
    BOOST_CHECK_EQUAL((*msgs)[0].message.role, "user");
    BOOST_CHECK_EQUAL((*msgs)[1].message.role, "assistant");
    latest_start = std::max(latest_start, (*msgs)[0].message.timestamp_ms);
    earliest_end = std::min(earliest_end, (*msgs)[1].message.timestamp_ms);
  }
  BOOST_CHECK_LT(latest_start, earliest_end);
}

BOOST_AUTO_TEST_CASE(max_concurrent_children_caps_the_parallelism) {
  auto opts = base_options();
  opts.delegation.max_concurrent_children = 1;
  start(opts);
  script(chat_completion("", {{"call_d", "delegate_task",
                               delegate_args({"job one", "job two"})}}));
  script(chat_completion("child finished"), 2, 300);
  script(chat_completion("Both finished."));
  std::string sid = "deleg-serial";
  auto res = run(call("two jobs", sid));
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "Both finished.");
  auto store = open_store();
  auto kids = children_of(*store, sid);
  BOOST_REQUIRE_EQUAL(kids.size(), 2u);
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (auto& k : kids) {
    auto msgs = store->load_messages(k.id);
    BOOST_REQUIRE(msgs && msgs->size() == 2u);
    spans.emplace_back((*msgs)[0].message.timestamp_ms,
                       (*msgs)[1].message.timestamp_ms);
  }
  std::sort(spans.begin(), spans.end());
  // One at a time: the second started after the first had finished.
  BOOST_CHECK_LE(spans[0].second, spans[1].first);
}

BOOST_AUTO_TEST_CASE(child_budget_exhausted) {
  auto opts = base_options();
  opts.delegation.max_iterations = 1;
  start(opts);
  temp_dir work;
  auto file = work.path() + "/notes.txt";
  { std::ofstream(file) << "alpha\n"; }
  script(chat_completion("", {{"call_d", "delegate_task",
                               one_arg("goal", "read the notes")}}));
  script(chat_completion("", {{"call_r", "read_file", one_arg("path", file)}}));
  script(chat_completion("Partial: I read notes.txt, nothing else."));
  script(chat_completion("The child ran out of budget."));
  auto res = run(call("delegate it", "deleg-budget"));
  BOOST_CHECK_EQUAL(res["final_response"].as_string(),
                    "The child ran out of budget.");
  auto d = delegate_result(res);
  BOOST_REQUIRE_EQUAL(d["results"].size(), 1u);
  auto& r = d["results"].as_array()[0];
  BOOST_CHECK_EQUAL(r["exit_reason"].as_string(),
                    "max_iterations_reached(1/1)");
  BOOST_CHECK_EQUAL(r["status"].as_string(), "error");
  BOOST_CHECK_EQUAL(r["summary"].as_string(),
                    "Partial: I read notes.txt, nothing else.");
  // The child's summary call was tool-free.
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 4u);
  BOOST_CHECK(reqs[1].find("tools") != nullptr);
  BOOST_CHECK(reqs[2].find("tools") == nullptr);
}

BOOST_AUTO_TEST_CASE(parent_interrupt_stops_the_children) {
  start(base_options());
  json::value targs;
  targs["command"] = "sleep 31.5";
  script(chat_completion("", {{"call_d", "delegate_task",
                               one_arg("goal", "wait a long time")}}));
  script(chat_completion("", {{"call_s", "terminal", targs.dump()}}));
  std::string sid = "deleg-interrupt";
  std::optional<turn_result> out;
  std::thread th([&] { out = rt->run_turn(call("go", sid)); });
  BOOST_REQUIRE(wait_for([&] { return !processes_with("sleep 31.5").empty(); },
                         20));
  auto t0 = steady_clock::now();
  rt->interrupt(sid, "stop everything");
  th.join();
  BOOST_CHECK_LT(duration<double>(steady_clock::now() - t0).count(), 10.0);
  BOOST_REQUIRE(out && out->started);
  auto parsed = json::parse(turn_result_json(*out).dump());
  BOOST_REQUIRE(parsed);
  auto& res = *parsed.v;
  BOOST_CHECK(res["interrupted"].as_bool());
  BOOST_CHECK_EQUAL(res["exit_reason"].as_string(), "interrupted_by_user");
  auto d = delegate_result(res);
  BOOST_REQUIRE_EQUAL(d["results"].size(), 1u);
  BOOST_CHECK_EQUAL(d["results"].as_array()[0]["status"].as_string(),
                    "interrupted");
  // The child's command is gone, and nothing else was asked of the model.
  BOOST_CHECK(wait_for([&] { return processes_with("sleep 31.5").empty(); },
                       10));
  BOOST_CHECK_EQUAL(requests().size(), 2u);
  auto store = open_store();
  auto kids = children_of(*store, sid);
  BOOST_REQUIRE_EQUAL(kids.size(), 1u);
}

BOOST_AUTO_TEST_CASE(child_kernels_are_disposed) {
  start(base_options());
  json::value code;
  code["code"] = "import os\nprint('KERNEL-PID', os.getpid())";
  // execute_code is not among a child's default toolsets: named here.
  auto args = json::parse(delegate_args({"first job", "second job"}));
  BOOST_REQUIRE(args);
  auto& a = *args.v;
  a["toolsets"] = json::value::make_array();
  for (auto* ts : {"terminal", "file", "code_execution"})
    a["toolsets"].push_back(json::value{ts});
  script(chat_completion("", {{"call_d", "delegate_task", a.dump()}}));
  script(chat_completion("", {{"call_x", "execute_code", code.dump()}}), 2);
  script(chat_completion("child done"), 2);
  script(chat_completion("both done"));
  std::string sid = "deleg-kernels";
  auto res = run(call("run code in children", sid));
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "both done");
  // The kernels' pids, from the children's stored tool results.
  auto store = session_store_of(*rt);
  std::vector<pid_t> pids;
  auto list = store->list_sessions(100, 0);
  BOOST_REQUIRE(list);
  for (auto& s : *list) {
    if (s.parent_session_id != sid)
      continue;
    auto msgs = store->load_messages(s.id);
    BOOST_REQUIRE(msgs);
    for (auto& m : *msgs) {
      auto p = m.message.content.find("KERNEL-PID ");
      if (m.message.role == "tool" && p != std::string::npos)
        pids.push_back(static_cast<pid_t>(
          std::atoi(m.message.content.c_str() + p + 11)));
    }
  }
  BOOST_REQUIRE_GE(pids.size(), 1u);
  // Disposed with the children, while the runtime still runs.
  BOOST_CHECK(wait_for(
    [&] {
      return std::none_of(pids.begin(), pids.end(),
                          [](pid_t p) { return alive(p); });
    },
    15));
  BOOST_CHECK(wait_for(
    [&] { return contains(rt->kernel_stats(), "\"kernels\":0"); }, 15));
}

BOOST_AUTO_TEST_CASE(delegate_task_outside_a_turn_is_an_error) {
  start(base_options());
  tool_call_request c;
  c.tool = "delegate_task";
  c.args_json = one_arg("goal", "x");
  auto out = rt->call_tool(c);
  BOOST_CHECK(contains(out.result_json, "only inside an agent turn"));
}

BOOST_AUTO_TEST_SUITE_END()
