// The scheduler actor (runtime/cron_scheduler.hpp, docs/cron.md "Running,
// approvals and delivery"). Detached: it owns its thread, so the store
// writes of the engine's changes (fsync'd LMDB transactions) may block in
// its handlers without holding a CAF scheduler thread. Idle, the thread
// sleeps on its mailbox; the only timer is the engine's next wake-up
// (capped at opts.max_sleep), or the lease retry of a standby.
#include "runtime/cron_internal.hpp"

#include <unistd.h>

#include <future>

#include "caf/all.hpp"

#include "actors/outside_spawn.hpp"
#include "base/log.hpp"
#include "base/utc_time.hpp"
#include "storage/session_id.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

namespace {

using cron_wake_atom = caf::atom_constant<caf::atom("mb_cwake")>;
using cron_op_atom = caf::atom_constant<caf::atom("mb_cop")>;
using cron_lease_atom = caf::atom_constant<caf::atom("mb_clease")>;
using cron_flush_atom = caf::atom_constant<caf::atom("mb_cflush")>;
using cron_renew_atom = caf::atom_constant<caf::atom("mb_crenew")>;
constexpr auto cron_flush_atom_v = cron_flush_atom::value;
constexpr auto cron_wake_atom_v = cron_wake_atom::value;
constexpr auto cron_op_atom_v = cron_op_atom::value;
constexpr auto cron_lease_atom_v = cron_lease_atom::value;
constexpr auto cron_renew_atom_v = cron_renew_atom::value;

// The lease is renewed every third of its ttl (runtime/cron_lease.hpp).
std::chrono::milliseconds renew_every(const cron_lease& l) {
  return std::chrono::milliseconds{l.ttl_ms() / 3};
}

cron_time system_now() {
  return std::chrono::time_point_cast<std::chrono::milliseconds>(
    std::chrono::system_clock::now());
}

cron_engine_options engine_options(const cron_host& h) {
  const auto& c = h.p->svc->cfg.cron;
  cron_engine_options o;
  o.clock = h.clock;
  o.max_concurrent = c.max_concurrent;
  o.catch_up = c.catch_up == "none" ? cron_catch_up::none : cron_catch_up::one;
  o.max_failures = c.max_failures;
  if (!h.opts.retry_delays.empty())
    o.retry_delays = h.opts.retry_delays;
  o.default_zone = c.default_timezone;
  return o;
}

// Takes the lease and loads the jobs; false while another process holds it.
bool try_activate(cron_sched_state& st) {
  auto& h = *st.host;
  auto holder = "pid " + std::to_string(::getpid())
                + (h.opts.holder.empty() ? "" : " " + h.opts.holder)
                + " since " + iso_utc_from_ms(cron_ms(system_now()));
  auto lease = cron_lease::try_acquire(
    *h.store, holder,
    cron_lease::ttl_for(h.p->svc->cfg.cluster.failure_timeout_ms));
  if (!lease) {
    if (lease.code != status_code::unavailable)
      MIBYAN_LOG(warning, "cron", lease.error);
    return false;
  }
  st.lease = std::move(*lease);
  st.self->delayed_send(st.self, renew_every(*st.lease), cron_renew_atom_v);
  st.writer = std::make_unique<cron_store_writer>(
    h.store, static_cast<size_t>(h.p->svc->cfg.cron.history_keep));
  st.engine = std::make_unique<cron_engine>(engine_options(h));
  auto jobs = h.store->list_cron_jobs(false);
  if (!jobs) {
    MIBYAN_LOG(error, "cron", "cannot load the jobs: " << jobs.error);
  } else {
    for (auto& d : jobs->damaged)
      MIBYAN_LOG(error, "cron", "job record not loaded: " << d);
    // Runs left "running" by a stop are recorded interrupted here, and the
    // catch-up rules decide what runs next (cron/engine.hpp).
    st.persist(st.engine->load(std::move(jobs->jobs)));
  }
  h.active = true;
  MIBYAN_LOG(info, "cron", "scheduler active (" << st.engine->job_count()
                                                << " jobs)");
  return true;
}

caf::behavior cron_scheduler(caf::stateful_actor<cron_sched_state>* self,
                             std::shared_ptr<cron_host> host) {
  auto& st = self->state;
  st.host = host;
  st.self = self;
  st.self_handle = caf::actor_cast<caf::actor>(self);
  self->set_exit_handler([self](caf::exit_msg& m) {
    auto& s = self->state;
    // Runs going now stay "running" in the store: the next start records
    // them interrupted (docs/cron.md).
    if (s.host && s.host->rt)
      for (auto& [run, sid] : s.running)
        s.host->rt->interrupt(sid, "the scheduler stopped");
    s.running.clear();
    // What was decided is stored (the writer's destructor waits for it);
    // runs going stay "running".
    if (s.engine)
      s.flush();
    s.writer.reset();
    if (s.host)
      s.host->active = false;
    s.lease.reset();
    self->quit(m.reason);
  });
  if (try_activate(st))
    st.tick();
  else
    self->delayed_send(self, host->opts.lease_retry, cron_lease_atom_v);
  return {
    [self](cron_wake_atom, uint64_t gen) {
      auto& s = self->state;
      if (gen != s.timer_gen || !s.engine)
        return;
      ++s.wakes;
      s.armed_ms = 0;
      s.tick();
    },
    [self](cron_op_atom, uint64_t id) {
      auto& s = self->state;
      std::function<void(cron_sched_state&)> fn;
      {
        std::lock_guard<std::mutex> g{s.host->mtx};
        auto i = s.host->ops.find(id);
        if (i == s.host->ops.end())
          return;
        fn = std::move(i->second);
        s.host->ops.erase(i);
      }
      fn(s);
    },
    [self](cron_flush_atom) { self->state.flush(); },
    [self](cron_renew_atom) {
      auto& s = self->state;
      if (!s.lease)
        return;
      auto st = s.lease->renew();
      if (st.ok() || st.code != status_code::unavailable) {
        if (!st.ok())
          MIBYAN_LOG(warning, "cron", "cannot renew the scheduler lease: "
                                        << st.error);
        self->delayed_send(self, renew_every(*s.lease), cron_renew_atom_v);
        return;
      }
      // Another process took the lease (this one lapsed): stand by. Runs
      // going are interrupted and stay "running" for the new holder.
      MIBYAN_LOG(warning, "cron", st.error << "; this scheduler stands by");
      if (s.host && s.host->rt)
        for (auto& [run, sid] : s.running)
          s.host->rt->interrupt(sid, "the scheduler lost its lease");
      s.running.clear();
      if (s.engine)
        s.flush();
      s.writer.reset();
      s.engine.reset();
      ++s.timer_gen;
      if (s.host)
        s.host->active = false;
      s.lease.reset();
      self->delayed_send(self, s.host->opts.lease_retry, cron_lease_atom_v);
    },
    [self](cron_lease_atom) {
      auto& s = self->state;
      if (s.engine)
        return;
      if (try_activate(s)) {
        s.tick();
        // Requests written while this process stood by (their writer
        // waits for the new holder, or takes the lease itself).
        serve_cron_requests(s);
      } else
        self->delayed_send(self, s.host->opts.lease_retry, cron_lease_atom_v);
    },
  };
}

} // namespace

