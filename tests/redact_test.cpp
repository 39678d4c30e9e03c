#define BOOST_TEST_MODULE redact
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "kernels/cell_result.hpp"
#include "base/redact.hpp"
#include "base/redact_slot.hpp"
#include "runtime/runtime.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/temp_dir.hpp"
#include "tools/redact_result.hpp"

using namespace mibyan;

namespace {

struct corpus_case {
  int line = 0;
  bool positive = false;
  std::string input;
  std::string secret;
};

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'n' || s[i + 1] == 't')) {
      out.push_back(s[i + 1] == 'n' ? '\n' : '\t');
      ++i;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::vector<corpus_case> load_corpus() {
  std::ifstream in{test::test_source_dir() + "/data/redaction/corpus.txt"};
  BOOST_REQUIRE(in.good());
  std::vector<corpus_case> cases;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.size() < 2 || (line[0] != '+' && line[0] != '-') || line[1] != ' ')
      continue;
    corpus_case c;
    c.line = number;
    c.positive = line[0] == '+';
    auto body = line.substr(2);
    if (c.positive) {
      auto sep = body.rfind(" ||| ");
      BOOST_REQUIRE_MESSAGE(sep != std::string::npos,
                            "corpus line " << number << " lacks ' ||| '");
      c.secret = body.substr(sep + 5);
      body = body.substr(0, sep);
    }
    c.input = unescape(body);
    cases.push_back(std::move(c));
  }
  return cases;
}

