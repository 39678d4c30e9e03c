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
    [] {
      std::string s;
      for (int i = 0; i < 100000; ++i)
        s += "$a;";
      return s;
    }(),
  };
  for (auto& h : hostile) {
    auto parsed = parse_shell(h);
    BOOST_CHECK_LE(parsed.commands.size(), shell_limits{}.max_commands);
    auto st = analyse_structure(h, paths);
    BOOST_CHECK_MESSAGE(st.truncated && has(st.keys, truncated_key),
                        "not reported as truncated: " << h.substr(0, 40));
    // Plain words and separators ("a;a;...") take the fast path: nothing
    // in them can hide a command; everything else is flagged.
    auto found = scan_command(make_variants(h, paths));
    if (needs_structure(h))
      BOOST_CHECK_MESSAGE(
        !found.hardline.empty() || has(found.dangerous, truncated_key),
        "not flagged: " << h.substr(0, 40));
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


BOOST_AUTO_TEST_CASE(lexer_reads_words_operators_and_heredocs) {
  auto ps = parse_shell("X=1 a 'b c'\"$Y\"$(d e) | f <<EOF && g >>out 2>&1\n"
                        "body $Z\nEOF\nh <(i)");
  BOOST_REQUIRE_EQUAL(ps.commands.size(), 4u);
  auto& a = ps.commands[0];
  BOOST_REQUIRE_EQUAL(a.words.size(), 3u);
  BOOST_CHECK_EQUAL(a.words[0].value(), "X=1");
  BOOST_CHECK_EQUAL(a.after, "|");
  auto& w = a.words[2].parts;
  BOOST_REQUIRE_EQUAL(w.size(), 3u);
  BOOST_CHECK(w[0].kind == segment_kind::literal && w[0].quoted
              && w[0].text == "b c");
  BOOST_CHECK(w[1].kind == segment_kind::variable && w[1].text == "Y");
  BOOST_CHECK(w[2].kind == segment_kind::command_sub && w[2].text == "d e");
  auto& f = ps.commands[1];
  BOOST_CHECK_EQUAL(f.pipe_from, 0);
  BOOST_REQUIRE_EQUAL(f.redirects.size(), 1u);
  BOOST_CHECK_EQUAL(f.redirects[0].op, "<<");
  BOOST_CHECK_EQUAL(f.redirects[0].body, "body $Z\n");
  BOOST_CHECK_EQUAL(f.after, "&&");
  auto& g = ps.commands[2];
  BOOST_REQUIRE_EQUAL(g.redirects.size(), 2u);
  BOOST_CHECK_EQUAL(g.redirects[0].op, ">>");
  BOOST_CHECK_EQUAL(g.redirects[1].op, ">&");
  auto& h = ps.commands[3];
  BOOST_REQUIRE_EQUAL(h.words.size(), 2u);
  BOOST_CHECK(h.words[1].parts.at(0).kind == segment_kind::process_sub);
  BOOST_CHECK(!ps.truncated);
}

BOOST_AUTO_TEST_CASE(resolved_forms) {
  auto form = [](const std::string& cmd) {
    auto st = analyse_structure(cmd, paths);
    std::string all;
    for (auto& f : st.forms)
      all += f + "\n--\n";
    return all;
  };
  auto has = [&](const std::string& cmd, const std::string& part) {
    auto f = form(cmd);
    BOOST_CHECK_MESSAGE(f.find(part) != std::string::npos,
                        cmd << " -> " << f << " lacks " << part);
  };
  has("rm -rf /usr/..", "rm -rf /\n");
  has("rm -rf /et?", "rm -rf /etc\n");
  has("cd / && rm -rf *", "rm -rf /*");
  has("cd /usr && rm -rf ../etc", "rm -rf /etc");
  has("X=rm; $X -rf ~/x", "rm -rf ~/x");
  has("R='rm -rf'; $R ~/x", "rm -rf ~/x");
  has("$'\\x72\\x6d' -rf ~/x", "rm -rf ~/x");
  has("$(printf '\\162\\155') -rf ~/x", "rm -rf ~/x");
  has("sudo -u root env A=1 nice -n 5 timeout 3 /bin/rm -rf x", "rm -rf x");
  has("echo 'a; b' > f", "echo 'a; b' > f");
  has("printf 'rm -rf ~/x' | bash", "rm -rf ~/x");
  has("bash <<EOF\nrm -rf ~/x\nEOF", "rm -rf ~/x");
  has("find . -exec rm -rf {} +", "rm -rf {}");
  has("echo b > /proc/./sysrq-trigger", "> /proc/sysrq-trigger");
  has("cat k >> ~/.s*/authorized_keys", ">> ~/.ssh/authorized_keys");
  // Structural keys.
  auto keys = [](const std::string& cmd) {
    return analyse_structure(cmd, paths).keys;
  };
  BOOST_CHECK(keys("$X -rf ~/x").at(0) == "dynamic command word");
  BOOST_CHECK(keys("X=rm; $X -rf ~/x").empty());
  BOOST_CHECK(keys("ls -la").empty());
  BOOST_CHECK(!needs_structure("git status"));
  BOOST_CHECK(needs_structure("rm -rf /usr/.."));
  BOOST_CHECK(needs_structure("echo $X"));
}
