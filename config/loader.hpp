// File: config/loader.hpp
//
// Reads `$MIBYAN_HOME/config.yaml` (yaml-cpp) into `options` and
// `$MIBYAN_HOME/.env` into `options::env_file`. yaml-cpp throws; every
// exception is caught here and turned into an error value.
#pragma once

#include "base/status.hpp"

#include <string>
#include <vector>

#include "config/options.hpp"

namespace mibyan {

/// Returns `$MIBYAN_HOME` if set, else `$HOME/.mibyan`, else
/// `<password-database home>/.mibyan`, made absolute; "" when there is no
/// home at all (never a shared temporary directory).
std::string resolve_home();

/// Loads the configuration of `home` ("" = resolve_home()). A missing
/// config.yaml or .env means defaults. A home that is not a private
/// directory of the user (base/state_dir.hpp) is an error, as is having
/// no home at all. `MIBYAN_CONFIG` names another config
/// file. Reads only; never creates or changes a file.
///
/// Every failure is config_invalid with one line naming the file, line,
/// key and problem, e.g. "/root/.mibyan/config.yaml:7:
/// code_execution.timeout: expected an integer, got 'soon'". A loaded
/// configuration passes validate_options (config/option_bounds.hpp).
result<options> load_options(const std::string& home = "");

/// Parses config YAML text (used by load_options and tests). `origin` is
/// the file name used in messages. Fails as load_options does.
result<options> parse_options(const std::string& yaml_text,
                              const std::string& origin);

/// Parses .env text: `KEY=VALUE` lines, optional `export `, single or double
/// quotes, `#` comments. Malformed lines are skipped and reported in
/// `warnings` (one entry per line, with the line number, never the value).
void parse_env_file(const std::string& text,
                    std::map<std::string, std::string>& out,
                    std::vector<std::string>* warnings);

/// Returns the effective configuration as YAML, secrets masked (the .env
/// values show only their length).
std::string render_options(const options& opts);

/// One option as `mibyan config show` prints it (secrets masked): the
/// section, the key and the shown value (YAML scalar or flow-list text).
struct shown_option {
  std::string section;
  std::string key;
  std::string value;
};

/// Every option of the table, in render_options' order and masking.
std::vector<shown_option> shown_options(const options& opts);

} // namespace mibyan
