// File: cluster/client.hpp
//
// A client of a Mibyan cluster, for `mibyan tool|run|nodes --connect`
// (docs/cluster.md): connects to one member, proves the cluster key with
// the same handshake as a node (role "client") and sends calls, turns and
// member queries to it. Given several addresses ("A,B,C") it connects to
// the first that answers, and when that member is lost it connects to the
// next one and sends the call or turn again (docs/cluster.md, "Failover").
// CAF-free header. Not thread-safe: one caller (interrupt excepted).
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
  /// Connects to HOST:PORT (or the first of "HOST:PORT,HOST:PORT,..."
  /// that answers) and authenticates. Returns null and sets `*error` (one
  /// line) on failure; `*refused` tells a refusal by a node (key,
  /// protocol: final, no other address is tried) from a connection
  /// failure (of every address).
  static std::unique_ptr<cluster_client>
  connect(const std::string& address, const options& opts, std::string* error,
          bool* refused = nullptr);

  /// The member this client talks to now (its "HOST:PORT" as given).
  const std::string& current_address() const;

  ~cluster_client();

  /// Runs one tool call on the cluster (the session's worker). A lost
  /// member is an error result, never a hang; with several addresses the
  /// call is sent again to the next member that answers (a call that was
  /// running when its member died may then have run twice: tools that must
  /// not repeat should be called through a turn, whose interrupted calls
  /// are reported, never re-run).
  tool_outcome call_tool(const tool_call_request& call);

  /// The names of the tools the member offers ("" on error).
  std::vector<std::string> tool_names(std::string* error);

  /// Runs one agent turn on the member (a gateway). Only session_id,
  /// prompt, provider, model, base_url, max_iterations, toolsets and
  /// save_trajectory of `call` travel. With several addresses, a member
  /// lost before it answered is replaced by the next one and the turn is
  /// sent again: the session's history then shows the interrupted turn
  /// (its tool calls reported as interrupted by a gateway loss) and the
  /// prompt once more.
  turn_result run_turn(const turn_call& call);

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
  /// The member was lost: connects to the next address that answers (each
  /// other one tried once, in order). False when none does.
  bool fail_over();
  std::unique_ptr<impl> impl_;
  options opts_;
  std::vector<std::string> addresses_;
  size_t at_ = 0;
};

} // namespace mibyan
