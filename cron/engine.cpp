#include "cron/engine.hpp"

#include <algorithm>

namespace mibyan {

namespace {

int64_t positive_min(int64_t a, int64_t b) {
  if (a <= 0)
    return b;
  if (b <= 0)
    return a;
  return std::min(a, b);
}

status unknown_job(const std::string& id) {
  return status::failure(status_code::not_found, "no job '" + id + "'");
}

} // namespace

cron_engine::cron_engine(cron_engine_options opts) : opts_(std::move(opts)) {
  if (!opts_.clock)
    opts_.clock = [] {
      return std::chrono::time_point_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now());
    };
  if (!opts_.new_run_id)
    opts_.new_run_id = [] { return new_cron_run_id(); };
  if (opts_.max_concurrent < 1)
    opts_.max_concurrent = 1;
}

cron_time cron_engine::now() { return opts_.clock(); }

// -- the timeline ---------------------------------------------------------------

void cron_engine::unschedule(entry& e) {
  if (e.wake_ms != 0)
    timeline_.erase({e.wake_ms, e.job.id});
  e.wake_ms = 0;
}

void cron_engine::leave_waiting(entry& e) {
  if (!e.waiting)
    return;
  e.waiting = false;
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), e.job.id),
                 waiting_.end());
}

void cron_engine::reschedule(entry& e) {
  unschedule(e);
  if (e.waiting || !e.job.enabled || e.job.paused || !e.sched)
    return;
  // A running job wakes for its next slot only (to record a skip); a
  // pending retry waits until the run ends.
  int64_t w = e.job.running_run_id.empty()
                ? positive_min(e.job.next_run_ms, e.job.retry_at_ms)
                : e.job.next_run_ms;
  if (w <= 0)
    return;
  e.wake_ms = w;
  timeline_.insert({w, e.job.id});
}

int64_t cron_engine::next_slot_after(entry& e, int64_t after_ms) const {
  if (!e.sched)
    return 0;
  auto from = std::max(after_ms, e.job.last_slot_ms);
  auto n = e.sched->next_after(cron_time_from_ms(from));
  return n ? cron_ms(*n) : 0;
}

void cron_engine::queue(entry& e, const char* trigger, int64_t slot_ms) {
  unschedule(e);
  e.waiting = true;
  e.pending_trigger = trigger;
  e.pending_slot_ms = slot_ms;
  waiting_.push_back(e.job.id);
}

cron_run cron_engine::new_run(const entry& e, const char* trigger,
                              int64_t slot_ms, int64_t now_ms) const {
  cron_run r;
  r.id = opts_.new_run_id();
  r.job_id = e.job.id;
  r.scheduled_for_ms = slot_ms;
  r.started_ms = now_ms;
  r.status = cron_run_status::running;
  r.trigger = trigger;
  return r;
}

void cron_engine::rebase_all(int64_t now_ms, cron_changes& ch) {
  for (auto& [id, e] : jobs_) {
    if (!e.sched || !e.job.enabled || e.job.paused)
      continue;
    bool changed = false;
    // The slots recorded on the wrong clock no longer bind.
    if (e.job.last_slot_ms > now_ms) {
      e.job.last_slot_ms = 0;
      changed = true;
    }
    if (e.job.next_run_ms > 0) {
      auto n = next_slot_after(e, now_ms);
      if (n != e.job.next_run_ms) {
        e.job.next_run_ms = n;
        changed = true;
      }
    }
    if (e.job.retry_at_ms > now_ms && !opts_.retry_delays.empty()) {
      auto idx = static_cast<size_t>(
        std::clamp<int64_t>(e.job.retry_attempt - 1, 0,
                            static_cast<int64_t>(opts_.retry_delays.size())
                              - 1));
      auto limit = now_ms + opts_.retry_delays[idx].count();
      if (e.job.retry_at_ms > limit) {
        e.job.retry_at_ms = limit;
        changed = true;
      }
    }
    if (changed) {
      reschedule(e);
      ch.jobs.push_back(e.job);
    }
  }
}

void cron_engine::note_time(cron_time t) {
  auto ms = cron_ms(t);
  if (ms > high_water_ms_)
    high_water_ms_ = ms;
}

// -- loading ----------------------------------------------------------------------

