// What a person sees in `mibyan chat` on a terminal, driven through a
// pseudo-terminal (docs/agent_loop.md, "What the terminal shows"): each
// tool call as it starts with its short arguments, an elapsed-time status
// line while it runs, its duration and mark at the end, subagent calls
// indented, no log lines in the conversation; and none of it when stdout
// is not a terminal.
#define BOOST_TEST_MODULE chat_pty
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <poll.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "tests/support/agent_fixture.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/cli_child.hpp"
#include "tests/support/process.hpp"

using namespace mibyan;
using namespace mibyan::test;
using namespace std::chrono;

namespace {

// `mibyan` on the slave side of a pseudo-terminal (stdin, stdout and
// stderr); the test reads and writes the master side.
struct pty_child {
  int master = -1;
  pid_t pid = -1;
  std::string seen;

  pty_child(const std::vector<std::string>& args, const std::string& home) {
    master = ::posix_openpt(O_RDWR | O_NOCTTY);
    BOOST_REQUIRE(master >= 0);
    BOOST_REQUIRE_EQUAL(::grantpt(master), 0);
    BOOST_REQUIRE_EQUAL(::unlockpt(master), 0);
    std::string slave_name = ::ptsname(master);
    pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
      ::setsid();
      int slave = ::open(slave_name.c_str(), O_RDWR);
      if (slave < 0)
        ::_exit(127);
      ::dup2(slave, 0);
      ::dup2(slave, 1);
      ::dup2(slave, 2);
      ::close(master);
      ::setenv("TERM", "xterm", 1);
      test::exec_cli(home, args);
    }
  }

  ~pty_child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (master >= 0)
      ::close(master);
  }

  void send(const std::string& text) {
    BOOST_REQUIRE_EQUAL(::write(master, text.data(), text.size()),
                        static_cast<ssize_t>(text.size()));
  }

  // Reads until `needle` was seen (returns true) or `seconds` passed.
  bool read_until(const std::string& needle, double seconds) {
    auto until = steady_clock::now()
                 + milliseconds(static_cast<int64_t>(seconds * 1000));
    while (seen.find(needle) == std::string::npos) {
      auto left = duration_cast<milliseconds>(until - steady_clock::now())
                    .count();
      if (left <= 0)
        return false;
      pollfd p{master, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 200))) <= 0)
        continue;
      char buf[4096];
      auto n = ::read(master, buf, sizeof(buf));
      if (n <= 0)
        return seen.find(needle) != std::string::npos;
      seen.append(buf, static_cast<size_t>(n));
    }
    return true;
  }

  int wait_exit(double seconds) {
    auto until = steady_clock::now()
                 + milliseconds(static_cast<int64_t>(seconds * 1000));
    while (steady_clock::now() < until) {
      read_until("\x01never\x01", 0.1); // drain
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
    }
    return -2;
  }
};

// A line of the display starting with `text` (after a newline or after
// the erased status line).
bool has_line(const std::string& s, const std::string& text) {
  return s.rfind(text, 0) == 0 || contains(s, "\n" + text)
         || contains(s, "\033[K" + text);
}

