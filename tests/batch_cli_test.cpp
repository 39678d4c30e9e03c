#define BOOST_TEST_MODULE batch_cli
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// `mibyan batch` end to end against the scripted provider (docs/batch.md):
// a 200-prompt run killed with SIGKILL and resumed, bad prompt lines, the
// merge filters and the run-identity checks.

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/json.hpp"
#include "storage/batch_run.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/cli_child.hpp"
#include "tests/support/process.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

struct fixture {
  test::http_server server;
  test::temp_dir home;

  test::process_options env() {
    auto o = test::cli_options(home.path(), 240);
    return o;
  }

  void script(const std::string& body, int times = 1, int delay_ms = 0) {
    server.script_chat(body, times, delay_ms);
  }

  std::vector<std::string> batch_args(const std::string& prompts,
                                      const std::string& run) {
    return {"batch",   prompts,     "--run-name", run,
            "--provider", "custom", "--base-url", server.url("/v1"),
            "--model", "m"};
  }

  std::string run_dir(const std::string& run) {
    return home / ("batch/" + run);
  }

  json::value stats(const std::string& run) {
    auto parsed = json::parse(test::slurp(run_dir(run) + "/stats.json"));
    BOOST_REQUIRE_MESSAGE(parsed && parsed.v->is_object(),
                          "stats.json is not a JSON object");
    return *parsed.v;
  }

  std::vector<json::value> trajectories(const std::string& run) {
    std::vector<json::value> out;
    std::istringstream in{
      test::slurp(run_dir(run) + "/trajectories.jsonl")};
    std::string line;
    while (std::getline(in, line)) {
      auto p = json::parse(line);
      BOOST_REQUIRE_MESSAGE(p && p.v->is_object(), "bad line: " << line);
      out.push_back(*p.v);
    }
    return out;
  }

  pid_t spawn(const std::vector<std::string>& args) {
    auto err_path = home / "batch.err";
    pid_t pid = ::fork();
    if (pid == 0) {
      int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      int nul = ::open("/dev/null", O_WRONLY);
      ::dup2(nul, 1);
      ::dup2(err, 2);
      test::exec_cli(home.path(), args);
    }
    return pid;
  }
};

size_t sample_files(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator{dir + "/samples", ec}) {
    auto name = e.path().filename().string();
    if (name.size() > 5 && name.substr(name.size() - 5) == ".json")
      ++n;
  }
  return n;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(batch_cli, fixture)

