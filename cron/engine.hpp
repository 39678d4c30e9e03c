// File: cron/engine.hpp
//
// The scheduling engine of scheduled jobs (docs/cron.md, "Engine rules"):
// which job runs when, without CAF and without a thread of its own. The
// scheduler actor (cron-run) owns one engine, asks it when to wake
// (`next_wake`), and at that time calls `due`, starts the runs it returns,
// and reports each run's end with `finished`. Time comes from an INJECTED
// CLOCK, so tests drive it without sleeping.
//
// Persistence contract: the engine never touches the store. Every call
// that changes something returns a `cron_changes` (storage/cron_record.hpp)
// that the caller persists, in the order the calls were made, with
// session_store::apply_cron_changes (one transaction). The engine's memory
// is the truth while it runs; the store is what a restart loads (`load`).
// A caller that fails to persist should log it; the next change of the
// same job rewrites the whole record.
//
// Rules (each tested in tests/cron_engine_test.cpp):
// * Slots: a job's next slot is schedule.next_after(last) where last is
//   the slot it just used or now, whichever is later: a job whose run
//   started late does not run again for the slots it missed.
// * No overlap: a slot that comes due while the job's run is still going
//   is recorded as a `skipped` run and the job moves to its next slot.
// * max_concurrent: at most that many runs at once. A due job beyond the
//   limit waits (in due order) and starts when a run finishes; it is not
//   skipped, and while it waits its later slots are not counted again.
//   Call `due` after each `finished`.
// * Catch-up (at `load`): a job whose next slot passed while the
//   scheduler was down, or whose run was interrupted by the stop, gets ONE
//   run at start-up with catch_up one (trigger catch_up), then continues
//   with its next slot after now. With catch_up none it gets a `skipped`
//   record and continues with its next slot after now; a one-shot that
//   was missed is then disabled.
// * Retries: a run that ends with `provider_unreachable` is recorded
//   `unreachable` and retried after 5, 15, then 30 minutes (attempts 1..3,
//   trigger retry); if the third retry is unreachable too the run is
//   recorded `failed`. A slot that comes due while a retry is pending
//   runs as that retry (the retry series continues).
// * Failures: ok and silent reset the consecutive-failure count; error,
//   failed and delivery_failed add one; unreachable (a retry follows),
//   skipped and interrupted leave it. At max_failures (> 0) the job is
//   paused with the reason "paused after N consecutive failures: <last
//   error>".
// * One-shots are disabled (enabled = false, next_run_ms = 0) once their
//   run finished for good (not while a retry is pending).
// * Clock going backwards: a job never runs a slot at or before the slot
//   it ran last (last_slot_ms), so no slot fires twice. After a backwards
//   step of at most 24 hours the jobs keep their next slots (they wait at
//   most the size of the step plus one period). A step of more than 24
//   hours below the latest time seen is taken as a corrected clock: every
//   job's next slot is recomputed from the new now, so nothing stalls for
//   the length of the step. The caller should re-arm its timer at most
//   every few minutes to notice clock steps at all (timers run on a
//   monotonic clock); an early wake-up is harmless (`due` returns nothing).
//
// Thread safety: not thread-safe; one owner (the scheduler actor) calls
// it. Cost: next_wake O(1); due O(k log n) for k due jobs; add about
// 45 us (validation and the prompt scan included); 10,000 jobs with
// 100-byte prompts take about 12 MiB (the records, their parsed schedules
// and one ordered-set entry each).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.hpp"
#include "cron/job.hpp"
#include "cron/schedule.hpp"
#include "storage/cron_record.hpp"

namespace mibyan {

enum class cron_catch_up : uint8_t { one, none };

struct cron_engine_options {
  /// Now. Required (the scheduler passes the system clock; tests a fake).
  std::function<cron_time()> clock;
  /// cron.max_concurrent (>= 1).
  int64_t max_concurrent = 4;
  /// cron.catch_up.
  cron_catch_up catch_up = cron_catch_up::one;
  /// cron.max_failures (0 = never pause).
  int64_t max_failures = 3;
  /// Delays of the retries after an unreachable provider.
  std::vector<std::chrono::milliseconds> retry_delays{
    std::chrono::minutes{5}, std::chrono::minutes{15},
    std::chrono::minutes{30}};
  /// A backwards step of the clock larger than this re-bases every job.
  std::chrono::milliseconds rebase_after = std::chrono::hours{24};
  /// Zone for jobs added without one ("" = the node's local zone).
  std::string default_zone;
  /// Run ids (default new_cron_run_id).
  std::function<std::string()> new_run_id;
};

/// A run the caller should start now: the run record (status running,
/// already in the returned changes) and a copy of its job.
struct cron_start {
  cron_run run;
  cron_job job;
};

/// How a run ended, as the runner saw it.
struct cron_outcome {
  /// ok, silent, error or delivery_failed (others are refused).
  std::string status = cron_run_status::ok;
  /// The provider could not be reached (connection refused, DNS, timeout
  /// before any answer): the engine retries (status is then ignored).
  bool provider_unreachable = false;
  std::string session_id;
  /// The final answer or script output (capped by the engine).
  std::string result;
  std::string error;
  /// Per-target delivery outcomes (JSON array text) or "".
  std::string delivery_json;
};

class cron_engine {
public:
  explicit cron_engine(cron_engine_options opts);

