#define BOOST_TEST_MODULE trajectory
#include <boost/test/unit_test.hpp>

#include <string>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "base/json.hpp"
#include "storage/trajectory.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

namespace {

json::value msg(const std::string& role, const std::string& content) {
  json::value m = json::value::make_object();
  m["role"] = role;
  m["content"] = content;
  return m;
}

json::value call(const std::string& id, const std::string& name,
                 const std::string& args) {
  json::value c = json::value::make_object();
  c["id"] = id;
  c["type"] = "function";
  c["function"]["name"] = name;
  c["function"]["arguments"] = args;
  return c;
}

json::value tool_msg(const std::string& id, const std::string& name,
                     const std::string& content) {
  auto m = msg("tool", content);
  m["tool_call_id"] = id;
  m["name"] = name;
  return m;
}

std::vector<trajectory_tool> tools() {
  auto schema = json::parse(R"({"type":"object","properties":{"path":)"
                            R"({"type":"string"}},"required":["path"]})");
  BOOST_REQUIRE(schema);
  return {{"read_file", "Reads a file.", *schema.v}};
}

// A turn: system prompt, question, one call, its result, answer.
json::value tool_turn() {
  json::value msgs = json::value::make_array();
  msgs.push_back(msg("system", "LIVE SYSTEM PROMPT"));
  msgs.push_back(msg("user", "What is in a.txt?"));
  auto a = msg("assistant", "Let me look.");
  a["reasoning"] = "I should read the file.";
  a["tool_calls"] = json::value::make_array();
  a["tool_calls"].push_back(call("call_1", "read_file", R"({"path":"a.txt"})"));
  msgs.push_back(std::move(a));
  msgs.push_back(tool_msg("call_1", "read_file", R"({"content":"hello"})"));
  msgs.push_back(msg("assistant", "It says hello."));
  return msgs;
}

std::string value_of(const json::value& conv, size_t i) {
  return conv.as_array().at(i).find("value")->as_string();
}

std::string from_of(const json::value& conv, size_t i) {
  return conv.as_array().at(i).find("from")->as_string();
}

std::time_t fixed_time() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 7;
  tm.tm_mday = 8;
  tm.tm_hour = 12;
  tm.tm_isdst = -1;
  return std::mktime(&tm);
}

