#define BOOST_TEST_MODULE kernel_runner
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <thread>

#include <unistd.h>

#include "tests/support/kernel_harness.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait_until.hpp"

using namespace mibyan;
using namespace mibyan::test;
using namespace std::chrono_literals;

namespace {

int64_t count_of(const runner_frame& f) {
  return f.body.get_int("execution_count", -1);
}

const json::value* field(const runner_frame& f, const char* key) {
  return f.body.find(key);
}

} // namespace

BOOST_AUTO_TEST_SUITE(kernel_runner)

BOOST_AUTO_TEST_CASE(state_persists_across_cells) {
  kernel_harness k;
  auto a = k.run("x = 41");
  BOOST_REQUIRE(a.ok);
  BOOST_TEST(a.status() == "ok");
  BOOST_TEST(a.body.get_string("id") == "cell-1");
  BOOST_TEST(count_of(a) == 1);
  BOOST_TEST(a.body.get_int("exit_code", -1) == 0);
  BOOST_TEST(a.out().empty());
  auto b = k.run("print(x + 1)");
  BOOST_REQUIRE(b.ok);
  BOOST_TEST(b.out() == "42\n");
  BOOST_TEST(b.body.get_string("id") == "cell-2");
  BOOST_TEST(count_of(b) == 2);
  auto c = k.run("import json as j\nprint(__name__)");
  BOOST_TEST(c.out() == "__main__\n");
  auto d = k.run("import __main__\nprint(j.dumps([__main__.x]))");
  BOOST_TEST(d.out() == "[41]\n");
}

BOOST_AUTO_TEST_CASE(frame_has_every_field) {
  kernel_harness k;
  auto f = k.run("pass");
  BOOST_REQUIRE(f.ok);
  for (auto key : {"id", "status", "stdout", "stderr", "stdout_clipped",
                   "stderr_clipped", "stdout_total", "stderr_total",
                   "traceback", "execution_count", "exit_code"})
    BOOST_TEST(field(f, key) != nullptr, "missing " << key);
  BOOST_TEST(field(f, "stdout_clipped")->is_bool());
  BOOST_TEST(!field(f, "stdout_clipped")->as_bool());
  BOOST_TEST(f.trace().empty());
}

BOOST_AUTO_TEST_CASE(exception_keeps_kernel_and_returns_traceback) {
  kernel_harness k;
  BOOST_REQUIRE(k.run("x = 1").ok);
  auto f = k.run("print('before')\ndef f():\n    return 1 / 0\nf()");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "error");
  BOOST_TEST(f.body.get_int("exit_code", -1) == 1);
  BOOST_TEST(f.out() == "before\n");
  auto tb = f.trace();
  BOOST_TEST(tb.find("Traceback (most recent call last)") == 0u);
  BOOST_TEST(tb.find("File \"<cell>\", line 4") != std::string::npos);
  BOOST_TEST(tb.find("ZeroDivisionError: division by zero")
             != std::string::npos);
  BOOST_TEST(tb.find("mibyan_kernel_runner") == std::string::npos);
  auto g = k.run("print(x)");
  BOOST_TEST(g.status() == "ok");
  BOOST_TEST(g.out() == "1\n");
  BOOST_TEST(count_of(g) == 3);
}

BOOST_AUTO_TEST_CASE(syntax_error_and_base_exceptions_are_errors) {
  kernel_harness k;
  auto s = k.run("def broken(:\n  pass");
  BOOST_REQUIRE(s.ok);
  BOOST_TEST(s.status() == "error");
  BOOST_TEST(s.trace().find("SyntaxError") != std::string::npos);
  BOOST_TEST(s.trace().find("<cell>") != std::string::npos);
  auto i = k.run("raise KeyboardInterrupt('stop')");
  BOOST_TEST(i.status() == "error");
  BOOST_TEST(i.trace().find("KeyboardInterrupt: stop") != std::string::npos);
  auto n = k.run("print(undefined_name)");
  BOOST_TEST(n.trace().find("NameError: name 'undefined_name' is not "
                            "defined")
             != std::string::npos);
  BOOST_TEST(k.run("print('alive')").out() == "alive\n");
}

