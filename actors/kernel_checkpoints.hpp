// File: actors/kernel_checkpoints.hpp
//
// The host side of kernel checkpoints (docs/execute_code.md,
// "Checkpoints"): one object per runtime, shared by the kernel registry,
// the kernel brokers and (in a cluster) the member actor.
//
//   * Sealing: a checkpoint leaves the host only as an envelope
//     "MCKE1 <hex HMAC-SHA256> <execution count>\n<payload>", the HMAC over
//     the session id, the count and the payload under a key the host holds
//     (a per-installation key in $MIBYAN_HOME/checkpoint.key, 0600, or one
//     derived from the cluster key). The key never reaches a kernel: the
//     envelope is opened (and refused when the HMAC does not match) here,
//     before the payload is written for the kernel to read.
//   * Where checkpoints go: the local checkpoint store
//     (storage/checkpoint_store.hpp), or, on a cluster worker, the
//     session's gateway (`set_remote`, installed by cluster/).
//   * How old a checkpoint is: the highest execution count seen per
//     session (`note_count`), compared with the checkpoint's own.
//
// Thread safety: every member may be called from any thread. `save`,
// `fetch`, `drop` and `load_or_create_key` block (disk, network): call
// them on the blocking pool, never on a CAF scheduler or I/O thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/blocking_pool.hpp"
#include "base/status.hpp"
#include "storage/checkpoint_store.hpp"

namespace mibyan {

/// What a kernel about to start gets from `kernel_checkpoints::fetch`.
struct checkpoint_restore {
  /// A checkpoint exists for the session.
  bool found = false;
  /// Verified payload (the runner's checkpoint file), when `refused` is "".
  std::string payload;
  uint64_t seq = 0;
  /// Execution count when it was taken, and how many cells ran after it
  /// as far as this host knows (0 when it does not know).
  int64_t execution_count = 0;
  int64_t age_cells = 0;
  /// Why the checkpoint was refused (HMAC mismatch, malformed envelope,
  /// the store or the gateway failed); the kernel then starts fresh.
  std::string refused;
};

class kernel_checkpoints {
public:
  /// `enabled`: code_execution.checkpoint resolved for this process;
  /// `max_bytes`: code_execution.checkpoint_max_mb in bytes.
  kernel_checkpoints(bool enabled, int64_t max_bytes);
  /// Waits for the store jobs that are running (submit_store_job); the
  /// queued ones are dropped.
  ~kernel_checkpoints();

  /// Runs `job` on the hub's own store threads (at most two, started on
  /// demand), not on the runtime's blocking pool: a cluster member serves
  /// store requests there, and the requests of this node's own kernels
  /// come from pool threads that block until they are answered, so with
  /// the pool full (runtime.blocking_threads: 1) a job queued behind them
  /// would never run. A job must wait on nothing but the store. False
  /// once the hub is going away.
  bool submit_store_job(std::function<void()> job);
  /// Refuses store jobs from now on, drops the queued ones and waits for
  /// the running ones (they may message actors: called by the runtime
  /// before its actor system ends). Idempotent.
  void stop_store_jobs();

  bool enabled() const;
  /// Turns checkpoints on or off (a cluster member resolves "auto" to on).
  void set_enabled(bool on);
  int64_t max_bytes() const { return max_bytes_; }

  /// The HMAC key (raw bytes). Until one is set nothing is sealed or
  /// opened (save and fetch fail).
  void set_key(std::string key);
  bool has_key() const;
  /// Reads $MIBYAN_HOME/checkpoint.key, creating it (32 random bytes,
  /// hex, 0600) when missing; errors name the file.
  static result<std::string> load_or_create_key(const std::string& home);
  /// The key a cluster derives from its shared key, so every member opens
  /// what another sealed.
  static std::string cluster_key(const std::string& shared_key);

  /// The local store (null: none; save and fetch fail unless remote).
  void set_store(std::shared_ptr<checkpoint_store> store);
  std::shared_ptr<checkpoint_store> store() const;

