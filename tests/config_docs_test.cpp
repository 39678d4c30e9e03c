// The configuration keys have one source, config/option_table.def (issue
// 29): the loader accepts exactly its keys, and the key reference of
// docs/configuration.md is generated from it. MIBYAN_UPDATE_DOCS=1 rewrites
// the generated part of the docs instead of failing.
#define BOOST_TEST_MODULE config_docs
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>

#include "config/loader.hpp"
#include "config/option_bounds.hpp"
#include "config/option_docs.hpp"
#include "config/option_table.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

namespace {

std::string docs_path() {
  return test::source_dir() + "/docs/configuration.md";
}

// The generated part of `doc` (between the marker lines), or "<missing>".
std::string generated_part(const std::string& doc, size_t* begin = nullptr,
                           size_t* end = nullptr) {
  auto b = doc.find(std::string{config_reference_begin} + "\n");
  auto e = doc.find(std::string{"\n"} + config_reference_end);
  if (b == std::string::npos || e == std::string::npos || e < b)
    return "<missing>";
  b += std::string{config_reference_begin}.size() + 1;
  if (begin != nullptr)
    *begin = b;
  if (end != nullptr)
    *end = e + 1;
  return doc.substr(b, e + 1 - b);
}

// The first line where `a` and `b` differ, for the failure message.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  std::string lx, ly;
  for (int n = 1;; ++n) {
    bool gx = static_cast<bool>(std::getline(x, lx));
    bool gy = static_cast<bool>(std::getline(y, ly));
    if (!gx && !gy)
      return "no difference";
    if (!gx || !gy || lx != ly)
      return "line " + std::to_string(n) + ": docs '" + (gx ? lx : "<end>")
             + "', table '" + (gy ? ly : "<end>") + "'";
  }
}

// The keys the loader names in its "unknown key" error for `section`.
std::string known_keys_of(const std::string& section) {
  auto r = parse_options(section + ":\n  no_such_key_x: 1\n", "c.yaml");
  auto at = r.error.find("(known: ");
  if (at == std::string::npos)
    return "<no list in '" + r.error + "'>";
  at += 8;
  return r.error.substr(at, r.error.rfind(')') - at);
}

// YAML setting row `row` to `value`.
std::string yaml_of(const option_row& row, const std::string& value) {
  if (*row.section == '\0')
    return std::string{row.key} + ": " + value + "\n";
  std::string key = row.key;
  auto dot = key.find('.');
  if (dot == std::string::npos)
    return std::string{row.section} + ":\n  " + key + ": " + value + "\n";
  return std::string{row.section} + ":\n  " + key.substr(0, dot) + ":\n    "
         + key.substr(dot + 1) + ": " + value + "\n";
}

} // namespace

BOOST_AUTO_TEST_SUITE(config_docs)

// The reference in the docs is the text the table generates.
BOOST_AUTO_TEST_CASE(the_key_reference_is_generated_from_the_table) {
  auto doc = test::slurp(docs_path());
  BOOST_REQUIRE(!doc.empty());
  auto expected = config_reference_markdown();
  size_t begin = 0, end = 0;
  auto actual = generated_part(doc, &begin, &end);
  const char* update = std::getenv("MIBYAN_UPDATE_DOCS");
  if (update != nullptr && std::string{update} == "1" && actual != expected
      && actual != "<missing>") {
    doc.replace(begin, end - begin, expected);
    std::ofstream(docs_path(), std::ios::binary | std::ios::trunc) << doc;
    BOOST_TEST_MESSAGE("rewrote the key reference of " << docs_path());
    actual = generated_part(test::slurp(docs_path()));
  }
  BOOST_TEST(actual != "<missing>", "the marker lines are missing");
  BOOST_TEST(actual == expected,
             "docs/configuration.md's key reference is stale ("
               << first_difference(actual, expected)
               << "); run MIBYAN_UPDATE_DOCS=1 build/tests/config_docs_test");
}

// Each key of the table has its row in the docs, and each row of the docs'
// reference is a key of the table.
BOOST_AUTO_TEST_CASE(every_key_is_documented_and_every_documented_key_exists) {
  auto doc = test::slurp(docs_path());
  std::set<std::string> names;
  for (auto& row : option_table()) {
    names.insert(row.name());
    auto cell = "| `" + row.name() + "` | ";
    BOOST_TEST(doc.find(cell) != std::string::npos, row.name());
    std::string line = row.doc;
    BOOST_TEST(!line.empty(), row.name() << " has no doc line");
    BOOST_TEST(line.find_first_of("|\n") == std::string::npos, row.name());
  }
  std::istringstream part(generated_part(doc));
  std::string line;
  int rows = 0;
  while (std::getline(part, line)) {
    if (line.rfind("| `", 0) != 0)
      continue;
    ++rows;
    auto name = line.substr(3, line.find('`', 3) - 3);
    BOOST_TEST(names.count(name) == 1u, "documented but no key: " << name);
  }
  BOOST_TEST(rows == static_cast<int>(option_table().size()));
}