BOOST_AUTO_TEST_CASE(sys_exit_ends_the_kernel_with_its_code) {
  struct exit_case {
    const char* code;
    int64_t exit_code;
    const char* trace;
  };
  exit_case cases[] = {
    {"import sys\nsys.exit(3)", 3, "SystemExit: 3"},
    {"import sys\nsys.exit()", 0, "SystemExit: None"},
    {"import sys\nsys.exit(None)", 0, "SystemExit: None"},
    {"import sys\nsys.exit('bye')", 1, "SystemExit: 'bye'"},
    {"raise SystemExit(0)", 0, "SystemExit: 0"},
    {"exit(7)", 7, "SystemExit: 7"},
  };
  for (auto& c : cases) {
    BOOST_TEST_CONTEXT(c.code) {
      kernel_harness k;
      auto f = k.run(std::string{"print('out')\n"} + c.code);
      BOOST_REQUIRE(f.ok);
      BOOST_TEST(f.status() == "exit");
      BOOST_TEST(f.body.get_int("exit_code", -1) == c.exit_code);
      BOOST_TEST(f.trace() == c.trace);
      BOOST_TEST(f.out() == "out\n");
      auto rc = k.proc->wait_exit(5s);
      BOOST_REQUIRE(rc.has_value());
      BOOST_TEST(*rc == c.exit_code);
    }
  }
}

BOOST_AUTO_TEST_CASE(exit_does_not_wait_for_threads_and_runs_atexit) {
  kernel_harness k;
  BOOST_REQUIRE(k.run("import threading, time\n"
                      "threading.Thread(target=time.sleep, args=(60,))"
                      ".start()").ok);
  auto f = k.run("import atexit, sys\n"
                 "atexit.register(lambda: print('atexit ran'))\n"
                 "sys.exit(0)");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "exit");
  BOOST_TEST(f.out() == "atexit ran\n");
  auto start = std::chrono::steady_clock::now();
  auto rc = k.proc->wait_exit(5s);
  BOOST_REQUIRE(rc.has_value());
  BOOST_TEST(*rc == 0);
  BOOST_TEST((std::chrono::steady_clock::now() - start < 3s));
}

BOOST_AUTO_TEST_CASE(invalid_cell_lines_get_protocol_error_frames) {
  kernel_harness k;
  struct bad_line {
    std::string line;
    const char* id;       // expected id ("" means null)
    const char* reason;
  };
  bad_line lines[] = {
    {"not json", "", "not JSON"},
    {"[1, 2]", "", "expected a JSON object"},
    {"{}", "", "'id' must be a non-empty string"},
    {"{\"id\": 5, \"code\": \"print(1)\"}", "",
     "'id' must be a non-empty string"},
    {"{\"id\": \"a1\"}", "a1", "'code' must be a string"},
    {"{\"id\": \"a2\", \"code\": 5}", "a2", "'code' must be a string"},
    {"{\"id\": \"a3\", \"code\": \"1\", \"timeout\": -1}", "a3",
     "'timeout' must be a positive number"},
    {"{\"id\": \"a4\", \"code\": \"1\", \"timeout\": \"9\"}", "a4",
     "'timeout' must be a positive number"},
    {"", "", "empty line"},
    {"\xff\xfe{}", "", "not valid UTF-8"},
  };
  for (auto& b : lines) {
    BOOST_TEST_CONTEXT(b.line) {
      BOOST_REQUIRE(k.proc->send_line(b.line));
      auto f = k.proc->read_frame(k.sentinel);
      BOOST_REQUIRE(f.ok);
      BOOST_TEST(f.status() == "protocol-error");
      auto id = f.body.find("id");
      BOOST_REQUIRE(id != nullptr);
      if (*b.id == '\0')
        BOOST_TEST(id->is_null());
      else
        BOOST_TEST(f.body.get_string("id") == b.id);
      BOOST_TEST(f.trace().find("Invalid cell request: ") == 0u);
      BOOST_TEST(f.trace().find(b.reason) != std::string::npos);
      BOOST_TEST(f.body.find("exit_code")->is_null());
      BOOST_TEST(count_of(f) == 0);
    }
  }
  auto ok = k.run("print('still here')");
  BOOST_TEST(ok.out() == "still here\n");
  BOOST_TEST(count_of(ok) == 1);
}

