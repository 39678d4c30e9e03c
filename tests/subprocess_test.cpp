#define BOOST_TEST_MODULE subprocess
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <random>
#include <thread>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/head_tail_buffer.hpp"
#include "base/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono_literals;

namespace {

subprocess_options shell(const std::string& cmd) {
  subprocess_options opts;
  opts.shell_command = cmd;
  return opts;
}

long max_rss_kb() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

// Returns whether `pid` no longer runs: it does not exist or is a zombie
// waiting for its new parent (init here may take a second to reap it).
bool dead(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat))
    return true;
  auto paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size()
         || stat[paren + 2] == 'Z' || stat[paren + 2] == 'X';
}

// Waits up to 2 s for `pid` to stop running.
bool process_gone(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    if (dead(pid))
      return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

pid_t read_pid(const mibyan::test::temp_dir& dir, const std::string& rel) {
  auto text = dir.read(rel);
  return text.empty() ? -1 : static_cast<pid_t>(std::stol(text));
}

bool reaped(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, WNOHANG) < 0 && errno == ECHILD;
}

} // namespace

// Runs first, while the process is small, so that the peak RSS reflects
// this test.
BOOST_AUTO_TEST_CASE(twenty_megabytes_keep_head_and_tail_in_bounded_memory) {
  auto before = max_rss_kb();
  auto opts = shell("printf START; head -c 20000000 /dev/zero | tr '\\0' x;"
                    " printf END");
  opts.max_output_bytes = 1000;
  auto res = run_subprocess(opts);
  BOOST_TEST(res.spawn_error == "");
  BOOST_TEST(res.exit_code == 0);
  BOOST_TEST(res.out_total == 20000008u);
  BOOST_TEST(res.out_omitted == 20000008u - 1000u);
  BOOST_TEST(res.out_head.size() == 400u);
  BOOST_TEST(res.out_tail.size() == 600u);
  BOOST_TEST(res.out_head.substr(0, 5) == "START");
  BOOST_TEST(res.out_tail.substr(597) == "END");
  BOOST_TEST(res.out_tail.substr(0, 597) == std::string(597, 'x'));
  // 20 MB of output must not show up in the peak resident set.
  BOOST_TEST(max_rss_kb() - before < 8 * 1024);
}

BOOST_AUTO_TEST_CASE(head_tail_buffer_matches_reference_on_random_chunks) {
  std::mt19937 rng{42};
  for (size_t cap : {0u, 1u, 5u, 10u, 100u, 1000u}) {
    auto buf = head_tail_buffer::with_cap(cap);
    std::string all;
    for (int i = 0; i < 200; ++i) {
      std::string chunk(rng() % 37, '\0');
      for (auto& c : chunk)
        c = static_cast<char>('a' + rng() % 26);
      all += chunk;
      buf.append(chunk);
    }
    size_t head = cap * 2 / 5;
    size_t tail = cap - head;
    BOOST_TEST(buf.total() == all.size());
    if (all.size() <= cap) {
      BOOST_TEST(!buf.truncated());
      BOOST_TEST(buf.joined() == all);
    } else {
      BOOST_TEST(buf.omitted() == all.size() - cap);
      BOOST_TEST(buf.head() == all.substr(0, head));
      BOOST_TEST(buf.tail() == all.substr(all.size() - tail));
    }
  }
}

BOOST_AUTO_TEST_CASE(head_tail_buffer_handles_chunk_larger_than_tail) {
  head_tail_buffer buf{2, 3};
  buf.append("ab");
  buf.append("cdefgh");
  buf.append("i");
  BOOST_TEST(buf.head() == "ab");
  BOOST_TEST(buf.tail() == "ghi");
  BOOST_TEST(buf.omitted() == 4u);
}

BOOST_AUTO_TEST_CASE(exit_codes_and_signals) {
  auto res = run_subprocess(shell("exit 3"));
  BOOST_TEST(res.exit_code == 3);
  BOOST_TEST(res.term_signal == 0);
  BOOST_TEST(reaped(res.pid));
  subprocess_options opts;
  opts.argv = {"true"};
  BOOST_TEST(run_subprocess(opts).exit_code == 0);
  res = run_subprocess(shell("kill -9 $$"));
  BOOST_TEST(res.exit_code == 137);
  BOOST_TEST(res.term_signal == SIGKILL);
  BOOST_TEST(!res.timed_out);
}