// The loader knows the table's keys and no others: its "unknown key" errors
// list exactly the table's keys of each section and the table's sections
// and top-level keys.
BOOST_AUTO_TEST_CASE(the_loader_accepts_exactly_the_keys_of_the_table) {
  for (auto& section : option_sections()) {
    std::string expected;
    for (auto& row : option_table())
      if (std::string{row.section} == section.name && !row.nested())
        expected += (expected.empty() ? "" : ", ") + std::string{row.key};
    BOOST_TEST(known_keys_of(section.name) == expected, section.name);
  }
  auto r = parse_options("no_such_section: 1\n", "c.yaml");
  std::string expected;
  for (auto& section : option_sections())
    expected += (expected.empty() ? "" : ", ") + std::string{section.name};
  for (auto& row : option_table())
    if (*row.section == '\0')
      expected += ", " + std::string{row.key};
  BOOST_TEST(r.error.find("unknown top-level key 'no_such_section' (known: "
                          + expected + ")")
               != std::string::npos,
             r.error);
  // A key of a mapping row is no key of the section itself.
  r = parse_options("storage:\n  postgres.url: x\n", "c.yaml");
  BOOST_TEST(r.error.find("unknown key 'storage.postgres.url'")
               != std::string::npos,
             r.error);
  // `config show` lists the table's section keys, in the table's order.
  std::vector<std::string> shown, table;
  for (auto& o : shown_options(options{}))
    shown.push_back(o.section + "." + o.key);
  for (auto& row : option_table())
    if (*row.section != '\0' && !row.nested())
      table.push_back(row.name());
  BOOST_TEST(shown == table, boost::test_tools::per_element());
}

// Every key takes the value `config show` prints for its default and gives
// back the same text: the defaults in the docs are values the loader reads.
BOOST_AUTO_TEST_CASE(every_default_as_shown_loads_back) {
  const options defaults{};
  for (auto& row : option_table()) {
    if (row.kind == option_kind::secret || row.kind == option_kind::mapping)
      continue; // masked; or its keys are rows of their own
    auto shown = row.show(defaults);
    auto r = parse_options(yaml_of(row, shown), "c.yaml");
    BOOST_TEST(r.ok(), row.name() << " = " << shown << ": " << r.error);
    BOOST_TEST(row.show(*r) == shown, row.name());
    // What the loader accepts passes the checks of options built in code.
    BOOST_TEST(validate_options(*r).ok(), row.name());
  }
}

// A value of the wrong type or out of range is refused, and the message
// names the key.
BOOST_AUTO_TEST_CASE(a_refused_value_names_its_key) {
  for (auto& row : option_table()) {
    std::string bad;
    switch (row.kind) {
    case option_kind::integer:
      bad = std::to_string(row.max) + "0";
      break;
    case option_kind::boolean:
      bad = "maybe";
      break;
    case option_kind::choice:
      bad = "no-such-value";
      break;
    case option_kind::fraction:
      bad = "1.5";
      break;
    case option_kind::list:
    case option_kind::string:
    case option_kind::secret:
      bad = "{a: 1}";
      break;
    default:
      continue;
    }
    auto r = parse_options(yaml_of(row, bad), "c.yaml");
    BOOST_TEST(!r.ok(), row.name() << " accepted " << bad);
    auto named = row.nested()
                   ? std::string{row.section} + "."
                       + std::string{row.key}.substr(
                         0, std::string{row.key}.find('.'))
                   : row.name();
    BOOST_TEST(r.error.find(named + ": ") != std::string::npos,
               row.name() << ": " << r.error);
  }
}

// Options an embedding host or a test built in code get the loader's checks
// from the same rows (validate_options, called by runtime creation): the
// range is written only in the table, and no code clamps a value again.
BOOST_AUTO_TEST_CASE(options_built_in_code_are_checked_by_the_rows) {
  BOOST_TEST(validate_options(options{}).ok());
  struct bad_case {
    std::function<void(options&)> set;
    std::string message;
  };
  std::vector<bad_case> cases{
    {[](options& o) { o.runtime.blocking_threads = 0; },
     "runtime.blocking_threads: must be between 1 and 1024, got 0"},
    {[](options& o) { o.agent.api_max_retries = 1000; },
     "agent.api_max_retries: must be between 1 and 100, got 1000"},
    {[](options& o) { o.provider.max_response_bytes = 1; },
     "provider.max_response_bytes: must be between 65536 and 1073741824, "
     "got 1"},
    {[](options& o) { o.storage.postgres_pool_size = 999; },
     "storage.postgres.pool_size: must be between 1 and 256, got 999"},
    {[](options& o) { o.terminal.kill_grace = -1; },
     "terminal.kill_grace: must be between 0 and 3600, got -1"},
    {[](options& o) { o.code_execution.mode = "bogus"; },
     "code_execution.mode: must be one of project, strict, got 'bogus'"},
    {[](options& o) { o.compression.threshold = 0.0; },
     "compression.threshold: expected a number above 0 and at most 1, got "
     "'0'"},
    {[](options& o) { o.storage.postgres_url = "mysql://db/x"; },
     "storage.postgres.url: expected a postgresql:// or postgres:// URI"},
  };
  for (auto& c : cases) {
    options o;
    c.set(o);
    auto st = validate_options(o);
    BOOST_TEST(!st.ok(), c.message);
    BOOST_TEST((st.code == status_code::config_invalid), c.message);
    BOOST_TEST(st.error == c.message);
  }
  // "" is what a null reads as for every string row: accepted, as the
  // loader accepts `mode:` with no value.
  options empty_choice;
  empty_choice.code_execution.mode = "";
  BOOST_TEST(validate_options(empty_choice).ok());
}

BOOST_AUTO_TEST_SUITE_END()