cron_changes cron_engine::load(
  std::vector<cron_job> jobs,
  const std::function<std::optional<cron_run>(const std::string&)>&
    find_run) {
  cron_changes ch;
  auto t = now();
  auto now_ms = cron_ms(t);
  high_water_ms_ = std::max(high_water_ms_, now_ms);
  for (auto& j : jobs) {
    auto id = j.id;
    if (jobs_.count(id) != 0)
      continue;
    entry& e = jobs_[id];
    e.job = std::move(j);
    bool changed = false;
    auto s = cron_job_schedule(e.job);
    if (s) {
      e.sched = std::move(*s);
    } else if (e.job.enabled && !e.job.paused) {
      e.job.paused = true;
      e.job.pause_reason = "the schedule no longer parses: " + s.error;
      e.job.next_run_ms = 0;
      changed = true;
    }
    // A run found going was interrupted by the stop.
    bool interrupted = false;
    int64_t interrupted_slot = 0;
    if (!e.job.running_run_id.empty()) {
      std::optional<cron_run> stored;
      if (find_run)
        stored = find_run(e.job.running_run_id);
      cron_run r;
      if (stored && stored->job_id == e.job.id) {
        r = std::move(*stored);
      } else {
        r.id = e.job.running_run_id;
        r.job_id = e.job.id;
        r.started_ms = e.job.last_run_ms;
        r.scheduled_for_ms = e.job.last_slot_ms;
        r.trigger = cron_trigger::schedule;
      }
      r.status = cron_run_status::interrupted;
      r.ended_ms = std::max(now_ms, r.started_ms);
      r.error = "the scheduler stopped while the run was going";
      ch.runs.push_back(r);
      interrupted_slot = e.job.last_slot_ms;
      e.job.running_run_id.clear();
      e.job.last_status = cron_run_status::interrupted;
      interrupted = true;
      changed = true;
    }
    if (e.job.enabled && !e.job.paused && e.sched) {
      if (e.job.next_run_ms == 0 && !e.sched->one_shot()
          && e.job.retry_at_ms == 0) {
        e.job.next_run_ms = next_slot_after(e, now_ms);
        changed = true;
      }
      bool missed = e.job.next_run_ms > 0 && e.job.next_run_ms <= now_ms;
      if (missed || interrupted) {
        int64_t slot = missed ? e.job.next_run_ms
                              : (interrupted_slot > 0 ? interrupted_slot
                                                      : now_ms);
        if (opts_.catch_up == cron_catch_up::one) {
          queue(e, cron_trigger::catch_up, slot);
        } else {
          cron_run r = new_run(e, cron_trigger::schedule, slot, now_ms);
          r.status = cron_run_status::skipped;
          r.ended_ms = now_ms;
          r.error = missed ? "missed while the scheduler was down "
                             "(cron.catch_up: none)"
                           : "interrupted, not run again (cron.catch_up: "
                             "none)";
          ch.runs.push_back(r);
          if (missed) {
            e.job.last_slot_ms = std::max(e.job.last_slot_ms, slot);
            e.job.next_run_ms = next_slot_after(e, now_ms);
          }
          if (e.job.next_run_ms == 0 && e.sched->one_shot()
              && e.job.retry_at_ms == 0) {
            e.job.enabled = false;
          }
          e.job.last_status = cron_run_status::skipped;
        }
        changed = true;
      }
    }
    reschedule(e);
    if (changed)
      ch.jobs.push_back(e.job);
  }
  return ch;
}

// -- waking -----------------------------------------------------------------------

std::optional<cron_time> cron_engine::next_wake() const {
  std::optional<int64_t> w;
  if (!timeline_.empty())
    w = timeline_.begin()->first;
  if (!waiting_.empty()
      && static_cast<int64_t>(running_.size()) < opts_.max_concurrent) {
    auto it = jobs_.find(waiting_.front());
    int64_t x = it != jobs_.end() ? it->second.pending_slot_ms : 0;
    w = w ? std::min(*w, x) : x;
  }
  if (!w)
    return std::nullopt;
  return cron_time_from_ms(*w);
}

