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

/// `mcp_servers.<name>.oauth`: OAuth 2.1 authorization of an HTTP server
/// (docs/mcp.md, "Authorization"). Without a pre-registered client the
/// client registers itself dynamically (RFC 7591) when the authorization
/// server offers it.
struct mcp_oauth_options {
  /// Run the authorization flow when the server answers 401 (false: a 401
  /// is an ordinary failure, as with a static Authorization header).
  bool enabled = true;
  /// A pre-registered client ("" = dynamic registration). An https URL
  /// with a path is used as a Client ID Metadata Document client id.
  std::string client_id;
  /// The client secret as a `${NAME}` / `${env:NAME}` reference into the
  /// environment or $MIBYAN_HOME/.env ("" = a public client). A literal is
  /// refused by the config reader.
  std::string client_secret;
  /// Port of the loopback redirect listener of `mibyan mcp login`
  /// (0 = a free port; a pre-registered client usually needs a fixed one).
  int64_t redirect_port = 0;
  /// Scopes to ask for ("" = from WWW-Authenticate, else the resource
  /// metadata's scopes_supported).
  std::string scope;
  /// Seconds for each metadata, registration and token request.
  int64_t request_timeout = 30;
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
  mcp_oauth_options oauth;
};

} // namespace mibyan