// 200 prompts, 4 workers; SIGKILL once some samples are done, then
// --resume: exactly 200 samples, one per prompt, none duplicated.
BOOST_AUTO_TEST_CASE(kill_9_then_resume_gives_exactly_200_samples) {
  std::string prompts;
  for (int i = 0; i < 200; ++i)
    prompts += R"({"prompt":"question )" + std::to_string(i)
               + R"(","id":"q)" + std::to_string(i) + "\"}\n";
  auto file = home.write("prompts.jsonl", prompts);
  // A tool round then an answer, repeated: each conversation consumes
  // replies until it gets an answer. Paced so the kill lands mid-run.
  auto tool_reply = test::completion(
    "", "read_file", R"({"path":")" + home.path() + R"(/prompts.jsonl","limit":1})");
  auto answer = test::completion("the answer");
  for (int i = 0; i < 320; ++i) {
    script(tool_reply, 1, 15);
    script(answer, 1, 15);
  }
  auto args = batch_args(file, "big");
  pid_t pid = spawn(args);
  auto dir = run_dir("big");
  for (int i = 0; i < 1200 && sample_files(dir) < 40; ++i)
    std::this_thread::sleep_for(milliseconds{25});
  size_t before = sample_files(dir);
  BOOST_REQUIRE_GE(before, 40u);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  BOOST_REQUIRE(WIFSIGNALED(status));
  size_t after_kill = sample_files(dir);
  BOOST_TEST_MESSAGE("samples at the kill: " << after_kill);
  BOOST_REQUIRE_LT(after_kill, 200u);
  // Every sample on disk after the kill is complete JSON.
  for (auto& e : std::filesystem::directory_iterator{dir + "/samples"}) {
    auto name = e.path().filename().string();
    if (name.find(".tmp.") != std::string::npos)
      continue;
    auto p = json::parse(test::slurp(e.path().string()));
    BOOST_REQUIRE_MESSAGE(p && p.v->is_object(), "torn sample " << name);
  }

  // Without --resume the existing run is refused.
  auto refused = test::run_mibyan(args, env());
  BOOST_TEST(refused.exit_code == 2);
  BOOST_TEST(contains(refused.err, "--resume"));

  args.push_back("--resume");
  auto r = test::run_mibyan(args, env());
  BOOST_TEST_MESSAGE(r.err);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_TEST(contains(r.err, "resuming 'big'"));
  BOOST_TEST(contains(r.err, "200/200 done"));

  auto lines = trajectories("big");
  BOOST_REQUIRE_EQUAL(lines.size(), 200u);
  std::set<int64_t> seen;
  for (auto& l : lines) {
    auto idx = l.get_int("prompt_index", -1);
    BOOST_TEST(seen.insert(idx).second);
    BOOST_TEST(l["metadata"].get_string("id", "") == "q" + std::to_string(idx));
    BOOST_TEST(l["conversations"].is_array());
  }
  BOOST_TEST(seen.size() == 200u);
  BOOST_TEST(*seen.begin() == 0);
  BOOST_TEST(*seen.rbegin() == 199);
  auto st = stats("big");
  BOOST_TEST(st.get_int("samples", 0) == 200);
  BOOST_TEST(st.get_int("written", 0) == 200);
  BOOST_TEST(st.get_int("missing", -1) == 0);
  BOOST_TEST(st.get_int("turns", 0) >= 200);
  BOOST_TEST(st["tool_calls_by_name"]["read_file"].get_int("count", 0) > 0);
  BOOST_TEST(contains(r.err, "read_file"));
}

// Unusable prompt lines are reported with their line numbers and counted;
// the usable ones run, their other members kept as metadata.
BOOST_AUTO_TEST_CASE(bad_prompt_lines_are_reported_and_counted) {
  script(test::completion("fine"), 5);
  auto file = home.write("p.jsonl",
                         "{\"prompt\":\"first\"}\n"
                         "this is not json\n"
                         "[1,2]\n"
                         "\n"
                         "{\"text\":\"no prompt member\"}\n"
                         "{\"prompt\":5}\n"
                         "{\"prompt\":\"second\",\"topic\":\"maths\"}\n"
                         "{\"prompt\":\"   \"}\n");
  auto r = test::run_mibyan(batch_args(file, "lines"), env());
  BOOST_TEST_MESSAGE(r.err);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_TEST(contains(r.err, "line 2: not valid JSON"));
  BOOST_TEST(contains(r.err, "line 3: expected a JSON object, got array"));
  BOOST_TEST(contains(r.err, "line 5: no \"prompt\" member"));
  BOOST_TEST(contains(r.err, "line 6: \"prompt\" must be a string"));
  BOOST_TEST(contains(r.err, "line 8: \"prompt\" is empty"));
  BOOST_TEST(!contains(r.err, "line 4:"));
  auto st = stats("lines");
  BOOST_TEST(st.get_int("bad_prompt_lines", 0) == 5);
  BOOST_TEST(st.get_int("total_prompts", 0) == 2);
  auto lines = trajectories("lines");
  BOOST_REQUIRE_EQUAL(lines.size(), 2u);
  BOOST_TEST(lines[0].get_int("prompt_index", -1) == 0);
  BOOST_TEST(lines[1].get_int("prompt_index", -1) == 6);
  BOOST_TEST(lines[1]["metadata"].get_string("topic", "") == "maths");

  // A file with no usable line is an error, not an empty run.
  auto none = home.write("none.jsonl", "nope\n{\"a\":1}\n");
  auto r2 = test::run_mibyan(batch_args(none, "none"), env());
  BOOST_TEST(r2.exit_code == 2);
  BOOST_TEST(contains(r2.err, "no usable prompt lines"));
  // A missing file says so.
  auto r3 = test::run_mibyan(batch_args(home / "missing.jsonl", "m"), env());
  BOOST_TEST(r3.exit_code == 2);
  BOOST_TEST(contains(r3.err, "cannot read"));
}