  /// Takes the stored jobs at start-up (all of them; paused and disabled
  /// ones are kept for listing but not scheduled) and applies the
  /// catch-up and interruption rules. Jobs whose schedule no longer
  /// parses are paused with the parse error as reason. Returns the changes
  /// (interrupted run records, catch-up state, skipped records).
  /// `find_run` (optional; e.g. session_store::get_cron_run) gives the
  /// stored record of an interrupted run, so that its rewrite keeps the
  /// session id, trigger and attempt; without it, or when it returns
  /// none, the record is rebuilt from the job's state.
  cron_changes load(std::vector<cron_job> jobs,
                    const std::function<std::optional<cron_run>(
                      const std::string& run_id)>& find_run = {});

  /// When `due` may next have work: the earliest pending slot or retry of
  /// a job that is not waiting for a free run slot. None when nothing is
  /// scheduled. May be in the past (then call `due` now).
  std::optional<cron_time> next_wake() const;

  /// Takes every job due at the clock's now: starts up to max_concurrent
  /// runs (`out`), records skipped slots, advances next slots. Returns
  /// the changes (the started runs and their jobs included).
  cron_changes due(std::vector<cron_start>& out);

  /// The runner created the run's session (optional; keeps it in the
  /// record before the run ends). Errors: unknown run.
  result<cron_changes> started(const std::string& run_id,
                               const std::string& session_id);

  /// The run ended. Applies the retry, failure and one-shot rules.
  /// Errors: unknown or finished run, a status not allowed here. A run
  /// whose job was removed meanwhile returns no changes.
  result<cron_changes> finished(const std::string& run_id,
                                const cron_outcome& outcome);

  // -- operations (the interfaces' verbs) -------------------------------------

  /// Adds a new job: fills id (when empty), created_ms/updated_ms (when
  /// 0), timezone (when empty), resets the state and computes next_run_ms
  /// from now. Validates (validate_cron_job). Errors: invalid job, an id
  /// that exists (already_exists), a one-shot whose time has passed.
  result<cron_changes> add(cron_job j);
  /// Replaces the definition of job `j.id` (the stored state is kept;
  /// next_run_ms recomputed from now when schedule or zone changed). A
  /// running run continues with the old definition.
  result<cron_changes> update(cron_job j);
  /// Removes the job and its history. A running run keeps going; its end
  /// is then ignored.
  result<cron_changes> remove(const std::string& id);
  /// Pauses (reason "" = "paused by a user"). Idempotent.
  result<cron_changes> pause(const std::string& id, std::string reason = {});
  /// Resumes a paused job: clears the reason, the failure count and a
  /// pending retry; next slot after now. Errors: a one-shot whose time has
  /// passed (it can still be run now).
  result<cron_changes> resume(const std::string& id);
  /// Queues a manual run (trigger manual), started by the next `due`
  /// (immediately when a run slot is free). Allowed for paused and
  /// disabled jobs; does not move the schedule. Errors: unknown job, the
  /// job is running or already queued (failed_precondition-like:
  /// status_code::unavailable).
  result<cron_changes> run_now(const std::string& id);

  // -- reading ----------------------------------------------------------------

  /// The job as the engine holds it (state up to date). Errors: unknown.
  result<cron_job> job(const std::string& id) const;
  /// All jobs, in id order.
  std::vector<cron_job> jobs() const;
  size_t job_count() const { return jobs_.size(); }
  size_t running_count() const { return running_.size(); }
  /// Jobs due but waiting for a free run slot.
  size_t waiting_count() const { return waiting_.size(); }

private:
  struct entry {
    cron_job job;
    std::optional<cron_schedule> sched;
    /// The time this job sits at in timeline_ (0: not in it).
    int64_t wake_ms = 0;
    bool waiting = false;
    /// The waiting entry's run: trigger and slot.
    const char* pending_trigger = cron_trigger::schedule;
    int64_t pending_slot_ms = 0;
  };
  struct active_run {
    cron_run run;
  };

  cron_time now();
  void note_time(cron_time t);
  void reschedule(entry& e);
  void unschedule(entry& e);
  // Takes e out of the waiting queue (no-op when it is not waiting).
  void leave_waiting(entry& e);
  int64_t next_slot_after(entry& e, int64_t after_ms) const;
  void queue(entry& e, const char* trigger, int64_t slot_ms);
  cron_run new_run(const entry& e, const char* trigger, int64_t slot_ms,
                   int64_t now_ms) const;
  void rebase_all(int64_t now_ms, cron_changes& ch);

  cron_engine_options opts_;
  std::map<std::string, entry> jobs_;
  /// (wake ms, job id) of every scheduled job that is not waiting.
  std::set<std::pair<int64_t, std::string>> timeline_;
  /// Due jobs waiting for a free run slot, in due order.
  std::deque<std::string> waiting_;
  /// run id -> run, for runs in progress.
  std::unordered_map<std::string, active_run> running_;
  /// The latest clock reading seen (for backwards steps).
  int64_t high_water_ms_ = 0;
};

} // namespace mibyan
