// File: runtime/cron_lease.hpp
//
// The scheduler lease of one job store (docs/cron.md, "In a cluster"): at
// most one scheduler runs the jobs of a store at a time, whichever process
// holds it (`mibyan serve`, a gateway node, `mibyan cron run`, on one
// $MIBYAN_HOME or several gateways sharing one). The lease is an exclusive
// flock on `<store dir>/cron.lock`: the kernel releases it when its holder
// exits or is killed, so a dead scheduler never keeps it, and a standby
// takes over at its next attempt. The holder writes its description (pid,
// node id, since) into the file for `mibyan cron` listings.
//
// Thread safety: a lease object is owned by one actor; try_acquire and
// holder_of may run on any thread. CAF-free; never throws.
#pragma once

#include <memory>
#include <string>

#include "base/status.hpp"

namespace mibyan {

class cron_lease {
public:
  /// Takes the lease of the store in `store_dir` for `holder` (a short
  /// description: "pid 123 node n1a2b3c4d"). unavailable with the current
  /// holder's description when another process (or another lease object of
  /// this process) holds it; another code when the file cannot be opened.
  static result<std::unique_ptr<cron_lease>>
  try_acquire(const std::string& store_dir, const std::string& holder);

  /// The description written by the current holder ("" when none or the
  /// file is unreadable). Advisory: it may be stale after a crash.
  static std::string holder_of(const std::string& store_dir);

  /// Releases the lease (closes the file).
  ~cron_lease();
  cron_lease(const cron_lease&) = delete;
  cron_lease& operator=(const cron_lease&) = delete;

private:
  explicit cron_lease(int fd) : fd_(fd) {}
  int fd_ = -1;
};

} // namespace mibyan
