// The dashboard's scheduled-jobs endpoints (serve/ui_jobs.hpp).
#include "serve/ui_jobs.hpp"

#include <algorithm>
#include <tuple>

#include "base/json.hpp"
#include "base/log.hpp"
#include "cron/cron_service.hpp"
#include "runtime/cron_scheduler.hpp"
#include "serve/routes.hpp"
#include "serve/ui_api.hpp"
#include "tools/agent/cron_jobs.hpp"

namespace mibyan::serve {

namespace {

const std::string prefix = "/ui/api/jobs";
constexpr size_t delivered_shown = 20;
constexpr int64_t runs_default = 20;
constexpr int64_t runs_max = 200;

// A verb's error as an HTTP answer. `run`: the verb was run_now, whose
// unavailable means the job's run is going or queued (elsewhere it means
// the store or the scheduler of another process is not answering).
ops_response verb_error(const std::string& id, status_code code,
                        const std::string& message, bool run = false) {
  switch (code) {
  case status_code::not_found:
    return ops_error(404, "no job '" + id + "'", "job_not_found");
  case status_code::invalid_argument:
    return ops_error(400, message, "invalid_job");
  case status_code::permission_denied:
    return ops_error(403, message, "refused");
  case status_code::unavailable:
    if (run)
      return ops_error(409, message, "job_busy");
    return ops_error(503, message, "scheduler_unavailable");
  case status_code::timeout:
    return ops_error(503, message, "scheduler_unavailable");
  default:
    return ops_error(500, message, "server_error");
  }
}

// Whether run `r` of job `j` delivered its answer to the dashboard.
bool delivered_to_dashboard(const cron_job& j, const cron_run& r) {
  if (std::find(j.deliver.begin(), j.deliver.end(), "dashboard")
      == j.deliver.end())
    return false;
  return r.ended_ms > 0 && !r.result.empty()
         && (r.status == cron_run_status::ok
             || r.status == cron_run_status::delivery_failed);
}

// Scheduled jobs first (soonest next run first), then the others by name.
void sort_for_listing(std::vector<cron_job>& jobs) {
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const cron_job& a, const cron_job& b) {
                     bool as = a.next_run_ms > 0 && !a.paused && a.enabled;
                     bool bs = b.next_run_ms > 0 && !b.paused && b.enabled;
                     if (as != bs)
                       return as;
                     if (as && a.next_run_ms != b.next_run_ms)
                       return a.next_run_ms < b.next_run_ms;
                     return a.name < b.name;
                   });
}

ops_response list_jobs(cron_service& jobs) {
  auto all = jobs.list();
  if (!all)
    return ops_error(all.code == status_code::unavailable ? 503 : 500,
                     "cannot list the jobs: " + all.error,
                     "store_unavailable");
  sort_for_listing(all->jobs);
  json::value data = json::value::make_array();
  for (auto& j : all->jobs)
    data.push_back(cron_job_view(j));
  json::value damaged = json::value::make_array();
  for (auto& d : all->damaged)
    damaged.push_back(d);
  auto where = jobs.scheduler();
  json::value sched;
  sched["here"] = where.here;
  sched["holder"] = where.holder;
  json::value v;
  v["data"] = std::move(data);
  v["damaged"] = std::move(damaged);
  v["scheduler"] = std::move(sched);
  return ops_json(v.dump());
}

ops_response show_job(cron_service& jobs, const std::string& id) {
  auto j = jobs.get(id);
  if (!j)
    return verb_error(id, j.code, j.error);
  json::value delivered = json::value::make_array();
  if (std::find(j->deliver.begin(), j->deliver.end(), "dashboard")
      != j->deliver.end()) {
    // The newest runs, enough to find `delivered_shown` answers among the
    // silent, skipped and failed ones.
    bool more = false;
    auto runs = jobs.history(id, delivered_shown * 5, 0, &more);
    if (!runs)
      return verb_error(id, runs.code, runs.error);
    for (auto& r : *runs) {
      if (delivered.size() >= delivered_shown)
        break;
      if (delivered_to_dashboard(*j, r))
        delivered.push_back(cron_run_to_json(r));
    }
  }
  json::value v;
  v["job"] = cron_job_view(*j);
  v["delivered"] = std::move(delivered);
  return ops_json(v.dump());
}

