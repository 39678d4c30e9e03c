// File: tests/support/browser_check.hpp
//
// What the headless-browser suites (tests/*_browser_test.cpp driving a
// tests/node/*_browser.mjs script through puppeteer-core) share: where
// Chromium is, the global fixture that skips or fails the suite without it,
// and reading the JSON report the script writes.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <unistd.h>

#include "base/json.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/temp_dir.hpp"

namespace mibyan::test {

/// The browser: $MIBYAN_TEST_CHROMIUM, else Debian's /usr/bin/chromium.
inline std::string chromium_path() {
  const char* env = std::getenv("MIBYAN_TEST_CHROMIUM");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/chromium";
}

/// A Boost.Test global fixture (BOOST_TEST_GLOBAL_FIXTURE in the suite's
/// file): runs before any test case; no browser, no suite (exit 77,
/// reported as skipped, never as passed), or exit 1 with
/// MIBYAN_REQUIRE_TEST_DATA=1.
struct chromium_presence {
  chromium_presence() {
    auto path = chromium_path();
    if (::access(path.c_str(), X_OK) == 0)
      return;
    // CI always installs the browser: there a missing one is a failure.
    if (const char* req = std::getenv("MIBYAN_REQUIRE_TEST_DATA");
        req != nullptr && std::string{req} == "1") {
      std::fprintf(stderr,
                   "FAILED: no Chromium at %s and MIBYAN_REQUIRE_TEST_DATA=1 "
                   "(scripts/install-test-deps.sh installs it)\n",
                   path.c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
    std::fprintf(stderr,
                 "SKIPPED: no Chromium at %s (install Debian's `chromium` "
                 "package with scripts/install-test-deps.sh, or set "
                 "MIBYAN_TEST_CHROMIUM)\n",
                 path.c_str());
    std::fflush(stderr);
    std::_Exit(77);
  }
};

/// tests/node, after requiring puppeteer-core is installed there.
inline std::string browser_node_dir() {
  auto node_dir = test_source_dir() + "/node";
  BOOST_REQUIRE_MESSAGE(
    std::filesystem::exists(node_dir + "/node_modules/puppeteer-core/package.json"),
    "puppeteer-core is not installed in tests/node/node_modules: run "
    "scripts/install-test-deps.sh (needs npm registry access)");
  return node_dir;
}

/// The last 6000 bytes of the file at `path` (a server's stderr log).
inline std::string log_tail(const std::string& path) {
  auto e = slurp(path);
  return e.size() > 6000 ? e.substr(e.size() - 6000) : e;
}

/// The report the script wrote at `report_path` (requires a JSON object).
inline json::value browser_report(const std::string& report_path) {
  auto parsed = json::parse(slurp(report_path));
  BOOST_REQUIRE_MESSAGE(parsed && parsed.v->is_object(),
                        "no JSON report at " << report_path);
  return *parsed.v;
}

/// Checks that every step of `report` succeeded; returns the step names.
inline std::set<std::string> checked_steps(const json::value& report) {
  std::set<std::string> steps;
  auto* step_list = report.find("steps");
  BOOST_REQUIRE(step_list && step_list->is_array());
  for (const auto& s : step_list->as_array()) {
    steps.insert(s.get_string("name"));
    BOOST_CHECK_MESSAGE(s.get_bool("ok", false),
                        "step '" << s.get_string("name") << "' failed: "
                                 << s.get_string("error"));
  }
  return steps;
}

} // namespace mibyan::test
