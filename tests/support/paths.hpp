// File: tests/support/paths.hpp
//
// Where the tests find the build's binary, the test sources and external
// test data. The absolute paths are compiled into paths.cpp alone, so no
// other translation unit carries a machine-specific path (ccache can then
// share objects between checkouts).
#pragma once

#include <string>

namespace mibyan::test {

/// The `mibyan` binary built alongside the tests.
const std::string& mibyan_binary();

/// tests/ in the source tree.
const std::string& test_source_dir();

/// The source tree's root.
const std::string& source_dir();

/// The directory that holds shared test data (`../shared` beside the
/// checkout by default; `MIBYAN_SHARED_DIR` in the environment overrides).
std::string shared_data_dir();

} // namespace mibyan::test
