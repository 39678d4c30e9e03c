// File: cron/cron_service.hpp
//
// The verbs of scheduled jobs as the rest of the node uses them (docs/cron.md,
// "Running, approvals and delivery"): the `cronjob` tool, `mibyan cron ...`
// and the dashboard's /ui/api/jobs call these, never the engine or the
// store's cron records directly. CAF-free, so tools/ (layer 4) may hold one.
//
// Implementations (runtime/cron_scheduler.hpp, cron-run):
// * the runtime's own: `cron_of(runtime&)`. While this process runs the
//   scheduler of its store (it holds the store's scheduler lease), every
//   verb goes to the scheduler actor and its engine (cron/engine.hpp), which
//   persists the changes and re-arms its timer at once. While another
//   process runs it, the verb is handed to that process (through the store
//   directory, see open_cron_service) and answered by it. While nobody runs
//   it, the verb is applied to the store directly and the scheduler that
//   starts later loads the result.
// * `open_cron_service(store, store_dir)` for a process without a runtime
//   (the CLI): the last two cases.
//
// Errors: invalid_argument (a bad definition or patch, naming the field;
// a prompt refused by check_prompt_text is permission_denied), not_found
// (unknown job id), already_exists, unavailable (run_now of a job already
// running or queued; the scheduler of the store did not answer; the store
// is unavailable). Messages are for people.
//
// Thread safety: every member function may be called from any thread but a
// CAF scheduler thread or an I/O thread: they block until the change is
// stored (a few milliseconds; at most cron_service::answer_timeout when the
// scheduler runs in another process). The cronjob tool calls them from its
// blocking-pool thread, the dashboard from serve's store threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "base/json.hpp"
#include "base/status.hpp"
#include "cron/job.hpp"

namespace mibyan {

/// Where the scheduler of a store runs, for listings.
struct cron_scheduler_info {
  /// This process runs it.
  bool here = false;
  /// The description its holder wrote ("pid 123 node n1a2b3c4d since
  /// 2026-12-06T07:00:00Z"; "" when nobody runs it).
  std::string holder;
};

class cron_service {
public:
  /// How long a verb waits for the scheduler of another process.
  static constexpr std::chrono::seconds answer_timeout{10};

  virtual ~cron_service() = default;

  /// Adds a job from its definition (cron_job_from_json's result: id may be
  /// empty, state is ignored). The prompt is checked with
  /// check_prompt_text first. Returns the job as stored (id, next_run_ms).
  virtual result<cron_job> add(cron_job def) = 0;
  /// Applies `patch` (cron_job_patch rules: the members present change;
  /// a changed prompt is checked again). Returns the job as stored.
  virtual result<cron_job> update(const std::string& id,
                                  const json::value& patch) = 0;
  /// Removes the job and its run history (a run in progress finishes; its
  /// end is ignored).
  virtual status remove(const std::string& id) = 0;
  /// Pauses ("" = "paused by a user"). Idempotent.
  virtual result<cron_job> pause(const std::string& id,
                                 const std::string& reason) = 0;
  /// Resumes a paused job (failure count and pending retry cleared).
  virtual result<cron_job> resume(const std::string& id) = 0;
  /// Queues a run now (trigger manual); it starts as soon as a run slot is
  /// free. unavailable when the job is running or queued already, or when
  /// no scheduler runs for the store (nothing would run it).
  virtual result<cron_job> run_now(const std::string& id) = 0;

  /// The job with its state (next_run_ms, last_status, ...).
  virtual result<cron_job> get(const std::string& id) = 0;
  /// Every job, in id order; undecodable records are listed in `damaged`.
  virtual result<cron_job_list> list() = 0;
  /// The job's runs, newest first (see session_store::list_cron_runs).
  virtual result<std::vector<cron_run>> history(const std::string& id,
                                                size_t limit, size_t offset,
                                                bool* more) = 0;

  /// Where the scheduler runs.
  virtual cron_scheduler_info scheduler() = 0;
};

} // namespace mibyan
