// One run of a scheduled job (docs/cron.md, "Running, approvals and
// delivery"): a prompt job's turn, or a script job's execute_code cell, in
// a new session of source "cron"; its approvals; how its outcome maps to a
// run status; the delivery of its answer. The run ends with one posted op
// to the scheduler actor (cron_sched_state::finished_run).
//
// Threads: launch_cron_run runs in the scheduler actor (its own thread).
// The turn's callbacks run on runtime threads; the end of a run (delivery,
// closing the session) runs on the blocking pool.
#include "runtime/cron_internal.hpp"

#include <filesystem>

#include "caf/all.hpp"

#include "agent/turn_result.hpp"
#include "base/log.hpp"
#include "storage/session_store.hpp"
#include "tools/agent/agent_tool_state.hpp"
#include "tools/agent/skill_sync.hpp"
#include "tools/agent/skills.hpp"
#include "tools/file_io.hpp"

namespace fs = std::filesystem;

namespace mibyan {

namespace {

// A run in progress, shared by its callbacks.
struct run_ctx {
  std::weak_ptr<cron_host> host;
  runtime* rt = nullptr;
  cron_start s;
  std::string sid;
  std::string cwd;
  /// Commands refused by the approval gate during the run (tool_end
  /// events arrive one at a time, but from runtime threads).
  std::mutex mtx;
  std::vector<std::string> refused;
};

using run_ptr = std::shared_ptr<run_ctx>;

// Hands the outcome to the scheduler (dropped when it stopped: the record
// stays "running" and the next start finds it interrupted).
void report(const run_ptr& c, cron_outcome out) {
  auto h = c->host.lock();
  if (!h || h->stopped)
    return;
  auto run_id = c->s.run.id;
  h->post([run_id, out = std::move(out)](cron_sched_state& st) {
    st.finished_run(run_id, out);
  });
}

// The session's channels end with the run; its conversation and kernels
// are released (the stored session stays).
void release_session(const run_ptr& c) {
  if (c->rt == nullptr || c->sid.empty())
    return;
  c->rt->clear_session_channels(c->sid);
  c->rt->close_session(c->sid);
}

std::string delivery_json(const delivery_report& r) {
  json::value a = json::value::make_array();
  for (auto& t : r.targets) {
    json::value e;
    e["target"] = t.target;
    e["ok"] = t.ok;
    if (!t.ok)
      e["error"] = t.error;
    a.push_back(std::move(e));
  }
  return a.dump();
}

// The end of a run that produced `answer` (or failed with out.error): the
// refusals noted, [SILENT] kept back, the answer delivered, the session
// released, the outcome reported. Blocking: on the pool.
void complete(const run_ptr& c, std::string answer, cron_outcome out) {
  auto h = c->host.lock();
  if (!h)
    return;
  if (h->stopped) {
    // Not reported: the record stays "running" and the next start finds
    // it interrupted. The session's conversation and kernels still go.
    release_session(c);
    return;
  }
  out.session_id = c->sid;
  {
    std::lock_guard<std::mutex> g{c->mtx};
    if (!c->refused.empty()) {
      std::string note = "Refused in this run (";
      note += h->p->svc->cfg.cron.approvals == "http"
                ? "cron.approvals: http"
                : "approvals.cron_mode: " + h->p->svc->cfg.approvals.cron_mode;
      note += "):";
      for (auto& r : c->refused)
        note += "\n- " + r;
      out.error = out.error.empty() ? note : out.error + "\n" + note;
    }
  }
  bool deliverable = !out.provider_unreachable
                     && (out.status == cron_run_status::ok
                         || out.status == cron_run_status::error);
  if (out.status == cron_run_status::ok && is_silent_answer(answer)) {
    out.status = cron_run_status::silent;
    deliverable = false;
  }
  if (deliverable) {
    auto& job = c->s.job;
    delivery_payload p;
    p.job_id = job.id;
    p.job_name = job.name;
    p.run_id = c->s.run.id;
    p.status = out.status;
    p.answer = out.status == cron_run_status::ok ? answer
               : answer.empty()                  ? out.error
                                                 : answer + "\n\n" + out.error;
    p.session_id = c->sid;
    p.scheduled_for_ms = c->s.run.scheduled_for_ms;
    p.finished_at_ms = cron_ms(h->clock());
    auto targets = job.deliver.empty() ? std::vector<std::string>{"session"}
                                       : job.deliver;
    auto rep = deliver_all(*h->p->svc->http, targets, c->cwd, p,
                           webhook_settings_of(h->p->svc->cfg), &h->stop);
    out.delivery_json = delivery_json(rep);
    // A failed run stays an error; a failed target of a good run is its
    // own status, and the answer is still in the session and the record.
    if (!rep.ok() && out.status == cron_run_status::ok) {
      out.status = cron_run_status::delivery_failed;
      out.error = out.error.empty() ? "delivery failed: " + rep.error_text()
                                    : out.error + "\ndelivery failed: "
                                        + rep.error_text();
    }
  }
  out.result = std::move(answer);
  release_session(c);
  report(c, std::move(out));
}

// complete() on the blocking pool; when the pool is stopping the run is
// left for the next start.
void complete_later(const run_ptr& c, std::string answer, cron_outcome out) {
  if (c->rt == nullptr)
    return;
  run_blocking(*c->rt, [c, answer = std::move(answer),
                        out = std::move(out)]() mutable {
    complete(c, std::move(answer), std::move(out));
  });
}

cron_outcome failure(std::string error) {
  cron_outcome o;
  o.status = cron_run_status::error;
  o.error = std::move(error);
  return o;
}

// The skills of the job, loaded as skill_view loads them: their SKILL.md
// text for the prompt, and their variables activated in the run's session.
result<std::string> load_skills(const options& cfg, agent_tool_state* agent,
                                const std::string& sid,
                                const std::vector<std::string>& names) {
  std::string out;
  if (names.empty())
    return out;
  // Shared skills (docs/storage.md, "Per-user state"): the local copy is
  // brought up to date first.
  if (agent != nullptr && agent->user_state)
    if (auto synced = sync_skills(cfg.home, *agent->user_state); !synced)
      return status::failure(synced.code,
                             "the job's skills: " + synced.error);
  auto roots = skill_roots(cfg.home, cfg);
  for (auto& name : names) {
    auto sk = find_skill(roots, name);
    if (!sk)
      return status::failure(status_code::not_found,
                             "the job's skill '" + name + "' was not found");
    auto text = read_whole_file(sk->skill_md, 4 * max_skill_md_chars);
    if (!text)
      return status::failure(status_code::unavailable,
                             "the job's skill '" + name + "': " + text.error);
    if (agent != nullptr)
      agent->activate_skill(sid, sk->name, sk->required_env);
    out += "[Skill '" + sk->name + "' is loaded for this run]\n" + *text
           + "\n\n";
  }
  return out;
}

std::string run_preamble(const cron_job& job) {
  std::string d;
  for (auto& t : job.deliver)
    d += (d.empty() ? "" : ", ") + t;
  return "[Scheduled job '" + job.name + "' (" + job.id
         + "). Nobody is present to answer questions or approve commands; "
           "do the task on your own and end with the final answer, which is "
           "delivered to: "
         + (d.empty() ? std::string{"session"} : d)
         + ". If there is nothing worth reporting, answer exactly "
         + cron_silent_answer + ".]\n\n";
}

std::string run_metadata(const cron_start& s) {
  json::value m;
  m["cron_job_id"] = s.job.id;
  m["cron_run_id"] = s.run.id;
  m["cron_job_name"] = s.job.name;
  return m.dump();
}

// Notes a tool result the approval gate refused (tools/approval_gate.cpp:
// {"status":"blocked","approved":false,"error":...}).
void note_refusal(const run_ptr& c, const tool_event& ev) {
  // The tool's result is JSON text (tool results, not the turn's).
  auto p = json::parse(ev.result_json);
  if (!p)
    return;
  const json::value* r = &*p.v;
  if (!r->is_object()
      || r->get_string("status", "") != "blocked"
      || r->get_bool("approved", true))
    return;
  std::string args = ev.args_json;
  if (args.size() > 300)
    args = args.substr(0, 300) + "...";
  std::lock_guard<std::mutex> g{c->mtx};
  if (c->refused.size() < 20)
    c->refused.push_back((ev.tool.empty() ? std::string{"tool"} : ev.tool)
                         + " " + args + ": "
                         + r->get_string("error", "refused"));
}

session_channels run_channels(cron_host& h) {
  session_channels ch;
  ch.context = approval_context::cron;
  const auto& cfg = h.p->svc->cfg;
  if (cfg.cron.approvals == "http" && cfg.approvals.http == "pending") {
    std::weak_ptr<pending_approvals> weak = h.p->pending;
    ch.approval = [weak](const approval_prompt& p) {
      auto reg = weak.lock();
      return reg ? reg->ask(p) : approval_choice::deny;
    };
  }
  // clarify stays empty: nobody answers questions in a run.
  return ch;
}

// On the blocking pool: loading skills and preparing the turn read files
// and the store, and must not hold the scheduler (the next due job).
void launch_prompt(const std::shared_ptr<cron_host>& hp, const run_ptr& c) {
  auto& h = *hp;
  auto& job = c->s.job;
  auto skills = load_skills(h.p->svc->cfg, h.p->svc->agent_tools.get(),
                            c->sid, job.skills);
  if (!skills) {
    complete_later(c, "", failure(skills.error));
    return;
  }
  turn_call call;
  call.session_id = c->sid;
  call.prompt = run_preamble(job) + *skills + job.prompt;
  // The job's provider and model, else the node's overrides (a job that
  // names its provider takes the configuration's URL and key for it).
  call.provider.provider = job.provider.empty() ? h.opts.provider.provider
                                                : job.provider;
  call.provider.model = job.model.empty() ? h.opts.provider.model
                                          : job.model;
  if (job.provider.empty()) {
    call.provider.base_url = h.opts.provider.base_url;
    call.provider.api_key = h.opts.provider.api_key;
  }
  call.toolsets = job.toolsets;
  call.stream = false;
  call.source = "cron";
  call.cwd = job.cwd;
  call.metadata = run_metadata(c->s);
  call.on_tool = [c](const tool_event& ev) {
    if (ev.what == tool_event::phase::end)
      note_refusal(c, ev);
  };
  c->rt->set_session_channels(c->sid, run_channels(h));
  c->rt->run_turn_async(call, [c](turn_result r) {
    if (!r.started) {
      complete_later(c, "", failure(r.error));
      return;
    }
    auto or_else = [](const std::string& s, const char* fallback) {
      return s.empty() ? std::string{fallback} : s;
    };
    std::string answer = r.final_response.value_or("");
    cron_outcome o;
    if (r.failed) {
      o = failure(or_else(r.error, "the turn failed"));
      // Provider unreachable after its retries: the engine retries the
      // run later (5, 15, 30 minutes).
      o.provider_unreachable = r.retryable;
    } else if (r.interrupted) {
      o = failure(or_else(r.error, "the run was interrupted"));
    } else if (answer.empty()) {
      o = failure("the run ended without an answer (" + turn_exit_reason(r)
                  + ")");
    } else {
      o.status = cron_run_status::ok;
      if (!r.completed)
        o.error = "the run ended early: " + turn_exit_reason(r)
                  + (r.error.empty() ? "" : " (" + r.error + ")");
    }
    complete_later(c, std::move(answer), std::move(o));
  });
}

// The messages a script run leaves in its session, so it reads like a
// conversation: the request, the execute_code call and result, the output.
std::vector<chat_message> script_transcript(const cron_start& s,
                                            const std::string& args,
                                            const std::string& call_id,
                                            const std::string& result_json,
                                            const std::string& output) {
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count();
  std::vector<chat_message> m(4);
  m[0].role = "user";
  m[0].content = "Scheduled script job '" + s.job.name + "' (" + s.job.id
                 + "), run " + s.run.id;
  m[1].role = "assistant";
  m[1].tool_calls.push_back(tool_call{call_id, "execute_code", args});
  m[1].finish_reason = "tool_calls";
  m[2].role = "tool";
  m[2].tool_call_id = call_id;
  m[2].tool_name = "execute_code";
  m[2].content = result_json;
  m[3].role = "assistant";
  m[3].content = output;
  m[3].finish_reason = "stop";
  for (auto& x : m)
    x.timestamp_ms = now;
  return m;
}

void launch_script(cron_sched_state& st, const run_ptr& c) {
  auto& h = *st.host;
  auto* self = st.self;
  session_meta meta;
  meta.id = c->sid;
  meta.source = "cron";
  meta.cwd = c->cwd;
  meta.title = "cron: " + c->s.job.name;
  meta.metadata_json = run_metadata(c->s);
  session_writer_actor writer;
  tool_dispatcher_actor dispatcher;
  {
    std::lock_guard<std::mutex> g{h.p->mtx};
    writer = h.p->writer;
    dispatcher = h.p->dispatcher;
  }
  if (!writer || !dispatcher) {
    complete_later(c, "", failure("the runtime is shutting down"));
    return;
  }
  self->request(writer, caf::infinite, create_atom_v, meta)
    .then(
      [self, c, writer, dispatcher, &h](std::string&) {
        // A person wrote this script and scheduled it: the script as a
        // whole is approved as theirs, and each command it runs still
        // follows approvals.cron_mode. A script the model scheduled
        // (created_by agent) needs cron_mode for the script as well.
        auto ch = run_channels(h);
        ch.approve_scripts = c->s.job.created_by != "agent";
        c->rt->set_session_channels(c->sid, std::move(ch));
        json::value a;
        a["code"] = c->s.job.script;
        auto args = a.dump();
        auto call_id = "cron_" + c->s.run.id;
        // A gateway's dispatcher is the cluster member: the cell runs on a
        // worker like any turn's tool call.
        self
          ->request(dispatcher, caf::infinite, invoke_atom_v,
                    tool_request{c->sid, call_id, "execute_code", args,
                                 c->cwd, false})
          .then(
            [self, c, writer, args, call_id](tool_response& r) {
              auto res = json::parse(r.result_json);
              std::string output;
              cron_outcome o;
              o.status = cron_run_status::ok;
              if (res && res.v->is_object()) {
                output = res.v->get_string("output", "");
                auto status = res.v->get_string("status", "");
                if (status != "success")
                  o = failure("the script ended with status '" + status
                              + "': "
                              + res.v->get_string("error", "no error text"));
              } else {
                o = failure("execute_code answered with no result object");
              }
              auto msgs = script_transcript(c->s, args, call_id,
                                            r.result_json, output);
              auto left = std::make_shared<size_t>(msgs.size());
              auto fin = [c, output, o, left]() {
                if (--*left == 0)
                  complete_later(c, output, o);
              };
              for (auto& m : msgs)
                self
                  ->request(writer, caf::infinite, append_atom_v,
                            message_append{c->sid, std::move(m), {}})
                  .then([fin](uint64_t) { fin(); },
                        [fin](caf::error&) { fin(); });
            },
            [self, c](caf::error& e) {
              complete_later(c, "",
                             failure("execute_code failed: "
                                     + self->system().render(e)));
            });
      },
      [self, c](caf::error& e) {
        complete_later(c, "",
                       failure("cannot create the run's session: "
                               + self->system().render(e)));
      });
}

} // namespace

void launch_cron_run(cron_sched_state& st, const cron_start& s,
                     const std::string& session_id) {
  auto c = std::make_shared<run_ctx>();
  c->host = st.host;
  c->rt = st.host->rt;
  c->s = s;
  c->sid = session_id;
  c->cwd = s.job.cwd.empty() ? st.host->p->svc->default_cwd : s.job.cwd;
  if (c->rt == nullptr) {
    report(c, failure("the scheduler has no runtime"));
    return;
  }
  if (st.host->opts.check_cwd && !s.job.cwd.empty()) {
    std::error_code ec;
    if (!fs::is_directory(s.job.cwd, ec)) {
      // No session is made: the run never started.
      c->sid.clear();
      complete_later(c, "",
                     failure("the job's working directory " + s.job.cwd
                             + " does not exist any more ("
                             + (ec ? ec.message()
                                   : std::string{"not a directory"})
                             + "); edit the job's cwd or create it"));
      return;
    }
  }
  if (!s.job.script.empty()) {
    launch_script(st, c);
    return;
  }
  auto host = st.host;
  if (!run_blocking(*c->rt, [host, c] { launch_prompt(host, c); }))
    report(c, failure("the runtime is shutting down"));
}

} // namespace mibyan
