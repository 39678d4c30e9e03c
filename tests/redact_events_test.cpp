// The redactor's fast forward (base/redact_events.hpp): the finder against
// a byte-by-byte reading of its contract, and the redactor's verdicts on
// the redaction corpus at every position relative to the finder's 64-byte
// blocks.
#define BOOST_TEST_MODULE redact_events
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/redact.hpp"
#include "base/redact_events.hpp"
#include "base/redact_literals.hpp"
#include "base/redact_names.hpp"
#include "tests/support/paths.hpp"

using namespace mibyan;
using namespace mibyan::redact_detail;

namespace {

const std::vector<std::string> prefixes = {"sk-", "ghp_", "AKIA", "-----",
                                           "eyJ", "password"};

// A rule byte the finder must report at p.
bool rule_event(const std::string& s, size_t p) {
  char c = s[p];
  if (c == '+' || c == '/' || c == '\\')
    return true;
  if (c != '=' && c != ':')
    return false;
  if (c == ':' && s.compare(p, 3, "://") == 0)
    return true;
  if (p == 0)
    return false;
  char b = s[p - 1];
  return b == ' ' || b == '\t' || b == '"' || b == '\''
         || std::string{"ntdeyshlNTDEYSHL"}.find(b) != std::string::npos;
}

bool starts_prefix(const std::string& s, size_t p) {
  if (p + 1 >= s.size())
    return false;
  for (auto& x : prefixes)
    if (s[p] == x[0] && s[p + 1] == x[1])
      return true;
  // "bearer" in any case.
  return (s[p] == 'b' || s[p] == 'B') && (s[p + 1] == 'e' || s[p + 1] == 'E');
}

// The contract, one byte at a time.
size_t reference_next(const std::string& s, size_t i, size_t end,
                      size_t long_from) {
  for (size_t p = i; p < end; ++p) {
    if (rule_event(s, p))
      return p;
    if (!is_tok(s[p]) || (p > 0 && is_tok(s[p - 1])))
      continue;
    if (starts_prefix(s, p))
      return p;
    size_t e = p;
    while (e < s.size() && is_tok(s[e]))
      ++e;
    if (long_from != std::string::npos && p >= long_from && e - p >= 10)
      return p;
  }
  return end;
}

event_finder make_finder() {
  event_finder f;
  for (auto& p : prefixes)
    f.add_prefix(p);
  f.add_prefix("bearer", true);
  return f;
}

std::string random_text(std::mt19937& rng, size_t n) {
  // Mostly token bytes, runs of all lengths, a few rule bytes, prefixes,
  // non-ASCII bytes.
  static const char* parts[] = {"sk-", "gh", "ghp_", "AK", "AKIA", "-----",
                                "ey", "eyJ", "Bearer", "bE", "password",
                                "pa", " ", "  ", "\n", "=", ":", "+", "/",
                                "://", "a:", "n=", "1=", "s:", "\"=",
                                "\\", "\xc3\xa9", "\x80", "_", "-", ".",
                                "\t", "@", "~"};
  std::string s;
  while (s.size() < n) {
    if (rng() % 3 == 0) {
      s += parts[rng() % (sizeof parts / sizeof parts[0])];
    } else {
      size_t len = rng() % 3 == 0 ? rng() % 40 : rng() % 12;
      for (size_t k = 0; k < len; ++k)
        s.push_back("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    "0123456789 "[rng() % 63]);
    }
  }
  s.resize(n);
  return s;
}

// The corpus's escapes: \n and \t.
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

} // namespace

BOOST_AUTO_TEST_CASE(finder_reports_what_the_contract_names) {
  auto f = make_finder();
  std::mt19937 rng{7};
  size_t checked = 0;
  for (int round = 0; round < 1000; ++round) {
    auto s = random_text(rng, rng() % 300);
    // A cursor asked at rising positions, as the scan asks it (it reuses
    // the block it classified last).
    event_cursor cursor{f, s};
    for (size_t i = 0; i <= s.size(); ++i) {
      // Only positions outside a token are valid starts.
      if (i > 0 && i < s.size() && is_tok(s[i - 1]) && is_tok(s[i]))
        continue;
      size_t end = s.size() - (rng() % 3 == 0 ? std::min<size_t>(
                                                  s.size() - i, rng() % 20)
                                              : 0);
      size_t long_from = rng() % 4 == 0   ? std::string::npos
                         : rng() % 2 == 0 ? i + rng() % 80
                                          : 0;
      auto want = reference_next(s, i, end, long_from);
      auto got = f.next(s, i, end, long_from);
      auto from_cursor = cursor.next(i, end, long_from);
      BOOST_TEST_CONTEXT("round " << round << " i " << i << " end " << end
                                  << " long_from " << long_from) {
        BOOST_TEST(got == want);
        BOOST_TEST(from_cursor == want);
      }
      ++checked;
    }
  }
  BOOST_TEST(checked > 10000u);
}

BOOST_AUTO_TEST_CASE(corpus_verdicts_do_not_depend_on_the_position) {
  std::ifstream in{test::test_source_dir() + "/data/redaction/corpus.txt"};
  BOOST_REQUIRE(in.good());
  redactor r{{{"ACME_SERVICE_TOKEN", "pl4nted-secret-value-2718"},
              {"ACME_DB_PASSWORD", "Tr0ub4dor&3-horse"}}};
  // Filler lines in which no rule starts, of every length up to two
  // blocks, with long words that end right at the case.
  const std::string words = "the quick brown fox jumps over the lazy dog "
                            "while tests keep running in the background ";
  std::string line;
  size_t cases = 0;
  while (std::getline(in, line)) {
    if (line.size() < 2 || (line[0] != '+' && line[0] != '-')
        || line[1] != ' ')
      continue;
    bool positive = line[0] == '+';
    auto body = line.substr(2);
    std::string secret;
    if (positive) {
      auto sep = body.rfind(" ||| ");
      BOOST_REQUIRE(sep != std::string::npos);
      secret = body.substr(sep + 5);
      body = body.substr(0, sep);
    }
    body = unescape(body);
    ++cases;
    for (size_t pad = 0; pad < 140; ++pad) {
      std::string before;
      while (before.size() < pad)
        before += words;
      before.resize(pad);
      before += "\n";
      auto text = before + body + "\n" + words;
      auto out = r.redacted(text);
      BOOST_TEST_CONTEXT("corpus case '" << body << "' after " << pad
                                         << " bytes") {
        if (positive) {
          // A block cut off at the case's end may take the words after
          // it; the text in front stays, the secret goes.
          BOOST_TEST(out.compare(0, before.size(), before) == 0);
          BOOST_TEST(out.find(secret) == std::string::npos);
          BOOST_TEST(out.find("[REDACTED") != std::string::npos);
        } else {
          BOOST_TEST(out == text);
        }
      }
    }
  }
  BOOST_TEST(cases > 80u);
}

BOOST_AUTO_TEST_CASE(literal_index_finds_every_occurrence) {
  // Few values (memmem each) and many (one hashed pass), on random text
  // over a small alphabet so that values overlap and recur.
  std::mt19937 rng{11};
  for (size_t count : {size_t{1}, size_t{3}, size_t{8}, size_t{9}, size_t{40}}) {
    std::vector<std::string> values;
    literal_index index;
    for (size_t k = 0; k < count; ++k) {
      std::string v;
      size_t len = 8 + rng() % 12;
      for (size_t j = 0; j < len; ++j)
        v.push_back("ab"[rng() % 2]);
      values.push_back(v);
      index.add(v);
    }
    index.add("short"); // under 8 bytes: never found, keeps the numbering
    for (int round = 0; round < 30; ++round) {
      std::string s;
      size_t n = rng() % 400;
      for (size_t j = 0; j < n; ++j)
        s.push_back("abc"[rng() % 3]);
      std::vector<literal_hit> got;
      index.find_all(s, got);
      std::set<std::pair<size_t, uint32_t>> want, have;
      for (size_t k = 0; k < values.size(); ++k)
        for (size_t pos = s.find(values[k]); pos != std::string::npos;
             pos = s.find(values[k], pos + 1))
          want.insert({pos, static_cast<uint32_t>(k)});
      for (auto& h : got)
        have.insert({h.pos, h.idx});
      BOOST_TEST_CONTEXT(count << " values, round " << round) {
        BOOST_TEST(have.size() == got.size()); // no duplicates
        BOOST_TEST((have == want));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(many_secret_values_are_all_redacted) {
  std::vector<redactor::secret> secrets;
  std::string text, want;
  for (int k = 0; k < 20; ++k) {
    std::string name = "SECRET_" + std::to_string(k);
    std::string value = "v4lue-" + std::to_string(k * 7919) + "-of-" + name;
    secrets.push_back({name, value});
    text += "x " + value + " y\n";
    want += "x [REDACTED:" + name + "] y\n";
  }
  text += secrets[3].value; // at the very end
  want += "[REDACTED:SECRET_3]";
  redactor r{secrets};
  BOOST_TEST(r.redacted(text) == want);
}
