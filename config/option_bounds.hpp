// File: config/option_bounds.hpp
//
// The allowed range of every integer configuration option, taken from the
// rows of config/option_table.def (the one place a range is written; the
// loader checks it and docs/configuration.md lists it). Bounds keep values
// where the code that uses them is correct: no overflow when seconds become
// nanoseconds, no thread or memory counts that abort the process. Plain
// data; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

/// Returns "" when `value` is allowed for `section.key`, else the problem,
/// e.g. "must be between 1 and 86400, got 10000000000". An unknown key is
/// a problem too.
std::string check_numeric_bounds(std::string_view section,
                                 std::string_view key, int64_t value);

/// Returns `value` limited to the range of `section.key` (unchanged for an
/// unknown key): for options that did not come through the loader, e.g.
/// built by an embedding host, where a value out of range must not reach
/// code that is only correct inside it.
int64_t clamp_to_bounds(std::string_view section, std::string_view key,
                        int64_t value);

} // namespace mibyan