BOOST_AUTO_TEST_CASE(stdout_and_stderr_separate_or_merged_in_order) {
  auto opts = shell("echo out; echo err >&2; echo out2");
  opts.merge_stderr = false;
  auto res = run_subprocess(opts);
  BOOST_TEST(res.out() == "out\nout2\n");
  BOOST_TEST(res.err() == "err\n");
  opts.merge_stderr = true;
  res = run_subprocess(opts);
  BOOST_TEST(res.out() == "out\nerr\nout2\n");
  BOOST_TEST(res.err() == "");
  BOOST_TEST(res.out_total == 13u);
}

BOOST_AUTO_TEST_CASE(spawn_errors_are_reported) {
  subprocess_options opts;
  opts.argv = {"definitely-not-a-program-4711"};
  auto res = run_subprocess(opts);
  BOOST_TEST(res.spawn_error.find("No such file") != std::string::npos);
  opts.argv = {};
  BOOST_TEST(run_subprocess(opts).spawn_error == "no program given");
  auto bad_cwd = shell("true");
  bad_cwd.cwd = "/nonexistent/dir/4711";
  BOOST_TEST(run_subprocess(bad_cwd).spawn_error.find("working directory")
             != std::string::npos);
  opts.argv = {"echo", std::string("a\0b", 3)};
  BOOST_TEST(run_subprocess(opts).spawn_error.find("NUL")
             != std::string::npos);
}

BOOST_AUTO_TEST_CASE(stdin_data_env_and_cwd) {
  auto opts = shell("cat");
  BOOST_TEST(run_subprocess(opts).out() == ""); // /dev/null: no hang
  opts.stdin_data = "hello stdin";
  BOOST_TEST(run_subprocess(opts).out() == "hello stdin");
  // A child that ignores a large input must not block or kill us (EPIPE).
  auto ignore = shell("exit 0");
  ignore.stdin_data = std::string(1 << 20, 'z');
  BOOST_TEST(run_subprocess(ignore).exit_code == 0);
  auto env = shell("echo \"$FOO:${HOME:-nohome}\"");
  env.env = std::vector<std::string>{"FOO=bar", "PATH=/usr/bin:/bin"};
  BOOST_TEST(run_subprocess(env).out() == "bar:nohome\n");
  mibyan::test::temp_dir dir;
  auto cwd = shell("pwd -P");
  cwd.cwd = dir.path();
  char real[4096];
  BOOST_REQUIRE(::realpath(dir.path().c_str(), real) != nullptr);
  BOOST_TEST(run_subprocess(cwd).out() == std::string{real} + "\n");
}

BOOST_AUTO_TEST_CASE(timeout_kills_the_whole_group_including_grandchildren) {
  mibyan::test::temp_dir dir;
  auto opts = shell("echo partial; sleep 100 & echo $! > " + (dir / "pid")
                    + "; sleep 100");
  opts.timeout = 300ms;
  opts.kill_grace = 200ms;
  auto res = run_subprocess(opts);
  BOOST_TEST(res.timed_out);
  BOOST_TEST(!res.cancelled);
  BOOST_TEST(res.out().find("partial") == 0u);
  BOOST_TEST(res.duration.count() < 3000);
  auto grandchild = read_pid(dir, "pid");
  BOOST_REQUIRE(grandchild > 0);
  BOOST_TEST(process_gone(grandchild));
  BOOST_TEST(reaped(res.pid));
}

BOOST_AUTO_TEST_CASE(sigterm_ignored_leads_to_sigkill_after_grace) {
  auto opts = shell("trap '' TERM; echo ready; sleep 100; sleep 100");
  opts.timeout = 200ms;
  opts.kill_grace = 400ms;
  auto res = run_subprocess(opts);
  BOOST_TEST(res.timed_out);
  BOOST_TEST(res.term_signal == SIGKILL);
  BOOST_TEST(res.exit_code == 128 + SIGKILL);
  BOOST_TEST(res.duration.count() >= 550);
  BOOST_TEST(res.duration.count() < 3000);
}