cron_changes cron_engine::due(std::vector<cron_start>& out) {
  cron_changes ch;
  auto t = now();
  auto now_ms = cron_ms(t);
  if (now_ms + opts_.rebase_after.count() < high_water_ms_) {
    rebase_all(now_ms, ch);
    high_water_ms_ = now_ms;
  }
  note_time(t);
  // 1. Everything due leaves the timeline: skipped when running, queued
  // otherwise.
  while (!timeline_.empty() && timeline_.begin()->first <= now_ms) {
    auto id = timeline_.begin()->second;
    timeline_.erase(timeline_.begin());
    auto it = jobs_.find(id);
    if (it == jobs_.end())
      continue;
    entry& e = it->second;
    e.wake_ms = 0;
    if (!e.job.running_run_id.empty()) {
      int64_t slot = e.job.next_run_ms;
      if (slot > 0 && slot <= now_ms) {
        cron_run r = new_run(e, cron_trigger::schedule, slot, now_ms);
        r.status = cron_run_status::skipped;
        r.ended_ms = now_ms;
        r.error = "the previous run (" + e.job.running_run_id
                  + ") was still going";
        ch.runs.push_back(r);
        e.job.last_slot_ms = std::max(e.job.last_slot_ms, slot);
        e.job.next_run_ms = next_slot_after(e, now_ms);
        ch.jobs.push_back(e.job);
      }
      reschedule(e);
      continue;
    }
    if (e.job.retry_at_ms > 0)
      queue(e, cron_trigger::retry, e.job.retry_at_ms);
    else
      queue(e, cron_trigger::schedule, e.job.next_run_ms);
  }
  // 2. Start waiting jobs while run slots are free.
  while (static_cast<int64_t>(running_.size()) < opts_.max_concurrent
         && !waiting_.empty()) {
    auto id = waiting_.front();
    waiting_.pop_front();
    auto it = jobs_.find(id);
    if (it == jobs_.end() || !it->second.waiting)
      continue;
    entry& e = it->second;
    e.waiting = false;
    std::string_view trigger = e.pending_trigger;
    cron_run r = new_run(e, e.pending_trigger, e.pending_slot_ms, now_ms);
    if (trigger != cron_trigger::manual) {
      // The slots up to now are used by this run.
      if (e.job.next_run_ms > 0 && e.job.next_run_ms <= now_ms) {
        e.job.last_slot_ms = std::max(e.job.last_slot_ms, e.job.next_run_ms);
        e.job.next_run_ms = next_slot_after(e, now_ms);
      }
      if (e.job.retry_at_ms > 0) {
        r.trigger = cron_trigger::retry;
        r.attempt = e.job.retry_attempt;
        e.job.retry_at_ms = 0;
      }
    }
    e.job.running_run_id = r.id;
    e.job.last_run_ms = now_ms;
    ++e.job.run_count;
    running_[r.id] = active_run{r};
    ch.jobs.push_back(e.job);
    ch.runs.push_back(r);
    out.push_back(cron_start{r, e.job});
    reschedule(e);
  }
  return ch;
}

result<cron_changes> cron_engine::started(const std::string& run_id,
                                          const std::string& session_id) {
  auto it = running_.find(run_id);
  if (it == running_.end())
    return result<cron_changes>::failure(status_code::not_found,
                                         "no run '" + run_id
                                           + "' in progress");
  it->second.run.session_id = session_id;
  cron_changes ch;
  if (jobs_.count(it->second.run.job_id) != 0)
    ch.runs.push_back(it->second.run);
  return ch;
}

result<cron_changes> cron_engine::finished(const std::string& run_id,
                                           const cron_outcome& o) {
  using R = result<cron_changes>;
  auto it = running_.find(run_id);
  if (it == running_.end())
    return R::failure(status_code::not_found,
                      "no run '" + run_id + "' in progress");
  if (!o.provider_unreachable
      && o.status != cron_run_status::ok && o.status != cron_run_status::silent
      && o.status != cron_run_status::error
      && o.status != cron_run_status::delivery_failed)
    return R::failure(status_code::invalid_argument,
                      "a run ends ok, silent, error or delivery_failed, not '"
                        + o.status + "'");
  cron_run r = std::move(it->second.run);
  running_.erase(it);
  auto now_ms = cron_ms(now());
  note_time(cron_time_from_ms(now_ms));
  r.ended_ms = std::max(now_ms, r.started_ms);
  if (!o.session_id.empty())
    r.session_id = o.session_id;
  r.result = cron_cap_text(o.result, cron_run_result_max_bytes);
  r.error = cron_cap_text(o.error, cron_run_error_max_bytes);
  r.delivery_json = o.delivery_json;
  cron_changes ch;
  auto jt = jobs_.find(r.job_id);
  if (jt == jobs_.end())
    return ch; // removed while it ran
  entry& e = jt->second;
  if (e.job.running_run_id == r.id)
    e.job.running_run_id.clear();
  bool final = true;
  bool failure = false;
  if (o.provider_unreachable) {
    auto attempt = static_cast<size_t>(std::max<int64_t>(r.attempt, 0));
    if (attempt < opts_.retry_delays.size()) {
      r.status = cron_run_status::unreachable;
      e.job.retry_attempt = r.attempt + 1;
      e.job.retry_at_ms = now_ms + opts_.retry_delays[attempt].count();
      final = false;
    } else {
      r.status = cron_run_status::failed;
      if (r.error.empty())
        r.error = "the provider was unreachable at every retry";
      e.job.retry_attempt = 0;
      e.job.retry_at_ms = 0;
      failure = true;
    }
  } else {
    r.status = o.status;
    e.job.retry_attempt = 0;
    e.job.retry_at_ms = 0;
    failure = cron_status_is_failure(r.status);
  }
  e.job.last_status = r.status;
  if (cron_status_is_success(r.status))
    e.job.consecutive_failures = 0;
  if (failure) {
    ++e.job.consecutive_failures;
    if (opts_.max_failures > 0
        && e.job.consecutive_failures >= opts_.max_failures
        && !e.job.paused) {
      e.job.paused = true;
      std::string last = r.error.empty() ? r.status : r.error;
      if (last.size() > 300)
        last = cron_cap_text(last, 300);
      e.job.pause_reason = "paused after "
                           + std::to_string(e.job.consecutive_failures)
                           + " consecutive failures: " + last;
      e.job.next_run_ms = 0;
      leave_waiting(e);
    }
  }
  if (final && e.sched && e.sched->one_shot() && e.job.next_run_ms == 0
      && r.trigger != cron_trigger::manual) {
    e.job.enabled = false;
  }
  reschedule(e);
  ch.jobs.push_back(e.job);
  ch.runs.push_back(std::move(r));
  return ch;
}

