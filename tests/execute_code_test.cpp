#define BOOST_TEST_MODULE execute_code
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <future>
#include <sstream>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime.hpp"
#include "tests/support/pid_namespace.hpp"
#include "tests/support/process.hpp"
#include "tests/support/kernel_options.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait_until.hpp"

using namespace mibyan;
using mibyan::test::wait_until;
using namespace std::chrono;
using namespace std::chrono_literals;

namespace {

struct exec_fixture {
  test::temp_dir home;
  test::temp_dir work;
  std::unique_ptr<runtime> rt;

  void start(const std::function<void(options&)>& adjust = {}) {
    // ctest runs this suite twice: sandboxed (default) and with the
    // fallback (MIBYAN_TEST_SANDBOX=off).
    auto opts = test::kernel_test_options(home.path());
    if (adjust)
      adjust(opts);
    std::string err;
    auto made = create_runtime(opts);
    BOOST_REQUIRE_MESSAGE(made, made.error);
    rt = std::move(*made);
  }

  json::value exec(const std::string& code, const std::string& session = "s1",
                   bool reset = false) {
    return test::run_cell(*rt, work.path(), code, session, reset);
  }

  json::value stats() {
    return *json::parse(rt->kernel_stats()).v;
  }
};

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(execute_code, exec_fixture)

BOOST_AUTO_TEST_CASE(script_calls_tools_and_only_prints_come_back) {
  start();
  auto r = exec("from mibyan_tools import terminal, write_file, read_file\n"
                "print(terminal('echo hi')['output'].strip())\n"
                "write_file('note.txt', 'a\\nb\\n')\n"
                "print(read_file('note.txt')['total_lines'])\n");
  BOOST_TEST(r.get_string("status") == "success");
  BOOST_TEST(r.get_string("output") == "hi\n2\n");
  BOOST_TEST(r.get_int("tool_calls_made", -1) == 3);
  BOOST_TEST(r.get_int("exit_code", -1) == 0);
  BOOST_TEST(r.find("duration_seconds") != nullptr);
  BOOST_TEST(test::slurp(work / "note.txt") == "a\nb\n");
}

// The stub is generated from read_file's schema, so a script's read_file()
// without a limit pages like a direct call: the tool's default of 500 lines
// (a hand-written stub once sent 2000).
BOOST_AUTO_TEST_CASE(script_read_file_pages_by_the_schema_default) {
  start();
  auto r = exec("from mibyan_tools import read_file\n"
                "with open('long.txt', 'w') as f:\n"
                "    f.write(''.join('line %d\\n' % i for i in range(1200)))\n"
                "r = read_file('long.txt')\n"
                "print(len(r['content'].splitlines()), r['total_lines'],\n"
                "      r.get('truncated'), r.get('next_offset'))\n"
                "r = read_file('long.txt', offset=501, limit=1000)\n"
                "print(len(r['content'].splitlines()), r.get('truncated'))\n");
  BOOST_TEST(r.get_string("status") == "success", r.dump());
  BOOST_TEST(r.get_string("output") == "500 1200 True 501\n700 False\n",
             r.dump());
}

BOOST_AUTO_TEST_CASE(state_persists_and_reset_discards_it) {
  start();
  auto a = exec("x = 41");
  BOOST_TEST(a["kernel"].get_bool("reused", true) == false);
  auto b = exec("print(x + 1)");
  BOOST_TEST(b.get_string("output") == "42\n");
  BOOST_TEST(b["kernel"].get_bool("reused", false));
  BOOST_TEST(b["kernel"].get_int("execution_count", 0) == 2);
  auto c = exec("print(x)", "s1", true);
  BOOST_TEST(c.get_string("status") == "error");
  BOOST_TEST(c["kernel"].get_bool("state_reset", false));
  BOOST_TEST(contains(c.get_string("output"), "NameError"));
  // Sessions do not share kernels.
  exec("y = 1", "s2");
  auto d = exec("print(y)", "s1");
  BOOST_TEST(contains(d.get_string("output"), "NameError"));
}

BOOST_AUTO_TEST_CASE(timeout_keeps_partial_output_and_loses_state) {
  start([](options& o) { o.code_execution.timeout = 2; });
  exec("x = 1");
  auto started = steady_clock::now();
  auto r = exec("import time, sys\nprint('partial output')\n"
                "sys.stdout.flush()\ntime.sleep(60)");
  auto took = steady_clock::now() - started;
  BOOST_TEST(r.get_string("status") == "timeout");
  BOOST_TEST(contains(r.get_string("output"), "partial output"));
  BOOST_TEST(contains(r.get_string("output"), "timed out after 2s"));
  BOOST_TEST(contains(r.get_string("output"), "state was lost"));
  BOOST_TEST(r.get_int("exit_code", 0) == -1);
  BOOST_TEST((took < 10s));
  auto next = exec("print(globals().get('x'))");
  BOOST_TEST(next.get_string("output") == "None\n");
  BOOST_TEST(next["kernel"].get_bool("reused", true) == false);
}

BOOST_AUTO_TEST_CASE(stdout_cap_spills_the_full_text) {
  start([](options& o) { o.code_execution.max_stdout_bytes = 1000; });
  auto r = exec("for i in range(20000):\n    print('line %05d' % i)");
  BOOST_TEST(r.get_string("status") == "success");
  BOOST_TEST(r.get_bool("stdout_truncated", false));
  BOOST_TEST(r.get_int("stdout_bytes_total", 0) == 20000 * 11);
  auto out = r.get_string("output");
  BOOST_TEST(out.size() < 1200u);
  BOOST_TEST(out.rfind("line 00000", 0) == 0);
  BOOST_TEST(contains(out, "line 19999"));
  BOOST_TEST(contains(out, "OUTPUT TRUNCATED"));
  auto path = r.get_string("stdout_spill_path");
  BOOST_REQUIRE(!path.empty());
  BOOST_TEST(path.rfind(home.path() + "/cache/exec/", 0) == 0);
  struct stat st{};
  BOOST_REQUIRE(::stat(path.c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0600u);
  auto full = test::slurp(path);
  BOOST_TEST(full.size() == 20000u * 11);
  BOOST_TEST(contains(r.get_string("warning"), path));
}

BOOST_AUTO_TEST_CASE(huge_output_is_bounded) {
  start([](options& o) {
    o.code_execution.max_stdout_bytes = 2000;
    o.code_execution.max_spill_bytes = 100000;
  });
  // 200 MB through fd 1 (a subprocess) and 20 MB through print().
  auto r = exec("import os\nos.system('head -c 200000000 /dev/zero | tr \"\\\\0\" x')\n"
                "print('y' * 20000000)");
  BOOST_TEST(r.get_string("status") == "success");
  BOOST_TEST(r.get_bool("stdout_truncated", false));
  BOOST_TEST(r.get_int("stdout_bytes_total", 0) > 200000000);
  BOOST_TEST(r.get_string("output").size() < 3000u);
  auto spill = test::slurp(r.get_string("stdout_spill_path"));
  BOOST_TEST(spill.size() < 101000u);
  BOOST_TEST(contains(spill, "output capped at 100000 bytes"));
}

BOOST_AUTO_TEST_CASE(stderr_is_capped_and_shown_on_error) {
  start([](options& o) { o.code_execution.max_stderr_bytes = 500; });
  auto r = exec("import sys\nsys.stderr.write('E' * 20000)\n"
                "raise ValueError('boom')");
  BOOST_TEST(r.get_string("status") == "error");
  BOOST_TEST(r.get_int("exit_code", 0) == 1);
  BOOST_TEST(r.get_bool("stderr_truncated", false));
  auto out = r.get_string("output");
  BOOST_TEST(out.size() < 1000u);
  BOOST_TEST(contains(out, "--- stderr ---"));
  BOOST_TEST(contains(out, "ValueError: boom"));
  BOOST_TEST(contains(r.get_string("error"), "ValueError: boom"));
}

BOOST_AUTO_TEST_CASE(tool_call_cap_refuses_without_running) {
  start([](options& o) { o.code_execution.max_tool_calls = 3; });
  auto r = exec("from mibyan_tools import terminal\n"
                "for i in range(5):\n"
                "    res = terminal('echo run%d >> runs.txt' % i)\n"
                "    print(res.get('error') or 'ok')");
  BOOST_TEST(r.get_int("tool_calls_made", 0) == 3);
  auto out = r.get_string("output");
  BOOST_TEST(contains(out, "ok\nok\nok\nTool call limit reached (3)."));
  BOOST_TEST(test::slurp(work / "runs.txt") == "run0\nrun1\nrun2\n");
  // The budget is per cell.
  auto next = exec("from mibyan_tools import terminal\n"
                   "print(terminal('echo again')['output'].strip())");
  BOOST_TEST(next.get_string("output") == "again\n");
}

BOOST_AUTO_TEST_CASE(late_call_from_a_finished_cell_is_refused) {
  start();
  exec("import threading, time\nfrom mibyan_tools import read_file\n"
       "late = {}\n"
       "def later():\n"
       "    time.sleep(1.0)\n"
       "    late['r'] = read_file('/etc/hostname')\n"
       "threading.Thread(target=later).start()");
  // The thread's call comes about 1 s after its cell ended, while the next
  // cell runs: the call names its own, settled cell and is refused. (One
  // waiting cell rather than a cell per poll: a connection opened just
  // before a cell settles is closed with it, and the call then fails as
  // lost, not refused.)
  auto wait = exec("import time\nt0 = time.time()\n"
                   "while 'r' not in late and time.time() - t0 < 30:\n"
                   "    time.sleep(0.02)\n"
                   "print('r' in late)");
  BOOST_REQUIRE_EQUAL(wait.get_string("output"), "True\n");
  auto r = exec("print(late['r'].get('error'))");
  BOOST_TEST(contains(r.get_string("output"), "No active execute_code cell"));
}

BOOST_AUTO_TEST_CASE(concurrent_calls_from_threads_overlap) {
  start();
  auto r = exec("import time\nfrom concurrent.futures import ThreadPoolExecutor\n"
                "from mibyan_tools import terminal\n"
                "t0 = time.time()\n"
                "with ThreadPoolExecutor(8) as ex:\n"
                "    outs = list(ex.map(lambda i: terminal('sleep 0.5; echo %d' % i)['output'].strip(), range(8)))\n"
                "print(outs)\nprint('took', round(time.time() - t0, 2))");
  BOOST_TEST(r.get_int("tool_calls_made", 0) == 8);
  auto out = r.get_string("output");
  BOOST_TEST(contains(out, "['0', '1', '2', '3', '4', '5', '6', '7']"));
  auto took = std::atof(out.substr(out.find("took ") + 5).c_str());
  BOOST_TEST(took < 2.5); // sequential would be 4 s
}

BOOST_AUTO_TEST_CASE(environment_is_scrubbed) {
  ::setenv("FAKE_API_KEY", "sk-should-not-leak", 1);
  ::setenv("MY_SECRET_TOKEN", "tok", 1);
  ::setenv("MIBYAN_BASE_URL", "http://x", 1);
  ::setenv("MY_DIR", "/somewhere", 1);
  ::setenv("GITHUB_TOKEN", "gh", 1);
  ::setenv("OPENAI_API_KEY", "sk-openai", 1);
  start([](options& o) {
    o.terminal.env_passthrough = {"GITHUB_TOKEN", "OPENAI_API_KEY"};
  });
  auto r = exec("import os\nfor k in ['FAKE_API_KEY', 'MY_SECRET_TOKEN', "
                "'MIBYAN_BASE_URL', 'MY_DIR', 'GITHUB_TOKEN', "
                "'OPENAI_API_KEY', 'PATH', 'HOME']:\n"
                "    print(k, k in os.environ)\n"
                "print(os.popen('env').read().count('sk-'))");
  auto out = r.get_string("output");
  BOOST_TEST(contains(out, "FAKE_API_KEY False"));
  BOOST_TEST(contains(out, "MY_SECRET_TOKEN False"));
  BOOST_TEST(contains(out, "MIBYAN_BASE_URL False"));
  BOOST_TEST(contains(out, "MY_DIR False"));
  BOOST_TEST(contains(out, "GITHUB_TOKEN True"));     // passed through
  BOOST_TEST(contains(out, "OPENAI_API_KEY False"));  // never
  BOOST_TEST(contains(out, "PATH True"));
  BOOST_TEST(contains(out, "HOME True"));
  BOOST_TEST(contains(out, "\n0\n"));
  for (auto k : {"FAKE_API_KEY", "MY_SECRET_TOKEN", "MIBYAN_BASE_URL",
                 "MY_DIR", "GITHUB_TOKEN", "OPENAI_API_KEY"})
    ::unsetenv(k);
}

BOOST_AUTO_TEST_CASE(raw_rpc_frames_are_checked) {
  start();
  auto r = exec(
    "import os, socket, json\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "s.connect(os.environ['MIBYAN_RPC_SOCKET'])\n"
    "f = s.makefile('rb')\n"
    "tok = os.environ['MIBYAN_RPC_TOKEN']\n"
    "def ask(obj):\n"
    "    s.sendall((obj if isinstance(obj, str) else json.dumps(obj)).encode() + b'\\n')\n"
    "    reply = json.loads(f.readline())\n"
    "    return json.loads(reply['result']).get('error') or 'OK'\n"
    "print(ask({'id': 'a', 'tool': 'execute_code', 'args': {}, 'token': tok}))\n"
    "print(ask({'id': 'b', 'tool': 'delegate_task', 'args': {}, 'token': tok}))\n"
    "print(ask({'id': 'c', 'tool': 'read_file', 'args': {'path': '/etc/hostname'}, 'token': 'wrong'}))\n"
    "print(ask('this is not json'))\n"
    "print(ask({'id': 'd', 'tool': 'read_file', 'args': [1], 'token': tok}))\n"
    "print(ask({'id': 'e', 'tool': 'read_file', 'args': {'path': '/etc/hostname'}, 'token': tok}))\n"
    "print(ask({'id': 'e', 'tool': 'read_file', 'args': {'path': '/etc/hostname'}, 'token': tok}))\n"
    "print(ask({'id': 'f', 'tool': 'terminal', 'args': {'command': 'echo x', 'background': True}, 'token': tok}))\n");
  auto out = r.get_string("output");
  BOOST_TEST_MESSAGE(out);
  BOOST_TEST(contains(out, "Tool 'execute_code' is not available in "
                           "execute_code. Available: patch, read_file"));
  BOOST_TEST(contains(out, "Tool 'delegate_task' is not available"));
  BOOST_TEST(contains(out, "Unauthorized RPC request"));
  BOOST_TEST(contains(out, "Invalid RPC request: not JSON"));
  BOOST_TEST(contains(out, "Invalid RPC request: 'args' must be a JSON object"));
  BOOST_TEST(contains(out, "OK\nDuplicate RPC request id"));
  // background is stripped, so the call runs in the foreground.
  BOOST_TEST(contains(out, "Duplicate RPC request id; the call was not "
                           "dispatched again.\nOK"));
  BOOST_TEST(r.get_int("tool_calls_made", 0) == 2);
}

BOOST_AUTO_TEST_CASE(strict_and_project_modes_choose_the_directory) {
  start();
  auto p = exec("import os\nprint(os.getcwd())");
  BOOST_TEST(p.get_string("output") == work.path() + "\n");
  rt.reset();
  start([](options& o) { o.code_execution.mode = "strict"; });
  auto s = exec("import os\nprint(os.getcwd())");
  BOOST_TEST(contains(s.get_string("output"), "/mibyan_kernel_"));
  BOOST_TEST(!contains(s.get_string("output"), work.path()));
}

BOOST_AUTO_TEST_CASE(idle_kernels_are_reaped_by_the_timer) {
  start([](options& o) { o.code_execution.kernel_idle_timeout = 1; });
  auto r = exec(std::string{"import os\nprint(os.getpid())\nprint("}
                + test::py_pid_ns + ")");
  std::istringstream out(r.get_string("output"));
  int pid = 0;
  std::string ns;
  out >> pid >> ns;
  BOOST_TEST(stats().get_int("kernels", -1) == 1);
  // Idle for 1 s, then the next reap tick (every 0.5 s) ends it.
  BOOST_TEST(wait_until([&] { return stats().get_int("kernels", -1) == 0; }));
  BOOST_TEST(stats().get_int("reaped", 0) >= 1);
  BOOST_TEST(test::wait_gone(ns, pid));
}

BOOST_AUTO_TEST_CASE(least_recently_used_idle_kernel_is_evicted) {
  start([](options& o) { o.code_execution.max_session_kernels = 2; });
  exec("v = 'a'", "a");
  exec("v = 'b'", "b");
  exec("print(v)", "a"); // a is now more recent than b
  exec("v = 'c'", "c");  // evicts b
  BOOST_TEST(stats().get_int("evicted", 0) == 1);
  BOOST_TEST(stats().get_int("kernels", 0) == 2);
  BOOST_TEST(exec("print(v)", "a").get_string("output") == "a\n");
  BOOST_TEST(exec("print(v)", "c").get_string("output") == "c\n");
  auto b = exec("print(globals().get('v'))", "b");
  BOOST_TEST(b.get_string("output") == "None\n");
}

BOOST_AUTO_TEST_CASE(busy_kernels_are_never_evicted) {
  start([](options& o) { o.code_execution.max_session_kernels = 1; });
  std::promise<tool_outcome> slow;
  rt->call_tool_async({"busy", "c", "execute_code",
                       R"J({"code":"import time\nx = 7\nopen('busy-started', 'w').close()\ntime.sleep(1.5)\nprint(x)"})J",
                       work.path()},
                      [&](tool_outcome o) { slow.set_value(std::move(o)); });
  // The other session's cell comes while this one runs.
  auto started = work.path() + "/busy-started";
  BOOST_REQUIRE(wait_until([&] { return ::access(started.c_str(), F_OK) == 0; }));
  exec("print(1)", "other");
  auto r = json::parse(slow.get_future().get().result_json);
  BOOST_TEST(r.v->get_string("output") == "7\n");
}

BOOST_AUTO_TEST_CASE(interrupt_kills_the_running_cell) {
  start();
  exec("x = 5");
  std::promise<tool_outcome> done;
  rt->call_tool_async({"s1", "c", "execute_code",
                       R"J({"code":"import sys, time\nprint('before')\nsys.stdout.flush()\nopen('s1-started', 'w').close()\ntime.sleep(60)"})J",
                       work.path()},
                      [&](tool_outcome o) { done.set_value(std::move(o)); });
  // Interrupted once the cell runs (it marks that in its working dir).
  auto started = work.path() + "/s1-started";
  BOOST_REQUIRE(wait_until([&] { return ::access(started.c_str(), F_OK) == 0; }));
  auto t0 = steady_clock::now();
  rt->interrupt("s1", "user sent a new message");
  auto out = done.get_future().get();
  BOOST_TEST((steady_clock::now() - t0 < 3s));
  auto r = *json::parse(out.result_json).v;
  BOOST_TEST(r.get_string("status") == "interrupted");
  auto text = r.get_string("output");
  BOOST_TEST(contains(text, "before"));
  std::string marker = "[execution interrupted — user sent a new message]";
  BOOST_TEST(text.size() > marker.size());
  BOOST_TEST(text.substr(text.size() - marker.size()) == marker);
  BOOST_TEST(exec("print(globals().get('x'))").get_string("output")
             == "None\n");
}

BOOST_AUTO_TEST_CASE(kernel_killed_from_outside_is_reported_and_replaced) {
  start();
  auto r = exec("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)");
  BOOST_TEST(r.get_string("status") == "error");
  BOOST_TEST(contains(r.get_string("error"), "The session kernel died"));
  auto next = exec("print('alive')");
  BOOST_TEST(next.get_string("output") == "alive\n");
  BOOST_TEST(next["kernel"].get_bool("reused", true) == false);
}

BOOST_AUTO_TEST_CASE(sys_exit_reports_the_real_exit_code) {
  start();
  auto r = exec("print('bye')\nimport sys\nsys.exit(3)");
  BOOST_TEST(r.get_string("status") == "error");
  BOOST_TEST(r.get_int("exit_code", 0) == 3);
  BOOST_TEST(r["kernel"].get_bool("ended", false));
  BOOST_TEST(contains(r.get_string("output"), "bye"));
  auto z = exec("import sys\nsys.exit(0)");
  BOOST_TEST(z.get_string("status") == "success");
  BOOST_TEST(exec("print(2)").get_string("output") == "2\n");
}

BOOST_AUTO_TEST_CASE(script_closing_its_stdout_and_faking_frames) {
  start();
  auto r = exec("import os, sys\n"
                "os.write(1, b'\\n@@MIBYAN-KERNEL-fake@@ 12\\nnot a frame\\n')\n"
                "sys.stdout.close()\nos.close(1)");
  BOOST_TEST(r.get_string("status") == "success");
  BOOST_TEST(contains(r.get_string("output"), "not a frame"));
  auto next = exec("print('still here')");
  BOOST_TEST(next.get_string("output") == "still here\n");
}

BOOST_AUTO_TEST_CASE(process_trees_die_with_a_timed_out_cell) {
  start([](options& o) { o.code_execution.timeout = 2; });
  auto r = exec(
    "import subprocess, time, sys\n"
    "pids = []\n"
    "for i in range(10):\n"
    "    p = subprocess.Popen(['bash', '-c', 'sleep 100 & sleep 100 & wait'])\n"
    "    pids.append(p.pid)\n"
    "import os\n"
    "print(" + std::string{test::py_pid_ns} + ")\n"
    "print(' '.join(map(str, pids)))\n"
    "sys.stdout.flush()\n"
    "time.sleep(100)");
  BOOST_TEST(r.get_string("status") == "timeout");
  auto out = r.get_string("output");
  std::istringstream in(out);
  std::string ns;
  in >> ns;
  int pid = 0, count = 0;
  while (in >> pid && count < 10) {
    BOOST_TEST(test::wait_gone(ns, pid), "pid " << pid << " survived");
    ++count;
  }
  BOOST_TEST(count == 10);
}

BOOST_AUTO_TEST_CASE(bad_arguments_get_clear_errors) {
  start();
  auto call = [&](const std::string& args) {
    auto out = rt->call_tool({"s1", "c", "execute_code", args, ""});
    return *json::parse(out.result_json).v;
  };
  BOOST_TEST(contains(call(R"J({"code": ""})J").get_string("error"),
                      "No code provided"));
  BOOST_TEST(contains(call(R"J({"command": "ls"})J").get_string("error"),
                      "received a 'command' parameter"));
  BOOST_TEST(contains(call(R"({"code": 42})").get_string("error"),
                      "received a integer in 'code'"));
  BOOST_TEST(contains(call("not json").get_string("error"),
                      "must be a JSON object"));
  auto big = call(json::value{json::object{
    {"code", std::string(5000000, '#')}}}.dump());
  BOOST_TEST(big.get_string("status") == "success");
}

BOOST_AUTO_TEST_CASE(unusable_interpreter_falls_back_and_says_so) {
  start([](options& o) { o.code_execution.python = "/nonexistent/python3"; });
  auto r = exec("print('fell back')");
  BOOST_TEST(r.get_string("status") == "success");
  BOOST_TEST(r.get_string("output") == "fell back\n");
  BOOST_TEST(contains(r.get_string("note"), "/nonexistent/python3"));
  BOOST_TEST(contains(r.get_string("note"), "could not be started"));
  // The session keeps that kernel.
  BOOST_TEST(exec("print(1)").get_string("output") == "1\n");
}

BOOST_AUTO_TEST_CASE(prestarted_kernel_serves_a_new_session) {
  start([](options& o) { o.code_execution.prestart_kernels = 1; });
  for (int i = 0; i < 100 && stats().get_int("prestarted", 0) < 1; ++i)
    std::this_thread::sleep_for(20ms);
  BOOST_TEST(stats().get_int("prestarted", 0) == 1);
  auto r = exec("print('warm')", "fresh");
  BOOST_TEST(r.get_string("output") == "warm\n");
  // The pool refills for the next session.
  for (int i = 0; i < 100 && stats().get_int("prestarted", 0) < 1; ++i)
    std::this_thread::sleep_for(20ms);
  BOOST_TEST(stats().get_int("prestarted", 0) == 1);
  BOOST_TEST(stats().get_int("spawned", 0) == 2);
}

BOOST_AUTO_TEST_CASE(close_session_disposes_its_kernels) {
  start();
  auto r = exec(std::string{"import os\nprint(os.getpid())\nprint("}
                + test::py_pid_ns + ")", "gone");
  std::istringstream out(r.get_string("output"));
  int pid = 0;
  std::string ns;
  out >> pid >> ns;
  exec("pass", "gone::child::sub1");
  BOOST_TEST(stats().get_int("kernels", 0) == 2);
  rt->close_session("gone");
  BOOST_TEST(test::wait_gone(ns, pid));
  for (int i = 0; i < 100 && stats().get_int("kernels", -1) != 0; ++i)
    std::this_thread::sleep_for(20ms);
  BOOST_TEST(stats().get_int("kernels", -1) == 0);
}

// Issue 14 item 4: a script's terminal call gets the kernel's allow-list,
// not only the direct call's secret filter.
BOOST_AUTO_TEST_CASE(script_terminal_calls_get_the_kernel_allow_list) {
  ::setenv("FILESEC_PLAIN_VAR", "plain-value", 1);
  ::setenv("FILESEC_DB_URL", "postgres://app:hunter2@db/x", 1);
  start();
  auto r = exec("from mibyan_tools import terminal\n"
                "print(terminal('env')['output'])\n");
  ::unsetenv("FILESEC_PLAIN_VAR");
  ::unsetenv("FILESEC_DB_URL");
  auto out = r.get_string("output");
  BOOST_TEST(r.get_string("status") == "success");
  BOOST_TEST(contains(out, "PATH="));
  BOOST_TEST(!contains(out, "plain-value"));
  BOOST_TEST(!contains(out, "hunter2"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(cli_stdin_keeps_one_kernel_per_session) {
  test::temp_dir home;
  // `mibyan tool` has no approval channel (docs/approvals.md): opt in.
  home.write("config.yaml", "approvals:\n  single_query_mode: approve\n");
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  po.input = R"J({"tool":"execute_code","args":{"code":"x = 41"}})J" "\n"
             R"J({"tool":"execute_code","args":{"code":"print(x + 1)"}})J" "\n"
             R"J({"tool":"execute_code","args":{"code":"from mibyan_tools import terminal\nprint(terminal(\"echo hi\")[\"output\"])"}})J" "\n";
  auto r = test::run_mibyan({"tool", "--stdin"}, po);
  BOOST_TEST(r.exit_code == 0);
  std::istringstream lines(r.out);
  std::string line;
  std::vector<json::value> results;
  while (std::getline(lines, line))
    results.push_back(*json::parse(line).v);
  BOOST_REQUIRE(results.size() == 3u);
  BOOST_TEST(results[1].get_string("output") == "42\n");
  BOOST_TEST(results[2].get_string("output") == "hi\n\n");
}

BOOST_AUTO_TEST_CASE(cli_sigint_interrupts_the_running_cell) {
  test::temp_dir home;
  test::temp_dir work;
  home.write("config.yaml", "approvals:\n  single_query_mode: approve\n");
  // The cell marks that it runs with a file in its working directory; the
  // test interrupts the CLI only then (not after a guessed delay, which a
  // loaded machine outlasts).
  auto marker = work.path() + "/cell-started";
  // The CLI's own pid, not a lookup by command line: under ctest -j another
  // suite may run a `mibyan tool execute_code` of its own.
  std::atomic<int> cli_pid{0};
  auto result = std::async(std::launch::async, [&] {
    test::process_options po;
    po.env["MIBYAN_HOME"] = home.path();
    po.cwd = work.path();
    po.on_started = [&](int pid) { cli_pid = pid; };
    return test::run_mibyan(
      {"tool", "execute_code",
       R"J({"code":"import time\nprint('running')\nopen('cell-started', 'w').close()\ntime.sleep(60)"})J"},
      po);
  });
  bool started = false;
  for (int i = 0; i < 1200 && !started; ++i) {
    std::this_thread::sleep_for(50ms);
    started = ::access(marker.c_str(), F_OK) == 0;
  }
  BOOST_REQUIRE_MESSAGE(started, "the cell did not start within 60 s");
  BOOST_REQUIRE(cli_pid.load() > 0);
  ::kill(cli_pid.load(), SIGINT);
  auto r = result.get();
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(contains(r.out, "\"status\":\"interrupted\""));
  BOOST_TEST(contains(r.out, "running"), r.out);
}