mode_t mode_of(const std::string& path) {
  struct stat st{};
  BOOST_REQUIRE_EQUAL(::stat(path.c_str(), &st), 0);
  return st.st_mode & 0777;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    BOOST_REQUIRE_MESSAGE(nl != std::string::npos, "unterminated line");
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(turn_with_a_tool_call) {
  auto t = make_trajectory(tool_turn(), tools(), "model-x", true,
                           fixed_time());
  BOOST_CHECK_EQUAL(t["timestamp"].as_string(), "2026-08-08T12:00:00");
  BOOST_CHECK_EQUAL(t["model"].as_string(), "model-x");
  BOOST_CHECK(t["completed"].as_bool());
  auto& conv = t["conversations"];
  BOOST_REQUIRE_EQUAL(conv.size(), 5u);
  // The live system prompt is replaced by the fixed preamble.
  BOOST_CHECK_EQUAL(from_of(conv, 0), "system");
  auto sys = value_of(conv, 0);
  BOOST_CHECK(sys.find("LIVE SYSTEM PROMPT") == std::string::npos);
  BOOST_CHECK_EQUAL(sys, trajectory_system_prompt(tools()));
  BOOST_CHECK_EQUAL(from_of(conv, 1), "human");
  BOOST_CHECK_EQUAL(value_of(conv, 1), "What is in a.txt?");
  BOOST_CHECK_EQUAL(from_of(conv, 2), "gpt");
  BOOST_CHECK_EQUAL(value_of(conv, 2),
                    "<think>\nI should read the file.\n</think>\nLet me look."
                    "\n<tool_call>\n{\"name\":\"read_file\",\"arguments\":"
                    "{\"path\":\"a.txt\"}}\n</tool_call>");
  BOOST_CHECK_EQUAL(from_of(conv, 3), "tool");
  BOOST_CHECK_EQUAL(value_of(conv, 3),
                    "<tool_response>\n{\"tool_call_id\":\"call_1\",\"name\":"
                    "\"read_file\",\"content\":{\"content\":\"hello\"}}\n"
                    "</tool_response>");
  BOOST_CHECK_EQUAL(from_of(conv, 4), "gpt");
  BOOST_CHECK_EQUAL(value_of(conv, 4), "<think>\n</think>\nIt says hello.");
}

BOOST_AUTO_TEST_CASE(system_preamble_lists_tools) {
  auto sys = trajectory_system_prompt(tools());
  auto open = sys.find("<tools>\n");
  auto close = sys.find("\n</tools>");
  BOOST_REQUIRE(open != std::string::npos && close != std::string::npos);
  auto list = json::parse(sys.substr(open + 8, close - open - 8));
  BOOST_REQUIRE(list);
  BOOST_REQUIRE_EQUAL(list.v->size(), 1u);
  auto& t = list.v->as_array()[0];
  BOOST_CHECK_EQUAL(t.find("name")->as_string(), "read_file");
  BOOST_CHECK_EQUAL(t.find("description")->as_string(), "Reads a file.");
  BOOST_CHECK(t.find("parameters")->is_object());
  BOOST_CHECK(t.find("required")->is_null());
  BOOST_CHECK(sys.find("<tool_call></tool_call>") != std::string::npos);
  BOOST_CHECK(sys.find("<tool_response></tool_response>")
              != std::string::npos);
  BOOST_CHECK(sys.find("\"required\": [\"name\", \"arguments\"]")
              != std::string::npos);
  // Fixed wording: the same tools give the same text.
  BOOST_CHECK_EQUAL(sys, trajectory_system_prompt(tools()));
}

BOOST_AUTO_TEST_CASE(parallel_results_merge_and_match_by_id) {
  json::value msgs = json::value::make_array();
  msgs.push_back(msg("user", "two things"));
  auto a = msg("assistant", "");
  a["tool_calls"] = json::value::make_array();
  a["tool_calls"].push_back(call("c_a", "alpha", R"({"x":1})"));
  a["tool_calls"].push_back(call("c_b", "beta", "not json"));
  msgs.push_back(std::move(a));
  // Results in the other order, with misleading names: ids decide.
  msgs.push_back(tool_msg("c_b", "wrong", "plain text"));
  msgs.push_back(tool_msg("c_a", "wrong", "[1,2]"));
  msgs.push_back(msg("user", "thanks"));
  auto t = make_trajectory(msgs, {}, "m", false, fixed_time());
  BOOST_CHECK(!t["completed"].as_bool());
  auto& conv = t["conversations"];
  BOOST_REQUIRE_EQUAL(conv.size(), 5u);
  BOOST_CHECK_EQUAL(value_of(conv, 2),
                    "<think>\n</think>\n<tool_call>\n{\"name\":\"alpha\","
                    "\"arguments\":{\"x\":1}}\n</tool_call>\n<tool_call>\n"
                    "{\"name\":\"beta\",\"arguments\":{}}\n</tool_call>");
  BOOST_CHECK_EQUAL(from_of(conv, 3), "tool");
  BOOST_CHECK_EQUAL(value_of(conv, 3),
                    "<tool_response>\n{\"tool_call_id\":\"c_b\",\"name\":"
                    "\"beta\",\"content\":\"plain text\"}\n</tool_response>\n"
                    "<tool_response>\n{\"tool_call_id\":\"c_a\",\"name\":"
                    "\"alpha\",\"content\":[1,2]}\n</tool_response>");
  BOOST_CHECK_EQUAL(from_of(conv, 4), "human");
  BOOST_CHECK_EQUAL(value_of(conv, 4), "thanks");
}

BOOST_AUTO_TEST_CASE(scratchpad_tags_become_think_tags) {
  json::value msgs = json::value::make_array();
  msgs.push_back(msg("user", "q"));
  auto a = msg("assistant",
               "<REASONING_SCRATCHPAD>hmm</REASONING_SCRATCHPAD>answer");
  msgs.push_back(std::move(a));
  auto t = make_trajectory(msgs, {}, "m", true, fixed_time());
  BOOST_CHECK_EQUAL(value_of(t["conversations"], 2),
                    "<think>\n</think>\n<think>hmm</think>answer");
  BOOST_CHECK_EQUAL(convert_scratchpad_tags("a<REASONING_SCRATCHPAD>b"),
                    "a<think>b");
}

BOOST_AUTO_TEST_CASE(malformed_messages_are_tolerated) {
  auto bad = json::parse(R"([1, "x", null, {"role":"assistant",)"
                         R"("tool_calls":[{"function":7},"y"]},)"
                         R"({"role":"tool","content":5},{"role":"mystery"}])");
  BOOST_REQUIRE(bad);
  auto t = make_trajectory(*bad.v, {}, "", false, fixed_time());
  auto& conv = t["conversations"];
  BOOST_REQUIRE_EQUAL(conv.size(), 3u);
  BOOST_CHECK_EQUAL(from_of(conv, 1), "gpt");
  BOOST_CHECK_EQUAL(from_of(conv, 2), "tool");
  // Not an array at all: just the preamble.
  auto none = make_trajectory(json::value{"nope"}, {}, "", false, 0);
  BOOST_CHECK_EQUAL(none["conversations"].size(), 1u);
  // A turn result without messages still gives a valid line.
  auto line = trajectory_line(json::value::make_object(), {}, 0);
  auto parsed = json::parse(line);
  BOOST_REQUIRE(parsed);
  BOOST_CHECK(!parsed.v->find("completed")->as_bool());
}

BOOST_AUTO_TEST_CASE(line_from_turn_result) {
  json::value res = json::value::make_object();
  res["messages"] = tool_turn();
  res["model"] = "model-y";
  res["completed"] = true;
  auto line = trajectory_line(res, tools(), fixed_time());
  BOOST_CHECK(line.find('\n') == std::string::npos);
  auto parsed = json::parse(line);
  BOOST_REQUIRE(parsed);
  BOOST_CHECK_EQUAL(parsed.v->find("model")->as_string(), "model-y");
  BOOST_CHECK(parsed.v->find("completed")->as_bool());
  BOOST_CHECK_EQUAL(parsed.v->find("conversations")->size(), 5u);
  BOOST_CHECK(*parsed.v == make_trajectory(tool_turn(), tools(), "model-y",
                                           true, fixed_time()));
}

BOOST_AUTO_TEST_CASE(append_creates_private_files) {
  test::temp_dir tmp;
  auto dir = tmp / "a/b/traj";
  BOOST_CHECK(append_trajectory_line(dir, trajectory_samples_file,
                                     R"({"n":1})").ok());
  BOOST_CHECK(append_trajectory_line(dir, trajectory_samples_file,
                                     R"({"n":2})").ok());
  auto path = dir + "/" + trajectory_samples_file;
  BOOST_CHECK_EQUAL(test::slurp(path), "{\"n\":1}\n{\"n\":2}\n");
  BOOST_CHECK_EQUAL(mode_of(path), 0600u);
  BOOST_CHECK_EQUAL(mode_of(dir), 0700u);
  BOOST_CHECK_EQUAL(mode_of(tmp / "a"), 0700u);
  // "" is the current directory.
  auto old = ::open(".", O_RDONLY);
  BOOST_REQUIRE_EQUAL(::chdir(tmp.path().c_str()), 0);
  auto err = append_trajectory_line("", failed_trajectories_file, "{}");
  BOOST_REQUIRE_EQUAL(::fchdir(old), 0);
  ::close(old);
  BOOST_CHECK_MESSAGE(err.ok(), err.error);
  BOOST_CHECK_EQUAL(tmp.read(failed_trajectories_file), "{}\n");
}

BOOST_AUTO_TEST_CASE(append_errors) {
  test::temp_dir tmp;
  tmp.write("plain", "x");
  auto err = append_trajectory_line(tmp / "plain", "t.jsonl", "{}");
  BOOST_CHECK_MESSAGE(err.error.find("plain") != std::string::npos, err.error);
  err = append_trajectory_line(tmp / "plain/sub", "t.jsonl", "{}");
  BOOST_CHECK(!err.ok());
  err = append_trajectory_line(tmp.path(), "../escape.jsonl", "{}");
  BOOST_CHECK(!err.ok());
  err = append_trajectory_line(tmp.path(), "", "{}");
  BOOST_CHECK(!err.ok());
  err = append_trajectory_line(tmp.path(), "t.jsonl", "{}\n{}");
  BOOST_CHECK(err.error.find("newline") != std::string::npos);
  BOOST_CHECK(err.code == status_code::invalid_argument);
  BOOST_CHECK_EQUAL(tmp.read("t.jsonl"), "");
  // A symlink in place of the file is not followed.
  BOOST_REQUIRE_EQUAL(::symlink((tmp / "plain").c_str(),
                                (tmp / "link.jsonl").c_str()),
                      0);
  err = append_trajectory_line(tmp.path(), "link.jsonl", "{}");
  BOOST_CHECK_MESSAGE(err.error.find("cannot open") != std::string::npos,
                      err.error);
  BOOST_CHECK_EQUAL(tmp.read("plain"), "x");
  // An unwritable directory.
  if (::geteuid() != 0) {
    auto ro = tmp / "ro";
    BOOST_REQUIRE_EQUAL(::mkdir(ro.c_str(), 0500), 0);
    err = append_trajectory_line(ro, "t.jsonl", "{}");
    BOOST_CHECK_MESSAGE(err.error.find("cannot open") != std::string::npos,
                        err.error);
    BOOST_CHECK(err.code == status_code::permission_denied);
  }
}

BOOST_AUTO_TEST_CASE(concurrent_processes_do_not_interleave) {
  test::temp_dir tmp;
  const int procs = 4;
  const int per_proc = 25;
  std::vector<pid_t> pids;
  for (int p = 0; p < procs; ++p) {
    pid_t pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
      // A large line (~64 KiB) makes torn writes likely if they happen.
      std::string fill(64 * 1024, static_cast<char>('a' + p));
      int bad = 0;
      for (int i = 0; i < per_proc; ++i) {
        json::value v = json::value::make_object();
        v["p"] = p;
        v["i"] = i;
        v["fill"] = fill;
        if (!append_trajectory_line(tmp.path(), "c.jsonl", v.dump()).ok())
          ++bad;
      }
      ::_exit(bad == 0 ? 0 : 1);
    }
    pids.push_back(pid);
  }
  for (auto pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    BOOST_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto lines = lines_of(tmp.read("c.jsonl"));
  BOOST_REQUIRE_EQUAL(lines.size(), static_cast<size_t>(procs * per_proc));
  std::vector<int> seen(procs, 0);
  for (auto& l : lines) {
    auto v = json::parse(l);
    BOOST_REQUIRE_MESSAGE(v, "torn line");
    auto p = v.v->get_int("p", -1);
    BOOST_REQUIRE(p >= 0 && p < procs);
    BOOST_CHECK_EQUAL(v.v->get_string("fill"),
                      std::string(64 * 1024, static_cast<char>('a' + p)));
    ++seen[p];
  }
  for (auto n : seen)
    BOOST_CHECK_EQUAL(n, per_proc);
}