BOOST_AUTO_TEST_CASE(background_grandchild_holding_pipe_does_not_hang) {
  mibyan::test::temp_dir dir;
  auto opts = shell("sleep 100 & echo $! > " + (dir / "pid")
                    + "; echo done");
  auto res = run_subprocess(opts);
  BOOST_TEST(res.exit_code == 0);
  BOOST_TEST(res.out() == "done\n");
  BOOST_TEST(res.duration.count() < 2000);
  auto grandchild = read_pid(dir, "pid");
  BOOST_REQUIRE(grandchild > 0);
  // Default: a background process started on purpose survives.
  BOOST_TEST(!dead(grandchild));
  ::kill(-res.pid, SIGKILL);
  BOOST_TEST(process_gone(grandchild));
  // kill_group_on_exit: nothing survives.
  opts.kill_group_on_exit = true;
  res = run_subprocess(opts);
  BOOST_TEST(res.duration.count() < 2000);
  grandchild = read_pid(dir, "pid");
  BOOST_TEST(process_gone(grandchild));
}

BOOST_AUTO_TEST_CASE(cancel_flag_stops_promptly_and_leaves_nothing_behind) {
  mibyan::test::temp_dir dir;
  std::atomic<bool> cancel{false};
  auto opts = shell("sleep 100 & echo $! > " + (dir / "pid")
                    + "; echo started; sleep 100");
  opts.cancel = &cancel;
  opts.timeout = 60s;
  // Cancelled once the command is under way (its "started" was read).
  std::string seen;
  opts.on_output = [&](output_stream, std::string_view data) {
    seen.append(data);
    if (seen.find("started\n") != std::string::npos)
      cancel = true;
    return true;
  };
  auto res = run_subprocess(opts);
  BOOST_TEST(res.cancelled);
  BOOST_TEST(!res.timed_out);
  BOOST_TEST(res.out() == "started\n");
  BOOST_TEST(res.duration.count() < 1500);
  BOOST_TEST(process_gone(read_pid(dir, "pid")));
  BOOST_TEST(reaped(res.pid));
}

BOOST_AUTO_TEST_CASE(output_callback_sees_everything_and_can_stop) {
  auto opts = shell("for i in 1 2 3; do echo line$i; done");
  std::string seen;
  opts.on_output = [&](output_stream s, std::string_view data) {
    BOOST_CHECK(s == output_stream::out);
    seen.append(data);
    return true;
  };
  opts.max_output_bytes = 0;
  auto res = run_subprocess(opts);
  BOOST_TEST(seen == "line1\nline2\nline3\n");
  BOOST_TEST(res.out() == "");
  BOOST_TEST(res.out_total == 18u);
  // `yes` never ends on its own: the callback stops it.
  subprocess_options inf;
  inf.argv = {"yes"};
  size_t got = 0;
  inf.on_output = [&](output_stream, std::string_view data) {
    got += data.size();
    return got < 100000;
  };
  res = run_subprocess(inf);
  BOOST_TEST(res.stopped);
  BOOST_TEST(res.term_signal == SIGKILL);
  BOOST_TEST(res.duration.count() < 2000);
}

BOOST_AUTO_TEST_CASE(find_executable_searches_path) {
  BOOST_TEST(find_executable("sh") != "");
  BOOST_TEST(find_executable("definitely-not-a-program-4711") == "");
  BOOST_TEST(find_executable("/bin/sh") == "/bin/sh");
  BOOST_TEST(find_executable("") == "");
}

BOOST_AUTO_TEST_CASE(concurrent_runs_do_not_interfere) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([i, &ok] {
      auto res = run_subprocess(shell("echo " + std::to_string(i)));
      if (res.out() == std::to_string(i) + "\n" && res.exit_code == 0)
        ++ok;
    });
  for (auto& t : threads)
    t.join();
  BOOST_TEST(ok.load() == 8);
}
