// The session lease keeper (runtime/session_lease_keeper.hpp): one thread
// with a queue of jobs and timers; all lease store work runs on it, in
// order, so a release never overtakes the acquire of the next turn.
#include "runtime/session_lease_keeper.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "base/log.hpp"
#include "storage/session_lease.hpp"

namespace mibyan {

namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string lease_name(const std::string& session) {
  return session_lease_name(session);
}

} // namespace

struct session_lease_keeper::impl {
  std::shared_ptr<session_lease_store> leases;
  std::shared_ptr<lease_tokens> tokens;
  lease_keeper_settings cfg;

  std::mutex mtx; // guards jobs, stop
  std::condition_variable cv;
  std::deque<std::function<void()>> jobs;
  bool stop = false;
  std::thread thread;

  // -- keeper thread only ----------------------------------------------------
  struct held {
    uint64_t token = 0;
    int active = 0;
    /// The renewal found the lease gone: the next admission starts over.
    bool lost = false;
  };
  /// Sessions with running turns here, and the token each last ran under.
  std::map<std::string, held> sessions;
  struct waiter {
    std::string session;
    bool may_forward = true;
    std::function<void(lease_admission)> decide;
    clock_type::time_point deadline;
  };
  std::list<waiter> waiting;
  clock_type::time_point next_renew = clock_type::time_point::max();
  clock_type::time_point next_retry = clock_type::time_point::max();

  int64_t retry_ms() const {
    return std::clamp<int64_t>(cfg.ttl_ms / 10, 20, 250);
  }

  void run() {
    std::unique_lock<std::mutex> lk{mtx};
    for (;;) {
      auto wake = std::min(next_renew, next_retry);
      if (jobs.empty() && !stop) {
        if (wake == clock_type::time_point::max())
          cv.wait(lk);
        else
          cv.wait_until(lk, wake);
      }
      if (stop)
        break;
      if (!jobs.empty()) {
        auto job = std::move(jobs.front());
        jobs.pop_front();
        lk.unlock();
        job();
        lk.lock();
        continue;
      }
      lk.unlock();
      auto now = clock_type::now();
      if (now >= next_renew)
        renew();
      if (now >= next_retry)
        retry_waiting();
      lk.lock();
    }
    lk.unlock();
    // Shutting down: waiting turns fail; held leases are released.
    for (auto& w : waiting) {
      lease_admission a;
      a.error = status::failure(status_code::unavailable,
                                "the gateway is shutting down");
      w.decide(std::move(a));
    }
    waiting.clear();
    for (auto& [sid, h] : sessions)
      if (h.active > 0)
        (void) leases->release(lease_name(sid), cfg.holder, h.token);
  }

  // One attempt for `w`: true when decided (granted, forward or failed).
  bool attempt(waiter& w) {
    auto name = lease_name(w.session);
    lease_admission a;
    // Read first: a live lease of another holder needs no write.
    auto row = leases->get(name);
    if (!row && row.code != status_code::not_found) {
      a.error = status::failure(status_code::unavailable,
                                "store_unavailable: " + row.error);
      w.decide(std::move(a));
      return true;
    }
    auto now_wall = std::chrono::duration_cast<milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    bool other_live = row && row->holder != cfg.holder && row->live(now_wall);
    if (!other_live) {
      auto got = leases->acquire(name, cfg.holder, cfg.ttl_ms);
      if (!got) {
        a.error = status::failure(status_code::unavailable,
                                  "store_unavailable: " + got.error);
        w.decide(std::move(a));
        return true;
      }
      if (got->granted) {
        auto& h = sessions[w.session];
        a.what = lease_admission::kind::run_here;
        a.token = got->token;
        a.new_token = h.lost || h.token != got->token;
        a.took_over = got->took_over;
        a.previous_holder = got->current.holder;
        h.token = got->token;
        h.lost = false;
        ++h.active;
        tokens->set(w.session, got->token);
        if (next_renew == clock_type::time_point::max())
          next_renew = clock_type::now() + milliseconds(renew_ms());
        w.decide(std::move(a));
        return true;
      }
      row = got->current;
    }
    if (w.may_forward && cfg.forward) {
      a.what = lease_admission::kind::forward;
      a.node = row->holder;
      w.decide(std::move(a));
      return true;
    }
    if (clock_type::now() >= w.deadline) {
      a.error = status::failure(
        status_code::unavailable,
        "session '" + w.session + "' is busy: gateway " + row->holder
          + " holds its lease");
      w.decide(std::move(a));
      return true;
    }
    return false;
  }