const char* cron_sched_state::name = "mibyan.cron_scheduler";

void cron_sched_state::defer(cron_changes ch) {
  if (ch.empty())
    return;
  pending.append(std::move(ch));
  if (!flush_queued) {
    flush_queued = true;
    self->send(self, cron_flush_atom_v);
  }
}

void cron_sched_state::flush() {
  flush_queued = false;
  if (pending.empty())
    return;
  cron_changes ch;
  std::swap(ch, pending);
  persist(std::move(ch));
}

void cron_sched_state::persist(cron_changes more,
                               std::function<void()> after) {
  cron_changes ch;
  std::swap(ch, pending);
  ch.append(std::move(more));
  if (ch.empty() && !after)
    return;
  if (!writer) {
    if (after)
      after();
    return;
  }
  writer->submit(std::move(ch), std::move(after));
}

cron_store_writer::cron_store_writer(std::shared_ptr<session_store> store,
                                     size_t keep)
  : store_(std::move(store)), keep_(keep) {
  thread_ = std::thread([this] { run(); });
}

cron_store_writer::~cron_store_writer() {
  {
    std::lock_guard<std::mutex> g{mtx_};
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void cron_store_writer::submit(cron_changes ch, std::function<void()> after) {
  {
    std::lock_guard<std::mutex> g{mtx_};
    queue_.emplace_back(std::move(ch), std::move(after));
  }
  cv_.notify_one();
}

void cron_store_writer::run() {
  for (;;) {
    std::vector<std::pair<cron_changes, std::function<void()>>> batch;
    {
      std::unique_lock<std::mutex> g{mtx_};
      cv_.wait(g, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty())
        return; // stopping, nothing left
      std::swap(batch, queue_);
    }
    cron_changes all;
    for (auto& [ch, after] : batch)
      all.append(std::move(ch));
    if (!all.empty())
      if (auto s = store_->apply_cron_changes(all, keep_); !s)
        MIBYAN_LOG(error, "cron", "cannot store the scheduler's changes: "
                                    << s.error);
    for (auto& [ch, after] : batch)
      if (after)
        after();
  }
}

void cron_sched_state::tick() {
  if (!engine || host->stopped)
    return;
  // A few rounds at most: runs that fail at once (a vanished cwd) free
  // their slot through a posted op, not here.
  for (int round = 0; round < 4; ++round) {
    auto now = host->clock();
    auto w = engine->next_wake();
    if (w && *w <= now) {
      std::vector<cron_start> starts;
      defer(engine->due(starts));
      for (auto& s : starts) {
        auto sid = new_session_id();
        if (auto ch = engine->started(s.run.id, sid); ch)
          defer(std::move(*ch));
        running[s.run.id] = sid;
        launch_cron_run(*this, s, sid);
      }
      continue;
    }
    ++timer_gen;
    if (!w) {
      armed_ms = 0;
      return;
    }
    auto delay = std::min<std::chrono::milliseconds>(
      std::chrono::milliseconds{cron_ms(*w) - cron_ms(now)},
      host->opts.max_sleep);
    armed_ms = cron_ms(*w);
    self->delayed_send(self, delay, cron_wake_atom_v, timer_gen);
    return;
  }
  // Still due after the rounds: look again as soon as the mailbox allows.
  ++timer_gen;
  self->send(self, cron_wake_atom_v, timer_gen);
}

void cron_sched_state::finished_run(const std::string& run_id,
                                    const cron_outcome& out) {
  running.erase(run_id);
  ++finished;
  if (!engine)
    return;
  auto ch = engine->finished(run_id, out);
  if (ch)
    defer(std::move(*ch));
  else
    MIBYAN_LOG(warning, "cron", "run " << run_id << ": " << ch.error);
  tick();
}

bool cron_host::post(std::function<void(cron_sched_state&)> fn) {
  caf::actor a;
  uint64_t id;
  {
    std::lock_guard<std::mutex> g{mtx};
    if (!actor || stopped)
      return false;
    a = actor;
    id = next_op++;
    ops.emplace(id, std::move(fn));
  }
  caf::anon_send(a, cron_op_atom_v, id);
  return true;
}

std::shared_ptr<cron_host> cron_host_of(runtime_impl& p) {
  std::lock_guard<std::mutex> g{p.mtx};
  if (!p.cron) {
    auto h = std::make_shared<cron_host>();
    h->p = &p;
    h->store = p.store;
    h->store_dir = session_store::default_dir(p.svc->cfg.home);
    h->clock = system_now;
    p.cron = h;
  }
  return p.cron;
}

status start_cron_scheduler(runtime& rt, cron_scheduler_options opts) {
  auto& p = runtime_access::of(rt);
  auto h = cron_host_of(p);
  if (!h->store)
    return status::failure(status_code::unavailable,
                           "the session store is unavailable: "
                             + p.store_error);
  std::unique_lock<std::mutex> g{h->mtx};
  if (h->started)
    return {};
  h->rt = &rt;
  h->opts = std::move(opts);
  h->clock = h->opts.clock ? h->opts.clock : system_now;
  h->started = true;
  outside_spawn_guard guard;
  h->actor = p.sys->spawn<caf::detached>(cron_scheduler, h);
  // Verbs of other processes (`mibyan cron pause ID` while this node runs)
  // arrive as files next to the store (cron_requests.cpp).
  std::weak_ptr<cron_host> weak = h;
  auto w = cron_change_watcher::start(h->store_dir, [weak] {
    if (auto host = weak.lock())
      host->post([](cron_sched_state& st) { serve_cron_requests(st); });
  });
  if (w)
    h->requests = std::move(*w);
  else
    MIBYAN_LOG(warning, "cron", w.error);
  // Requests written between taking the lease (in spawn) and the watch
  // (post takes the host's lock).
  g.unlock();
  h->post([](cron_sched_state& st) { serve_cron_requests(st); });
  // The actor makes its first attempt at the lease when it starts, on its
  // own thread; a posted op runs after that attempt. Waiting for it
  // (bounded) means a caller that answers requests right after start -
  // serve's jobs page, `cron run` - already knows whether this node
  // schedules.
  auto first = std::make_shared<std::promise<void>>();
  auto done = first->get_future();
  if (h->post([first](cron_sched_state&) { first->set_value(); }))
    done.wait_for(std::chrono::seconds{10});
  return {};
}

void stop_cron_scheduler(runtime& rt) {
  stop_cron(runtime_access::of(rt));
}

void stop_cron(runtime_impl& p) {
  std::shared_ptr<cron_host> h;
  {
    std::lock_guard<std::mutex> g{p.mtx};
    h = p.cron;
  }
  if (!h)
    return;
  caf::actor a;
  std::unique_ptr<cron_change_watcher> watcher;
  {
    std::lock_guard<std::mutex> g{h->mtx};
    h->stopped = true;
    a = h->actor;
    h->actor = nullptr;
    watcher = std::move(h->requests);
    h->ops.clear();
  }
  watcher.reset(); // joins its thread
  h->stop.stop();
  if (a && p.sys) {
    outside_spawn_guard guard;
    caf::scoped_actor self{*p.sys};
    self->send_exit(a, caf::exit_reason::user_shutdown);
    self->wait_for(a);
  }
  h->active = false;
}

void cron_clock_changed(runtime& rt) {
  auto h = cron_host_of(runtime_access::of(rt));
  h->post([](cron_sched_state& st) {
    ++st.timer_gen;
    st.tick();
  });
}

cron_scheduler_stats cron_stats(runtime& rt) {
  auto h = cron_host_of(runtime_access::of(rt));
  auto done = std::make_shared<std::promise<cron_scheduler_stats>>();
  auto f = done->get_future();
  bool posted = h->post([done](cron_sched_state& st) {
    cron_scheduler_stats s;
    s.started = true;
    s.active = st.engine != nullptr;
    if (st.engine) {
      s.jobs = static_cast<int64_t>(st.engine->job_count());
      s.running = static_cast<int64_t>(st.engine->running_count());
      s.waiting = static_cast<int64_t>(st.engine->waiting_count());
    }
    s.finished = st.finished;
    s.next_wake_ms = st.armed_ms;
    s.wakes = st.wakes;
    done->set_value(s);
  });
  if (!posted || f.wait_for(std::chrono::seconds(5))
                   != std::future_status::ready)
    return {};
  return f.get();
}

} // namespace mibyan
