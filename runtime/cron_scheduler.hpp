// File: runtime/cron_scheduler.hpp
//
// The scheduler of scheduled jobs in a node (docs/cron.md, "Running,
// approvals and delivery" and "In a cluster"). One actor per runtime owns
// the engine (cron/engine.hpp): it sleeps on a CAF timer until the engine's
// next wake-up (never a polling loop; at most `max_sleep`, so that a step
// of the wall clock is noticed), starts the due runs, records their
// outcomes and re-arms when a job changes. A run of a prompt job is its own
// conversation (runtime::run_turn_async, source "cron", a new session with
// {"cron_job_id","cron_run_id"} metadata, the job's cwd, toolsets, model and
// provider, its skills loaded); a script job runs its script with
// execute_code in a new session, without a model. Approvals in a run follow
// approvals.cron_mode (or wait for the dashboard with cron.approvals: http);
// clarify is unavailable. The answer is delivered (runtime/cron_delivery.hpp).
//
// One scheduler per store: the actor runs jobs only while it holds the
// store's lease (runtime/cron_lease.hpp); a standby tries again every
// `lease_retry`. Job changes made by other processes reach it through
// runtime/cron_changes.hpp.
//
// Started by `mibyan serve`, `mibyan node --role gateway|all` and `mibyan
// cron run`; stopped by the runtime's destructor (running runs are cut;
// their records stay "running" and are found interrupted at the next
// start). CAF-free header.
//
// Thread safety: all functions may be called from any thread except a CAF
// scheduler or I/O thread (start, stop and the service's verbs block
// briefly).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "mibyan/turn.hpp"
#include "cron/cron_service.hpp"
#include "cron/schedule.hpp"

namespace mibyan {

class runtime;
class session_store;
struct options;

struct cron_scheduler_options {
  /// Now. Empty: the system clock. Tests pass a manual clock and call
  /// cron_clock_changed after moving it.
  std::function<cron_time()> clock;
  /// Written into the lease file with the pid ("node n1a2b3c4d").
  std::string holder;
  /// How often a standby tries to take the lease.
  std::chrono::milliseconds lease_retry{5000};
  /// Longest sleep between two looks at the engine (clock steps are noticed
  /// within it; an early wake-up finds nothing due).
  std::chrono::milliseconds max_sleep{std::chrono::minutes{1}};
  /// Check that a job's cwd exists before its run (off on a gateway whose
  /// tools run on workers, where the directory lives).
  bool check_cwd = true;
  /// Delays of the retries after an unreachable provider (empty: the
  /// engine's 5, 15, 30 minutes).
  std::vector<std::chrono::milliseconds> retry_delays;
  /// The node's provider overrides (`--provider`, `--model`, `--base-url`,
  /// `--api-key` of serve and node), used by runs whose job names none
  /// (each "" = the configuration's).
  provider_config provider;
};

/// Starts the scheduler of `rt` (idempotent: a second call does nothing).
/// Errors: the store is unavailable. Not holding the lease is not an
/// error: the scheduler waits as a standby. Returns once the first attempt
/// at the lease was made (at most 10 s): call it from a plain thread, never
/// from an actor.
status start_cron_scheduler(runtime& rt, cron_scheduler_options opts = {});

/// Stops the scheduler of `rt` (the runtime's destructor does it too).
/// Running runs are interrupted and left "running" in the store.
void stop_cron_scheduler(runtime& rt);

/// The verbs of `rt`'s jobs (cron/cron_service.hpp). Never null; works
/// whether or not the scheduler runs in this process.
std::shared_ptr<cron_service> cron_of(runtime& rt);

/// The manual clock moved: the scheduler looks at the engine now.
void cron_clock_changed(runtime& rt);

/// What the scheduler of `rt` is doing (tests, benchmarks, the console).
struct cron_scheduler_stats {
  /// Started in this process.
  bool started = false;
  /// Holds the lease and runs jobs.
  bool active = false;
  int64_t jobs = 0;
  int64_t running = 0;
  int64_t waiting = 0;
  /// Runs finished since start (all statuses).
  int64_t finished = 0;
  /// The armed wake-up (Unix ms; 0 = none).
  int64_t next_wake_ms = 0;
  /// Timer wake-ups handled since start.
  int64_t wakes = 0;
};
/// Asks the scheduler (at most 5 s; a default value when it does not
/// answer or is not started).
cron_scheduler_stats cron_stats(runtime& rt);

/// The verbs over a store without a runtime (the CLI): handed to the
/// process that runs the scheduler of `store_dir` when there is one, else
/// applied to the store directly.
std::shared_ptr<cron_service>
open_cron_service(std::shared_ptr<session_store> store,
                  const std::string& store_dir, const options& cfg);

} // namespace mibyan
