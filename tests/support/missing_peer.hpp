// File: tests/support/missing_peer.hpp
//
// How a test executable ends when a peer it needs (node, an npm package,
// shared test data) is absent: skipped outside CI, a failure in CI.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace mibyan::test {

/// Prints "SKIPPED: <why>" and exits 77 (ctest: skipped), or, with
/// MIBYAN_REQUIRE_TEST_DATA=1 (CI), prints "FAILED: <why>" and exits 1.
/// For global fixtures, before any test case runs.
[[noreturn]] inline void exit_missing_peer(const std::string& why) {
  const char* req = std::getenv("MIBYAN_REQUIRE_TEST_DATA");
  bool required = req != nullptr && std::string{req} == "1";
  std::fprintf(stderr, "%s: %s\n", required ? "FAILED" : "SKIPPED",
               why.c_str());
  std::fflush(stderr);
  std::_Exit(required ? 1 : 77);
}

} // namespace mibyan::test
