// File: storage/cron_record.hpp
//
// The stored records of scheduled jobs (docs/cron.md, "Job model" and
// "Storage"): a job (its definition and its scheduler state) and one run of
// a job. Plain data: the meaning of the fields (the schedule's syntax, the
// status strings, the JSON form, validation) belongs to layer 3
// (cron/job.hpp, cron/schedule.hpp); storage only keeps the bytes and
// refuses records it cannot decode.
//
// Encoding: a format byte, then varint-prefixed fields in a fixed order
// (as storage/response_record.hpp). A reader refuses a format it does not
// know (decode returns false: the store reports data_corrupt naming the
// record), so a newer build's record is never half-read.
//
// Times are milliseconds since the Unix epoch (UTC); 0 means "none".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace mibyan {

/// A scheduled job: definition and state in one record, so that one write
/// keeps them consistent.
struct cron_job_record {
  // -- definition -------------------------------------------------------------
  /// "job_" + 16 lowercase hex digits when generated (cron/job.hpp,
  /// new_job_id); any id passing check_cron_job_id is accepted.
  std::string id;
  std::string name;
  /// The schedule as written ("every 2h", "0 9 * * 1-5", ...).
  std::string schedule;
  /// IANA zone name ("Europe/Berlin"), resolved when the job was created.
  std::string timezone;
  /// Exactly one of prompt and script is non-empty.
  std::string prompt;
  std::string script;
  std::vector<std::string> skills;
  /// Working directory of the run's session ("" = the node's default).
  std::string cwd;
  /// Toolsets of the run ("" list = the node's default toolsets).
  std::vector<std::string> toolsets;
  std::string model;
  std::string provider;
  /// "session", "file:PATH", "webhook:URL", "dashboard".
  std::vector<std::string> deliver;
  /// "user" or "agent".
  std::string created_by;
  /// The session that created the job ("" when created by a user outside
  /// a session).
  std::string created_by_session;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;

  // -- state (owned by the engine, cron/engine.hpp) ---------------------------
  /// False once a one-shot has run (or the job was disabled): never due.
  bool enabled = true;
  /// Paused by a user, an agent or the engine (after max_failures).
  bool paused = false;
  std::string pause_reason;
  /// The slot (scheduled time) of the last run started by the schedule.
  int64_t last_slot_ms = 0;
  /// When the last run started.
  int64_t last_run_ms = 0;
  /// The next slot; 0 when none (spent one-shot, paused, disabled).
  int64_t next_run_ms = 0;
  /// The status of the last finished run (a run status, cron/job.hpp).
  std::string last_status;
  int64_t consecutive_failures = 0;
  /// Retries already scheduled for the current provider outage (0..3).
  int64_t retry_attempt = 0;
  /// When the pending retry is due (0 = none).
  int64_t retry_at_ms = 0;
  /// The run in progress ("" when none). Found set at start-up, that run
  /// was interrupted by a stop of the node.
  std::string running_run_id;
  /// Runs started, all triggers.
  int64_t run_count = 0;
};

/// One run of a job.
struct cron_run_record {
  /// "run_" + 16 lowercase hex digits.
  std::string id;
  std::string job_id;
  /// The session of the run ("" until it exists; none for skipped runs).
  std::string session_id;
  /// The slot the run belongs to (its due time; the request time for a
  /// manual run).
  int64_t scheduled_for_ms = 0;
  int64_t started_ms = 0;
  /// 0 while running.
  int64_t ended_ms = 0;
  /// A run status (cron/job.hpp, cron_run_status).
  std::string status;
  /// What started it: "schedule", "catch_up", "retry", "manual".
  std::string trigger;
  /// 0 for the first attempt, 1..3 for the retries after 5, 15, 30 min.
  int64_t attempt = 0;
  /// The final answer or script output, capped (cron_run_result_max_bytes
  /// in cron/job.hpp; the full text is in the session).
  std::string result;
  std::string error;
  /// Per-target delivery outcomes as a JSON array (owned by the runner;
  /// "" when none).
  std::string delivery_json;
};

std::string encode_cron_job(const cron_job_record& j);
/// False for truncated or trailing bytes and unknown formats.
bool decode_cron_job(std::string_view bytes, cron_job_record& out);

std::string encode_cron_run(const cron_run_record& r);
bool decode_cron_run(std::string_view bytes, cron_run_record& out);

/// Succeeds for a well-formed job id (1..64 bytes of [A-Za-z0-9_-]), else
/// invalid_argument with why not.
status check_cron_job_id(std::string_view id);
/// The same for run ids.
status check_cron_run_id(std::string_view id);

/// One batch of scheduler changes, written by
/// session_store::apply_cron_changes in ONE transaction, in this order:
/// job puts, run puts, job deletes. The engine (cron/engine.hpp) returns
/// them; its owner persists them.
struct cron_changes {
  /// Jobs to write (insert or replace, the whole record).
  std::vector<cron_job_record> jobs;
  /// Runs to write (insert, or replace the run with the same id).
  std::vector<cron_run_record> runs;
  /// Jobs to delete with their run history.
  std::vector<std::string> deleted_jobs;

  bool empty() const {
    return jobs.empty() && runs.empty() && deleted_jobs.empty();
  }
  /// Appends `other` (later changes win on the same job id when applied).
  void append(cron_changes other);
};

/// The jobs of a listing, and the ones that could not be decoded (their
/// ids with the reason); a damaged record never hides the others.
struct cron_job_list {
  std::vector<cron_job_record> jobs;
  std::vector<std::string> damaged;
};

} // namespace mibyan