BOOST_AUTO_TEST_CASE(fd_level_output_arrives_raw_before_the_frame) {
  kernel_harness k;
  auto f = k.run("import os, sys\n"
                 "print('python level')\n"
                 "os.system('echo hi')\n"
                 "os.write(1, b'direct')\n"
                 "os.system('echo to-err >&2')\n");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.raw == "hi\ndirect");
  BOOST_TEST(f.out() == "python level\n");
  BOOST_TEST(f.status() == "ok");
  // fd-level stderr goes to fd 2, which the host reads separately.
  BOOST_TEST(!k.proc->wait_exit(200ms).has_value());
  BOOST_TEST(k.proc->err_text().find("to-err\n") != std::string::npos);
  // The original Python streams are fd-level too, flushed before the frame.
  auto g = k.run("import sys\nsys.__stdout__.write('orig')");
  BOOST_TEST(g.raw == "orig");
  auto h = k.run("import subprocess, sys\n"
                 "subprocess.run(['echo', 'via-fileno'], stdout=sys.stdout)");
  BOOST_TEST(h.status() == "ok");
  BOOST_TEST(h.raw == "via-fileno\n");
}

BOOST_AUTO_TEST_CASE(python_streams_are_captured_separately) {
  kernel_harness k;
  auto f = k.run("import sys\n"
                 "print('to out')\n"
                 "print('to err', file=sys.stderr)\n"
                 "sys.stdout.buffer.write('bytes \\u00e9\\n'.encode())\n"
                 "sys.stdout.writelines(['a', 'b'])\n");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.out() == "to out\nbytes \xc3\xa9\nab");
  BOOST_TEST(f.err() == "to err\n");
  BOOST_TEST(f.raw.empty());
  BOOST_TEST(f.body.get_int("stderr_total", -1) == 7);
}

BOOST_AUTO_TEST_CASE(printed_or_forged_sentinel_does_not_break_framing) {
  kernel_harness k;
  auto code = "import os\nS = " + json::quote(k.sentinel)
              + "\nprint('\\n' + S + ' 5\\nhello')\n"
                "os.write(1, ('\\n' + S + ' nonsense\\n').encode())\n"
                "print('done')";
  auto f = k.run(code);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.out() == "\n" + k.sentinel + " 5\nhello\ndone\n");
  BOOST_TEST(f.raw == "\n" + k.sentinel + " nonsense\n");
  BOOST_TEST(k.run("print(1)").out() == "1\n");
}

BOOST_AUTO_TEST_CASE(closing_sys_stdout_still_gets_a_frame) {
  kernel_harness k;
  auto f = k.run("import sys\nprint('one')\nsys.stdout.close()");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok");
  BOOST_TEST(f.out() == "one\n");
  auto g = k.run("import sys\nsys.stdout.close()\nprint('two')");
  BOOST_REQUIRE(g.ok);
  BOOST_TEST(g.status() == "error");
  BOOST_TEST(g.trace().find("ValueError") != std::string::npos);
  auto h = k.run("print('three')");
  BOOST_TEST(h.out() == "three\n");
  auto i = k.run("import sys\nsys.stdout = None\nsys.stderr = None");
  BOOST_TEST(i.status() == "ok");
  BOOST_TEST(k.run("print('four')").out() == "four\n");
}

BOOST_AUTO_TEST_CASE(closing_fd_1_still_gets_a_frame) {
  kernel_harness k;
  auto f = k.run("import os\nos.close(1)\nos.close(2)\nprint('still')");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok");
  BOOST_TEST(f.out() == "still\n");
  // fd 1 and fd 2 are restored for later cells' subprocesses.
  auto g = k.run("import os\nos.system('echo back')");
  BOOST_REQUIRE(g.ok);
  BOOST_TEST(g.raw == "back\n");
  auto h = k.run("import sys\nsys.__stdout__.close()\nprint('ok')");
  BOOST_TEST(h.out() == "ok\n");
  BOOST_TEST(k.run("print(5)").out() == "5\n");
}

