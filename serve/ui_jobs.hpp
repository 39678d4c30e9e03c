// File: serve/ui_jobs.hpp
//
// The dashboard's scheduled-jobs endpoints (docs/cron.md, "Dashboard";
// docs/serve.md "Dashboard"), without HTTP:
//
//   GET    /ui/api/jobs                       {"data":[job...],"damaged":[...]}
//   GET    /ui/api/jobs/{id}                  {"job":{...},"delivered":[run...]}
//   GET    /ui/api/jobs/{id}/runs?limit=&offset=
//                                             {"data":[run...],"next_offset":n|null}
//   POST   /ui/api/jobs/{id}/run              {"job_id","run":"queued"|run...}
//   POST   /ui/api/jobs/{id}/pause            {"job":{...}}
//   POST   /ui/api/jobs/{id}/resume           {"job":{...}}
//   DELETE /ui/api/jobs/{id}                  {"id","deleted":true}
//
// A job is cron_job_to_json (cron/job.hpp) plus "schedule_description"
// (the schedule in words, or why it does not parse). "delivered" lists the
// newest runs (at most 20) whose answer went to the `dashboard` target. A
// run is cron_run_to_json. Errors in the serve error shape: 400 malformed
// id or parameter (bad_job_id, bad_parameter), 404 unknown job
// (job_not_found) or path, 405 method, 409 a run of the job is already
// going or queued (job_busy), 503 no store or the scheduler of another
// process not answering (scheduler_unavailable), no scheduler for "run"
// (no_scheduler), the runtime stopping (runtime_unavailable).
//
// The routes sit beside the operator endpoints (serve/ui_ops.hpp routes
// these paths here), so the server's own connections and a gateway
// answering `mibyan dashboard --connect` answer alike. Store reads and the
// job changes run on the runtime's blocking pool; `done` is called once,
// on any thread.
#pragma once

#include <string>

#include "runtime/runtime.hpp"
#include "serve/ui_ops.hpp"

namespace mibyan::serve {

/// Whether `path` is /ui/api/jobs or below it.
bool is_ui_jobs_path(const std::string& path);

/// Answers `req` (a path for which is_ui_jobs_path holds).
void answer_ui_jobs(runtime& rt, const ops_request& req, ops_done done);

} // namespace mibyan::serve
