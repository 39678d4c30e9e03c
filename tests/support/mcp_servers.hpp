// File: tests/support/mcp_servers.hpp
//
// The real MCP servers the MCP tests use (docs/testing.md): the npm
// packages @modelcontextprotocol/server-everything and
// server-filesystem, installed by scripts/install-test-deps.sh into
// tests/node/node_modules, and our misbehaving stdlib server
// (tests/support/mcp_misbehaving_server.py).
#pragma once

#include <string>
#include <vector>

#include "config/mcp_options.hpp"

namespace mibyan::test {

/// Path of an installed package's entry script, e.g.
/// mcp_package_entry("server-everything").
std::string mcp_package_entry(const std::string& package);

/// Exits the test executable with 77 (skipped; 1 when
/// MIBYAN_REQUIRE_TEST_DATA=1) and a visible message when node or the npm
/// packages are missing. Use as BOOST_TEST_GLOBAL_FIXTURE(mcp_npm_presence).
struct mcp_npm_presence {
  mcp_npm_presence();
};

/// stdio configs of the npm servers (`name` is the server's key).
mcp_server_options everything_stdio(const std::string& name = "everything");
mcp_server_options filesystem_stdio(const std::string& root,
                                    const std::string& name = "files");
/// The misbehaving server in `mode` (see the script's docstring).
mcp_server_options misbehaving_stdio(const std::string& mode,
                                     const std::string& name = "bad");

/// server-everything over Streamable HTTP ("streamableHttp") or SSE
/// ("sse") on a free loopback port; killed (its group) by the destructor.
class everything_http_server {
public:
  /// `port` 0 picks a free one.
  explicit everything_http_server(const std::string& mode, int port = 0);
  ~everything_http_server();
  everything_http_server(const everything_http_server&) = delete;
  everything_http_server& operator=(const everything_http_server&) = delete;
  /// http://127.0.0.1:<port>/mcp or .../sse; "" when it did not start.
  const std::string& url() const { return url_; }
  int port() const { return port_; }

private:
  int pid_ = -1;
  int port_ = 0;
  std::string url_;
};

/// tests/support/mcp_http_script_server.py (a scripted Streamable HTTP
/// server; its docstring lists `options` and tools) on a free loopback
/// port; killed by the destructor.
class scripted_http_server {
public:
  explicit scripted_http_server(std::vector<std::string> options = {});
  ~scripted_http_server();
  scripted_http_server(const scripted_http_server&) = delete;
  scripted_http_server& operator=(const scripted_http_server&) = delete;
  /// http://127.0.0.1:<port>/mcp; "" when it did not start.
  const std::string& url() const { return url_; }
  /// The request record: http://127.0.0.1:<port>/log.
  std::string log_url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/log";
  }

private:
  int pid_ = -1;
  int port_ = 0;
  std::string url_;
};

} // namespace mibyan::test