BOOST_AUTO_TEST_CASE(large_output_is_clipped_at_five_million_chars) {
  kernel_harness k;
  auto f = k.run("import sys\nprint('x' * 10000000)\n"
                 "print('e' * 6000000, file=sys.stderr)", 120s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.out().size() == 5000000u);
  BOOST_TEST(f.out().find_first_not_of('x') == std::string::npos);
  BOOST_TEST(f.body.get_bool("stdout_clipped", false));
  BOOST_TEST(f.body.get_int("stdout_total", -1) == 10000001);
  BOOST_TEST(f.err().size() == 5000000u);
  BOOST_TEST(f.body.get_bool("stderr_clipped", false));
  auto g = k.run("print('small')");
  BOOST_TEST(!g.body.get_bool("stdout_clipped", true));
  BOOST_TEST(g.out() == "small\n");
}

BOOST_AUTO_TEST_CASE(non_ascii_and_lone_surrogates_are_valid_utf8) {
  kernel_harness k;
  auto f = k.run("print('h\\u00e9llo \\u4e16\\u754c \\U0001F600')\n"
                 "print('bad \\udcff end')");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.out().find("h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c "
                          "\xf0\x9f\x98\x80\n")
             == 0u);
  BOOST_TEST(f.out().find("bad ? end\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(input_sees_end_of_file_not_the_next_cell) {
  kernel_harness k;
  auto f = k.run("try:\n    input()\nexcept EOFError:\n    print('eof')");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.out() == "eof\n");
  auto g = k.run("import subprocess\n"
                 "print(subprocess.run(['cat'], capture_output=True)"
                 ".stdout)");
  BOOST_TEST(g.out() == "b''\n");
}

BOOST_AUTO_TEST_CASE(threads_left_running_do_not_block_the_next_cell) {
  kernel_harness k;
  auto f = k.run("import threading, time\n"
                 "ev = threading.Event()\n"
                 "def work():\n"
                 "    ev.wait(30)\n"
                 "    print('late')\n"
                 "threading.Thread(target=work).start()\n"
                 "print('started')");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.out() == "started\n");
  // The thread prints during the next cell, so that cell captures it.
  auto g = k.run("ev.set()\ntime.sleep(0.5)\nprint('next')");
  BOOST_TEST(g.out() == "late\nnext\n");
}

BOOST_AUTO_TEST_CASE(forked_child_leaving_the_cell_exits_without_a_frame) {
  kernel_harness k;
  auto f = k.run("import os\n"
                 "pid = os.fork()\n"
                 "if pid == 0:\n"
                 "    print('child')\n"
                 "    raise ValueError('in child')\n"
                 "_, status = os.waitpid(pid, 0)\n"
                 "print('parent', os.waitstatus_to_exitcode(status)\n"
                 "      if hasattr(os, 'waitstatus_to_exitcode')\n"
                 "      else status >> 8)");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok");
  BOOST_TEST(f.out() == "parent 1\n");
  BOOST_TEST(f.raw == "child\n");
  // The child did not consume the next cell line nor send a second frame.
  auto g = k.run("print('next')");
  BOOST_TEST(g.out() == "next\n");
  BOOST_TEST(g.raw.empty());
  BOOST_TEST(g.body.get_int("execution_count", -1) == 2);
  BOOST_TEST(!k.proc->wait_exit(100ms).has_value());
  BOOST_TEST(k.proc->err_text().find("ValueError: in child")
             != std::string::npos);
}

BOOST_AUTO_TEST_CASE(private_variables_are_removed_from_the_environment) {
  kernel_harness_options o;
  o.rpc_socket = "/nonexistent/rpc.sock";
  o.rpc_token = "tok";
  kernel_harness k{o};
  auto f = k.run("import os, json\n"
                 "print(json.dumps(sorted(k for k in os.environ\n"
                 "    if k.startswith('MIBYAN_KERNEL_'))))\n"
                 "print(os.environ.get('MIBYAN_RPC_SOCKET'))\n"
                 "print(any(" + json::quote(k.sentinel)
                 + " in v for v in os.environ.values()))\n"
                   "print(os.environ.get('PYTHONDONTWRITEBYTECODE'))\n"
                   "import subprocess\n"
                   "print(subprocess.run(['sh', '-c', "
                   "'env | grep -c MIBYAN_KERNEL_ || true'], "
                   "capture_output=True, text=True).stdout.strip())");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.out() == "[]\n/nonexistent/rpc.sock\nFalse\n1\n0\n");
}

