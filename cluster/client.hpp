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

#include "base/status.hpp"
#include "cluster/node.hpp"
#include "config/options.hpp"
#include "mibyan/runtime.hpp"

namespace mibyan {

class cluster_client {
public:
  /// Connects to HOST:PORT (or the first of "HOST:PORT,HOST:PORT,..."
  /// that answers) and authenticates. Fails with one line and the code:
  ///   invalid_argument   an address is not HOST:PORT;
  ///   config_invalid     no cluster key is configured;
  ///   permission_denied  a node refused (wrong key, another protocol
  ///                      version or message types, its own refusal);
  ///   unavailable        no member answered (each address's reason);
  ///   internal           the actor system did not start, or a node
  ///                      answered the handshake without a member.
  /// The first two refusals are final (refused()): no other address is
  /// tried after them.
  static result<std::unique_ptr<cluster_client>>
  connect(const std::string& address, const options& opts);

  /// Whether a failed connect was refused (config_invalid or
  /// permission_denied: fix the key or the versions) rather than not
  /// answered; the commands exit 2 for a refusal, 1 otherwise.
  static bool refused(const status& st);

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

  /// The names of the tools the member offers. Fails with unavailable when
  /// every member is lost, else with the member's error's code.
  result<std::vector<std::string>> tool_names();

  /// Runs one agent turn on the member (a gateway). Only session_id,
  /// prompt, provider, model, base_url, max_iterations, toolsets and
  /// save_trajectory of `call` travel. With several addresses, a member
  /// lost before it answered is replaced by the next one and the turn is
  /// sent again: the session's history then shows the interrupted turn
  /// (its tool calls reported as interrupted by a gateway loss) and the
  /// prompt once more.
  turn_result run_turn(const turn_call& call);

  /// The member list as a JSON array (docs/cluster.md). Fails as
  /// tool_names does.
  result<std::string> members_json();

  /// Forwards one dashboard API request to the member (a gateway that
  /// serves the dashboard API) and waits for its answer. unavailable when
  /// the member is lost (no fail-over), else the member's error's code
  /// when it refuses.
  /// `mibyan dashboard --connect` calls it from one thread at a time.
  result<dashboard_answer> dashboard(const dashboard_request& req);

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
