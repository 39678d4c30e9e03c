// File: cli/mcp_login.hpp
//
// `mibyan mcp login NAME` and `mibyan mcp logout NAME` (docs/mcp.md,
// "Authorization"): the OAuth browser flow of an HTTP MCP server with a
// loopback redirect listener, and removing the stored tokens.
#pragma once

#include <string>
#include <vector>

namespace mibyan {
struct options;
}

namespace mibyan::cli {

/// `args` are the words after `login`: NAME [--port N] [--timeout S]
/// [--no-browser]. Exit code 0 logged in, 1 the flow failed, 2 usage.
int mcp_login(const options& opts, const std::vector<std::string>& args);

/// `args`: NAME. Exit code 0 (also when nothing was stored), 2 usage.
int mcp_logout(const options& opts, const std::vector<std::string>& args);

} // namespace mibyan::cli