BOOST_AUTO_TEST_CASE(stub_is_preloaded_by_exact_path) {
  kernel_harness k;
  // A module of the same name in the working directory (first on
  // sys.path) does not shadow the generated stub.
  k.dir.write("work/mibyan_tools.py", "raise ImportError('decoy')\n");
  auto f = k.run("import sys, mibyan_tools\n"
                 "print(mibyan_tools.__file__ == " + json::quote(k.stub_path)
                 + ")\nprint(sys.path[0] == '')\n"
                   "from mibyan_tools import json_parse, read_file\n"
                   "print(json_parse('\\ufeff{\"a\": 1}'))");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.out() == "True\nTrue\n{'a': 1}\n");
}

BOOST_AUTO_TEST_CASE(cell_timeout_field_sets_the_rpc_timeout) {
  kernel_harness k;
  BOOST_REQUIRE(k.proc->send_line(
    "{\"id\": \"t1\", \"code\": \"import os\\nprint(os.environ["
    "'MIBYAN_RPC_TIMEOUT'])\", \"timeout\": 12}"));
  auto f = k.proc->read_frame(k.sentinel);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.out() == "12.0\n");
}

BOOST_AUTO_TEST_CASE(stdin_eof_ends_the_runner) {
  kernel_harness k;
  BOOST_REQUIRE(k.run("import threading, time\n"
                      "threading.Thread(target=time.sleep, args=(60,))"
                      ".start()").ok);
  k.proc->close_stdin();
  auto rc = k.proc->wait_exit(5s);
  BOOST_REQUIRE(rc.has_value());
  BOOST_TEST(*rc == 0);
}

BOOST_AUTO_TEST_CASE(sentinel_is_not_in_the_environment) {
  // A cell that knows the sentinel can forge a reply frame; it used to be
  // readable from /proc/self/environ.
  kernel_harness k;
  auto f = k.run("import os\n"
                 "raw = open('/proc/self/environ', 'rb').read()\n"
                 "print(" + json::quote(k.sentinel) + ".encode() in raw)\n"
                 "print(sorted(k for k in os.environ if 'SENTINEL' in k))\n");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.out() == "False\n[]\n");
}

BOOST_AUTO_TEST_CASE(missing_sentinel_refuses_to_start) {
  kernel_harness_options o;
  o.pass_sentinel = false;
  kernel_harness k{o};
  auto rc = k.proc->wait_exit(10s);
  BOOST_REQUIRE(rc.has_value());
  BOOST_TEST(*rc == 2);
  BOOST_TEST(k.proc->err_text().find("MIBYAN_KERNEL_SENTINEL_FD")
             != std::string::npos);
}

BOOST_AUTO_TEST_CASE(watchdog_kills_runner_and_children_on_parent_death) {
  kernel_harness k;
  auto f = k.run("import subprocess\n"
                 "p = subprocess.Popen(['sleep', '60'])\n"
                 "q = subprocess.Popen(['setsid', 'sleep', '61'])\n"
                 "print(p.pid, q.pid)");
  BOOST_REQUIRE(f.ok);
  int sleep_pid = 0, detached_pid = 0;
  BOOST_REQUIRE(std::sscanf(f.out().c_str(), "%d %d", &sleep_pid,
                            &detached_pid)
                == 2);
  BOOST_TEST(process_alive(sleep_pid));
  // Nothing happens while the host holds its end.
  BOOST_TEST(!k.proc->wait_exit(300ms).has_value());
  auto start = std::chrono::steady_clock::now();
  k.proc->close_watchdog();
  auto rc = k.proc->wait_exit(10s);
  BOOST_REQUIRE(rc.has_value());
  BOOST_TEST((std::chrono::steady_clock::now() - start < 5s));
  auto dead = [](int pid) {
    for (int i = 0; i < 100 && process_alive(pid); ++i)
      std::this_thread::sleep_for(50ms);
    return !process_alive(pid);
  };
  BOOST_TEST(dead(sleep_pid));
  BOOST_TEST(dead(detached_pid));
  if (process_alive(detached_pid))
    ::kill(detached_pid, SIGKILL);
}