  /// Cluster workers: checkpoints go to and come from the session's
  /// gateway. `put` gets the sealed envelope; `get` returns the latest
  /// envelope (found=false when none) and `known_count`: the envelope's
  /// own count plus the cells the keeper knows ran past it.
  struct remote_fetch {
    bool found = false;
    uint64_t seq = 0;
    std::string envelope;
    int64_t known_count = -1;
  };
  using put_fn = std::function<status(const std::string& session,
                                      uint64_t seq, std::string envelope)>;
  using get_fn =
    std::function<result<remote_fetch>(const std::string& session)>;
  using drop_fn = std::function<status(const std::string& session)>;
  void set_remote(put_fn put, get_fn get, drop_fn drop);

  /// Seals and stores checkpoint `seq` of `session` (blocking).
  status save(const std::string& session, uint64_t seq,
              int64_t execution_count, const std::string& payload);
  /// Stores an envelope sealed elsewhere, after checking it (the gateway
  /// side of a worker's save; blocking).
  status store_sealed(const std::string& session, uint64_t seq,
                      const std::string& envelope);
  /// The latest checkpoint of `session`, opened and verified (blocking).
  checkpoint_restore fetch(const std::string& session);
  /// The latest sealed envelope of `session` in the local store (the
  /// gateway side of a worker's fetch; blocking).
  result<remote_fetch> fetch_sealed(const std::string& session);
  /// Drops the checkpoints of `session` (reset: true; blocking).
  status drop(const std::string& session);

  /// Where the count of a session this process has not seen run comes
  /// from after a restart: the execution count of the session's last
  /// execute_code result in its stored history (-1: none). Installed by
  /// the runtime; called on pool threads by fetch and fetch_sealed.
  using history_count_fn = std::function<int64_t(const std::string& session)>;
  void set_history_count(history_count_fn fn);

  /// The session reached execution count `count` (a cell started or
  /// answered with it); kept as the highest seen.
  void note_count(const std::string& session, int64_t count);
  /// The highest count seen for `session`, or -1.
  int64_t known_count(const std::string& session) const;
  /// known_count, or (nothing seen in this process) what the session's
  /// stored history says (set_history_count). Blocking.
  int64_t known_or_recorded_count(const std::string& session) const;
  /// The session's stored checkpoint holds the state after cell `count`
  /// (a checkpoint of it was stored, or the cell changed nothing); kept
  /// as the highest seen. The age of a restored checkpoint is the cells
  /// known to have run past max(its own count, this).
  void note_covered(const std::string& session, int64_t count);
  /// The highest covered count of `session`, or -1.
  int64_t covered_count(const std::string& session) const;

  /// A number above every checkpoint number this process handed out
  /// before, and above the wall clock in microseconds, so numbers keep
  /// growing across restarts and kernels.
  uint64_t next_seq();

  /// Seals `payload` (exposed for tests and tools that plant checkpoints).
  std::string seal(const std::string& session, int64_t execution_count,
                   const std::string& payload) const;
  /// Opens an envelope: the payload and count, or the reason it is
  /// refused.
  result<std::pair<int64_t, std::string>>
  open(const std::string& session, const std::string& envelope) const;

private:
  checkpoint_restore open_into(const std::string& session, uint64_t seq,
                               const std::string& envelope,
                               int64_t known) const;

  const int64_t max_bytes_;
  mutable std::mutex mtx_;
  bool enabled_;
  std::string key_;
  std::shared_ptr<checkpoint_store> store_;
  put_fn put_;
  get_fn get_;
  drop_fn drop_;
  history_count_fn history_count_;
  std::map<std::string, int64_t> counts_;
  std::map<std::string, int64_t> covered_;
  uint64_t last_seq_ = 0;
  blocking_pool store_jobs_{2};
};

/// Whether code_execution.checkpoint turns checkpoints on for a process
/// (`in_cluster`: a cluster member).
bool checkpoints_wanted(const std::string& setting, bool in_cluster);

} // namespace mibyan
