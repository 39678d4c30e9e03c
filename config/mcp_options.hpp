// File: config/mcp_options.hpp
//
// The typed form of the top-level `mcp_servers:` mapping of config.yaml:
// one entry per MCP server the runtime connects to (docs/mcp.md). Plain
// data; config/mcp_config.cpp fills it from YAML.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mibyan {

/// `mcp_servers.<name>.sampling` (docs/mcp.md, "Sampling").
struct mcp_sampling_options {
  /// Serve the server's `sampling/createMessage` requests. Off by default in
  /// Mibyan: a server must be trusted before it may spend model tokens.
  bool enabled = false;
  /// Model override ("" = the runtime's default model).
  std::string model;
  /// Upper bound of `maxTokens` a server may ask for.
  int64_t max_tokens_cap = 4096;
  /// Seconds one sampling request may take.
  int64_t timeout = 30;
  /// Sampling requests per minute and server; more are refused.
  int64_t max_rpm = 10;
  /// Models a server may name in its preferences ("" list = any).
  std::vector<std::string> allowed_models;
};

/// One entry of `mcp_servers`.
struct mcp_server_options {
  /// The key under `mcp_servers` (the raw server name).
  std::string name;
  /// Skip the server when false.
  bool enabled = true;
  /// "stdio", "http" (Streamable HTTP) or "sse". Derived: `command` selects
  /// stdio, else `transport` (default http).
  std::string transport = "http";
  /// stdio: program and arguments.
  std::string command;
  std::vector<std::string> args;
  /// stdio: variables added to the scrubbed environment (values with
  /// ${VAR} / ${env:VAR} references resolved).
  std::vector<std::pair<std::string, std::string>> env;
  /// stdio: working directory ("" = the runtime's).
  std::string cwd;
  /// http/sse: endpoint and request headers (references resolved).
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  /// Seconds per tool call.
  int64_t timeout = 300;
  /// Seconds for connecting and the initial discovery.
  int64_t connect_timeout = 60;
  /// Seconds between liveness pings (floored at 5; 0 disables).
  int64_t keepalive_interval = 180;
  /// stdio: recycle the process after this many idle seconds / this age
  /// (0 = never).
  int64_t idle_timeout_seconds = 0;
  int64_t max_lifetime_seconds = 0;
  /// Register the tools from the schema cache and connect on first call.
  bool lazy = false;
  /// The server's tools may run concurrently with each other.
  bool supports_parallel_tool_calls = false;
  /// Catalog filters on raw tool names (exact names or shell globs).
  std::vector<std::string> include;
  std::vector<std::string> exclude;
  /// Allow the resource / prompt utility tools.
  bool resources = true;
  bool prompts = true;
  /// Largest JSON-RPC message accepted from the server, in bytes.
  int64_t max_message_bytes = 16 * 1024 * 1024;
  mcp_sampling_options sampling;
  /// Offer the `roots` capability (docs/mcp.md, "Roots"): `root_dirs`
  /// when given (absolute), else the runtime's working directory. false:
  /// not offered (a server keeps the directories of its own arguments).
  bool roots = true;
  std::vector<std::string> root_dirs;
  /// Offer form-mode `elicitation`: the server's questions go to the
  /// calling session's user (docs/mcp.md, "Elicitation").
  bool elicitation = true;
};

} // namespace mibyan
