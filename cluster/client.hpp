// File: cluster/client.hpp
//
// A client of a Mibyan cluster, for `mibyan tool|run|nodes --connect`
// (docs/cluster.md): connects to one member, proves the cluster key with
// the same handshake as a node (role "client") and sends calls, turns and
// member queries to it. CAF-free header. Not thread-safe: one caller.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cluster/node.hpp"
#include "config/options.hpp"
#include "mibyan/runtime.hpp"

namespace mibyan {

class cluster_client {
public:
  /// Connects to HOST:PORT and authenticates. Returns null and sets
  /// `*error` (one line) on failure; `*refused` tells a refusal by the
  /// node (key, protocol) from a connection failure.
  static std::unique_ptr<cluster_client>
  connect(const std::string& address, const options& opts, std::string* error,
          bool* refused = nullptr);

  ~cluster_client();

  /// Runs one tool call on the cluster (the session's worker). A lost
  /// member is an error result, never a hang.
  tool_outcome call_tool(const tool_call_request& call);

  /// The names of the tools the member offers ("" on error).
  std::vector<std::string> tool_names(std::string* error);

  /// Runs one agent turn on the member (a gateway). Only session_id,
  /// prompt, provider, model, base_url, max_iterations, toolsets and
  /// save_trajectory of `call` travel.
  turn_outcome run_turn(const turn_call& call);

  /// The member list as a JSON array (docs/cluster.md); "" on error.
  std::string members_json(std::string* error);

  /// Forwards one dashboard API request to the member (a gateway that
  /// serves the dashboard API) and waits for its answer. False with
  /// `*error` when the member is lost or refuses. `mibyan dashboard
  /// --connect` calls it from one thread at a time.
  bool dashboard(const dashboard_request& req, dashboard_answer* out,
                 std::string* error);

  /// Interrupts the running calls of `session_id` on its worker.
  void interrupt(const std::string& session_id, const std::string& reason);

  struct impl;

private:
  explicit cluster_client(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace mibyan