redactor corpus_redactor() {
  return redactor{{{"ACME_SERVICE_TOKEN", "pl4nted-secret-value-2718"},
                   {"ACME_DB_PASSWORD", "Tr0ub4dor&3-horse"},
                   {"SHORT_TOKEN", "abc123"}}};
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_CASE(corpus_has_enough_cases) {
  auto cases = load_corpus();
  size_t pos = 0, neg = 0;
  for (auto& c : cases)
    (c.positive ? pos : neg)++;
  BOOST_TEST(pos >= 50u);
  BOOST_TEST(neg >= 50u);
}

BOOST_AUTO_TEST_CASE(corpus_positives_are_redacted) {
  auto r = corpus_redactor();
  for (auto& c : load_corpus()) {
    if (!c.positive)
      continue;
    auto out = r.redacted(c.input);
    BOOST_TEST_CONTEXT("corpus line " << c.line << ": " << c.input
                       << "\n  -> " << out) {
      BOOST_TEST(out != c.input);
      BOOST_TEST(!contains(out, c.secret));
      BOOST_TEST(contains(out, "[REDACTED"));
    }
  }
}

BOOST_AUTO_TEST_CASE(corpus_negatives_are_untouched) {
  auto r = corpus_redactor();
  for (auto& c : load_corpus()) {
    if (c.positive)
      continue;
    auto out = r.redacted(c.input);
    BOOST_TEST_CONTEXT("corpus line " << c.line << ": " << c.input
                       << "\n  -> " << out) {
      BOOST_TEST(out == c.input);
    }
  }
}

BOOST_AUTO_TEST_CASE(redaction_is_idempotent) {
  auto r = corpus_redactor();
  for (auto& c : load_corpus()) {
    auto once = r.redacted(c.input);
    BOOST_TEST_CONTEXT("corpus line " << c.line) {
      BOOST_TEST(r.redacted(once) == once);
    }
  }
}

BOOST_AUTO_TEST_CASE(literal_values_name_their_variable) {
  redactor r{{{"MY_TOKEN", "0123456789abcdef"}}};
  BOOST_TEST(r.redacted("x 0123456789abcdef y") == "x [REDACTED:MY_TOKEN] y");
  BOOST_TEST(r.secret_count() == 1u);
  // The longest value wins where one value contains another.
  redactor nested{{{"A_KEY", "abcdefgh"}, {"B_KEY", "abcdefghijkl"}}};
  BOOST_TEST(nested.redacted("abcdefghijkl") == "[REDACTED:B_KEY]");
}

BOOST_AUTO_TEST_CASE(short_values_are_not_redacted) {
  redactor r{{{"PIN_TOKEN", "1234567"}}};
  BOOST_TEST(r.secret_count() == 0u);
  BOOST_TEST(r.redacted("code 1234567") == "code 1234567");
}

BOOST_AUTO_TEST_CASE(from_environment_picks_secret_names) {
  std::vector<std::string> env{"HOME=/home/someone-long-path",
                               "GITHUB_TOKEN=value-of-github-token",
                               "SSH_AUTH_SOCK=/tmp/ssh-agent.socket.1",
                               "MY_DSN=postgres-dsn-value",
                               "EDITOR=vim-editor-long"};
  auto r = redactor::from_environment(env, {{"CUSTOM_API_KEY",
                                             "dotenv-secret-value"},
                                            {"MODEL", "gpt-model-name"}});
  BOOST_TEST(r.secret_count() == 3u);
  BOOST_TEST(r.redacted("value-of-github-token") == "[REDACTED:GITHUB_TOKEN]");
  BOOST_TEST(r.redacted("dotenv-secret-value") == "[REDACTED:CUSTOM_API_KEY]");
  BOOST_TEST(r.redacted("/home/someone-long-path") == "/home/someone-long-path");
  BOOST_TEST(r.redacted("gpt-model-name") == "gpt-model-name");
  BOOST_TEST(r.redacted("/tmp/ssh-agent.socket.1") == "/tmp/ssh-agent.socket.1");
  BOOST_TEST(is_secret_variable_name("OPENAI_API_KEY"));
  BOOST_TEST(is_secret_variable_name("slack_webhook"));
  BOOST_TEST(!is_secret_variable_name("SSH_AUTH_SOCK"));
  BOOST_TEST(!is_secret_variable_name("PATH"));
}

BOOST_AUTO_TEST_CASE(pem_block_keeps_its_frame) {
  redactor r;
  auto out = r.redacted("-----BEGIN RSA PRIVATE KEY-----\nAAAA\nBBBB\n"
                        "-----END RSA PRIVATE KEY-----\nok");
  BOOST_TEST(out == "-----BEGIN RSA PRIVATE KEY-----\n[REDACTED PRIVATE KEY]\n"
                    "-----END RSA PRIVATE KEY-----\nok");
}

BOOST_AUTO_TEST_CASE(json_strings_are_walked) {
  redactor r{{{"X_TOKEN", "json-nested-secret-1"}}};
  json::value v;
  v["output"] = "a json-nested-secret-1 b";
  v["list"].push_back("json-nested-secret-1");
  v["n"] = 5;
  v["json-nested-secret-1"] = "names are kept";
  BOOST_TEST(redact_json_strings(v, r));
  BOOST_TEST(v.get_string("output") == "a [REDACTED:X_TOKEN] b");
  BOOST_TEST(v.find("list")->as_array()[0].as_string() == "[REDACTED:X_TOKEN]");
  BOOST_TEST(!redact_json_strings(v, r));
}

BOOST_AUTO_TEST_CASE(cell_result_output_and_spill_are_redacted) {
  redactor r{{{"CELL_TOKEN", "cell-secret-value-42"}}};
  cell_outcome c;
  c.stdout_text = "start cell-secret-value-42\n" + std::string(5000, 'x')
                  + "\nend cell-secret-value-42\n";
  c.stdout_total = c.stdout_text.size();
  c.stderr_text = "warn: cell-secret-value-42\n";
  c.error = "failed with cell-secret-value-42";
  cell_limits lim;
  lim.max_stdout_bytes = 1000;
  lim.redact = &r;
  std::string spilled;
  auto res = build_cell_result(c, lim, [&](const std::string& text) {
    spilled = text;
    return std::string{"/tmp/spill.txt"};
  });
  auto dump = res.dump();
  BOOST_TEST(!contains(dump, "cell-secret-value-42"));
  BOOST_TEST(contains(dump, "[REDACTED:CELL_TOKEN]"));
  BOOST_TEST(!spilled.empty());
  BOOST_TEST(!contains(spilled, "cell-secret-value-42"));
  BOOST_TEST(contains(spilled, "end [REDACTED:CELL_TOKEN]"));
}

// -- end to end through the runtime -----------------------------------------

namespace {

constexpr const char* planted_name = "MIBYAN_E2E_SERVICE_TOKEN";
constexpr const char* planted_value = "planted-e2e-secret-31415926";

struct e2e_fixture {
  test::temp_dir home;
  test::temp_dir work;
  std::unique_ptr<runtime> rt;

  e2e_fixture() {
    ::setenv(planted_name, planted_value, 1);
    options opts;
    opts.home = home.path();
    opts.code_execution.prestart_kernels = 0;
    // Passed through on purpose, so the child really sees the value and
    // only redaction stands between it and the result.
    opts.terminal.env_passthrough = {planted_name};
    std::string err;
    auto made = create_runtime(opts);
    BOOST_REQUIRE_MESSAGE(made, made.error);
    rt = std::move(*made);
  }
  ~e2e_fixture() {
    rt.reset();
    ::unsetenv(planted_name);
  }

  std::string call(const std::string& tool, const json::value& args) {
    return rt->call_tool({"s1", "call-1", tool, args.dump(), work.path()})
      .result_json;
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(terminal_env_comes_back_redacted, e2e_fixture) {
  json::value args;
  args["command"] = "env; echo direct=$MIBYAN_E2E_SERVICE_TOKEN";
  auto out = call("terminal", args);
  BOOST_TEST(!contains(out, planted_value), out);
  BOOST_TEST(contains(out, std::string{planted_name} + "=[REDACTED"), out);
  BOOST_TEST(contains(out, "direct=[REDACTED:"), out);
}

BOOST_FIXTURE_TEST_CASE(terminal_spill_file_is_redacted, e2e_fixture) {
  json::value args;
  args["command"] = "echo head=$MIBYAN_E2E_SERVICE_TOKEN; "
                    "head -c 200000 /dev/zero | tr '\\0' 'y'; echo; "
                    "echo tail=$MIBYAN_E2E_SERVICE_TOKEN";
  auto out = call("terminal", args);
  BOOST_TEST(!contains(out, planted_value));
  auto parsed = json::parse(out);
  BOOST_REQUIRE(parsed);
  auto path = parsed.v->get_string("output_path");
  BOOST_REQUIRE_MESSAGE(!path.empty(), out);
  auto spill = test::slurp(path);
  BOOST_TEST(contains(spill, "head=[REDACTED:"));
  BOOST_TEST(!contains(spill, planted_value));
}

BOOST_FIXTURE_TEST_CASE(execute_code_print_comes_back_redacted, e2e_fixture) {
  work.write("notes.txt", std::string{"from file: "} + planted_value + "\n");
  json::value args;
  args["code"] = "import os\n"
                 "print('env:', os.environ.get('MIBYAN_E2E_SERVICE_TOKEN'))\n"
                 "print(open('notes.txt').read())\n"
                 "from mibyan_tools import read_file\n"
                 "r = read_file('notes.txt')\n"
                 "print('tool:', r['content'])\n";
  auto out = call("execute_code", args);
  BOOST_TEST(!contains(out, planted_value), out);
  BOOST_TEST(contains(out, "env: [REDACTED:"), out);
  BOOST_TEST(contains(out, "from file: [REDACTED:"), out);
}

// base/redact_slot.hpp: a changed .env map swaps the redactor; readers on
// other threads keep working, and a pointer taken before a swap stays valid.
BOOST_AUTO_TEST_CASE(redactor_slot_swaps_on_change) {
  const std::string text = "value slotsecret-42x here";
  redactor_slot slot{{}};
  const redactor* before = slot.get();
  BOOST_TEST(before->redacted(text) == text);
  BOOST_TEST(!slot.update({}));
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i)
    readers.emplace_back([&] {
      while (!stop.load())
        (void)slot.get()->redacted(text);
    });
  for (int i = 0; i < 40; ++i)
    BOOST_TEST(slot.update({{"SLOT_TOKEN", i % 2 ? "other-value-0001"
                                                 : "slotsecret-42x"}}));
  stop = true;
  for (auto& t : readers)
    t.join();
  BOOST_TEST(!slot.update({{"SLOT_TOKEN", "other-value-0001"}}));
  BOOST_TEST(slot.update({{"SLOT_TOKEN", "slotsecret-42x"}}));
  BOOST_TEST(slot.get()->redacted(text) == "value [REDACTED:SLOT_TOKEN] here");
  BOOST_TEST(before->redacted(text) == text); // still alive
}
