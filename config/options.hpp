// File: config/options.hpp
//
// The typed configuration: one struct per section of config.yaml, made from
// the rows of config/option_table.def (each row gives a member, its default
// and its meaning; the YAML key is in the row, e.g. `code_execution.timeout`
// or `model.default` for model_options::default_model). See
// docs/configuration.md for the reference generated from the same rows.
// Plain data, no logic.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "config/mcp_options.hpp"

namespace mibyan {

/// Thresholds of the tool-loop guardrails, counted per turn
/// (config/option_table.def, section `tool_loop_guardrails`).
struct guardrail_thresholds {
  /// The same call (tool + canonical arguments) failed this many times.
  int64_t identical_failure = 0;
  /// The same tool failed this many times in a row (any arguments).
  int64_t same_tool_failure = 0;
  /// A read-only tool returned the same result for the same call this many
  /// times.
  int64_t idempotent_repeat = 0;
};

// The section structs, one member per row of config/option_table.def.
#define MIBYAN_BRACED(...) {__VA_ARGS__}
#define MIBYAN_SECTION(type, member, name, doc) struct type {
#define MIBYAN_SECTION_END() };
#define MIBYAN_INT(member, key, dflt, lo, hi, doc) int64_t member = dflt;
#define MIBYAN_BOOL(member, key, dflt, doc) bool member = dflt;
#define MIBYAN_STRING(member, key, dflt, doc) std::string member = dflt;
#define MIBYAN_SECRET(member, key, dflt, doc) std::string member = dflt;
#define MIBYAN_CHOICE(member, key, dflt, values, doc) std::string member = dflt;
#define MIBYAN_CHECKED(member, key, dflt, check, doc) std::string member = dflt;
#define MIBYAN_LIST(member, key, dflt, doc) \
  std::vector<std::string> member MIBYAN_BRACED dflt;
#define MIBYAN_FRACTION(member, key, dflt, doc) double member = dflt;
#define MIBYAN_CUSTOM(type, member, key, set, show, values, dflt, doc) \
  type member MIBYAN_BRACED dflt;
#define MIBYAN_MEMBER(type, member, dflt) type member MIBYAN_BRACED dflt;
#include "config/option_table_defaults.hpp"
#include "config/option_table.def"
#include "config/option_table_undef.hpp"
#undef MIBYAN_BRACED

/// The whole effective configuration plus where it came from.
struct options {
  // One member per section and per top-level key of the table.
#define MIBYAN_SECTION(type, member, name, doc) type member;
#define MIBYAN_TOP(type, member, key, set, show, values, doc) type member;
#include "config/option_table_defaults.hpp"
#include "config/option_table.def"
#include "config/option_table_undef.hpp"

  /// `$MIBYAN_HOME`, absolute.
  std::string home;
  /// Path of the config file that was read ("" when none existed).
  std::string config_path;
  /// Variables from `$MIBYAN_HOME/.env` (secrets). Never logged unmasked.
  std::map<std::string, std::string> env_file;
  /// The values of secret keys in config.yaml ("section.key", value):
  /// server.key, cluster.key and every *key/*token/*secret/*password
  /// (config/secret_literals.hpp). The runtime's redactor replaces them
  /// wherever they occur. Never logged.
  std::vector<std::pair<std::string, std::string>> secret_literals;

  /// Returns the value of a secret: the process environment first, then
  /// `.env`. Empty when unset.
  std::string secret(const std::string& name) const;
};

} // namespace mibyan
