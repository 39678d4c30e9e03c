// File: config/option_bounds.hpp
//
// The allowed values of the configuration options, taken from the rows of
// config/option_table.def (the one place a range is written; the loader
// checks it while parsing and docs/configuration.md lists it). Bounds keep
// values where the code that uses them is correct: no overflow when
// seconds become nanoseconds, no thread or memory counts that abort the
// process. Code that reads an option relies on them and does not clamp it
// again. Plain data; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.hpp"
#include "config/options.hpp"

namespace mibyan {

/// The range of one integer option, inclusive.
struct numeric_bounds {
  const char* section;
  /// The key; dotted for a key inside a mapping ("postgres.pool_size").
  const char* key;
  int64_t min;
  int64_t max;
};

/// Every integer option, in the order of config/option_table.def.
const std::vector<numeric_bounds>& numeric_option_bounds();

/// Checks every option of `opts` against its row (option_row::check): an
/// integer's range, a choice's values, a checked string's check, a
/// fraction's (0, 1]. For options that did not come through the loader
/// (built by an embedding host or a test, or changed after loading);
/// runtime creation calls it, so an out-of-range value never reaches the
/// code that reads it. config_invalid naming the first bad key, e.g.
/// "runtime.blocking_threads: must be between 1 and 1024, got 0". Loaded
/// options always pass.
status validate_options(const options& opts);

} // namespace mibyan
