// The verbs of scheduled jobs (cron/cron_service.hpp): to the scheduler
// actor of this process, to the scheduler of another process
// (cron_requests.cpp), or, when no scheduler runs for the store, to the
// store directly under the store's lease. Reads always go to the store:
// the scheduler persists every change before it answers.
#include "runtime/cron_internal.hpp"

#include <unistd.h>

#include "base/log.hpp"
#include "cron/prompt_scan.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

namespace {

cron_time wall_now() {
  return std::chrono::time_point_cast<std::chrono::milliseconds>(
    std::chrono::system_clock::now());
}

// A changed prompt is checked for instruction overrides (cron/prompt_scan).
status check_job_prompt(const cron_job& j) {
  if (j.prompt.empty())
    return {};
  return check_prompt_text(j.prompt, "the job's prompt");
}

json::value failure_json(const status& s) {
  json::value v;
  v["ok"] = false;
  v["code"] = to_string(s.code);
  v["error"] = s.error;
  return v;
}

json::value ok_json(const std::string& id) {
  json::value v;
  v["ok"] = true;
  v["id"] = id;
  return v;
}

status_code code_from(const std::string& name) {
  for (auto c : {status_code::invalid_argument, status_code::not_found,
                 status_code::already_exists, status_code::permission_denied,
                 status_code::unavailable, status_code::timeout,
                 status_code::cancelled, status_code::resource_exhausted,
                 status_code::data_corrupt, status_code::config_invalid})
    if (name == to_string(c))
      return c;
  return status_code::internal;
}

// The job id a reply names, or its failure.
result<std::string> reply_id(const json::value& r) {
  if (r.get_bool("ok", false))
    return r.get_string("id", "");
  return status::failure(code_from(r.get_string("code", "")),
                         r.get_string("error", "the scheduler refused"));
}

size_t history_keep(const options& cfg) {
  return static_cast<size_t>(cfg.cron.history_keep);
}

// -- no scheduler runs: the store, under the lease ----------------------------

result<std::string> apply_offline(session_store& store, const options& cfg,
                                  const json::value& v) {
  using R = result<std::string>;
  auto op = v.get_string("op", "");
  auto id = v.get_string("id", "");
  auto now = cron_ms(wall_now());
  if (op == "add") {
    auto* jv = v.find("job");
    if (jv == nullptr)
      return R::failure(status_code::invalid_argument, "no job given");
    auto def = cron_job_from_json(*jv, cfg.cron.default_timezone, true);
    if (!def)
      return R{def.get_status()};
    if (auto s = check_job_prompt(*def); !s)
      return R{s};
    if (!def->id.empty() && store.get_cron_job(def->id))
      return R::failure(status_code::already_exists,
                        "a job '" + def->id + "' exists already");
    // A fresh engine computes the new job's state exactly as the scheduler
    // would; it holds no other job, and loading none has no side effects.
    cron_engine_options eo;
    eo.clock = wall_now;
    eo.default_zone = cfg.cron.default_timezone;
    cron_engine e{eo};
    auto ch = e.add(std::move(*def));
    if (!ch)
      return R{ch.get_status()};
    auto new_id = ch->jobs.empty() ? std::string{} : ch->jobs.back().id;
    if (auto s = store.apply_cron_changes(*ch, history_keep(cfg)); !s)
      return R{s};
    return new_id;
  }
  if (op == "remove") {
    if (auto s = store.delete_cron_job(id); !s)
      return R{s};
    return id;
  }
  if (op == "run_now")
    return R::failure(status_code::unavailable,
                      "no scheduler runs for this store, so nothing would "
                      "run the job: start `mibyan cron run`, `mibyan serve` "
                      "or a gateway node");
  if (op != "update" && op != "pause" && op != "resume")
    return R::failure(status_code::invalid_argument,
                      "unknown verb '" + op + "'");
  // The same state rules as the engine's verbs (cron/engine.cpp), applied
  // to the stored record in one transaction.
  auto patch = v.find("patch");
  auto reason = v.get_string("reason", "");
  auto r = store.update_cron_job(id, [&](cron_job& j) -> status {
    if (op == "pause") {
      if (j.paused)
        return {};
      j.paused = true;
      j.pause_reason = reason.empty() ? "paused by a user" : reason;
      j.next_run_ms = 0;
      j.retry_at_ms = 0;
      j.retry_attempt = 0;
      j.updated_ms = now;
      return {};
    }
    auto sched = cron_job_schedule(j);
    if (op == "resume") {
      if (!j.paused)
        return {};
      if (!sched)
        return sched.get_status();
      auto n = sched->next_after(cron_time_from_ms(
        std::max(now, j.last_slot_ms)));
      if (!n)
        return status::failure(status_code::invalid_argument,
                               "job '" + j.id + "': its time has passed ("
                                 + sched->describe()
                                 + "); give it a new schedule");
      j.paused = false;
      j.pause_reason.clear();
      j.consecutive_failures = 0;
      j.retry_attempt = 0;
      j.retry_at_ms = 0;
      j.enabled = true;
      j.next_run_ms = cron_ms(*n);
      j.updated_ms = now;
      return {};
    }
    auto before = j;
    if (patch == nullptr)
      return status::failure(status_code::invalid_argument,
                             "no changes given");
    if (auto s = cron_job_patch(j, *patch); !s)
      return s;
    if (j.prompt != before.prompt)
      if (auto s = check_job_prompt(j); !s)
        return s;
    j.updated_ms = now;
    if (j.schedule != before.schedule || j.timezone != before.timezone) {
      auto s2 = cron_job_schedule(j);
      if (!s2)
        return s2.get_status();
      auto n = s2->next_after(cron_time_from_ms(now));
      if (n) {
        j.enabled = true;
        j.next_run_ms = j.paused ? 0 : cron_ms(*n);
      } else {
        j.next_run_ms = 0;
        if (s2->one_shot())
          j.enabled = false;
      }
    }
    return {};
  });
  if (!r)
    return R{r.get_status()};
  return id;
}

// A verb where this process does not run the scheduler: to the process
// that does, else to the store under the lease. A holder that dies while
// the request waits untaken stops renewing its lease; once it lapsed the
// request is withdrawn and applied here under the lease (the next
// scheduler loads it from the store), all within answer_timeout.
result<std::string> mutate_elsewhere(session_store& store,
                                     const std::string& store_dir,
                                     const options& cfg,
                                     const json::value& verb) {
  using R = result<std::string>;
  auto deadline = std::chrono::steady_clock::now()
                  + cron_service::answer_timeout;
  auto holder = "pid " + std::to_string(::getpid()) + " (editing jobs)";
  auto ttl = cron_lease::ttl_for(cfg.cluster.failure_timeout_ms);
  for (;;) {
    auto lease = cron_lease::try_acquire(store, holder, ttl);
    if (lease) {
      auto r = apply_offline(store, cfg, verb);
      lease->reset();
      return r;
    }
    if (lease.code != status_code::unavailable)
      return R{lease.get_status()};
    auto sent = send_cron_request(
      store_dir, verb.get_string("op", ""), verb, deadline,
      [&store] { return cron_lease::holder_of(store).empty(); },
      [&store] { return cron_lease::holder_of(store); });
    if (!sent)
      return R{sent.get_status()};
    if (!sent->withdrawn)
      return reply_id(sent->reply);
    if (std::chrono::steady_clock::now() >= deadline)
      return R::failure(status_code::unavailable,
                        "the scheduler of this store went away and no "
                        "other took over within "
                          + std::to_string(
                            cron_service::answer_timeout.count())
                          + " s; nothing was changed");
  }
}

json::value verb_json(const std::string& op, const std::string& id) {
  json::value v;
  v["op"] = op;
  v["id"] = id;
  return v;
}

class service_impl final : public cron_service {
public:
  service_impl(std::weak_ptr<cron_host> host,
               std::shared_ptr<session_store> store, std::string store_dir,
               options cfg)
    : host_(std::move(host)), store_(std::move(store)),
      store_dir_(std::move(store_dir)), cfg_(std::move(cfg)) {}

