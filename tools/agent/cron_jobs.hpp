// File: tools/agent/cron_jobs.hpp
//
// What the job interfaces (the `cronjob` tool, `mibyan cron`, the
// dashboard's /ui/api/jobs) share besides the verbs of cron/cron_service.hpp
// (docs/cron.md, "Using it"): a job as they show it, times in words, and
// the "is this a job's own run" test of a session.
//
// Thread safety: the functions are pure or read the store (LMDB: they
// block; never on an I/O or CAF scheduler thread).
#pragma once

#include <cstdint>
#include <string>

#include "base/json.hpp"
#include "base/status.hpp"
#include "cron/job.hpp"

namespace mibyan {

class session_store;

/// A job for people and models: cron_job_to_json(j, all) plus
/// "schedule_description" (the schedule in words, or "invalid schedule:
/// <why>").
json::value cron_job_view(const cron_job& j);

/// "2026-12-06 09:00:00 CET" in zone `zone` ("" or unknown: UTC, with a
/// trailing "UTC"); "-" for 0.
std::string cron_local_time(int64_t ms, const std::string& zone);

/// "in 4m 10s" / "3h 2m ago" relative to `now_ms`.
std::string cron_relative(int64_t ms, int64_t now_ms);

/// When the job fires next, in words: "2026-12-06 09:00:00 CET (in 52m)",
/// "paused (<reason>)", "never (a one-shot that ran)".
std::string cron_next_run_text(const cron_job& j, int64_t now_ms);

/// Whether `session_id` (or the session it continues or was delegated
/// from) is a run of a scheduled job: source "cron", or a metadata
/// cron_job_id. False when the store does not know it.
bool is_cron_run_session(const session_store& store,
                         const std::string& session_id);

} // namespace mibyan
