#define BOOST_TEST_MODULE process_tool
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <functional>
#include <thread>

#include "config/options.hpp"
#include "base/process_registry.hpp"
#include "runtime/runtime.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait_until.hpp"
#include "tools/registry.hpp"

using namespace mibyan;
using mibyan::test::wait_until;
using namespace std::chrono;
using namespace std::chrono_literals;

namespace {

bool process_alive(int pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0)
    return false;
  auto stat = test::slurp("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return close == std::string::npos || stat.size() < close + 3
         || (stat[close + 2] != 'Z' && stat[close + 2] != 'X');
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

struct fixture {
  test::temp_dir home;
  test::temp_dir work;
  std::unique_ptr<runtime> rt;

  fixture() {
    options opts;
    opts.home = home.path();
    opts.code_execution.prestart_kernels = 0;
    std::string err;
    auto made = create_runtime(opts);
    BOOST_REQUIRE_MESSAGE(made, made.error);
    rt = std::move(*made);
  }

  json::value call(const std::string& tool, const std::string& args,
                   const std::string& session = "s1") {
    auto out = rt->call_tool({session, "c1", tool, args, work.path()});
    auto parsed = json::parse(out.result_json);
    BOOST_REQUIRE_MESSAGE(parsed, out.result_json);
    return *parsed.v;
  }

  json::value start(const std::string& command, bool pty = false,
                    const std::string& session = "s1") {
    json::value a;
    a["command"] = command;
    a["background"] = true;
    if (pty)
      a["pty"] = true;
    auto r = call("terminal", a.dump(), session);
    BOOST_REQUIRE_MESSAGE(r.find("session_id") != nullptr, r.dump());
    return r;
  }

  json::value process(const std::string& action, const std::string& id,
                      json::value extra = json::value::make_object(),
                      const std::string& session = "s1") {
    extra["action"] = action;
    if (!id.empty())
      extra["session_id"] = id;
    return call("process", extra.dump(), session);
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(background_start_poll_log_wait, fixture) {
  auto r = start("echo start; for i in 1 2 3 4 5; do echo line$i; "
                 "sleep 0.05; done; exit 3");
  BOOST_TEST(r.get_string("output") == "Background process started");
  BOOST_TEST(r["exit_code"].as_int() == 0);
  BOOST_TEST(r["error"].is_null());
  auto id = r.get_string("session_id");
  BOOST_TEST(id.rfind("proc_", 0) == 0u);
  BOOST_TEST(r["pid"].as_int() > 0);

  auto p = process("poll", id);
  BOOST_TEST(p.get_string("session_id") == id);
  BOOST_TEST(p.get_string("command").find("echo start") == 0u);
  auto st = p.get_string("status");
  BOOST_TEST((st == "running" || st == "exited"));
  BOOST_TEST(p.find("output_preview") != nullptr);

  json::value w;
  w["timeout"] = 60;
  auto waited = process("wait", id, w);
  BOOST_TEST(waited.get_string("status") == "exited", waited.dump());
  BOOST_TEST(waited["exit_code"].as_int() == 3);
  BOOST_TEST(contains(waited.get_string("output"), "line5"));

  p = process("poll", id);
  BOOST_TEST(p.get_string("status") == "exited");
  BOOST_TEST(p["exit_code"].as_int() == 3);
  BOOST_TEST(p.get_string("completion_reason") == "exited");
  BOOST_TEST(p.get_string("termination_source") == "process");

  auto log = process("log", id);
  BOOST_TEST(log["total_lines"].as_int() == 6);
  BOOST_TEST(log.get_string("showing") == "6 lines");
  BOOST_TEST(log.get_string("output") == "start\nline1\nline2\nline3\nline4\nline5\n");
  json::value page;
  page["offset"] = 1;
  page["limit"] = 2;
  log = process("log", id, page);
  BOOST_TEST(log.get_string("output") == "line1\nline2\n");
  BOOST_TEST(log.get_string("showing") == "2 lines");
  json::value tail;
  tail["limit"] = 2;
  log = process("log", id, tail);
  BOOST_TEST(log.get_string("output") == "line4\nline5\n");

  auto list = process("list", "");
  BOOST_REQUIRE(list["processes"].is_array());
  BOOST_TEST(list["processes"].size() == 1u);
  BOOST_TEST(list["processes"].as_array()[0].get_string("session_id") == id);
  // Other sessions neither see nor reach it.
  auto other = process("list", "", json::value::make_object(), "s2");
  BOOST_TEST(other["processes"].size() == 0u);
  auto nf = process("poll", id, json::value::make_object(), "s2");
  BOOST_TEST(nf.get_string("status") == "not_found");
  BOOST_TEST(nf.get_string("error") == "No process with ID " + id);
}

BOOST_FIXTURE_TEST_CASE(rolling_buffer_keeps_the_newest_200000_bytes,
                        fixture) {
  auto r = start("for i in $(seq 1 60000); do echo line-$i; done");
  auto id = r.get_string("session_id");
  json::value w;
  w["timeout"] = 60;
  BOOST_TEST(process("wait", id, w).get_string("status") == "exited");
  json::value all;
  all["limit"] = 100000;
  auto log = process("log", id, all);
  auto out = log.get_string("output");
  BOOST_TEST(out.size() <= 200000u);
  BOOST_TEST(out.size() > 190000u);
  BOOST_TEST(contains(out, "line-60000\n"));
  BOOST_TEST(!contains(out, "\nline-1\n"));
  BOOST_TEST(contains(log.get_string("note"), "Older output was dropped"));
}

BOOST_FIXTURE_TEST_CASE(kill_escalates_to_sigkill, fixture) {
  auto r = start("trap '' TERM; echo ready; while true; do sleep 0.1; done");
  auto id = r.get_string("session_id");
  auto pid = static_cast<int>(r["pid"].as_int());
  BOOST_REQUIRE(wait_until([&] {
    return contains(process("log", id).get_string("output"), "ready");
  }));
  auto k = process("kill", id);
  BOOST_TEST(k.get_string("status") == "killed");
  BOOST_TEST(k["exit_code"].as_int() == 128 + SIGKILL, k.dump());
  BOOST_TEST(!process_alive(pid));
}

BOOST_FIXTURE_TEST_CASE(process_output_is_redacted, fixture) {
  auto r = start("echo key=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789");
  auto id = r.get_string("session_id");
  json::value w;
  w["timeout"] = 30;
  auto waited = process("wait", id, w);
  BOOST_TEST(waited.get_string("status") == "exited");
  auto log = process("log", id).get_string("output");
  BOOST_TEST(contains(log, "sk-proj-[REDACTED]"), log);
  BOOST_TEST(!contains(log, "abcdefghijklmnopqrstuvwxyz0123456789"));
  // The command echoed in poll is redacted too.
  BOOST_TEST(!contains(process("poll", id).dump(), "abcdefghijklmnop"));
}

BOOST_FIXTURE_TEST_CASE(wait_times_out_and_kill_takes_the_group, fixture) {
  auto r = start("sleep 300 & echo $! > child.pid; echo started; wait");
  auto id = r.get_string("session_id");
  auto pid = static_cast<int>(r["pid"].as_int());
  BOOST_REQUIRE(wait_until([&] { return !work.read("child.pid").empty(); }));
  auto child = std::stoi(work.read("child.pid"));
  BOOST_TEST(process_alive(child));

  json::value w;
  w["timeout"] = 1;
  auto waited = process("wait", id, w);
  BOOST_TEST(waited.get_string("status") == "timeout", waited.dump());
  BOOST_TEST(contains(waited.get_string("timeout_note"), "still running"));

  auto k = process("kill", id);
  BOOST_TEST(k.get_string("status") == "killed", k.dump());
  BOOST_TEST(wait_until([&] { return !process_alive(pid); }));
  BOOST_TEST(wait_until([&] { return !process_alive(child); }));
  auto p = process("poll", id);
  BOOST_TEST(p.get_string("status") == "exited");
  BOOST_TEST(p.get_string("completion_reason") == "killed");
  BOOST_TEST(p.get_string("termination_source") == "process_tool");
  // Killing again reports the exit instead of failing.
  BOOST_TEST(process("kill", id).get_string("status") == "already_exited");
}

BOOST_FIXTURE_TEST_CASE(python_repl_under_a_pty, fixture) {
  auto r = start("python3 -i -q", true);
  auto id = r.get_string("session_id");
  BOOST_TEST(r["pty"].as_bool());
  json::value d;
  d["data"] = "x = 6 * 7";
  auto s = process("submit", id, d);
  BOOST_TEST(s.get_string("status") == "ok", s.dump());
  d["data"] = "print('answer', x)";
  process("submit", id, d);
  BOOST_TEST(wait_until([&] {
    return contains(process("log", id).get_string("output"), "answer 42");
  }));
  // write sends raw text: a line needs its own newline.
  d["data"] = "print('raw', 1 + 1)\n";
  BOOST_TEST(process("write", id, d).get_string("status") == "ok");
  BOOST_TEST(wait_until([&] {
    return contains(process("log", id).get_string("output"), "raw 2");
  }));
  // close sends EOF: the REPL exits.
  BOOST_TEST(process("close", id).get_string("status") == "ok");
  json::value w;
  w["timeout"] = 30;
  auto waited = process("wait", id, w);
  BOOST_TEST(waited.get_string("status") == "exited", waited.dump());
  BOOST_TEST(waited["exit_code"].as_int() == 0);
}

BOOST_FIXTURE_TEST_CASE(stdin_of_a_pipe_process, fixture) {
  auto r = start("read a; echo got:$a; cat; echo done");
  auto id = r.get_string("session_id");
  json::value d;
  d["data"] = "hello";
  process("submit", id, d);
  d["data"] = "tail-text\n";
  process("write", id, d);
  process("close", id);
  json::value w;
  w["timeout"] = 30;
  auto waited = process("wait", id, w);
  BOOST_TEST(waited.get_string("status") == "exited");
  BOOST_TEST(waited.get_string("output") == "got:hello\ntail-text\ndone\n");
  // Writing to an exited process is a clear error.
  auto e = process("write", id, d);
  BOOST_TEST(contains(e.get_string("error"), "exited"), e.dump());
}

BOOST_FIXTURE_TEST_CASE(argument_errors, fixture) {
  auto e = process("poll", "");
  BOOST_TEST(e.get_string("error") == "session_id is required for poll");
  e = process("wait", "");
  BOOST_TEST(e.get_string("error") == "session_id is required for wait");
  e = process("log", "proc_000000000000");
  BOOST_TEST(e.get_string("status") == "not_found");
  BOOST_TEST(e.get_string("error") == "No process with ID proc_000000000000");
  e = call("process", R"({"action":"explode"})");
  BOOST_TEST(e.find("error") != nullptr);
  auto r = start("sleep 30");
  e = process("write", r.get_string("session_id"));
  BOOST_TEST(e.get_string("error") == "data is required for write");
  // A foreground-only flag without background is refused.
  e = call("terminal", R"({"command":"echo","pty":true})");
  BOOST_TEST(contains(e.get_string("error"), "needs background=true"));
}

BOOST_FIXTURE_TEST_CASE(the_65th_process_is_refused_and_session_close_kills,
                        fixture) {
  std::vector<int> pids;
  for (int i = 0; i < 64; ++i)
    pids.push_back(static_cast<int>(start("sleep 120")["pid"].as_int()));
  auto r = call("terminal", R"({"command":"sleep 120","background":true})");
  BOOST_TEST(r.find("session_id") == nullptr);
  BOOST_TEST(contains(r.get_string("error"), "Too many background processes"),
             r.dump());
  BOOST_TEST(r["exit_code"].as_int() == -1);
  // Other sessions count too: the cap is per runtime.
  r = call("terminal", R"({"command":"sleep 120","background":true})", "s2");
  BOOST_TEST(contains(r.get_string("error"), "Too many"));
  rt->close_session("s1");
  for (auto pid : pids)
    BOOST_TEST(wait_until([&] { return !process_alive(pid); }));
  // Room again.
  start("true");
}

BOOST_FIXTURE_TEST_CASE(runtime_shutdown_kills_everything, fixture) {
  auto a = start("sleep 120");
  auto b = start("python3 -i -q", true, "s2");
  auto pa = static_cast<int>(a["pid"].as_int());
  auto pb = static_cast<int>(b["pid"].as_int());
  BOOST_TEST(process_alive(pa));
  BOOST_TEST(process_alive(pb));
  rt.reset();
  BOOST_TEST(!process_alive(pa));
  BOOST_TEST(!process_alive(pb));
}

BOOST_FIXTURE_TEST_CASE(scripts_get_no_background_and_no_process, fixture) {
  json::value a;
  a["code"] = "import mibyan_tools\n"
              "print('has_process', hasattr(mibyan_tools, 'process'))\n"
              "from mibyan_tools import terminal\n"
              "try:\n"
              "    terminal('sleep 100', background=True)\n"
              "except TypeError as e:\n"
              "    print('refused', type(e).__name__)\n";
  auto r = call("execute_code", a.dump());
  auto out = r.get_string("output");
  BOOST_TEST(contains(out, "has_process False"), r.dump());
  BOOST_TEST(contains(out, "refused TypeError"), r.dump());
  // Below the stub: a script-originated call is refused by both tools.
  options cfg;
  tool_registry reg;
  register_core_tools(reg);
  process_registry procs;
  std::atomic<bool> cancelled{false};
  tool_context ctx;
  ctx.cwd = work.path();
  ctx.home = home.path();
  ctx.cfg = &cfg;
  ctx.cancelled = &cancelled;
  ctx.deadline = steady_clock::now() + 1h;
  ctx.processes = &procs;
  ctx.from_script = true;
  auto t = dispatch_tool(reg, "terminal",
                         std::string_view{R"({"command":"sleep 100","background":true})"},
                         ctx);
  BOOST_TEST(contains(t.get_string("error"), "execute_code"), t.dump());
  auto p = dispatch_tool(reg, "process", std::string_view{R"({"action":"list"})"},
                         ctx);
  BOOST_TEST(contains(p.get_string("error"), "execute_code"), p.dump());
  BOOST_TEST(procs.running() == 0u);
}

BOOST_AUTO_TEST_CASE(no_process_survives_mibyan_exiting) {
  test::temp_dir home;
  test::temp_dir work;
  test::process_options o;
  o.env["MIBYAN_HOME"] = home.path();
  o.cwd = work.path();
  o.input = R"({"tool":"terminal","args":{"command":"sleep 300 & echo $! > grandchild.pid; sleep 300","background":true}})"
            "\n"
            R"({"tool":"terminal","args":{"command":"python3 -i -q","background":true,"pty":true}})"
            "\n";
  o.timeout_seconds = 60;
  auto res = test::run_mibyan({"tool", "--stdin", "--cwd", work.path()}, o);
  BOOST_TEST_REQUIRE(res.exit_code == 0, res.err);
  std::vector<int> pids;
  size_t pos = 0;
  while ((pos = res.out.find("\"pid\":", pos)) != std::string::npos) {
    pos += 6;
    pids.push_back(std::stoi(res.out.substr(pos)));
  }
  BOOST_TEST_REQUIRE(pids.size() == 2u, res.out);
  auto gc = work.read("grandchild.pid");
  if (!gc.empty())
    pids.push_back(std::stoi(gc));
  for (auto pid : pids)
    BOOST_TEST(wait_until([&] { return !process_alive(pid); }, 5s),
               "pid " << pid << " survived");
}
