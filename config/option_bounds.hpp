// File: config/option_bounds.hpp
//
// The allowed range of every numeric configuration option, the one table
// the loader checks and docs/configuration.md ("Numeric ranges") lists.
// Bounds keep values where the code that uses them is correct: no overflow
// when seconds become nanoseconds, no thread or memory counts that abort
// the process. Plain data; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mibyan {

/// The range of one integer option, inclusive.
struct numeric_bounds {
  const char* section;
  const char* key;
  int64_t min;
  int64_t max;
};

/// Upper bound of an integer option without a row in the table (one added
/// without a row): large, but far from any overflow.
constexpr int64_t default_numeric_max = 1'000'000'000;

/// Every row, in the order of docs/configuration.md.
const std::vector<numeric_bounds>& numeric_option_bounds();

/// Returns "" when `value` is allowed for `section.key`, else the problem,
/// e.g. "must be at most 86400, got 10000000000". Options without a row
/// get [INT64_MIN, default_numeric_max] (their own minimum is checked by
/// the loader).
std::string check_numeric_bounds(std::string_view section,
                                 std::string_view key, int64_t value);

} // namespace mibyan
