// File: runtime/session_lease_keeper.hpp
//
// Turns of one session over several gateways (docs/cluster.md, "Several
// gateways"): before a gateway runs a turn it takes the session's lease
// (storage/session_lease.hpp). The keeper decides, per turn, whether it
// runs here (the lease is this node's), is forwarded to the live holder,
// waits for the holder's lease, or takes the session over once that lease
// lapsed; renews the leases of sessions with running turns every third of
// the ttl; releases a lease when the session's last turn here ends; and
// ends the leases of a member the cluster declared lost, so a waiting turn
// takes over at once.
//
// The runtime installs nothing by itself: a cluster gateway enables it
// (cluster/node.cpp). Single-node use never takes leases.
//
// Thread safety: every member may be called from any thread. The keeper
// owns one thread on which it does its store work (blocking writes) in
// order and runs the `decide` callbacks; callbacks must not block long.
// CAF-free; never throws.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.hpp"
#include "mibyan/runtime.hpp"

namespace mibyan {

class runtime;
class session_lease_store;
class lease_tokens;

/// Sends a turn to gateway `node` (which holds the session's lease) and
/// calls `done` once: `delivered` false when `node` is not a live gateway
/// member or was lost before it answered (the turn may then have run
/// partly there; the keeper waits for its lease to lapse).
using turn_forwarder = std::function<void(
  const std::string& node, const turn_call& call,
  std::function<void(bool delivered, turn_result out)> done)>;

struct lease_keeper_settings {
  /// This gateway's node id (the leases' holder).
  std::string holder;
  /// Lease ttl: a dead holder's lease lapses within it
  /// (cluster.failure_timeout_ms).
  int64_t ttl_ms = 3000;
  /// Longest a turn waits for a lease another live gateway keeps
  /// (cluster.lease_wait_ms); then it fails, unavailable.
  int64_t wait_ms = 120000;
  turn_forwarder forward;
};

/// What the keeper decided for one turn.
struct lease_admission {
  enum class kind : uint8_t { run_here, forward, fail };
  kind what = kind::fail;
  /// run_here: the token of this node's lease.
  uint64_t token = 0;
  /// run_here: the session was written under another token since this
  /// node last ran it (or never ran here): a cached conversation is stale.
  bool new_token = false;
  /// run_here: taken over from a holder whose lease lapsed (it died):
  /// `previous_holder` names it.
  bool took_over = false;
  std::string previous_holder;
  /// forward: the live holder.
  std::string node;
  /// fail: why (unavailable when the store or the holder keeps it).
  status error;
};

class session_lease_keeper {
public:
  session_lease_keeper(std::shared_ptr<session_lease_store> leases,
                       std::shared_ptr<lease_tokens> tokens,
                       lease_keeper_settings s);
  /// Stops the thread; admissions still waiting fail (unavailable).
  ~session_lease_keeper();
  session_lease_keeper(const session_lease_keeper&) = delete;
  session_lease_keeper& operator=(const session_lease_keeper&) = delete;

  /// Decides where a turn of `session` runs; `decide` runs once, on the
  /// keeper's thread. With `may_forward` false (a turn another gateway
  /// forwarded here, or one whose holder could not be reached) it never
  /// answers forward: it waits for the lease or takes it over. Every
  /// run_here must be matched by one `finished`.
  void admit(const std::string& session, bool may_forward,
             std::function<void(lease_admission)> decide);
  /// A turn admitted run_here ended: the lease is released when it was the
  /// session's last turn here.
  void finished(const std::string& session);
  /// Cluster member `node` was declared lost: its leases end now.
  void holder_lost(const std::string& node);
  /// Runs `job` on the keeper's thread, after the work queued before it.
  void post(std::function<void()> job);

  const lease_keeper_settings& settings() const;
  const std::shared_ptr<session_lease_store>& leases() const;

  struct impl;

private:
  std::unique_ptr<impl> p_;
};

/// Makes `rt` one of several gateways over its store: its turns take the
/// session's lease (above). Called once, before turns arrive. Errors: the
/// store is unavailable or has no leases.
status enable_session_leases(runtime& rt, lease_keeper_settings s);

/// Runs a turn another gateway forwarded to this one: never forwarded
/// again (waits for the lease or takes the session over). Without leases
/// enabled it is run_turn_async.
void run_forwarded_turn(runtime& rt, const turn_call& call,
                        std::function<void(turn_result)> done);

/// Member `node` was lost (no-op without leases). Any thread.
void session_holder_lost(runtime& rt, const std::string& node);

} // namespace mibyan