// Samples calling a tool that does not exist, or with arguments that are
// not JSON, are kept on disk but filtered from the merge, and counted.
BOOST_AUTO_TEST_CASE(invalid_tool_names_and_broken_json_are_filtered) {
  // One worker: the replies reach the prompts in order.
  script(test::completion("", "zzzz_no_such_capability", "{}"));
  script(test::completion("after the unknown tool"));
  script(test::completion("", "read_file", "{\"path\": \"x\""));
  script(test::completion("after the broken arguments"));
  script(test::completion("clean answer"));
  auto file = home.write("p.jsonl", "{\"prompt\":\"a\"}\n{\"prompt\":\"b\"}\n"
                                    "{\"prompt\":\"c\"}\n");
  auto args = batch_args(file, "filters");
  args.push_back("--workers");
  args.push_back("1");
  auto r = test::run_mibyan(args, env());
  BOOST_TEST_MESSAGE(r.err);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  auto st = stats("filters");
  BOOST_TEST(st.get_int("samples", 0) == 3);
  BOOST_TEST(st.get_int("written", 0) == 1);
  BOOST_TEST(st["filtered"].get_int("invalid_tool_name", 0) == 1);
  BOOST_TEST(st["filtered"].get_int("invalid_json", 0) == 1);
  auto lines = trajectories("filters");
  BOOST_REQUIRE_EQUAL(lines.size(), 1u);
  BOOST_TEST(lines[0].get_int("prompt_index", -1) == 2);
}

// Resuming with a different prompts file is refused; bad flags are usage
// errors.
BOOST_AUTO_TEST_CASE(run_identity_and_flags) {
  script(test::completion("ok"), 4);
  auto file = home.write("p.jsonl", "{\"prompt\":\"a\"}\n");
  auto r = test::run_mibyan(batch_args(file, "ident"), env());
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  // Resuming a finished run runs nothing and re-merges.
  auto again = batch_args(file, "ident");
  again.push_back("--resume");
  auto r2 = test::run_mibyan(again, env());
  BOOST_TEST(r2.exit_code == 0);
  BOOST_TEST(trajectories("ident").size() == 1u);
  auto other = home.write("q.jsonl", "{\"prompt\":\"different\"}\n");
  auto changed = batch_args(other, "ident");
  changed.push_back("--resume");
  auto r3 = test::run_mibyan(changed, env());
  BOOST_TEST(r3.exit_code == 2);
  BOOST_TEST(contains(r3.err, "differs"));

  auto bad = batch_args(file, "../escape");
  BOOST_TEST(test::run_mibyan(bad, env()).exit_code == 2);
  auto w = batch_args(file, "w");
  w.push_back("--workers");
  w.push_back("0");
  BOOST_TEST(test::run_mibyan(w, env()).exit_code == 2);
  auto s = batch_args(file, "s");
  s.push_back("--session");
  s.push_back("x");
  BOOST_TEST(test::run_mibyan(s, env()).exit_code == 2);
  auto no_name = std::vector<std::string>{"batch", file};
  BOOST_TEST(test::run_mibyan(no_name, env()).exit_code == 2);
}

// The merge on its own: failure heuristics of tool results.
BOOST_AUTO_TEST_CASE(tool_result_failure_heuristic) {
  BOOST_TEST(batch::tool_result_failed(R"({"error":"boom"})"));
  BOOST_TEST(!batch::tool_result_failed(R"({"error":null,"output":"x"})"));
  BOOST_TEST(batch::tool_result_failed(R"({"success":false})"));
  BOOST_TEST(batch::tool_result_failed(R"({"content":{"error":"x"}})"));
  BOOST_TEST(!batch::tool_result_failed(R"({"exit_code":1,"output":""})"));
  BOOST_TEST(batch::tool_result_failed(""));
  BOOST_TEST(batch::tool_result_failed("Error: no such file"));
  BOOST_TEST(!batch::tool_result_failed("plain text"));
}

BOOST_AUTO_TEST_SUITE_END()
