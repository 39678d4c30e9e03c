#define BOOST_TEST_MODULE config
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>

#include <cstdlib>
#include <functional>
#include <optional>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "config/loader.hpp"
#include "config/option_bounds.hpp"
#include "tests/support/paths.hpp"
#include "runtime/runtime.hpp"
#include "base/state_dir.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using mibyan::test::run_mibyan;
using mibyan::test::temp_dir;

BOOST_AUTO_TEST_CASE(empty_or_missing_means_defaults) {
  auto r = parse_options("", "config.yaml");
  BOOST_TEST(r.ok());
  BOOST_TEST(r->code_execution.timeout == 300);
  BOOST_TEST(r->terminal.timeout == 180);
  BOOST_TEST(r->code_execution.mode == "project");
  temp_dir home;
  auto loaded = load_options(home.path());
  BOOST_TEST(loaded.ok());
  BOOST_TEST(loaded->config_path.empty());
  BOOST_TEST(loaded->home == home.path());
}

BOOST_AUTO_TEST_CASE(values_override_defaults) {
  auto r = parse_options(R"(
code_execution:
  timeout: 20
  mode: strict
terminal:
  env_passthrough: [GITHUB_TOKEN, MY_VAR]
security:
  allow_private_urls: true
model:
  default: gpt-x
)", "c.yaml");
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  BOOST_TEST(r->code_execution.timeout == 20);
  BOOST_TEST(r->code_execution.mode == "strict");
  BOOST_TEST(r->terminal.env_passthrough.size() == 2u);
  BOOST_TEST(r->security.allow_private_urls);
  BOOST_TEST(r->model.default_model == "gpt-x");
}

BOOST_AUTO_TEST_CASE(bad_files_give_one_error_with_key_and_line) {
  struct bad_case {
    const char* text;
    const char* expected;
  };
  bad_case cases[] = {
    {"agent:\n  max_turns: lots\n", "c.yaml:2: agent.max_turns: expected an integer, got 'lots'"},
    {"nonsense: 1\n", "c.yaml:1: unknown top-level key 'nonsense'"},
    {"agent:\n  max_turn: 3\n", "c.yaml:2: unknown key 'agent.max_turn'"},
    {"code_execution:\n  mode: jail\n", "code_execution.mode: must be one of project, strict"},
    {"code_execution:\n  timeout: 0\n",
     "code_execution.timeout: must be between 1 and 86400, got 0"},
    {"security:\n  allow_private_urls: maybe\n", "expected true or false"},
    {"terminal:\n  env_passthrough: abc\n", "expected a list of strings"},
    {"terminal: [1, 2]\n", "terminal: expected a mapping"},
    {"- a\n- b\n", "top level must be a mapping"},
    {"agent: {max_turns: [\n", "invalid YAML"},
    {"model:\n  default: {a: 1}\n", "model.default: expected a string, got a mapping"},
  };
  for (auto& c : cases) {
    auto r = parse_options(c.text, "c.yaml");
    BOOST_TEST(!r.ok(), "accepted: " << c.text);
    BOOST_TEST(r.error.find(c.expected) != std::string::npos,
               "error '" << r.error << "' lacks '" << c.expected << "'");
  }
}