struct pty_fixture : agent_fixture {
  std::vector<std::string> chat_args() {
    return {"chat", "--provider", "custom", "--base-url", server.url("/v1"),
            "--model", "m", "--max-iterations", "10"};
  }
  void allow_commands() {
    std::ofstream cfg(home.path() + "/config.yaml");
    cfg << "approvals:\n  mode: \"off\"\n";
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(chat_pty, pty_fixture)

BOOST_AUTO_TEST_CASE(tool_calls_are_shown_while_they_run) {
  allow_commands();
  json::value targs;
  targs["command"] = "sleep 1.6; echo slept";
  script(chat_completion("", {{"call_s", "terminal", targs.dump()}}));
  script(chat_completion("", {{"call_r", "read_file",
                               one_arg("path", "/nonexistent/zz")}}));
  script(chat_completion("All good."));
  pty_child chat(chat_args(), home.path());
  BOOST_REQUIRE_MESSAGE(chat.read_until("> ", 20), chat.seen);
  chat.send("do the thing\n");
  BOOST_REQUIRE_MESSAGE(chat.read_until("All good.", 30), chat.seen);
  chat.send("/exit\n");
  BOOST_CHECK_EQUAL(chat.wait_exit(20), 0);
  auto& s = chat.seen;
  // The call as it starts: name and the command.
  BOOST_CHECK_MESSAGE(contains(s, "> terminal  sleep 1.6; echo slept"), s);
  // A status line with the elapsed time while it ran, erased afterwards.
  BOOST_CHECK_MESSAGE(contains(s, "terminal 1.") || contains(s, "terminal 0."),
                      s);
  BOOST_CHECK(contains(s, "\r\033[K"));
  // Its end: ok mark and duration; the failing read gets the error mark.
  // It slept 1.6 s, so it shows at least that (more on a busy machine).
  auto ok_at = s.find("ok terminal ");
  BOOST_REQUIRE_MESSAGE(ok_at != std::string::npos, s);
  BOOST_CHECK_MESSAGE(std::strtod(s.c_str() + ok_at + 12, nullptr) >= 1.5, s);
  BOOST_CHECK_MESSAGE(contains(s, "> read_file  /nonexistent/zz"), s);
  BOOST_CHECK_MESSAGE(contains(s, "x read_file "), s);
  // The start comes before the end, and both before the answer.
  BOOST_CHECK_LT(s.find("> terminal"), s.find("ok terminal"));
  BOOST_CHECK_LT(s.find("ok terminal"), s.find("All good."));
  // No log line in the conversation; they went to the log file.
  BOOST_CHECK_MESSAGE(!contains(s, " INFO ") && !contains(s, "WARN "), s);
  BOOST_CHECK(std::filesystem::exists(home.path() + "/logs/chat.log"));
}

BOOST_AUTO_TEST_CASE(subagent_calls_are_indented_under_the_parent) {
  allow_commands();
  json::value targs;
  targs["command"] = "echo from-child";
  script(chat_completion("", {{"call_d", "delegate_task",
                               one_arg("goal", "say hello")}}));
  script(chat_completion("", {{"call_c", "terminal", targs.dump()}}));
  script(chat_completion("child said hello"));
  script(chat_completion("Delegated."));
  pty_child chat(chat_args(), home.path());
  BOOST_REQUIRE_MESSAGE(chat.read_until("> ", 20), chat.seen);
  chat.send("delegate\n");
  BOOST_REQUIRE_MESSAGE(chat.read_until("Delegated.", 30), chat.seen);
  chat.send("/exit\n");
  chat.wait_exit(20);
  auto& s = chat.seen;
  BOOST_CHECK_MESSAGE(has_line(s, "  > delegate_task  say hello"), s);
  BOOST_CHECK_MESSAGE(has_line(s, "    > terminal  echo from-child"), s);
  BOOST_CHECK_MESSAGE(has_line(s, "    ok terminal "), s);
  BOOST_CHECK_MESSAGE(has_line(s, "  ok delegate_task "), s);
}

// The report: during a long tool call the screen showed nothing,
// and Ctrl-C printed INFO log lines into the conversation.
BOOST_AUTO_TEST_CASE(ctrl_c_during_a_tool_call_prints_no_log_lines) {
  allow_commands();
  json::value targs;
  targs["command"] = "sleep 20";
  script(chat_completion("", {{"call_s", "terminal", targs.dump()}}));
  pty_child chat(chat_args(), home.path());
  BOOST_REQUIRE_MESSAGE(chat.read_until("> ", 20), chat.seen);
  chat.send("wait\n");
  BOOST_REQUIRE_MESSAGE(chat.read_until("> terminal  sleep 20", 20), chat.seen);
  // The status line counts while the command runs.
  BOOST_REQUIRE_MESSAGE(chat.read_until("terminal 1.", 10), chat.seen);
  chat.send("\x03"); // the terminal turns it into SIGINT
  BOOST_REQUIRE_MESSAGE(chat.read_until("[interrupted]", 20), chat.seen);
  chat.send("/exit\n");
  BOOST_CHECK_EQUAL(chat.wait_exit(20), 0);
  auto& s = chat.seen;
  BOOST_CHECK_MESSAGE(!contains(s, " INFO ") && !contains(s, "WARN "), s);
  BOOST_CHECK_MESSAGE(has_line(s, "  x terminal "), s);
}

BOOST_AUTO_TEST_CASE(run_on_a_terminal_shows_tool_calls) {
  allow_commands();
  json::value targs;
  targs["command"] = "echo from-run";
  script(chat_completion("", {{"call_s", "terminal", targs.dump()}}));
  script(chat_completion("Ran it."));
  auto args = chat_args();
  args[0] = "run";
  args.push_back("run the command");
  pty_child run(args, home.path());
  BOOST_REQUIRE_MESSAGE(run.read_until("Ran it.", 30), run.seen);
  BOOST_CHECK_EQUAL(run.wait_exit(20), 0);
  auto& s = run.seen;
  BOOST_CHECK_MESSAGE(has_line(s, "  > terminal  echo from-run"), s);
  BOOST_CHECK_MESSAGE(has_line(s, "  ok terminal "), s);
  BOOST_CHECK(!contains(s, " INFO "));
  BOOST_CHECK(std::filesystem::exists(home.path() + "/logs/run.log"));
}

BOOST_AUTO_TEST_CASE(no_decoration_without_a_terminal) {
  allow_commands();
  json::value targs;
  targs["command"] = "echo piped";
  script(chat_completion("", {{"call_s", "terminal", targs.dump()}}));
  script(chat_completion("Done."));
  process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  po.unset = {"OPENAI_API_KEY", "CUSTOM_API_KEY", "MIBYAN_LOG_LEVEL"};
  po.input = "go\n";
  auto r = run_mibyan(chat_args(), po);
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK(contains(r.out, "Done."));
  BOOST_CHECK(!contains(r.out, "\033["));
  BOOST_CHECK(!contains(r.out + r.err, "> terminal"));
}

// A notify_on_complete process that ends while the prompt waits is
// announced at once, and the prompt is drawn again (docs/agent_loop.md,
// "Background deliveries").
BOOST_AUTO_TEST_CASE(background_end_is_announced_while_the_prompt_waits) {
  allow_commands();
  auto flag = home.path() + "/go";
  json::value targs;
  targs["command"] = "while [ ! -e '" + flag
                     + "' ]; do sleep 0.05; done; echo PTY-DONE";
  targs["background"] = true;
  targs["notify_on_complete"] = true;
  script(chat_completion("", {{"call_t", "terminal", targs.dump()}}));
  script(chat_completion("Launched it."));
  pty_child chat(chat_args(), home.path());
  BOOST_REQUIRE_MESSAGE(chat.read_until("> ", 20), chat.seen);
  chat.send("start it\n");
  BOOST_REQUIRE_MESSAGE(chat.read_until("Launched it.", 30), chat.seen);
  BOOST_REQUIRE_MESSAGE(chat.read_until("\n> ", 10), chat.seen);
  auto before = chat.seen.size();
  { std::ofstream(flag) << "go\n"; }
  BOOST_REQUIRE_MESSAGE(chat.read_until("exited with code 0", 30), chat.seen);
  BOOST_REQUIRE_MESSAGE(chat.read_until("code 0\r\n> ", 10), chat.seen);
  auto tail = chat.seen.substr(before);
  BOOST_CHECK_MESSAGE(contains(tail, "[background] process proc_"), tail);
  chat.send("/exit\n");
  BOOST_CHECK_EQUAL(chat.wait_exit(20), 0);
}

BOOST_AUTO_TEST_SUITE_END()