// -- operations -------------------------------------------------------------------

result<cron_changes> cron_engine::add(cron_job j) {
  using R = result<cron_changes>;
  auto now_ms = cron_ms(now());
  if (j.id.empty())
    j.id = new_cron_job_id();
  if (jobs_.count(j.id) != 0)
    return R::failure(status_code::already_exists,
                      "a job '" + j.id + "' exists already");
  if (j.created_ms == 0)
    j.created_ms = now_ms;
  if (j.updated_ms == 0)
    j.updated_ms = j.created_ms;
  if (j.timezone.empty())
    j.timezone = opts_.default_zone.empty() ? cron_local_zone_name()
                                            : opts_.default_zone;
  if (j.created_by.empty())
    j.created_by = "user";
  bool paused = j.paused;
  std::string reason = j.pause_reason;
  // The state starts fresh.
  cron_job fresh;
  j.enabled = true;
  j.paused = paused;
  j.pause_reason = paused ? (reason.empty() ? "paused by a user" : reason)
                          : std::string{};
  j.last_slot_ms = fresh.last_slot_ms;
  j.last_run_ms = fresh.last_run_ms;
  j.next_run_ms = 0;
  j.last_status.clear();
  j.consecutive_failures = 0;
  j.retry_attempt = 0;
  j.retry_at_ms = 0;
  j.running_run_id.clear();
  j.run_count = 0;
  if (auto st = validate_cron_job(j); !st)
    return R{st};
  auto s = cron_job_schedule(j);
  if (!s)
    return R{s.get_status()};
  auto first = s->next_after(cron_time_from_ms(now_ms));
  if (!first)
    return R::failure(status_code::invalid_argument,
                      "schedule '" + j.schedule
                        + "': its time has passed (" + s->describe() + ")");
  if (!paused)
    j.next_run_ms = cron_ms(*first);
  entry& e = jobs_[j.id];
  e.job = std::move(j);
  e.sched = std::move(*s);
  reschedule(e);
  cron_changes ch;
  ch.jobs.push_back(e.job);
  return ch;
}

