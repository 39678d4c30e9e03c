// File: config/option_parsers.hpp
//
// The parsers of config keys with structure of their own, named by the
// MIBYAN_CUSTOM, MIBYAN_CHECKED and MIBYAN_TOP rows of
// config/option_table.def, and the renderings `config show` uses for them.
// Each parser returns "" or the problem and leaves its target unchanged on
// error; a top-level key's problem starts with the key's name (the loader
// adds the section and key of the others). Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "config/options.hpp"

namespace YAML {
class Node;
}

namespace mibyan {

/// YAML text of a string value: double-quoted, `"` and `\` escaped.
std::string quoted_for_show(const std::string& s);

/// How a node that is not the expected scalar is named in a message:
/// its text, "a list", "a mapping" or "null".
std::string scalar_text(const YAML::Node& node);

/// `tool_loop_guardrails.warn_after` / `hard_stop_after`: a mapping of
/// identical_failure, same_tool_failure, idempotent_repeat (integers >= 1);
/// keys left out keep their value.
std::string parse_guardrail_thresholds(const YAML::Node& node,
                                       guardrail_thresholds& out);
std::string show_guardrail_thresholds(const guardrail_thresholds& t);

/// `approvals.mode`: manual, smart or off; YAML false/off read as "off",
/// any other scalar as "manual" (the safe mode).
std::string parse_approvals_mode(const YAML::Node& node, std::string& out);
/// The string unquoted (how `config show` prints approvals.mode).
std::string show_plain_string(const std::string& s);

/// Checks a storage.postgres.url: a postgresql:// URI whose password, if
/// any (in the user part or a `password` parameter), is a `${VAR}`
/// reference: the secret lives in the environment or .env, not in the
/// file. Returns "" when it is acceptable ("" itself is).
std::string check_postgres_url(const std::string& url);

/// Top-level `command_allowlist`: a list of at most 1000 pattern keys of
/// at most 200 characters; null empties it.
std::string parse_command_allowlist(const YAML::Node& node,
                                    std::vector<std::string>& out,
                                    std::vector<std::string>& warnings);
std::string show_command_allowlist(const std::vector<std::string>& keys);

/// Top-level `mcp_servers` (config/mcp_config.hpp), with its warnings.
std::string parse_mcp_server_map(const YAML::Node& node,
                                 std::vector<mcp_server_options>& out,
                                 std::vector<std::string>& warnings);
/// The servers as one YAML flow mapping (names only; the full rendering is
/// config/mcp_config.hpp's render_mcp_servers).
std::string show_mcp_server_map(const std::vector<mcp_server_options>& s);

} // namespace mibyan