BOOST_AUTO_TEST_CASE(runner_announces_ready_before_reading_cells) {
  kernel_harness k;
  BOOST_REQUIRE(k.ready.ok);
  BOOST_TEST(k.ready.status() == "ready");
  BOOST_TEST(k.ready.body.get_int("pid", 0) == k.proc->pid());
}

BOOST_AUTO_TEST_CASE(kill_byte_ships_partial_output_then_ends_the_group) {
  kernel_harness k;
  // The cell marks (after its print) that it runs.
  mibyan::test::temp_dir marks;
  auto marker = marks.path() + "/c1-started";
  BOOST_REQUIRE(k.proc->send_line(
    R"JSON({"id": "c1", "code": "import subprocess, time\np = subprocess.Popen(['sleep', '60'])\nprint('partial', p.pid)\nopen(')JSON"
    + marker + R"JSON(', 'w').close()\ntime.sleep(60)"})JSON"));
  BOOST_REQUIRE(mibyan::test::wait_until(
    [&] { return ::access(marker.c_str(), F_OK) == 0; }));
  BOOST_REQUIRE(k.proc->kill_cell());
  auto f = k.proc->read_frame(k.sentinel, 10s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "killed");
  BOOST_TEST(f.body.get_string("id") == "c1");
  BOOST_TEST(f.out().rfind("partial ", 0) == 0);
  int sleep_pid = std::atoi(f.out().c_str() + 8);
  auto rc = k.proc->wait_exit(10s);
  BOOST_REQUIRE(rc.has_value());
  for (int i = 0; i < 100 && process_alive(sleep_pid); ++i)
    std::this_thread::sleep_for(50ms);
  BOOST_TEST(!process_alive(sleep_pid));
}

BOOST_AUTO_TEST_CASE(without_watchdog_fd_the_kernel_still_runs) {
  kernel_harness_options o;
  o.watchdog = false;
  kernel_harness k{o};
  BOOST_TEST(k.run("print('fine')").out() == "fine\n");
}

// Warm cells run in the one kernel process and see its state. The times are
// reported, never asserted (docs/testing.md); bench/ measures them.
BOOST_AUTO_TEST_CASE(warm_cells_reuse_the_kernel_process) {
  auto t0 = std::chrono::steady_clock::now();
  kernel_harness k;
  auto first = k.run("import os\nprint(os.getpid())");
  auto t1 = std::chrono::steady_clock::now();
  BOOST_REQUIRE(first.ok);
  const std::string pid = first.out();
  BOOST_REQUIRE(!pid.empty());
  constexpr int n = 200;
  for (int i = 0; i < n; ++i)
    BOOST_REQUIRE(k.run("y = " + std::to_string(i)).ok);
  auto t2 = std::chrono::steady_clock::now();
  auto last = k.run("print(os.getpid())\nprint(y)");
  BOOST_REQUIRE(last.ok);
  BOOST_TEST(last.out() == pid + std::to_string(n - 1) + "\n");
  auto cold = std::chrono::duration<double, std::milli>(t1 - t0).count();
  auto warm = std::chrono::duration<double, std::milli>(t2 - t1).count() / n;
  BOOST_TEST_MESSAGE("cold spawn + first cell: " << cold
                     << " ms; warm cell: " << warm << " ms");
}

// Checkpoint and restore lines (docs/kernel_protocol.md, section 3.1).
BOOST_AUTO_TEST_CASE(checkpoint_frames_follow_the_cell_and_restore_reports) {
  kernel_harness k;
  auto& p = *k.proc;
  BOOST_REQUIRE(p.send_line(
    R"({"id": "c1", "code": "x = 41\nimport re\nrx = re.compile('a+')\n)"
    R"(lam = lambda: 0", "checkpoint": {"file": "ck-1.bin", "max_bytes": 0,)"
    R"( "timeout": 5}})"));
  auto cell = p.read_frame(k.sentinel);
  BOOST_REQUIRE(cell.ok);
  BOOST_TEST(cell.status() == "ok");
  BOOST_TEST(cell.body.get_string("checkpoint") == "follows");
  auto ck = p.read_frame(k.sentinel);
  BOOST_REQUIRE(ck.ok);
  BOOST_TEST(ck.status() == "checkpoint");
  BOOST_TEST(ck.body.get_string("id") == "c1");
  BOOST_TEST(ck.body.get_bool("changed", false));
  BOOST_TEST(ck.body.get_string("file") == "ck-1.bin");
  BOOST_TEST(ck.body.find("not_saved")->as_array().size() == 1u);
  BOOST_REQUIRE(p.send_line(
    R"({"id": "c2", "code": "y = x", "checkpoint": {"file": "ck-2.bin"}})"));
  BOOST_REQUIRE(p.read_frame(k.sentinel).ok);
  auto second = p.read_frame(k.sentinel);
  BOOST_TEST(second.status() == "checkpoint");
  BOOST_TEST(second.body.get_bool("changed", false)); // y is new
  // Nothing changed: said in the cell's own frame, no checkpoint frame.
  BOOST_REQUIRE(p.send_line(
    R"({"id": "c3", "code": "pass", "checkpoint": {"file": "ck-3.bin"}})"));
  auto third = p.read_frame(k.sentinel);
  BOOST_TEST(third.body.get_string("checkpoint") == "unchanged");
  // An explicit checkpoint of an unchanged namespace writes no file.
  BOOST_REQUIRE(p.send_line(
    R"({"id": "c4", "op": "checkpoint", "checkpoint": {"file": "ck-4.bin"}})"));
  auto fourth = p.read_frame(k.sentinel);
  BOOST_TEST(fourth.status() == "checkpoint");
  BOOST_TEST(!fourth.body.get_bool("changed", true));
  BOOST_TEST(fourth.body.find("file") == nullptr);
  // A mutation in place is seen.
  BOOST_REQUIRE(p.send_line(
    R"({"id": "c5", "code": "box = [1]", "checkpoint": {"file": "ck-5.bin"}})"));
  BOOST_TEST(p.read_frame(k.sentinel).body.get_string("checkpoint")
             == "follows");
  BOOST_TEST(p.read_frame(k.sentinel).body.get_bool("changed", false));
  BOOST_REQUIRE(p.send_line(
    R"x({"id": "c6", "code": "box.append(2)", "checkpoint": {"file": "ck-6.bin"}})x"));
  BOOST_TEST(p.read_frame(k.sentinel).body.get_string("checkpoint")
             == "follows");
  BOOST_TEST(p.read_frame(k.sentinel).body.get_bool("changed", false));
  // Malformed requests are protocol errors, the kernel goes on.
  for (auto bad : {R"({"id": "b1", "code": "", "checkpoint": {"file": "../x"}})",
                   R"({"id": "b2", "code": "", "checkpoint": 3})",
                   R"({"id": "b3", "op": "restore", "file": "a/b"})",
                   R"({"id": "b4", "op": "explode"})"}) {
    BOOST_REQUIRE(p.send_line(bad));
    auto f = p.read_frame(k.sentinel);
    BOOST_TEST(f.status() == "protocol-error", bad);
  }
  // A second kernel restores the first checkpoint.
  kernel_harness k2;
  k2.dir.write("restore.bin", slurp(k.dir / "ck-1.bin"));
  BOOST_REQUIRE(k2.proc->send_line(
    R"({"id": "r1", "op": "restore", "file": "restore.bin", "timeout": 5})"));
  auto restored = k2.proc->read_frame(k2.sentinel);
  BOOST_REQUIRE(restored.ok);
  BOOST_TEST(restored.status() == "restored");
  BOOST_TEST(restored.body.get_string("error").empty());
  BOOST_TEST(restored.body.get_int("execution_count", 0) == 1);
  auto after = k2.run("print(x, rx.pattern)");
  BOOST_TEST(after.out() == "41 a+\n");
  BOOST_TEST(count_of(after) == 2);
  // Garbage is refused as a whole.
  k2.dir.write("junk.bin", "not a checkpoint");
  BOOST_REQUIRE(k2.proc->send_line(
    R"({"id": "r2", "op": "restore", "file": "junk.bin"})"));
  auto junk = k2.proc->read_frame(k2.sentinel);
  BOOST_TEST(junk.status() == "restored");
  BOOST_TEST(junk.body.get_string("error").find("bad magic")
             != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
