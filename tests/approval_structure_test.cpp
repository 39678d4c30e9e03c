#define BOOST_TEST_MODULE approval_structure
#include <boost/test/unit_test.hpp>

// The structural analysis of approvals (docs/approvals.md, "Structure"):
// the shell lexer's caps on hostile input, nested text, the decoders.
// The classification of the corpus is in approval_corpus_test.

#include <algorithm>
#include <string>
#include <vector>

#include "approvals/escapes.hpp"
#include "approvals/normalize.hpp"
#include "approvals/patterns.hpp"
#include "approvals/shell_parse.hpp"
#include "approvals/structure.hpp"

using namespace mibyan::approvals;

namespace {

const home_paths paths{"/home/user", "/home/user/.mibyan"};

} // namespace

// The shell lexer and the structural analysis stay bounded on hostile
// input: deep nesting, 1 MB of quotes, many here-documents and words.
// (No time is asserted; the caps are.)
BOOST_AUTO_TEST_CASE(structure_is_bounded_on_hostile_input) {
  const std::string truncated_key = "command too large or deep to analyse";
  auto has = [](const std::vector<std::string>& xs, const std::string& x) {
    return std::find(xs.begin(), xs.end(), x) != xs.end();
  };
  std::vector<std::string> hostile = {
    std::string(1 << 20, '\''),
    std::string(1 << 20, '"'),
    [] {
      std::string s;
      for (int i = 0; i < 100000; ++i)
        s += "$(";
      return s + "rm -rf /";
    }(),
    [] {
      std::string s;
      for (int i = 0; i < 100000; ++i)
        s += "${";
      return s;
    }(),
    [] {
      std::string s;
      for (int i = 0; i < 20000; ++i)
        s += "cat <<A ";
      return s + "\n";
    }(),
    [] {
      std::string s = "eval ";
      for (int i = 0; i < 2000; ++i)
        s += "'eval ";
      return s + "rm -rf /";
    }(),
    [] {
      std::string s;
      for (int i = 0; i < 300000; ++i)
        s += "a;";
      return s;
    }(),
  };
  for (auto& h : hostile) {
    auto parsed = parse_shell(h);
    BOOST_CHECK_LE(parsed.commands.size(), shell_limits{}.max_commands);
    auto st = analyse_structure(h, paths);
    BOOST_CHECK_MESSAGE(st.truncated && has(st.keys, truncated_key),
                        "not reported as truncated: " << h.substr(0, 40));
    auto found = scan_command(make_variants(h, paths));
    BOOST_CHECK(!found.hardline.empty() || has(found.dangerous, truncated_key));
  }
  // Nesting within the caps is still read: rm -rf / four levels down.
  auto nested = scan_command(make_variants(
    R"cmd(bash -c 'eval "$(echo c2ggLWMgJ3JtIC1yZiAvJw== | base64 -d)"')cmd", paths));
  BOOST_CHECK_EQUAL(nested.hardline, "root filesystem delete");
  BOOST_CHECK(parse_shell("$(echo $(echo $(echo x)))").commands.size() == 1);
}

BOOST_AUTO_TEST_CASE(escape_decoders) {
  BOOST_CHECK_EQUAL(decode_ansi_c("\\x72\\x6d"), "rm");
  BOOST_CHECK_EQUAL(decode_ansi_c("\\162\\155\\u0020\\t"), "rm \t");
  BOOST_CHECK_EQUAL(printf_output({"\\162\\155"}).value(), "rm");
  BOOST_CHECK_EQUAL(printf_output({"%s-%s\\n", "a", "b", "c"}).value(),
                    "a-b\nc-\n");
  BOOST_CHECK_EQUAL(printf_output({"%b", "\\0162m"}).value(), "rm");
  BOOST_CHECK_EQUAL(echo_output({"-e", "\\x72m"}), "rm\n");
  BOOST_CHECK_EQUAL(echo_output({"\\x72m"}), "\\x72m\n");
  BOOST_CHECK_EQUAL(base64_decode("cm0gLXJmIH4veA==").value(), "rm -rf ~/x");
  BOOST_CHECK(!base64_decode("not base64!"));
}

