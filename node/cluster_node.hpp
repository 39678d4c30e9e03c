// File: node/cluster_node.hpp
//
// `mibyan node`: one member of a Mibyan cluster (docs/cluster.md). CAF-free
// so the CLI can include it.
#pragma once

#include <string>

#include "config/options.hpp"

namespace mibyan {

struct node_args {
  /// HOST:PORT to listen on (port 0 = a free port).
  std::string listen;
  /// HOST:PORT of any member to join through ("" = start a new cluster).
  std::string join;
  /// "gateway", "worker" or "all".
  std::string role = "all";
  /// Working directory of the sessions this node hosts ("" = current).
  std::string workdir;
  /// Provider overrides for the turns a gateway runs ("" = config).
  std::string provider;
  std::string model;
  std::string base_url;
};

/// Runs a node until SIGTERM/SIGINT (then drains and leaves). Prints the
/// ready line `mibyan node NODE_ID listening on HOST:PORT` on stdout.
/// Returns the exit code: 0 after a clean drain, 1 on a runtime failure,
/// 2 on a configuration or handshake refusal (reason on stderr).
int run_node(const node_args& args, options opts);

/// Splits "HOST:PORT" ("[v6]:PORT" allowed). Returns false on bad input.
bool split_host_port(const std::string& text, std::string& host,
                     uint16_t& port);

/// Whether `host` is a loopback address or "localhost".
bool is_loopback_host(const std::string& host);

/// The cluster key: MIBYAN_CLUSTER_KEY, else `cluster.key` ("" = none).
std::string cluster_key(const options& opts);

} // namespace mibyan
