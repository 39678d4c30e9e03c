// File: config/mcp_config.hpp
//
// Reading the top-level `mcp_servers:` mapping (docs/mcp.md,
// "Configuration") and resolving the `${VAR}` / `${env:VAR}` references of
// its env and header values. yaml-cpp stays in the .cpp.
#pragma once

#include <string>
#include <vector>

#include "base/status.hpp"
#include "config/mcp_options.hpp"

namespace YAML {
class Node;
}

namespace mibyan {

struct options;

/// Parses `node` (the value of `mcp_servers`) into `out`, sorted by name.
/// Fails with config_invalid and one error naming the server and key.
/// Bool-ish strings (true/false/1/0/yes/no/on/off) are accepted; a bad
/// boolean keeps the default and adds a warning to `warnings`. Unknown
/// keys are errors.
status parse_mcp_servers(const YAML::Node& node,
                         std::vector<mcp_server_options>& out,
                         std::vector<std::string>& warnings);

/// Replaces `${NAME}` and `${env:NAME}` in `text` by `cfg.secret(NAME)`
/// (process environment, then `$MIBYAN_HOME/.env`). A reference to an
/// unset variable becomes "" and its name is appended to `*unset` when
/// given. Text without references is returned unchanged.
std::string resolve_mcp_refs(const std::string& text, const options& cfg,
                             std::vector<std::string>* unset = nullptr);

/// Renders `servers` as YAML for `mibyan config` (header values masked).
std::string render_mcp_servers(const std::vector<mcp_server_options>& servers);

} // namespace mibyan