  result<cron_job> add(cron_job def) override {
    auto v = verb_json("add", def.id);
    v["job"] = cron_job_to_json(def, cron_json_parts::all);
    return after(mutate(v));
  }
  result<cron_job> update(const std::string& id,
                          const json::value& patch) override {
    auto v = verb_json("update", id);
    v["patch"] = patch;
    return after(mutate(v));
  }
  status remove(const std::string& id) override {
    return mutate(verb_json("remove", id)).get_status();
  }
  result<cron_job> pause(const std::string& id,
                         const std::string& reason) override {
    auto v = verb_json("pause", id);
    v["reason"] = reason;
    return after(mutate(v));
  }
  result<cron_job> resume(const std::string& id) override {
    return after(mutate(verb_json("resume", id)));
  }
  result<cron_job> run_now(const std::string& id) override {
    return after(mutate(verb_json("run_now", id)));
  }
  result<cron_job> get(const std::string& id) override {
    if (!store_)
      return unavailable();
    auto r = store_->get_cron_job(id);
    if (!r)
      return result<cron_job>{r.get_status()};
    return *r;
  }
  result<cron_job_list> list() override {
    if (!store_)
      return result<cron_job_list>{unavailable().get_status()};
    auto r = store_->list_cron_jobs(false);
    if (!r)
      return result<cron_job_list>{r.get_status()};
    return std::move(*r);
  }
  result<std::vector<cron_run>> history(const std::string& id, size_t limit,
                                        size_t offset, bool* more) override {
    using R = result<std::vector<cron_run>>;
    if (!store_)
      return R{unavailable().get_status()};
    if (!store_->get_cron_job(id))
      return R::failure(status_code::not_found, "no job '" + id + "'");
    auto r = store_->list_cron_runs(id, limit, offset, more);
    if (!r)
      return R{r.get_status()};
    return std::move(*r);
  }
  cron_scheduler_info scheduler() override {
    cron_scheduler_info i;
    auto h = host_.lock();
    i.here = h && h->active;
    if (store_)
      i.holder = cron_lease::holder_of(*store_);
    return i;
  }

private:
  static result<cron_job> unavailable() {
    return result<cron_job>::failure(status_code::unavailable,
                                     "the session store is unavailable");
  }

