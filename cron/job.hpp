// File: cron/job.hpp
//
// The job model of scheduled jobs (docs/cron.md, "Job model"): the run
// status strings every part of the scheduler agrees on, the job's JSON
// form (what the `cronjob` tool, `mibyan cron --json` and /ui/api/jobs
// show and accept) and its validation. The records themselves are the
// plain structs of storage/cron_record.hpp (cron_job_record,
// cron_run_record); this file gives them meaning.
//
// Pure functions; any thread; nothing throws.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.hpp"
#include "base/status.hpp"
#include "cron/schedule.hpp"
#include "storage/cron_record.hpp"

namespace mibyan {

using cron_job = cron_job_record;
using cron_run = cron_run_record;

/// Run statuses: the `status` of a cron_run_record and the `last_status`
/// of a job. A contract shared by the engine, the runner (the scheduler
/// actor) and the interfaces; docs/cron.md lists what each means.
namespace cron_run_status {
/// Started, not finished (a run found "running" at start-up was
/// interrupted: the engine rewrites it to `interrupted`).
inline constexpr const char* running = "running";
/// Finished; the answer (or script output) was delivered.
inline constexpr const char* ok = "ok";
/// Finished; the final answer was exactly [SILENT]: recorded, not
/// delivered. Counts as a success.
inline constexpr const char* silent = "silent";
/// The run failed (the turn or script ended with an error, the working
/// directory vanished, a budget ran out). Not retried; counts as a
/// failure. An approval denied in a run is not a status: the model gets
/// the refusal as the tool result and the run ends as it ends (the reason
/// is in the session and usually the result).
inline constexpr const char* error = "error";
/// The provider could not be reached; a retry is scheduled (after 5, 15,
/// 30 minutes). Not counted as a failure by itself.
inline constexpr const char* unreachable = "unreachable";
/// The provider was still unreachable at the last retry: the retry series
/// gave up. Counts as one failure.
inline constexpr const char* failed = "failed";
/// Not run: the job's previous run was still going when this slot came
/// (no overlap), or the slots missed while the scheduler was down with
/// cron.catch_up: none. started_ms = ended_ms = when it was decided.
inline constexpr const char* skipped = "skipped";
/// The run succeeded but at least one delivery target failed (the answer
/// stays in the run's session). Counts as a failure (a target that keeps
/// failing pauses the job after cron.max_failures).
inline constexpr const char* delivery_failed = "delivery_failed";
/// The node stopped while the run was going (found at start-up). Not a
/// failure; with cron.catch_up: one the job gets its one catch-up run.
inline constexpr const char* interrupted = "interrupted";
} // namespace cron_run_status

/// Run triggers (cron_run_record::trigger).
namespace cron_trigger {
inline constexpr const char* schedule = "schedule";
inline constexpr const char* catch_up = "catch_up";
inline constexpr const char* retry = "retry";
inline constexpr const char* manual = "manual";
} // namespace cron_trigger

/// True for the statuses above.
bool is_cron_run_status(std::string_view s);
/// True for a finished run's statuses that reset the failure count (ok,
/// silent).
bool cron_status_is_success(std::string_view s);
/// True for those that add one to it (error, failed, delivery_failed).
bool cron_status_is_failure(std::string_view s);

/// Longest result text kept in a run record (bytes; cut at a UTF-8
/// boundary with a note). The full answer is in the run's session.
constexpr size_t cron_run_result_max_bytes = 16 * 1024;
/// Longest error text kept in a run record.
constexpr size_t cron_run_error_max_bytes = 4 * 1024;
/// `text` cut to at most `max` bytes at a UTF-8 boundary, with
/// "\n[... N bytes cut]" appended when it was cut.
std::string cron_cap_text(std::string_view text, size_t max);

/// Limits of a job's fields (bytes).
constexpr size_t cron_max_name_bytes = 200;
constexpr size_t cron_max_prompt_bytes = 64 * 1024;
constexpr size_t cron_max_script_bytes = 256 * 1024;
constexpr size_t cron_max_list_items = 32;
constexpr size_t cron_max_item_bytes = 2048;

/// "job_" + 16 random lowercase hex digits.
std::string new_cron_job_id();
/// "run_" + 16 random lowercase hex digits.
std::string new_cron_run_id();

/// Checks a job's definition (not its state): id, name (1..200 bytes,
/// UTF-8, no control characters), exactly one of prompt and script,
/// schedule and zone parse (cron_schedule::parse, anchored at
/// created_ms), deliver targets (session, dashboard, file:ABSOLUTE_PATH,
/// webhook:http(s)://...), created_by user|agent, sizes. Errors:
/// invalid_argument naming the field ("deliver[1]: unknown target 'ftp:x'
/// (session, file:PATH, webhook:URL, dashboard)").
status validate_cron_job(const cron_job& j);

/// The job's schedule, parsed (anchored at created_ms).
result<cron_schedule> cron_job_schedule(const cron_job& j);

/// Which parts cron_job_to_json writes.
enum class cron_json_parts : uint8_t { definition, all };

/// The job as a JSON object: id, name, schedule, timezone, prompt|script,
/// skills, cwd, toolsets, model, provider, deliver, created_by,
/// created_by_session, created_ms, updated_ms, and with `all` the state:
/// enabled, paused, pause_reason, last_slot_ms, last_run_ms, next_run_ms,
/// last_status, consecutive_failures, retry_attempt, retry_at_ms,
/// running_run_id, run_count. Empty strings and lists are written.
json::value cron_job_to_json(const cron_job& j,
                             cron_json_parts parts = cron_json_parts::all);

/// A job definition from JSON (what a user or the model submits). Strict:
/// unknown members, wrong types and bad values are errors naming the
/// member; provenance (id, created_by, created_by_session, created_ms,
/// updated_ms) and state members are refused unless `allow_state` (a full
/// record, e.g. an export): the interface sets created_by itself.
/// `deliver` may be one string or a list. Required: schedule and prompt or script. Defaults:
/// name = the first line of the prompt (or "script"), cut to 60 bytes;
/// deliver = ["session"]; timezone = `default_zone` ("" = the node's
/// local zone); created_by = "user". Does not set id, created_ms or the
/// state (the engine's add does) unless given with `allow_state`. Runs
/// validate_cron_job when id and created_ms are set, else checks what it
/// can (the schedule is parsed with anchor `now`).
result<cron_job> cron_job_from_json(const json::value& v,
                                    const std::string& default_zone,
                                    bool allow_state = false);

/// Applies a partial update (the members present in `patch`, same rules
/// as cron_job_from_json; "id" and state members refused) to `j`, and
/// validates the result. Changing schedule or timezone is allowed.
status cron_job_patch(cron_job& j, const json::value& patch);

/// The run as a JSON object (every field of cron_run_record).
json::value cron_run_to_json(const cron_run& r);

} // namespace mibyan
