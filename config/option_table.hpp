// File: config/option_table.hpp
//
// The configuration keys as data: one row per row of config/option_table.def,
// with the parser and the `config show` rendering of the key. The loader
// (config/loader.hpp), the range checks (config/option_bounds.hpp) and the
// generated reference (config/option_docs.hpp) read this table and nothing
// else. Built once on first use; read-only afterwards, thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "config/options.hpp"

namespace YAML {
class Node;
}

namespace mibyan {

/// What a key holds, which decides its parser and its docs.
enum class option_kind {
  integer,   ///< int64_t in [min, max]
  boolean,   ///< true/True/yes/on or false/False/no/off
  string,    ///< any string; null reads as ""
  secret,    ///< a string shown masked
  choice,    ///< one of `values`
  checked,   ///< a string its own check accepts
  list,      ///< a list of strings; null reads as []
  fraction,  ///< a number in (0, 1]
  mapping,   ///< a mapping of the section's rows "<key>.<name>"
  custom,    ///< parsed by hand (config/option_parsers.hpp)
};

/// One configuration key.
struct option_row {
  /// The section, e.g. "code_execution"; "" for a top-level key.
  const char* section = "";
  /// The key inside the section. A dotted key ("postgres.url") is a key of
  /// the mapping row named by its first part, set only through it.
  const char* key = "";
  option_kind kind = option_kind::string;
  /// The range of an integer (inclusive).
  int64_t min = 0;
  int64_t max = 0;
  /// A choice's values separated by '|' ("" may be one of them); for a
  /// custom or top-level key, the text the reference shows as its range.
  const char* values = "";
  /// One line of the configuration reference.
  const char* doc = "";
  /// Sets the key from YAML; returns "" or the problem. The problem lacks
  /// the file and line, which the loader adds, and, except for a top-level
  /// key, "section.key: " too. On error `opts` is unchanged.
  /// Warnings that do not stop loading go to `warnings`.
  std::function<std::string(const YAML::Node& node, options& opts,
                            std::vector<std::string>& warnings)>
    set;
  /// The value as `mibyan config show` prints it (secrets masked): a YAML
  /// scalar or flow collection.
  std::function<std::string(const options& opts)> show;
  /// Checks the value `opts` holds now against the row (an integer's range,
  /// a choice's values, a checked string's check, a fraction's (0, 1]), for
  /// options built in code rather than by `set`: config_invalid with the
  /// problem, worded as `set` words it (without the key). Empty for kinds
  /// whose every value is valid (bool, string, list) and for mapping and
  /// custom rows, whose parsers check what they read.
  std::function<status(const options& opts)> check;

  /// "section.key", or "key" for a top-level key.
  std::string name() const;
  /// Whether the key is set only through its mapping row (a dotted key).
  bool nested() const;
};

/// A section of config.yaml.
struct option_section {
  const char* name;
  /// One line of the configuration reference.
  const char* doc;
};

/// Every section, in the order of config/option_table.def.
const std::vector<option_section>& option_sections();

/// Every row, in the order of config/option_table.def.
const std::vector<option_row>& option_table();

/// The row of `section.key` (a dotted key for a mapping's keys), or null.
const option_row* find_option(const std::string& section,
                              const std::string& key);

} // namespace mibyan