ops_response list_runs(cron_service& jobs, const std::string& id,
                       int64_t limit, int64_t offset) {
  // An unknown job is a 404, not an empty history.
  auto j = jobs.get(id);
  if (!j)
    return verb_error(id, j.code, j.error);
  bool more = false;
  auto runs = jobs.history(id, static_cast<size_t>(limit),
                           static_cast<size_t>(offset), &more);
  if (!runs)
    return verb_error(id, runs.code, runs.error);
  json::value data = json::value::make_array();
  for (auto& r : *runs)
    data.push_back(cron_run_to_json(r));
  json::value v;
  v["data"] = std::move(data);
  v["next_offset"] = more ? json::value{offset + static_cast<int64_t>(
                                                   runs->size())}
                          : json::value{};
  return ops_json(v.dump());
}

ops_response act(cron_service& jobs, const std::string& id,
                 const std::string& verb) {
  json::value v;
  if (verb == "delete") {
    if (auto st = jobs.remove(id); !st)
      return verb_error(id, st.code, st.error);
    v["id"] = id;
    v["deleted"] = true;
    return ops_json(v.dump());
  }
  if (verb == "run") {
    if (auto known = jobs.get(id); !known)
      return verb_error(id, known.code, known.error);
    auto where = jobs.scheduler();
    if (!where.here && where.holder.empty())
      return ops_error(503,
                       "no scheduler runs for this node's jobs, so nothing "
                       "would run it (cron.enabled is false here, or the "
                       "scheduler has not started)",
                       "no_scheduler");
  }
  auto r = verb == "run"     ? jobs.run_now(id)
           : verb == "pause" ? jobs.pause(id, "paused from the dashboard")
                             : jobs.resume(id);
  if (!r)
    return verb_error(id, r.code, r.error, verb == "run");
  v["job"] = cron_job_view(*r);
  if (verb == "run")
    v["queued"] = true;
  return ops_json(v.dump());
}

} // namespace

bool is_ui_jobs_path(const std::string& path) {
  return path == prefix
         || (path.size() > prefix.size() && path.rfind(prefix + "/", 0) == 0);
}

void answer_ui_jobs(runtime& rt, const ops_request& req, ops_done done) {
  const auto& path = req.path;
  bool get = req.method == "GET" || req.method == "HEAD";
  bool post = req.method == "POST";
  bool del = req.method == "DELETE";
  // /ui/api/jobs[/<id>[/<verb>]]
  std::string id, verb;
  if (path != prefix) {
    auto rest = path.substr(prefix.size() + 1);
    auto slash = rest.find('/');
    id = url_decode(rest.substr(0, slash));
    if (slash != std::string::npos) {
      verb = rest.substr(slash + 1);
      if (verb.empty() || verb.find('/') != std::string::npos
          || (verb != "runs" && verb != "run" && verb != "pause"
              && verb != "resume"))
        return done(ops_error(404, "no such endpoint: " + path, "not_found"));
    }
    if (auto why = check_cron_job_id(id).error; !why.empty())
      return done(ops_error(400, "malformed job id: " + why, "bad_job_id"));
  }
  int64_t limit = runs_default, offset = 0;
  if (id.empty()) {
    if (!get)
      return done(ops_method_not_allowed(req));
  } else if (verb.empty()) {
    if (!get && !del)
      return done(ops_method_not_allowed(req));
  } else if (verb == "runs") {
    if (!get)
      return done(ops_method_not_allowed(req));
    for (auto [name, min, max, out] :
         {std::tuple{"limit", int64_t{1}, runs_max, &limit},
          std::tuple{"offset", int64_t{0}, int64_t{1000000}, &offset}})
      if (auto err = parse_count(req.query, name, min, max, *out);
          !err.empty())
        return done(ops_error(400, err, "bad_parameter"));
  } else if (!post) {
    return done(ops_method_not_allowed(req));
  }
  auto jobs = cron_of(rt);
  auto work = [jobs, id, verb, del, limit, offset, done] {
    // On the runtime's blocking pool: the verbs block on the store or the
    // scheduler.
    if (id.empty())
      return done(list_jobs(*jobs));
    if (verb.empty())
      return done(del ? act(*jobs, id, "delete") : show_job(*jobs, id));
    if (verb == "runs")
      return done(list_runs(*jobs, id, limit, offset));
    MIBYAN_LOG(info, "serve", "job " << id << ": " << verb
                                     << " from the dashboard");
    done(act(*jobs, id, verb));
  };
  if (!run_blocking(rt, work))
    done(ops_error(503, "the runtime is shutting down",
                   "runtime_unavailable"));
}

} // namespace mibyan::serve