  result<cron_job> after(result<std::string> id) {
    if (!id)
      return result<cron_job>{id.get_status()};
    return get(*id);
  }

  result<std::string> mutate(const json::value& verb) {
    using R = result<std::string>;
    if (!store_)
      return R{unavailable().get_status()};
    if (auto h = host_.lock(); h && h->active) {
      auto done = std::make_shared<std::promise<json::value>>();
      auto f = done->get_future();
      if (h->post([done, verb](cron_sched_state& st) {
            apply_cron_verb(st, verb.get_string("op", ""), verb,
                            [done](json::value r) {
                              done->set_value(std::move(r));
                            });
          })) {
        if (f.wait_for(answer_timeout) != std::future_status::ready)
          return R::failure(status_code::unavailable,
                            "the scheduler did not answer within "
                              + std::to_string(answer_timeout.count())
                              + " s");
        try {
          return reply_id(f.get());
        } catch (const std::future_error&) {
          return R::failure(status_code::unavailable,
                            "the scheduler stopped");
        }
      }
    }
    return mutate_elsewhere(*store_, store_dir_, cfg_, verb);
  }

  std::weak_ptr<cron_host> host_;
  std::shared_ptr<session_store> store_;
  std::string store_dir_;
  options cfg_;
};

} // namespace

void apply_cron_verb(cron_sched_state& st, const std::string& op,
                     const json::value& v,
                     std::function<void(json::value)> reply) {
  auto fail = [&](const status& s) { reply(failure_json(s)); };
  if (!st.engine)
    return fail(status::failure(status_code::unavailable,
                                "the scheduler is not active"));
  auto& e = *st.engine;
  auto id = v.get_string("id", "");
  result<cron_changes> ch;
  const auto& cfg = st.host->p->svc->cfg;
  if (op == "add") {
    auto* jv = v.find("job");
    if (jv == nullptr)
      return fail(status::failure(status_code::invalid_argument,
                                          "no job given"));
    auto def = cron_job_from_json(*jv, cfg.cron.default_timezone, true);
    if (!def)
      return fail(def.get_status());
    if (auto s = check_job_prompt(*def); !s)
      return fail(s);
    ch = e.add(std::move(*def));
    if (ch && !ch->jobs.empty())
      id = ch->jobs.back().id;
  } else if (op == "update") {
    auto j = e.job(id);
    if (!j)
      return fail(j.get_status());
    auto* patch = v.find("patch");
    if (patch == nullptr)
      return fail(status::failure(status_code::invalid_argument,
                                          "no changes given"));
    auto before = j->prompt;
    if (auto s = cron_job_patch(*j, *patch); !s)
      return fail(s);
    if (j->prompt != before)
      if (auto s = check_job_prompt(*j); !s)
        return fail(s);
    ch = e.update(std::move(*j));
  } else if (op == "remove") {
    ch = e.remove(id);
  } else if (op == "pause") {
    ch = e.pause(id, v.get_string("reason", ""));
  } else if (op == "resume") {
    ch = e.resume(id);
  } else if (op == "run_now") {
    ch = e.run_now(id);
  } else {
    return fail(status::failure(status_code::invalid_argument,
                                        "unknown verb '" + op + "'"));
  }
  if (!ch)
    return fail(ch.get_status());
  // Answered once stored (with what was pending): readers of the store
  // see the change when the verb returns.
  st.persist(std::move(*ch), [reply, id] { reply(ok_json(id)); });
  // The timer follows the change (a new job, a moved schedule, a run
  // queued now).
  ++st.timer_gen;
  st.tick();
}

std::shared_ptr<cron_service> cron_of(runtime& rt) {
  return cron_service_of(runtime_access::of(rt));
}

std::shared_ptr<cron_service> cron_service_of(runtime_impl& p) {
  auto h = cron_host_of(p);
  std::lock_guard<std::mutex> g{h->mtx};
  if (!h->service)
    h->service = std::make_shared<service_impl>(h, h->store, h->store_dir,
                                                p.svc->cfg);
  return h->service;
}

std::shared_ptr<cron_service>
open_cron_service(std::shared_ptr<session_store> store,
                  const std::string& store_dir, const options& cfg) {
  return std::make_shared<service_impl>(std::weak_ptr<cron_host>{},
                                        std::move(store), store_dir, cfg);
}

} // namespace mibyan