result<cron_changes> cron_engine::update(cron_job j) {
  using R = result<cron_changes>;
  auto it = jobs_.find(j.id);
  if (it == jobs_.end())
    return R{unknown_job(j.id)};
  entry& e = it->second;
  auto now_ms = cron_ms(now());
  const cron_job& old = e.job;
  cron_job next = old;
  next.name = j.name;
  next.schedule = j.schedule;
  next.timezone = j.timezone.empty() ? old.timezone : j.timezone;
  next.prompt = j.prompt;
  next.script = j.script;
  next.skills = j.skills;
  next.cwd = j.cwd;
  next.toolsets = j.toolsets;
  next.model = j.model;
  next.provider = j.provider;
  next.deliver = j.deliver;
  next.updated_ms = now_ms;
  if (auto st = validate_cron_job(next); !st)
    return R{st};
  auto s = cron_job_schedule(next);
  if (!s)
    return R{s.get_status()};
  bool moved = next.schedule != old.schedule || next.timezone != old.timezone;
  e.job = std::move(next);
  e.sched = std::move(*s);
  if (moved && e.job.enabled && !e.job.paused) {
    if (e.job.last_slot_ms > now_ms)
      e.job.last_slot_ms = 0;
    e.job.next_run_ms = next_slot_after(e, now_ms);
    if (e.job.next_run_ms == 0 && e.sched->one_shot()
        && e.job.running_run_id.empty() && e.job.retry_at_ms == 0)
      e.job.enabled = false;
  } else if (moved && !e.job.enabled && !e.sched->one_shot()) {
    // A spent one-shot turned into a recurring job starts again.
    e.job.enabled = true;
    if (!e.job.paused)
      e.job.next_run_ms = next_slot_after(e, now_ms);
  } else if (moved && !e.job.enabled) {
    auto n = e.sched->next_after(cron_time_from_ms(now_ms));
    if (n) {
      e.job.enabled = true;
      if (!e.job.paused)
        e.job.next_run_ms = cron_ms(*n);
    }
  }
  if (!e.waiting)
    reschedule(e);
  cron_changes ch;
  ch.jobs.push_back(e.job);
  return ch;
}

result<cron_changes> cron_engine::remove(const std::string& id) {
  using R = result<cron_changes>;
  auto it = jobs_.find(id);
  if (it == jobs_.end())
    return R{unknown_job(id)};
  unschedule(it->second);
  leave_waiting(it->second);
  jobs_.erase(it);
  cron_changes ch;
  ch.deleted_jobs.push_back(id);
  return ch;
}

result<cron_changes> cron_engine::pause(const std::string& id,
                                        std::string reason) {
  using R = result<cron_changes>;
  auto it = jobs_.find(id);
  if (it == jobs_.end())
    return R{unknown_job(id)};
  entry& e = it->second;
  cron_changes ch;
  if (e.job.paused)
    return ch;
  e.job.paused = true;
  e.job.pause_reason = reason.empty() ? "paused by a user" : std::move(reason);
  e.job.next_run_ms = 0;
  e.job.retry_at_ms = 0;
  e.job.retry_attempt = 0;
  e.job.updated_ms = cron_ms(now());
  leave_waiting(e);
  reschedule(e);
  ch.jobs.push_back(e.job);
  return ch;
}

result<cron_changes> cron_engine::resume(const std::string& id) {
  using R = result<cron_changes>;
  auto it = jobs_.find(id);
  if (it == jobs_.end())
    return R{unknown_job(id)};
  entry& e = it->second;
  cron_changes ch;
  if (!e.job.paused)
    return ch;
  if (!e.sched)
    return R{cron_job_schedule(e.job).get_status()};
  auto now_ms = cron_ms(now());
  auto n = next_slot_after(e, now_ms);
  if (n == 0)
    return R::failure(status_code::invalid_argument,
                      "job '" + id + "': its time has passed ("
                        + e.sched->describe()
                        + "); run it now or give it a new schedule");
  e.job.paused = false;
  e.job.pause_reason.clear();
  e.job.consecutive_failures = 0;
  e.job.retry_attempt = 0;
  e.job.retry_at_ms = 0;
  e.job.enabled = true;
  e.job.next_run_ms = n;
  e.job.updated_ms = now_ms;
  reschedule(e);
  ch.jobs.push_back(e.job);
  return ch;
}

result<cron_changes> cron_engine::run_now(const std::string& id) {
  using R = result<cron_changes>;
  auto it = jobs_.find(id);
  if (it == jobs_.end())
    return R{unknown_job(id)};
  entry& e = it->second;
  if (!e.job.running_run_id.empty())
    return R::failure(status_code::unavailable,
                      "job '" + id + "' is running (run "
                        + e.job.running_run_id + ")");
  if (e.waiting)
    return R::failure(status_code::unavailable,
                      "job '" + id + "' is already waiting to run");
  queue(e, cron_trigger::manual, cron_ms(now()));
  return cron_changes{};
}

// -- reading ------------------------------------------------------------------------

result<cron_job> cron_engine::job(const std::string& id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end())
    return result<cron_job>{unknown_job(id)};
  return it->second.job;
}

std::vector<cron_job> cron_engine::jobs() const {
  std::vector<cron_job> out;
  out.reserve(jobs_.size());
  for (auto& [id, e] : jobs_)
    out.push_back(e.job);
  return out;
}

} // namespace mibyan
