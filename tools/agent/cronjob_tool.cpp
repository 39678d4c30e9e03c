// The cronjob tool (docs/tools.md "cronjob", docs/cron.md "Using it"): the
// model schedules work for later or for every day: create, list, update,
// pause, resume, run (now), remove, history. The definitions are checked
// by cron/job.hpp (schedule, zone, targets, sizes) and a prompt by the
// prompt scanner (cron/prompt_scan.hpp) inside the verbs of the runtime's
// cron_service (cron/cron_service.hpp: its scheduler, the scheduler of
// another process on the store, or the store alone).
//
// A job's own run (a session of source cron, or one it delegated to) may
// not create, change or delete jobs unless cron.allow_agent_scheduling is
// true; it may list them and read their history.
#include <chrono>
#include <filesystem>

#include "config/options.hpp"
#include "cron/cron_service.hpp"
#include "storage/session_store.hpp"
#include "tools/agent/agent_tool_state.hpp"
#include "tools/agent/agent_tools.hpp"
#include "tools/agent/cron_jobs.hpp"

namespace mibyan {

namespace {

namespace fs = std::filesystem;

constexpr int64_t history_default = 10;
constexpr int64_t history_max = 50;
constexpr size_t shown_result_bytes = 600;

const char* const actions[] = {"create", "list",   "update", "pause",
                               "resume", "run",    "remove", "history"};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

std::string clip(const std::string& s, size_t max) {
  if (s.size() <= max)
    return s;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80)
    --cut;
  return s.substr(0, cut) + " …[" + std::to_string(s.size() - cut)
         + " more bytes]";
}

// `p` absolute: relative ones are taken from the session's directory.
std::string absolute_from(const std::string& p, const std::string& cwd) {
  if (p.empty() || p[0] == '/' || p[0] == '~' || cwd.empty())
    return p;
  return (fs::path{cwd} / p).lexically_normal().string();
}

// The members of the tool's arguments that define a job, as the job JSON
// of cron/job.hpp names them, with relative paths made absolute.
json::value definition_of(const json::value& args, const tool_context& ctx) {
  json::value def = json::value::make_object();
  for (auto key : {"name", "schedule", "timezone", "prompt", "script", "model",
                   "provider"}) {
    auto v = args.find(key);
    if (v != nullptr && !v->is_null())
      def[key] = *v;
  }
  for (auto key : {"skills", "toolsets"}) {
    auto v = args.find(key);
    if (v != nullptr && !v->is_null())
      def[key] = *v;
  }
  if (auto v = args.find("cwd"); v != nullptr && v->is_string())
    def["cwd"] = absolute_from(v->as_string(), ctx.cwd);
  if (auto v = args.find("deliver"); v != nullptr && v->is_array()) {
    json::value list = json::value::make_array();
    for (auto& t : v->as_array()) {
      if (t.is_string() && t.as_string().rfind("file:", 0) == 0)
        list.push_back("file:" + absolute_from(t.as_string().substr(5), ctx.cwd));
      else
        list.push_back(t);
    }
    def["deliver"] = std::move(list);
  }
  return def;
}

// The job in the tool's answers: what a model needs to talk about it.
json::value brief(const cron_job& j, int64_t now) {
  json::value v;
  v["id"] = j.id;
  v["name"] = j.name;
  v["schedule"] = j.schedule;
  v["timezone"] = j.timezone;
  auto sched = cron_job_schedule(j);
  v["schedule_description"]
    = sched ? sched->describe() : "invalid schedule: " + sched.error;
  v["kind"] = j.script.empty() ? "prompt" : "script";
  v["next_run"] = cron_next_run_text(j, now);
  v["next_run_ms"] = j.next_run_ms;
  v["paused"] = j.paused;
  if (!j.pause_reason.empty())
    v["pause_reason"] = j.pause_reason;
  v["enabled"] = j.enabled;
  v["last_status"] = j.last_status.empty() ? json::value{} : json::value{j.last_status};
  v["last_run"] = j.last_run_ms > 0 ? json::value{cron_local_time(j.last_run_ms, j.timezone)}
                                    : json::value{};
  json::value deliver = json::value::make_array();
  for (auto& d : j.deliver)
    deliver.push_back(d);
  v["deliver"] = std::move(deliver);
  v["created_by"] = j.created_by;
  return v;
}

json::value run_brief(const cron_run& r, const std::string& zone) {
  json::value v;
  v["run_id"] = r.id;
  v["status"] = r.status;
  v["trigger"] = r.trigger;
  v["started"] = cron_local_time(r.started_ms, zone);
  if (r.ended_ms > 0)
    v["ended"] = cron_local_time(r.ended_ms, zone);
  if (!r.session_id.empty())
    v["session_id"] = r.session_id;
  if (!r.result.empty())
    v["result"] = clip(r.result, shown_result_bytes);
  if (!r.error.empty())
    v["error"] = r.error;
  return v;
}

// "" while a scheduler runs the store's jobs; else when they will run.
std::string scheduler_note(cron_service& jobs) {
  auto where = jobs.scheduler();
  if (where.here || !where.holder.empty())
    return {};
  return "No scheduler is running for this node's jobs now: the job is "
         "stored and runs when a scheduler starts (`mibyan serve`, `mibyan "
         "cron run`, or a gateway node); a time that passed meanwhile gets "
         "one catch-up run.";
}

class cronjob_tool final : public tool {
public:
  const char* name() const override { return "cronjob"; }
  const char* toolset() const override { return "cron"; }

