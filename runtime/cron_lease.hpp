// File: runtime/cron_lease.hpp
//
// The scheduler lease of one job store (docs/cron.md, "In a cluster"): at
// most one scheduler runs the jobs of a store at a time, whichever process
// holds it (`mibyan serve`, a gateway node, `mibyan cron run`, on one
// $MIBYAN_HOME or several gateways sharing one store). The lease is the
// row `cron:scheduler` of the store's leases (storage/session_lease.hpp),
// so it works wherever the store is shared: processes on one disk over one
// LMDB directory, or machines over one PostgreSQL database. Its holder
// renews it every third of its ttl (cluster.failure_timeout_ms, at least
// 1 s: see ttl_for); a holder that dies stops renewing and a standby takes
// it over once it lapsed, at its next attempt. The holder's
// description (pid, node id, since) is the lease's holder, for `mibyan
// cron` listings.
//
// Thread safety: a lease object is owned by one actor or thread;
// try_acquire and holder_of may run on any thread. Every call is store
// work (a write transaction): call it where blocking is allowed (the
// scheduler is a detached actor; the CLI). CAF-free; never throws.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.hpp"

namespace mibyan {

class session_store;
class session_lease_store;

class cron_lease {
public:
  /// The lease's name in the store.
  static constexpr const char* name = "cron:scheduler";
  /// The ttl of `cfg_failure_timeout_ms` (cluster.failure_timeout_ms): a
  /// holder silent that long has lost the lease, as a cluster member is
  /// lost; at least min_ttl_ms, so renewals stay rare.
  static constexpr int64_t min_ttl_ms = 1000;
  static int64_t ttl_for(int64_t cfg_failure_timeout_ms) {
    return cfg_failure_timeout_ms < min_ttl_ms ? min_ttl_ms
                                               : cfg_failure_timeout_ms;
  }

  /// Takes the lease of `store`'s scheduler for `holder` (a short
  /// description: "pid 123 node n1a2b3c4d since ...") for `ttl_ms` (see
  /// ttl_for; renew() extends it by as much). unavailable with the
  /// current holder's description when another holds it; the store's
  /// error (or unavailable: a backend without leases) otherwise.
  static result<std::unique_ptr<cron_lease>>
  try_acquire(session_store& store, const std::string& holder,
              int64_t ttl_ms);

  /// The description of the live holder ("" when none, or unreadable).
  static std::string holder_of(session_store& store);

  /// Renews the lease (call every ttl_ms / 3). unavailable when
  /// another holder took it (this one lapsed: stop scheduling), or the
  /// store's error.
  status renew();

  int64_t ttl_ms() const { return ttl_ms_; }

  /// Releases the lease.
  ~cron_lease();
  cron_lease(const cron_lease&) = delete;
  cron_lease& operator=(const cron_lease&) = delete;

private:
  cron_lease(std::shared_ptr<session_lease_store> leases, std::string holder,
             uint64_t token, int64_t ttl_ms)
    : leases_(std::move(leases)), holder_(std::move(holder)), token_(token),
      ttl_ms_(ttl_ms) {}
  std::shared_ptr<session_lease_store> leases_;
  std::string holder_;
  uint64_t token_ = 0;
  int64_t ttl_ms_ = min_ttl_ms;
};

} // namespace mibyan
