#define BOOST_TEST_MODULE terminal
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <sys/stat.h>

#include "config/options.hpp"
#include "base/env_filter.hpp"
#include "tools/core_tools.hpp"
#include "base/output_cap.hpp"
#include "tools/registry.hpp"
#include "kernels/process_launcher.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait_until.hpp"

using namespace mibyan;
using namespace std::chrono_literals;

namespace {

struct fixture {
  mibyan::test::temp_dir home;
  mibyan::test::temp_dir work;
  options cfg;
  std::atomic<bool> cancelled{false};
  tool_registry reg;
  tool_context ctx;

  fixture() {
    reg.add(make_terminal_tool());
    cfg.terminal.kill_grace = 1;
    ctx.cwd = work.path();
    ctx.home = home.path();
    ctx.cfg = &cfg;
    ctx.cancelled = &cancelled;
    ctx.call_id = "call_1";
    ctx.deadline = std::chrono::steady_clock::now() + 1h;
  }

  json::value call(const std::string& args) {
    return dispatch_tool(reg, "terminal", std::string_view{args}, ctx);
  }

  json::value run(const std::string& command) {
    json::value args;
    args["command"] = command;
    return dispatch_tool(reg, "terminal", args, ctx);
  }
};

bool contains_text(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string str(const json::value& v, const char* key) {
  return v.get_string(key, "<absent>");
}

bool has_error(const json::value& v, const std::string& needle) {
  auto e = v.find("error");
  return e != nullptr && e->is_string()
         && e->as_string().find(needle) != std::string::npos;
}

std::string real(const std::string& path) {
  char buf[4096];
  return ::realpath(path.c_str(), buf) ? buf : path;
}

// Whether process `pid` is gone (or a zombie nobody reaped yet), polled
// for up to 10 s.
bool process_gone(long pid) {
  for (int i = 0; i < 200; ++i) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    if (!in)
      return true;
    std::string line;
    std::getline(in, line);
    auto close = line.rfind(')');
    if (close != std::string::npos && close + 2 < line.size()
        && (line[close + 2] == 'Z' || line[close + 2] == 'X'))
      return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

// The pids a command printed, one per line.
std::vector<long> pids_in(const std::string& output) {
  std::vector<long> pids;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty())
      pids.push_back(std::stol(line));
  return pids;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(terminal, fixture)

BOOST_AUTO_TEST_CASE(echo_returns_output_exit_code_and_null_error) {
  auto r = run("echo hello");
  BOOST_TEST(r.dump() == R"({"output":"hello\n","exit_code":0,"error":null})");
}

BOOST_AUTO_TEST_CASE(non_zero_exit_codes_and_their_meaning) {
  auto r = run("exit 3");
  BOOST_TEST(r["exit_code"].as_int() == 3);
  BOOST_TEST(r.find("exit_code_meaning") == nullptr);
  r = run("grep nothing-here /dev/null");
  BOOST_TEST(r["exit_code"].as_int() == 1);
  BOOST_TEST(str(r, "exit_code_meaning") == "No matches found (not an error)");
  work.write("a", "1\n");
  work.write("b", "2\n");
  r = run("diff a b > /dev/null");
  BOOST_TEST(str(r, "exit_code_meaning") == "Files differ (not an error)");
  r = run("no-such-command-4711");
  BOOST_TEST(r["exit_code"].as_int() == 127);
  BOOST_TEST(str(r, "exit_code_meaning") == "Command not found");
  r = run("kill -9 $$");
  BOOST_TEST(r["exit_code"].as_int() == 137);
  BOOST_TEST(str(r, "exit_code_meaning").find("SIGKILL") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(stderr_is_merged_in_order_and_stdin_is_empty) {
  auto r = run("echo a; echo b >&2; echo c");
  BOOST_TEST(str(r, "output") == "a\nb\nc\n");
  r = run("cat; echo after-cat");
  BOOST_TEST(str(r, "output") == "after-cat\n");
}

BOOST_AUTO_TEST_CASE(workdir_default_relative_and_absolute) {
  ::mkdir((work / "sub").c_str(), 0700);
  BOOST_TEST(str(run("pwd -P"), "output") == real(work.path()) + "\n");
  auto r = call(R"({"command":"pwd -P","workdir":"sub"})");
  BOOST_TEST(str(r, "output") == real(work / "sub") + "\n");
  json::value args;
  args["command"] = "pwd -P";
  args["workdir"] = home.path();
  r = dispatch_tool(reg, "terminal", args, ctx);
  BOOST_TEST(str(r, "output") == real(home.path()) + "\n");
}

BOOST_AUTO_TEST_CASE(bad_workdir_gives_clear_errors) {
  auto r = call(R"({"command":"pwd","workdir":"/nonexistent/4711"})");
  BOOST_TEST(has_error(r, "workdir does not exist: /nonexistent/4711"));
  work.write("file.txt", "x");
  r = call(R"({"command":"pwd","workdir":"file.txt"})");
  BOOST_TEST(has_error(r, "workdir is not a directory"));
  r = call(R"({"command":"pwd","workdir":""})");
  BOOST_TEST(has_error(r, "workdir must not be empty"));
  r = call(R"({"command":"pwd","workdir":"a\u0000b"})");
  BOOST_TEST(has_error(r, "NUL"));
  r = call(R"({"command":"pwd","workdir":42})");
  BOOST_TEST(has_error(r, "workdir"));
}

BOOST_AUTO_TEST_CASE(timeout_gives_124_and_keeps_partial_output) {
  auto start = std::chrono::steady_clock::now();
  auto r = call(R"({"command":"echo partial; sleep 30","timeout":1})");
  auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST(r["exit_code"].as_int() == 124);
  BOOST_TEST(str(r, "error") == "Command timed out after 1 seconds");
  BOOST_TEST(str(r, "output") == "partial\n");
  BOOST_CHECK(took < 5s);
  // A numeric string is coerced by the dispatcher.
  r = call(R"({"command":"echo ok","timeout":"5"})");
  BOOST_TEST(str(r, "output") == "ok\n");
}

BOOST_AUTO_TEST_CASE(timeout_over_the_maximum_is_refused) {
  auto r = call(R"({"command":"echo x","timeout":601})");
  BOOST_TEST(has_error(r, "exceeds the foreground maximum of 600 seconds"));
  BOOST_TEST(has_error(r, "background"));
  BOOST_TEST(has_error(r, "process tool"));
  cfg.terminal.max_timeout = 10;
  r = call(R"({"command":"echo x","timeout":11})");
  BOOST_TEST(has_error(r, "maximum of 10 seconds"));
  // The configured default above the maximum is clamped, not refused.
  cfg.terminal.timeout = 100;
  BOOST_TEST(str(run("echo y"), "output") == "y\n");
}

BOOST_AUTO_TEST_CASE(deadline_covers_timeout_grace_and_margin) {
  auto t = reg.find("terminal");
  json::value args;
  args["command"] = "x";
  args["timeout"] = 100;
  BOOST_TEST(t->deadline(args, cfg).count() >= (100 + 1) * 1000);
  args.erase("timeout");
  BOOST_TEST(t->deadline(args, cfg).count() >= (180 + 1) * 1000);
}

BOOST_AUTO_TEST_CASE(secrets_are_filtered_from_the_environment) {
  ::setenv("FAKE_API_KEY", "x", 1);
  ::setenv("MY_Secret_value", "s", 1);
  ::setenv("FAKE_PLAIN_VAR", "plain", 1);
  ::setenv("OPENAI_API_KEY", "sk-test", 1);
  auto cmd = "echo ${FAKE_API_KEY:-unset} ${MY_Secret_value:-unset} "
             "${FAKE_PLAIN_VAR:-unset} ${OPENAI_API_KEY:-unset}";
  BOOST_TEST(str(run(cmd), "output") == "unset unset plain unset\n");
  cfg.terminal.env_passthrough = {"FAKE_API_KEY", "OPENAI_API_KEY"};
  BOOST_TEST(str(run(cmd), "output") == "x unset plain unset\n");
  ::unsetenv("FAKE_API_KEY");
  ::unsetenv("MY_Secret_value");
  ::unsetenv("FAKE_PLAIN_VAR");
  ::unsetenv("OPENAI_API_KEY");
}

// Issue 14 item 4: names outside the old deny-list and credential-shaped
// values must not reach a direct call's command.
BOOST_AUTO_TEST_CASE(credential_shaped_variables_are_dropped) {
  std::vector<std::pair<const char*, const char*>> vars{
    {"DATABASE_URL", "postgres://app:hunter2@db.internal:5432/prod"},
    {"GH_PAT", "abc123"},
    {"PGPASS", "hunter2"},
    {"SENTRY_DSN", "https://k@o1.ingest.sentry.io/1"},
    {"SLACK_WEBHOOK_URL", "https://hooks.slack.com/services/T/B/x"},
    {"AWS_SESSION_TOKEN", "FwoGZXIvYXdz"},
    {"AWS_SESSION_EXPIRATION", "2026-12-01T00:00:00Z"},
    {"MY_UPSTREAM", "https://user:pw@example.com/repo.git"},
    {"CI_HELPER", "ghp_0123456789abcdefghijABCDEFGHIJ012345"},
  };
  for (auto& [k, v] : vars)
    ::setenv(k, v, 1);
  ::setenv("FAKE_PLAIN_URL", "https://example.com/path", 1);
  auto out = str(run("env"), "output");
  for (auto& [k, v] : vars) {
    BOOST_TEST(out.find(std::string{k} + "=") == std::string::npos, k);
    BOOST_TEST(out.find(v) == std::string::npos, k);
  }
  BOOST_TEST(out.find("FAKE_PLAIN_URL=https://example.com/path")
             != std::string::npos);
  // An exact passthrough entry still lets a name through.
  cfg.terminal.env_passthrough = {"GH_PAT", "DATABASE_URL"};
  out = str(run("echo $GH_PAT $DATABASE_URL"), "output");
  // The variables reach the command; the result the model sees is still
  // redacted (docs/security.md, "Secret redaction"), so the URL's password
  // is masked while the rest comes through.
  BOOST_TEST(out == "abc123 postgres://app:[REDACTED]@db.internal:5432/prod\n");
  for (auto& [k, v] : vars)
    ::unsetenv(k);
  ::unsetenv("FAKE_PLAIN_URL");
}

// Issue 14 item 4: a script's terminal call gets the kernel's allow-list.
BOOST_AUTO_TEST_CASE(script_calls_get_the_kernel_allow_list) {
  ::setenv("FAKE_PLAIN_VAR", "plain", 1);
  ::setenv("MIBYAN_BASE_URL", "http://x", 1);
  auto cmd = "echo ${FAKE_PLAIN_VAR:-unset} ${MIBYAN_BASE_URL:-unset} "
             "${PATH:+path-set}";
  BOOST_TEST(str(run(cmd), "output") == "plain http://x path-set\n");
  ctx.from_script = true;
  BOOST_TEST(str(run(cmd), "output") == "unset unset path-set\n");
  cfg.terminal.env_passthrough = {"FAKE_PLAIN_VAR"};
  BOOST_TEST(str(run(cmd), "output") == "plain unset path-set\n");
  ::unsetenv("FAKE_PLAIN_VAR");
  ::unsetenv("MIBYAN_BASE_URL");
}

// Issue 14 item 8: what a foreground command starts in the background, in
// its own process group or session, is gone when the call returns.
BOOST_AUTO_TEST_CASE(background_processes_do_not_outlive_the_call) {
  auto r = run("sleep 100 & echo $!\n"
               "setsid sleep 101 </dev/null >/dev/null 2>&1 & echo $!\n"
               "(set -m; sleep 102 </dev/null >/dev/null 2>&1 & echo $!)\n");
  BOOST_TEST(r["exit_code"].as_int() == 0);
  auto pids = pids_in(str(r, "output"));
  BOOST_REQUIRE(pids.size() == 3u);
  for (auto pid : pids)
    BOOST_TEST(process_gone(pid), "pid " << pid << " survived the call");
}

BOOST_AUTO_TEST_CASE(oversize_output_is_truncated_and_spilled) {
  cfg.tool_output.max_bytes = 1000;
  auto r = run("printf START; head -c 100000 /dev/zero | tr '\\0' x; "
               "printf END");
  auto out = str(r, "output");
  BOOST_TEST(out.substr(0, 5) == "START");
  BOOST_TEST(out.substr(out.size() - 3) == "END");
  auto marker = "\n\n... [OUTPUT TRUNCATED - 99008 chars omitted out of "
                "100008 total] ...\n\n";
  BOOST_TEST(out.find(marker) == 400u);
  BOOST_TEST(out.size() == 1000 + std::string{marker}.size());
  BOOST_TEST(r["exit_code"].as_int() == 0);
  auto path = str(r, "output_path");
  BOOST_TEST(path.rfind(home.path() + "/cache/exec/no-session/terminal-call_1-",
                        0)
             == 0u);
  struct stat st;
  BOOST_REQUIRE(::stat(path.c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0600u);
  BOOST_TEST(st.st_size == 100008);
  BOOST_REQUIRE(::stat((home.path() + "/cache/exec").c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0700u);
  BOOST_REQUIRE(
    ::stat((home.path() + "/cache/exec/no-session").c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0700u);
  BOOST_TEST(str(r, "output_note").find("full output was saved")
             != std::string::npos);
  auto spilled = mibyan::test::slurp(path);
  BOOST_TEST(spilled.substr(0, 5) == "START");
  BOOST_TEST(spilled.substr(spilled.size() - 3) == "END");
}

// Issue 31 item 14: two sessions whose providers both number their calls
// "call_0_0" each keep their own spill file, under their own directory;
// the same call id twice in one session does not overwrite either.
BOOST_AUTO_TEST_CASE(spill_files_of_two_sessions_with_one_call_id) {
  cfg.tool_output.max_bytes = 100;
  ctx.call_id = "call_0_0";
  std::vector<std::string> paths;
  for (auto session : {"sess-A", "sess-B", "sess-B"}) {
    ctx.session_id = session;
    auto r = run(std::string{"for i in $(seq 200); do echo "} + session
                 + "-output-$i; done");
    paths.push_back(str(r, "output_path"));
  }
  BOOST_TEST(paths[0].rfind(home.path() + "/cache/exec/session-sess-A/", 0)
             == 0u);
  BOOST_TEST(paths[1].rfind(home.path() + "/cache/exec/session-sess-B/", 0)
             == 0u);
  BOOST_TEST(paths[0] != paths[1]);
  BOOST_TEST(paths[1] != paths[2]);
  auto a = mibyan::test::slurp(paths[0]);
  auto b = mibyan::test::slurp(paths[1]);
  BOOST_TEST(a.find("sess-A-output-200") != std::string::npos);
  BOOST_TEST(a.find("sess-B") == std::string::npos);
  BOOST_TEST(b.find("sess-B-output-200") != std::string::npos);
  BOOST_TEST(mibyan::test::slurp(paths[2]).find("sess-B-output-1\n") == 0u);
}

BOOST_AUTO_TEST_CASE(default_cap_is_fifty_thousand_and_spill_caps_at_5mb) {
  ctx.call_id = "";
  auto r = run("head -c 6000000 /dev/zero | tr '\\0' a");
  auto out = str(r, "output");
  BOOST_TEST(out.find("[OUTPUT TRUNCATED - 5950000 chars omitted out of "
                      "6000000 total]")
             == 20006u);
  auto path = str(r, "output_path");
  BOOST_TEST(path.find(home.path() + "/cache/exec/no-session/terminal-")
             == 0u);
  struct stat st;
  BOOST_REQUIRE(::stat(path.c_str(), &st) == 0);
  BOOST_TEST(st.st_size == 5000000);
  BOOST_TEST(str(r, "output_note").find("first 5000000 bytes")
             != std::string::npos);
  // Small output writes nothing.
  r = run("echo small");
  BOOST_TEST(r.find("output_path") == nullptr);
}

BOOST_AUTO_TEST_CASE(spill_failure_is_reported_not_fatal) {
  home.write("cache", "a file where a directory should be");
  cfg.tool_output.max_bytes = 100;
  auto r = run("head -c 1000 /dev/zero | tr '\\0' a");
  BOOST_TEST(r.find("output_path") == nullptr);
  BOOST_TEST(str(r, "output_note").find("could not be saved")
             != std::string::npos);
  BOOST_TEST(r["exit_code"].as_int() == 0);
}

BOOST_AUTO_TEST_CASE(ansi_sequences_are_stripped) {
  auto r = run("printf '\\033[1;31mred\\033[0m \\033]0;title\\007plain"
               "\\033(B\\n'");
  BOOST_TEST(str(r, "output") == "red plain\n");
}

BOOST_AUTO_TEST_CASE(cancellation_gives_130_and_marker) {
  // Cancelled once the command is under way (it made its marker).
  auto marker = work.path() + "/begun";
  std::thread setter{[this, marker] {
    mibyan::test::wait_until([&] {
      struct stat st;
      return ::stat(marker.c_str(), &st) == 0;
    });
    cancelled = true;
  }};
  auto start = std::chrono::steady_clock::now();
  auto r = run("echo begun; touch '" + marker + "'; sleep 30");
  auto took = std::chrono::steady_clock::now() - start;
  setter.join();
  BOOST_TEST(r["exit_code"].as_int() == 130);
  BOOST_TEST(str(r, "output") == "begun\n[Command interrupted]");
  BOOST_CHECK(took < 2s);
}

// The command starts through the context's process launcher
// (kernels/process_launcher.hpp): the runtime's, or a test's.
BOOST_AUTO_TEST_CASE(commands_start_through_the_injected_launcher) {
  struct recording_launcher final : process_launcher {
    mutable std::vector<subprocess_options> runs;
    subprocess_result run(const subprocess_options& o) const override {
      runs.push_back(o);
      subprocess_result r;
      r.exit_code = 3;
      r.out_head = "from the launcher\n";
      r.out_total = r.out_head.size();
      r.pid = 1;
      return r;
    }
    result<kernel_process>
    start_kernel(const kernel_spawn_options&) const override {
      return result<kernel_process>::failure("no kernels here");
    }
  } launcher;
  ctx.launcher = &launcher;
  auto r = run("echo real");
  ctx.launcher = nullptr;
  BOOST_REQUIRE_EQUAL(launcher.runs.size(), 1u);
  BOOST_TEST(launcher.runs[0].shell_command == "echo real");
  BOOST_TEST(launcher.runs[0].cancel == &cancelled);
  BOOST_TEST(r["exit_code"].as_int() == 3);
  BOOST_TEST(str(r, "output") == "from the launcher\n", r.dump());
  // A launcher that cannot start the command: a clear error result.
  struct refusing_launcher final : process_launcher {
    subprocess_result run(const subprocess_options&) const override {
      subprocess_result r;
      r.spawn_error = "fork refused";
      return r;
    }
    result<kernel_process>
    start_kernel(const kernel_spawn_options&) const override {
      return result<kernel_process>::failure("no kernels here");
    }
  } refusing;
  ctx.launcher = &refusing;
  auto bad = run("echo real");
  ctx.launcher = nullptr;
  BOOST_TEST(contains_text(bad.dump(), "fork refused"), bad.dump());
}

BOOST_AUTO_TEST_CASE(unsupported_modes_are_refused) {
  // No process registry in this fixture (the runtime provides one; see
  // process_tool_test).
  auto r = call(R"({"command":"echo x","background":true})");
  BOOST_TEST(has_error(r, "not available in this runtime"));
  r = call(R"({"command":"echo x","pty":true})");
  BOOST_TEST(has_error(r, "needs background=true"));
  r = call(R"({"command":"echo x","notify_on_complete":true})");
  BOOST_TEST(has_error(r, "background processes only"));
  r = call(R"({"command":"echo x","watch_patterns":["a"]})");
  BOOST_TEST(has_error(r, "background processes only"));
  // Explicit false is fine.
  r = call(R"({"command":"echo x","background":false,"pty":"false"})");
  BOOST_TEST(str(r, "output") == "x\n");
}

BOOST_AUTO_TEST_CASE(bad_arguments_of_every_shape) {
  BOOST_TEST(has_error(call(R"({})"), "command"));
  BOOST_TEST(has_error(call(R"({"command":""})"), "must not be empty"));
  BOOST_TEST(has_error(call(R"({"command":"  \n "})"), "must not be empty"));
  BOOST_TEST(has_error(call(R"({"command":42})"), "expected string"));
  BOOST_TEST(has_error(call(R"({"command":["ls"]})"), "expected string"));
  BOOST_TEST(has_error(call(R"({"command":null})"), "command"));
  BOOST_TEST(has_error(call(R"({"command":"echo \u0000"})"), "NUL"));
  BOOST_TEST(has_error(call(R"({"command":"x","timeout":0})"), ">= 1"));
  BOOST_TEST(has_error(call(R"({"command":"x","timeout":-5})"), ">= 1"));
  BOOST_TEST(has_error(call(R"({"command":"x","timeout":"soon"})"),
                       "expected integer"));
  BOOST_TEST(has_error(call(R"({"command":"x","timeout":1.5})"),
                       "expected integer"));
  BOOST_TEST(has_error(call(R"({"command":"x","background":"yes"})"),
                       "expected boolean"));
  BOOST_TEST(str(call("[1,2]"), "error") == "Invalid tool arguments");
  BOOST_TEST(str(call("{not json"), "error") == "Invalid tool arguments");
  BOOST_TEST(str(call("\"echo\""), "error") == "Invalid tool arguments");
  json::value huge;
  huge["command"] = "echo " + std::string(200000, 'a');
  BOOST_TEST(has_error(dispatch_tool(reg, "terminal", huge, ctx),
                       "too long"));
  // Binary (invalid UTF-8) output is sanitised, never fatal.
  auto r = run("printf '\\377\\376ok'");
  BOOST_TEST(r["exit_code"].as_int() == 0);
  BOOST_TEST(str(r, "output").find("ok") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(schema_and_metadata) {
  auto t = reg.find("terminal");
  BOOST_TEST(std::string{t->toolset()} == "terminal");
  BOOST_TEST(!t->parallel_safe());
  auto s = t->schema();
  BOOST_TEST(s["required"].dump() == R"(["command"])");
  BOOST_TEST(s["properties"]["timeout"]["minimum"].as_int() == 1);
  BOOST_TEST(t->description().find("read_file") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

// -- helpers ------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(strip_ansi_handles_all_sequence_kinds) {
  BOOST_TEST(strip_ansi("\x1b[0m\x1b[38;5;196mx\x1b[K") == "x");
  BOOST_TEST(strip_ansi("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b")
             == "alinkb");
  BOOST_TEST(strip_ansi("\x1b(Bq\x1b=r\x1b") == "qr");
  BOOST_TEST(strip_ansi("no escapes\n") == "no escapes\n");
  BOOST_TEST(strip_ansi("\x1b[") == "");
}

BOOST_AUTO_TEST_CASE(render_head_tail_drops_cut_utf8_sequences) {
  // "é" is C3 A9; the head ends after C3, the tail starts with A9.
  auto r = render_head_tail("ab\xc3", "\xa9" "cd", 5, 11);
  BOOST_TEST(r == "ab" + truncation_marker(5, 11) + "cd");
  BOOST_TEST(render_head_tail("ab", "cd", 0, 4) == "abcd");
  BOOST_TEST(truncation_marker(3, 10)
             == "\n\n... [OUTPUT TRUNCATED - 3 chars omitted out of 10 "
                "total] ...\n\n");
  // A complete sequence at the seam is kept.
  BOOST_TEST(render_head_tail("a\xc3\xa9", "b", 1, 5).substr(0, 3)
             == "a\xc3\xa9");
}

BOOST_AUTO_TEST_CASE(env_filter_rules) {
  BOOST_TEST(is_secret_env_name("GITHUB_TOKEN"));
  BOOST_TEST(is_secret_env_name("db_password"));
  BOOST_TEST(is_secret_env_name("SSH_AUTH_SOCK"));
  BOOST_TEST(is_secret_env_name("MY_CREDENTIALS"));
  BOOST_TEST(is_secret_env_name("SMTP_PASSWD"));
  BOOST_TEST(!is_secret_env_name("PATH"));
  BOOST_TEST(!is_secret_env_name("HOME"));
  auto out = filter_environment({"PATH=/bin", "AWS_SECRET_ACCESS_KEY=a",
                                 "GITHUB_TOKEN=b", "ANTHROPIC_API_KEY=c",
                                 "broken", "=x", "LANG=C"},
                                {"GITHUB_TOKEN", "ANTHROPIC_API_KEY"});
  std::vector<std::string> expected{"PATH=/bin", "GITHUB_TOKEN=b", "LANG=C"};
  BOOST_TEST(out == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(credential_shaped_names_and_values) {
  for (auto n : {"GH_PAT", "GITHUB_PAT", "MY_PAT_FILE", "PGPASS",
                 "PGPASSFILE", "SENTRY_DSN", "SLACK_WEBHOOK_URL",
                 "AWS_SESSION_TOKEN", "AWS_SESSION_EXPIRATION", "DB_PASS",
                 "DB_PWD", "GPG_PASSPHRASE", "SESSION_COOKIE",
                 "SSH_PRIVATE_FILE"})
    BOOST_TEST(is_secret_env_name(n), n);
  for (auto n : {"PATH", "PWD", "OLDPWD", "PATCH_DIR", "PASSPORT_DIR",
                 "PAGER", "DATABASE_URL", "COMPASS_HOME"})
    BOOST_TEST(!is_secret_env_name(n), n);
  for (auto v : {"postgres://u:p@h/db", "redis://:pw@cache:6379",
                 "https://token@github.com/x.git",
                 "a,b,mysql://root:x@127.0.0.1",
                 "ghp_0123456789abcdefghijABCDEFGHIJ012345",
                 "Bearer sk-proj-0123456789abcdefABCDEF",
                 "xoxb-123456789012-abcdefghijkl",
                 "AKIAIOSFODNN7EXAMPLE",
                 "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
                 "-----BEGIN OPENSSH PRIVATE KEY-----\nabc"})
    BOOST_TEST(is_secret_env_value(v), v);
  for (auto v : {"https://example.com/a@b", "user@example.com", "/usr/bin",
                 "task-runner", "sk-short", "xterm-256color",
                 "AKIA-not-a-key", "C.UTF-8"})
    BOOST_TEST(!is_secret_env_value(v), v);
  auto env = std::vector<std::string>{"PATH=/bin", "HOME=/h", "EDITOR=vi",
                                      "MIBYAN_HOME=/m", "MIBYAN_X=1",
                                      "GITHUB_TOKEN=t", "LANG=C",
                                      "TERM_URL=https://a:b@c"};
  auto out = allowlist_environment(env, {"EDITOR"});
  std::vector<std::string> expected{"PATH=/bin", "HOME=/h", "EDITOR=vi",
                                    "MIBYAN_HOME=/m", "LANG=C"};
  BOOST_TEST(out == expected, boost::test_tools::per_element());
}