  std::string description() const override {
    return "Schedule work for later or on a repeating schedule. Each job "
           "runs its prompt as a new conversation of its own (or, with "
           "script, a Python script in a kernel, without a model) and "
           "delivers the final answer. action=create needs schedule and "
           "prompt (or script): schedules are 'in 30m', 'every 2h', a "
           "five-field cron expression ('0 9 * * 1-5') or an ISO time "
           "('2026-12-24T09:00'); cron and ISO times are wall-clock times "
           "in timezone (an IANA name; default: this node's zone). deliver "
           "lists where the answer goes: 'session' (always), 'file:PATH', "
           "'webhook:URL', 'dashboard'. Write the prompt so it stands on "
           "its own: the run does not see this conversation. list shows "
           "the jobs; update changes the given fields of job_id; pause, "
           "resume, run (now), remove and history (the recent runs) take "
           "job_id.";
  }

  json::value schema() const override {
    json::value action = schema_property("string", "What to do.");
    action["enum"] = json::array{"create", "list",   "update", "pause",
                                 "resume", "run",    "remove", "history"};
    json::value strings = schema_property("array", "");
    strings["items"] = schema_property("string", "");
    auto list_of = [&](std::string text) {
      json::value p = strings;
      p["description"] = std::move(text);
      return p;
    };
    json::value props;
    props["action"] = std::move(action);
    props["job_id"] = schema_property(
      "string", "The job (update, pause, resume, run, remove, history).");
    props["name"] = schema_property("string", "A short name for the job.");
    props["schedule"] = schema_property(
      "string", "When it runs: 'in 30m', 'every 2h', '0 9 * * 1-5' (cron: "
                "minute hour day-of-month month day-of-week) or an ISO time "
                "'2026-12-24T09:00'.");
    props["timezone"] = schema_property(
      "string", "IANA time zone of cron and ISO times, e.g. Europe/Berlin "
                "(default: this node's zone).");
    props["prompt"] = schema_property(
      "string", "The task for the run, complete in itself.");
    props["script"] = schema_property(
      "string", "Instead of prompt: a Python script run in a kernel; its "
                "printed output is the result.");
    props["skills"] = list_of("Skills the run loads first.");
    props["cwd"] = schema_property(
      "string", "Working directory of the run (default: this session's).");
    props["toolsets"] = list_of("Toolsets offered in the run (default: the "
                                "node's).");
    props["model"] = schema_property("string", "Model override for the run.");
    props["provider"] = schema_property("string",
                                        "Provider override for the run.");
    props["deliver"] = list_of("Where the answer goes: session, "
                               "file:PATH, webhook:URL, dashboard (default "
                               "[session]).");
    props["reason"] = schema_property("string", "Why (pause).");
    props["limit"] = schema_property(
      "integer", "history: how many recent runs (1-50, default 10).");
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    s["required"] = json::array{"action"};
    return s;
  }

  bool parallel_safe() const override { return false; }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    auto action = args.get_string("action");
    bool known = false;
    for (auto a : actions)
      known = known || action == a;
    if (!known)
      return error_result("unknown action '" + action
                          + "' (create, list, update, pause, resume, run, "
                            "remove, history)");
    if (ctx.agent == nullptr || !ctx.agent->cron)
      return error_result("cronjob needs the node's job store, which is not "
                          "available here: scheduled jobs cannot be used in "
                          "this process.");
    auto& jobs = *ctx.agent->cron;
    if (action == "list")
      return list(jobs);
    auto id = args.get_string("job_id");
    if (action != "create") {
      if (id.empty())
        return error_result("action '" + action + "' needs job_id (see "
                            "action=list)");
      if (auto why = check_cron_job_id(id).error; !why.empty())
        return error_result("job_id: " + why);
    }
    if (action == "history")
      return history(jobs, id, args);
    // Everything else changes jobs: not from a job's own run.
    if (!(ctx.cfg != nullptr && ctx.cfg->cron.allow_agent_scheduling)
        && !ctx.session_id.empty() && ctx.agent->store
        && is_cron_run_session(*ctx.agent->store, ctx.session_id))
      return error_result(
        "refused: this conversation is a run of a scheduled job, and a job "
        "may not create, change or delete jobs (cron.allow_agent_scheduling "
        "is false). Do the task itself and report the result instead.");
    if (action == "create")
      return create(jobs, args, ctx);
    if (action == "update")
      return update(jobs, id, args, ctx);
    int64_t now = now_ms();
    if (action == "pause") {
      auto reason = args.get_string("reason");
      auto r = jobs.pause(id, reason.empty() ? "paused by the agent"
                                             : "paused by the agent: " + reason);
      if (!r)
        return error_result(not_found_text(r, id));
      json::value v;
      v["paused"] = true;
      v["job"] = brief(*r, now);
      return v;
    }
    if (action == "resume") {
      auto r = jobs.resume(id);
      if (!r)
        return error_result(not_found_text(r, id));
      json::value v;
      v["resumed"] = true;
      v["job"] = brief(*r, now);
      if (auto note = scheduler_note(jobs); !note.empty())
        v["note"] = note;
      return v;
    }
    if (action == "remove") {
      if (auto st = jobs.remove(id); !st)
        return error_result(not_found_text(st, id));
      json::value v;
      v["removed"] = id;
      return v;
    }
    // run (an unknown id is "no job", whether or not a scheduler runs)
    if (auto known = jobs.get(id); !known)
      return error_result(not_found_text(known, id));
    auto r = jobs.run_now(id);
    if (!r)
      return error_result(not_found_text(r, id));
    json::value v;
    v["queued"] = true;
    v["job"] = brief(*r, now);
    v["note"] = "The run starts as soon as a run slot is free "
                "(cron.max_concurrent); its answer goes to the job's "
                "targets. See action=history for the outcome.";
    return v;
  }

private:
  // The error of a verb, with a hint for an unknown id.
  template <class R>
  static std::string not_found_text(const R& r, const std::string& id) {
    if (r.code == status_code::not_found)
      return "no job '" + id + "' (see action=list)";
    return r.error;
  }