  int64_t renew_ms() const { return std::max<int64_t>(cfg.ttl_ms / 3, 10); }

  void renew() {
    bool any = false;
    for (auto& [sid, h] : sessions) {
      if (h.active <= 0 || h.lost)
        continue;
      any = true;
      auto got = leases->acquire(lease_name(sid), cfg.holder, cfg.ttl_ms);
      if (!got) {
        MIBYAN_LOG(warning, "cluster", "cannot renew the lease of session "
                                         << sid << ": " << got.error);
        continue;
      }
      if (!got->granted || got->token != h.token) {
        // Another gateway ran the session meanwhile: this node's writes
        // keep the old token and are fenced; its conversation is stale.
        MIBYAN_LOG(warning, "cluster",
                   "the lease of session " << sid << " moved to "
                                           << got->current.holder
                                           << " while a turn ran here");
        h.lost = true;
        if (got->granted)
          (void) leases->release(lease_name(sid), cfg.holder, got->token);
      }
    }
    next_renew = any ? clock_type::now() + milliseconds(renew_ms())
                     : clock_type::time_point::max();
  }

  void retry_waiting() {
    for (auto it = waiting.begin(); it != waiting.end();)
      it = attempt(*it) ? waiting.erase(it) : std::next(it);
    next_retry = waiting.empty()
                   ? clock_type::time_point::max()
                   : clock_type::now() + milliseconds(retry_ms());
  }

  void enqueue(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> g{mtx};
      if (stop)
        return;
      jobs.push_back(std::move(job));
    }
    cv.notify_one();
  }
};

session_lease_keeper::session_lease_keeper(
  std::shared_ptr<session_lease_store> leases,
  std::shared_ptr<lease_tokens> tokens, lease_keeper_settings s)
  : p_(std::make_unique<impl>()) {
  p_->leases = std::move(leases);
  p_->tokens = std::move(tokens);
  p_->cfg = std::move(s);
  p_->thread = std::thread([p = p_.get()] { p->run(); });
}

session_lease_keeper::~session_lease_keeper() {
  {
    std::lock_guard<std::mutex> g{p_->mtx};
    p_->stop = true;
  }
  p_->cv.notify_one();
  if (p_->thread.joinable())
    p_->thread.join();
}

void session_lease_keeper::admit(const std::string& session, bool may_forward,
                                 std::function<void(lease_admission)> decide) {
  auto p = p_.get();
  p->enqueue([p, session, may_forward, decide = std::move(decide)]() mutable {
    impl::waiter w{session, may_forward, std::move(decide),
                   clock_type::now() + milliseconds(p->cfg.wait_ms)};
    if (p->attempt(w))
      return;
    p->waiting.push_back(std::move(w));
    p->next_retry = std::min(p->next_retry,
                             clock_type::now()
                               + milliseconds(p->retry_ms()));
  });
}

void session_lease_keeper::finished(const std::string& session) {
  auto p = p_.get();
  p->enqueue([p, session] {
    auto it = p->sessions.find(session);
    if (it == p->sessions.end() || it->second.active <= 0)
      return;
    if (--it->second.active > 0)
      return;
    if (!it->second.lost) {
      auto st = p->leases->release(lease_name(session), p->cfg.holder,
                                   it->second.token);
      if (!st)
        MIBYAN_LOG(warning, "cluster", "cannot release the lease of session "
                                         << session << ": " << st.error);
    }
    // A waiting turn of the same session may go now.
    if (!p->waiting.empty())
      p->retry_waiting();
  });
}

void session_lease_keeper::holder_lost(const std::string& node) {
  auto p = p_.get();
  p->enqueue([p, node] {
    auto n = p->leases->expire_holder(node);
    if (!n)
      MIBYAN_LOG(warning, "cluster", "cannot end the leases of lost member "
                                       << node << ": " << n.error);
    else if (*n > 0)
      MIBYAN_LOG(info, "cluster", "ended " << *n << " session lease(s) of lost "
                                           << "member " << node);
    if (!p->waiting.empty())
      p->retry_waiting();
  });
}

void session_lease_keeper::post(std::function<void()> job) {
  p_->enqueue(std::move(job));
}

const lease_keeper_settings& session_lease_keeper::settings() const {
  return p_->cfg;
}

const std::shared_ptr<session_lease_store>&
session_lease_keeper::leases() const {
  return p_->leases;
}

} // namespace mibyan
