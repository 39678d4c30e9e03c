// File: runtime/cron_internal.hpp
//
// The parts of the scheduler shared by its files (runtime/cron_scheduler.hpp
// is the interface):
//   cron_scheduler.cpp  the scheduler actor: lease, engine, timer, persistence
//   cron_run.cpp        one run: a prompt job's turn or a script job's cell,
//                       approvals, outcome, delivery
//   cron_service.cpp    the verbs (cron/cron_service.hpp): to the actor, to
//                       another process's scheduler, or to the store
//   cron_requests.cpp   verbs handed between processes through the store dir
// Includes CAF: only those .cpp files include it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <condition_variable>
#include <vector>
#include <string>

#include "caf/actor.hpp"

#include "cron/engine.hpp"
#include "runtime/cron_changes.hpp"
#include "runtime/cron_delivery.hpp"
#include "runtime/cron_lease.hpp"
#include "runtime/cron_scheduler.hpp"
#include "runtime/runtime_impl.hpp"

namespace mibyan {

struct cron_sched_state;

/// The scheduler's store writes, in submission order, on a thread of their
/// own: an fsync'd LMDB commit (tens of milliseconds on a busy disk) never
/// holds the scheduler, so a job due meanwhile still starts on time. What
/// is queued while a commit runs goes into the next one (one transaction,
/// one fsync). `after` callbacks run on the writer's thread once their
/// changes are stored (or failed: logged). The destructor stores what is
/// queued, then joins.
class cron_store_writer {
public:
  cron_store_writer(std::shared_ptr<session_store> store, size_t keep);
  ~cron_store_writer();
  cron_store_writer(const cron_store_writer&) = delete;
  cron_store_writer& operator=(const cron_store_writer&) = delete;

  void submit(cron_changes ch, std::function<void()> after);

private:
  void run();

  std::shared_ptr<session_store> store_;
  size_t keep_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<std::pair<cron_changes, std::function<void()>>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

/// What the runtime, the verbs, the runs and the actor share. Owned by the
/// runtime's impl (`cron_host_of`); runs hold it weakly.
struct cron_host {
  runtime_impl* p = nullptr;
  /// The runtime object (set by start_cron_scheduler: runs need its
  /// public API). Null until then.
  runtime* rt = nullptr;
  std::shared_ptr<session_store> store;
  std::string store_dir;
  cron_scheduler_options opts;
  /// opts.clock, or the system clock.
  std::function<cron_time()> clock;
  /// Webhook waits stop when the scheduler stops.
  delivery_stop stop;
  /// The scheduler holds the lease and answers verbs.
  std::atomic<bool> active{false};
  std::atomic<bool> stopped{false};

  std::mutex mtx;
  caf::actor actor;               // guarded by mtx
  bool started = false;           // guarded by mtx
  uint64_t next_op = 0;           // guarded by mtx
  /// Work for the actor, run in its context in arrival order.
  std::map<uint64_t, std::function<void(cron_sched_state&)>> ops;
  /// Verbs of other processes (cron_requests.cpp).
  std::unique_ptr<cron_change_watcher> requests;
  /// The verbs (cron_service.cpp), made on first use.
  std::shared_ptr<cron_service> service; // guarded by mtx

  /// Queues `fn` for the actor; false when the scheduler is not running
  /// (then `fn` is dropped).
  bool post(std::function<void(cron_sched_state&)> fn);
};

/// The host of `p`, made on first use (never null).
std::shared_ptr<cron_host> cron_host_of(runtime_impl& p);

/// The actor's state (cron_scheduler.cpp).
struct cron_sched_state {
  std::shared_ptr<cron_host> host;
  std::unique_ptr<cron_engine> engine;
  std::unique_ptr<cron_lease> lease;
  /// The actor itself, for its own timers and requests.
  caf::actor self_handle;
  caf::event_based_actor* self = nullptr;
  uint64_t timer_gen = 0;
  int64_t armed_ms = 0;
  int64_t wakes = 0;
  int64_t finished = 0;
  /// Runs going: run id -> session id.
  std::map<std::string, std::string> running;

  /// Changes not stored yet, in call order, and whether a flush message is
  /// on its way (see defer).
  cron_changes pending;
  bool flush_queued = false;

  /// The store writes (made when the lease is taken).
  std::unique_ptr<cron_store_writer> writer;

  /// Hands `ch` to the writer now, after what is pending; `after` runs
  /// once it is stored (a failure is logged: the next change of the job
  /// rewrites its record).
  void persist(cron_changes ch, std::function<void()> after = {});
  /// Queues `ch` to be stored with whatever else the actor changes before
  /// its mailbox's next flush message: a burst of due, started and finished
  /// runs is one transaction (one fsync), and runs start before it.
  void defer(cron_changes ch);
  /// Stores what is pending.
  void flush();
  /// Starts what is due and re-arms the timer.
  void tick();
  /// The end of run `run_id`.
  void finished_run(const std::string& run_id, const cron_outcome& out);

  static const char* name;
};

/// Starts run `s` in session `session_id` (cron_run.cpp); its outcome comes
/// back to the actor as a posted op. Called in the actor's context.
void launch_cron_run(cron_sched_state& st, const cron_start& s,
                     const std::string& session_id);

/// Applies a verb of another process (cron_requests.cpp) in the actor.
void serve_cron_requests(cron_sched_state& st);

/// What became of a request handed to another process.
struct cron_request_outcome {
  /// Withdrawn untaken because `holder_gone` said the scheduler is gone:
  /// nothing was applied; the caller may take the lease itself.
  bool withdrawn = false;
  /// The reply object ({"ok":true,"id":...} or {"ok":false,"code":...,
  /// "error":...}) when not withdrawn.
  json::value reply;
};

/// Hands `op` with `args` to the scheduler of `store_dir` running in
/// another process and waits for its answer until `deadline`. Every
/// 100 ms while the request lies untaken, `holder_gone` (may be empty) is
/// asked whether the scheduler's lease lapsed (its holder died): then the
/// request is withdrawn (outcome.withdrawn). unavailable when nobody
/// answers by the deadline; `who` (may be empty) names the scheduler in
/// that error. Blocking (file I/O, sleeps): never on a CAF scheduler
/// thread.
result<cron_request_outcome>
send_cron_request(const std::string& store_dir, const std::string& op,
                  const json::value& args,
                  std::chrono::steady_clock::time_point deadline,
                  const std::function<bool()>& holder_gone,
                  const std::function<std::string()>& who);

/// Runs one verb against the engine (actor side of both paths): `op` is
/// add|update|remove|pause|resume|run_now. `reply` gets {"ok":true,"id"}
/// once the change is stored (on the writer's thread), or the failure
/// {"ok":false,"code","error"} at once.
void apply_cron_verb(cron_sched_state& st, const std::string& op,
                     const json::value& args,
                     std::function<void(json::value)> reply);

} // namespace mibyan