  static json::value list(cron_service& jobs) {
    auto all = jobs.list();
    if (!all)
      return error_result("cannot list the jobs: " + all.error);
    int64_t now = now_ms();
    json::value data = json::value::make_array();
    for (auto& j : all->jobs)
      data.push_back(brief(j, now));
    json::value v;
    v["jobs"] = std::move(data);
    v["count"] = static_cast<int64_t>(all->jobs.size());
    if (!all->damaged.empty()) {
      json::value damaged = json::value::make_array();
      for (auto& d : all->damaged)
        damaged.push_back(d);
      v["damaged"] = std::move(damaged);
    }
    if (auto note = scheduler_note(jobs); !note.empty())
      v["note"] = note;
    return v;
  }

  static json::value history(cron_service& jobs, const std::string& id,
                             const json::value& args) {
    auto job = jobs.get(id);
    if (!job)
      return error_result(not_found_text(job, id));
    int64_t limit = history_default;
    if (auto l = args.find("limit"); l != nullptr && l->is_number())
      limit = std::max<int64_t>(1, std::min(history_max, l->as_int()));
    bool more = false;
    auto runs = jobs.history(id, static_cast<size_t>(limit), 0, &more);
    if (!runs)
      return error_result(runs.error);
    json::value data = json::value::make_array();
    for (auto& r : *runs)
      data.push_back(run_brief(r, job->timezone));
    json::value v;
    v["job"] = brief(*job, now_ms());
    v["runs"] = std::move(data);
    v["more"] = more;
    return v;
  }

  static json::value create(cron_service& jobs, const json::value& args,
                            const tool_context& ctx) {
    auto def = definition_of(args, ctx);
    if (def.find("cwd") == nullptr && !ctx.cwd.empty())
      def["cwd"] = ctx.cwd;
    // The node's zone is written into the job.
    std::string zone = ctx.cfg != nullptr ? ctx.cfg->cron.default_timezone
                                          : std::string{};
    if (zone.empty())
      zone = cron_local_zone_name();
    auto job = cron_job_from_json(def, zone);
    if (!job)
      return error_result("the job was not created: " + job.error);
    // Provenance is the interface's to set, never the model's.
    job->created_by = "agent";
    job->created_by_session = ctx.session_id;
    // The service checks the prompt (check_prompt_text) before storing.
    auto added = jobs.add(std::move(*job));
    if (!added)
      return error_result(added.code == status_code::permission_denied
                            ? added.error
                            : "the job was not created: " + added.error);
    json::value v;
    v["created"] = true;
    v["job"] = brief(*added, now_ms());
    if (auto note = scheduler_note(jobs); !note.empty())
      v["note"] = note;
    return v;
  }

  static json::value update(cron_service& jobs, const std::string& id,
                            const json::value& args, const tool_context& ctx) {
    auto patch = definition_of(args, ctx);
    if (patch.as_object().empty())
      return error_result("update needs at least one field to change (name, "
                          "schedule, timezone, prompt, script, skills, cwd, "
                          "toolsets, model, provider, deliver)");
    auto r = jobs.update(id, patch);
    if (!r)
      return error_result(r.code == status_code::not_found
                            ? not_found_text(r, id)
                            : "the job was not changed: " + r.error);
    json::value v;
    v["updated"] = true;
    v["job"] = brief(*r, now_ms());
    return v;
  }
};

} // namespace

std::unique_ptr<tool> make_cronjob_tool() {
  return std::make_unique<cronjob_tool>();
}

} // namespace mibyan