// Issue 14: every numeric option has a maximum. Huge timeouts used to pass
// the check and then time out at once; 100000 scheduler threads aborted.
BOOST_AUTO_TEST_CASE(every_numeric_option_is_bounded) {
  struct big_case {
    const char* text;
    const char* expected;
  };
  big_case cases[] = {
    {"terminal:\n  timeout: 10000000000\n",
     "c.yaml:2: terminal.timeout: must be between 1 and 86400, got "
     "10000000000"},
    {"provider:\n  request_timeout: 10000000000\n",
     "c.yaml:2: provider.request_timeout: must be between"},
    {"code_execution:\n  timeout: 10000000000\n",
     "c.yaml:2: code_execution.timeout: must be between"},
    {"runtime:\n  scheduler_threads: 100000\n",
     "c.yaml:2: runtime.scheduler_threads: must be between 0 and 512"},
    {"runtime:\n  io_spin_us: 20000\n",
     "c.yaml:2: runtime.io_spin_us: must be between 0 and 10000"},
  };
  for (auto& c : cases) {
    auto r = parse_options(c.text, "c.yaml");
    BOOST_TEST(r.error.find(c.expected) != std::string::npos,
               "error '" << r.error << "' lacks '" << c.expected << "'");
  }
  // Every integer option the loader knows (read from `config show`'s
  // rendering, so options added later are covered) refuses 10^13, and
  // every row's own bounds are accepted.
  std::istringstream shown(render_options(options{}));
  std::string line, section;
  int numeric = 0;
  while (std::getline(shown, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    if (line[0] != ' ') {
      section = line.substr(0, line.find(':'));
      continue;
    }
    auto colon = line.find(':');
    auto key = line.substr(2, colon - 2);
    auto value = line.substr(colon + 2);
    if (value.empty() || value.find_first_not_of("-0123456789")
                           != std::string::npos)
      continue;
    ++numeric;
    auto r = parse_options(section + ":\n  " + key + ": 10000000000000\n",
                           "c.yaml");
    BOOST_TEST(r.error.find("c.yaml:2: " + section + "." + key + ": must be")
                 != std::string::npos,
               section << "." << key << ": " << r.error);
  }
  BOOST_TEST(numeric >= 27);
  // The YAML that sets `section.key` to `v`; a dotted key is a nested
  // mapping (storage.postgres.pool_size).
  auto yaml_of = [](const numeric_bounds& b, int64_t v) {
    std::string out = std::string{b.section} + ":\n";
    std::string key{b.key};
    std::string indent = "  ";
    for (auto dot = key.find('.'); dot != std::string::npos;
         dot = key.find('.')) {
      out += indent + key.substr(0, dot) + ":\n";
      key = key.substr(dot + 1);
      indent += "  ";
    }
    return out + indent + key + ": " + std::to_string(v) + "\n";
  };
  for (auto& b : numeric_option_bounds()) {
    for (auto v : {b.min, b.max}) {
      auto r = parse_options(yaml_of(b, v), "c.yaml");
      BOOST_TEST(r.ok(), b.section << "." << b.key << "=" << v << ": "
                                   << r.error);
      if (r.ok()) // the bounds themselves pass the rows' checks
        BOOST_TEST(validate_options(*r).ok(), b.section << "." << b.key);
    }
    auto r = parse_options(yaml_of(b, b.max + 1), "c.yaml");
    BOOST_TEST(!r.ok(), b.section << "." << b.key);
  }
}

BOOST_AUTO_TEST_CASE(the_ranges_are_documented) {
  std::ifstream in(test::source_dir() + "/docs/configuration.md");
  std::stringstream ss;
  ss << in.rdbuf();
  auto doc = ss.str();
  for (auto& b : numeric_option_bounds()) {
    auto name = "| `" + std::string{b.section} + "." + b.key + "` | ";
    auto at = doc.find(name);
    BOOST_TEST(at != std::string::npos, name);
    auto line = doc.substr(at, doc.find('\n', at) - at);
    auto range = " | " + std::to_string(b.min) + " .. " + std::to_string(b.max)
                 + " | ";
    BOOST_TEST(line.find(range) != std::string::npos, line);
  }
}

// Issue 14: a repeated key used to be accepted silently (one value won).
BOOST_AUTO_TEST_CASE(duplicate_keys_are_reported_at_every_level) {
  struct dup_case {
    const char* text;
    const char* expected;
  };
  dup_case cases[] = {
    {"terminal:\n  timeout: 10\n  timeout: 20\n",
     "c.yaml:3: terminal.timeout: duplicate key (first given at line 2)"},
    {"terminal:\n  timeout: 10\nagent:\n  max_turns: 3\nterminal:\n"
     "  kill_grace: 1\n",
     "c.yaml:5: terminal: duplicate key (first given at line 1)"},
    {"terminal: {timeout: 1, timeout: 2}\n",
     "c.yaml:1: terminal.timeout: duplicate key"},
    {"terminal:\n  env_passthrough:\n    - {a: 1, a: 2}\n",
     "c.yaml:3: terminal.env_passthrough[0].a: duplicate key"},
  };
  for (auto& c : cases) {
    auto r = parse_options(c.text, "c.yaml");
    BOOST_TEST(!r.ok(), "accepted: " << c.text);
    BOOST_TEST(r.error.find(c.expected) != std::string::npos,
               "error '" << r.error << "' lacks '" << c.expected << "'");
  }
  BOOST_TEST(parse_options("terminal:\n  timeout: 10\nagent:\n  timeout_x: 1\n",
                           "c.yaml").error.find("duplicate") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(env_file_parsing) {
  std::map<std::string, std::string> env;
  std::vector<std::string> warnings;
  parse_env_file("# comment\nA=1\nexport B=\"two words\"\nC='x'\n"
                 "D=v # trailing\nbroken line\n=nokey\n", env, &warnings);
  BOOST_TEST(env["A"] == "1");
  BOOST_TEST(env["B"] == "two words");
  BOOST_TEST(env["C"] == "x");
  BOOST_TEST(env["D"] == "v");
  BOOST_TEST(warnings.size() == 2u);
  BOOST_TEST(warnings[0].find("line 6") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(cli_config_check_and_show) {
  temp_dir home;
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  auto ok = run_mibyan({"config", "check"}, po);
  BOOST_TEST(ok.exit_code == 0);
  BOOST_TEST(ok.out.find("defaults") != std::string::npos);

  home.write(".env", "OPENAI_API_KEY=sk-very-secret-value\n");
  home.write("config.yaml", "code_execution:\n  timeout: 42\n");
  auto show = run_mibyan({"config", "show"}, po);
  BOOST_TEST(show.exit_code == 0);
  BOOST_TEST(show.out.find("timeout: 42") != std::string::npos);
  BOOST_TEST(show.out.find("OPENAI_API_KEY") != std::string::npos);
  BOOST_TEST(show.out.find("sk-very-secret-value") == std::string::npos);

  auto before = home.read("config.yaml");
  home.write("config.yaml", "code_execution:\n  timeout: soon\n");
  auto bad = run_mibyan({"config", "check"}, po);
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(bad.err.find("config.yaml:2: code_execution.timeout") != std::string::npos);
  // A bad config stops every command with exit 2 and touches nothing.
  auto tool = run_mibyan({"tool", "read_file", "{\"path\":\"x\"}"}, po);
  BOOST_TEST(tool.exit_code == 2);
  BOOST_TEST(home.read("config.yaml") == "code_execution:\n  timeout: soon\n");
  BOOST_TEST(home.read(".env") == "OPENAI_API_KEY=sk-very-secret-value\n");
}

// Issue 14 item 10: without HOME the state must not go to /tmp/.mibyan.
BOOST_AUTO_TEST_CASE(without_home_the_state_never_goes_to_a_temp_dir) {
  auto saved = [](const char* k) {
    const char* v = std::getenv(k);
    return v ? std::optional<std::string>{v} : std::nullopt;
  };
  auto home = saved("HOME");
  auto mhome = saved("MIBYAN_HOME");
  ::unsetenv("HOME");
  ::unsetenv("MIBYAN_HOME");
  auto resolved = resolve_home();
  auto pw = passwd_home();
  if (home)
    ::setenv("HOME", home->c_str(), 1);
  if (mhome)
    ::setenv("MIBYAN_HOME", mhome->c_str(), 1);
  BOOST_TEST(resolved.rfind("/tmp", 0) != 0u, resolved);
  BOOST_TEST(resolved == (pw.empty() ? std::string{} : pw + "/.mibyan"));
}

// Issue 14 item 10: a state directory others can write, or that belongs to
// someone else, is refused with the path and the fix.
BOOST_AUTO_TEST_CASE(unsafe_state_directories_are_refused) {
  temp_dir dir;
  auto home = dir / "state";
  ::mkdir(home.c_str(), 0700);
  BOOST_TEST(load_options(home).ok());
  BOOST_TEST(check_state_dir(dir / "not-yet").ok());
  ::chmod(home.c_str(), 0777);
  auto r = load_options(home);
  BOOST_TEST(r.error.find(home) != std::string::npos, r.error);
  BOOST_TEST(r.error.find("chmod 700") != std::string::npos, r.error);
  ::chmod(home.c_str(), 0770);
  BOOST_TEST(load_options(home).error.find("its group") != std::string::npos);
  // The CLI and the embeddable runtime refuse it too.
  test::process_options po;
  po.env["MIBYAN_HOME"] = home;
  auto check = run_mibyan({"config", "check"}, po);
  BOOST_TEST(check.exit_code == 2);
  BOOST_TEST(check.err.find("chmod 700 " + home) != std::string::npos);
  options opts;
  opts.home = home;
  auto made = create_runtime(opts);
  BOOST_TEST(!made);
  BOOST_TEST(made.error.find(home) != std::string::npos, made.error);
  ::chmod(home.c_str(), 0700);
  if (::geteuid() == 0) {
    // Someone else's directory (only root can hand one over in a test).
    BOOST_REQUIRE(::chown(home.c_str(), 65534, 65534) == 0);
    r = load_options(home);
    BOOST_TEST(r.error.find("belongs to uid 65534") != std::string::npos,
               r.error);
    BOOST_REQUIRE(::chown(home.c_str(), 0, 0) == 0);
  }
  BOOST_TEST(load_options(home).ok());
}

// Options built in code get the loader's checks once, at runtime creation:
// an out-of-range value is refused naming the key, never clamped later.
BOOST_AUTO_TEST_CASE(runtime_creation_refuses_out_of_range_options) {
  temp_dir home;
  auto refused = [&](std::function<void(options&)> set) {
    options opts;
    opts.home = home.path();
    set(opts);
    auto made = create_runtime(std::move(opts));
    BOOST_TEST(!made);
    BOOST_TEST((made.code == status_code::config_invalid));
    return made.error;
  };
  BOOST_TEST(refused([](options& o) { o.runtime.blocking_threads = 0; })
             == "runtime.blocking_threads: must be between 1 and 1024, got 0");
  BOOST_TEST(refused([](options& o) { o.code_execution.timeout = -5; })
             == "code_execution.timeout: must be between 1 and 86400, got -5");
  BOOST_TEST(refused([](options& o) { o.approvals.cron_mode = "maybe"; })
             == "approvals.cron_mode: must be one of deny, approve, got "
                "'maybe'");
  // The embedding API's overrides pass the same check.
  runtime_config cfg;
  cfg.home = home.path();
  cfg.blocking_threads = 5000;
  auto made = runtime::create(cfg);
  BOOST_TEST(!made);
  BOOST_TEST((made.code == status_code::config_invalid));
  BOOST_TEST(made.error
             == "runtime.blocking_threads: must be between 1 and 1024, got "
                "5000");
  // The same value in a config file: the loader refuses it, with the line.
  std::ofstream(home / "over.yaml") << "runtime:\n  blocking_threads: 5000\n";
  cfg.blocking_threads = 0;
  cfg.config_file = home / "over.yaml";
  made = runtime::create(cfg);
  BOOST_TEST(!made);
  BOOST_TEST((made.code == status_code::config_invalid));
  BOOST_TEST(made.error.find("over.yaml:2: runtime.blocking_threads: must be "
                             "between 1 and 1024") != std::string::npos,
             made.error);
}

BOOST_AUTO_TEST_CASE(log_file_receives_levels) {
  temp_dir home;
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  auto log = home / "mibyan.log";
  auto r = run_mibyan({"--log-level", "debug", "--log-file", log, "tool",
                       "execute_code", "{\"code\": \"print(1)\"}"}, po);
  BOOST_TEST(r.exit_code == 0);
  auto text = test::slurp(log);
  BOOST_TEST(text.find(" DEBUG [kernel] started pid") != std::string::npos);
  auto bad = run_mibyan({"--log-level", "chatty", "config", "check"}, po);
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(bad.err.find("unknown log level 'chatty'") != std::string::npos);
}
