#include "runtime/lean_clock.hpp"

#include <pthread.h>

#include "caf/actor_system.hpp"
#include "caf/group.hpp"
#include "caf/mailbox_element.hpp"

namespace mibyan {

lean_actor_clock::~lean_actor_clock() {
  stop();
  // Entries set after stop() (actors ending during the system's teardown).
  schedule_map rest;
  actor_lookup_map rest_lookup;
  {
    std::lock_guard<std::mutex> g{mtx_};
    rest.swap(schedule_);
    rest_lookup.swap(actor_lookup_);
  }
}

template <class Add>
void lean_actor_clock::insert(time_point t, Add add) {
  entry_list dropped; // a replaced ordinary timeout
  bool wake = false;
  {
    std::lock_guard<std::mutex> g{mtx_};
    add(dropped);
    if (t < sleeps_until_) {
      // Due before the time the thread sleeps until: it must look again.
      sleeps_until_ = t;
      wake = true;
      ++notifications_;
    }
  }
  if (wake)
    cv_.notify_one();
}

template <class Pred>
void lean_actor_clock::take(caf::actor_id aid, Pred pred, bool first_only,
                            entry_list& out) {
  auto range = actor_lookup_.equal_range(aid);
  for (auto i = range.first; i != range.second;) {
    if (!pred(*i->second->second)) {
      ++i;
      continue;
    }
    out.push_back(std::move(i->second->second));
    schedule_.erase(i->second);
    i = actor_lookup_.erase(i);
    if (first_only)
      return;
  }
}

namespace {

auto ordinary_of_type(caf::atom_value type) {
  using clk = caf::detail::simple_actor_clock;
  return [type](const clk::delayed_event& e) {
    return e.subtype == clk::ordinary_timeout_type
           && static_cast<const clk::ordinary_timeout&>(e).type == type;
  };
}

} // namespace

void lean_actor_clock::set_ordinary_timeout(time_point t,
                                            caf::abstract_actor* self,
                                            caf::atom_value type,
                                            uint64_t id) {
  auto ctrl = self->ctrl();
  auto aid = self->id();
  insert(t, [&](entry_list& dropped) {
    // One receive timeout per type and actor: the new one replaces it.
    take(aid, ordinary_of_type(type), true, dropped);
    new_schedule_entry<ordinary_timeout>(t, std::move(ctrl), type, id);
  });
}

void lean_actor_clock::set_multi_timeout(time_point t,
                                         caf::abstract_actor* self,
                                         caf::atom_value type, uint64_t id) {
  auto ctrl = self->ctrl();
  insert(t, [&](entry_list&) {
    new_schedule_entry<multi_timeout>(t, std::move(ctrl), type, id);
  });
}

void lean_actor_clock::set_request_timeout(time_point t,
                                           caf::abstract_actor* self,
                                           caf::message_id id) {
  auto ctrl = self->ctrl();
  insert(t, [&](entry_list&) {
    new_schedule_entry<request_timeout>(t, std::move(ctrl), id);
  });
}

void lean_actor_clock::cancel_ordinary_timeout(caf::abstract_actor* self,
                                               caf::atom_value type) {
  entry_list dropped;
  std::lock_guard<std::mutex> g{mtx_};
  take(self->id(), ordinary_of_type(type), true, dropped);
  // `dropped` is destroyed after the guard (declared before it).
}

void lean_actor_clock::cancel_request_timeout(caf::abstract_actor* self,
                                              caf::message_id id) {
  entry_list dropped;
  std::lock_guard<std::mutex> g{mtx_};
  take(self->id(),
       [id](const delayed_event& e) {
         return e.subtype == request_timeout_type
                && static_cast<const request_timeout&>(e).id == id;
       },
       true, dropped);
}

void lean_actor_clock::cancel_timeouts(caf::abstract_actor* self) {
  entry_list dropped;
  std::lock_guard<std::mutex> g{mtx_};
  take(self->id(), [](const delayed_event&) { return true; }, false,
       dropped);
}

void lean_actor_clock::schedule_message(time_point t,
                                        caf::strong_actor_ptr receiver,
                                        caf::mailbox_element_ptr content) {
  insert(t, [&](entry_list&) {
    new_schedule_entry<actor_msg>(t, std::move(receiver), std::move(content));
  });
}

void lean_actor_clock::schedule_message(time_point t, caf::group target,
                                        caf::strong_actor_ptr sender,
                                        caf::message content) {
  insert(t, [&](entry_list&) {
    new_schedule_entry<group_msg>(t, std::move(target), std::move(sender),
                                  std::move(content));
  });
}

void lean_actor_clock::cancel_all() {
  schedule_map dropped;
  actor_lookup_map dropped_lookup;
  std::lock_guard<std::mutex> g{mtx_};
  dropped.swap(schedule_);
  dropped_lookup.swap(actor_lookup_);
}

void lean_actor_clock::start(caf::actor_system* sys) {
  std::lock_guard<std::mutex> g{mtx_};
  if (started_ || stopping_)
    return;
  started_ = true;
  thread_ = std::thread{[this, sys] { run(sys); }};
}

void lean_actor_clock::stop() {
  {
    std::lock_guard<std::mutex> g{mtx_};
    if (stopping_)
      return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable())
    thread_.join();
  cancel_all();
}

uint64_t lean_actor_clock::notifications() const {
  std::lock_guard<std::mutex> g{mtx_};
  return notifications_;
}

size_t lean_actor_clock::pending() const {
  std::lock_guard<std::mutex> g{mtx_};
  return schedule_.size();
}

void lean_actor_clock::run(caf::actor_system* sys) {
  ::pthread_setname_np(::pthread_self(), "mibyan.clock");
  if (sys != nullptr)
    sys->thread_started();
  entry_list due;
  std::unique_lock<std::mutex> lk{mtx_};
  while (!stopping_) {
    if (schedule_.empty()) {
      sleeps_until_ = time_point::max();
      cv_.wait(lk);
      sleeps_until_ = time_point::min();
      continue;
    }
    auto first = schedule_.begin()->first;
    auto t = now();
    if (first > t) {
      sleeps_until_ = first;
      cv_.wait_until(lk, first);
      sleeps_until_ = time_point::min();
      continue; // a spurious wake-up, a new earlier entry, or the time
    }
    // Take every entry due by now, then send their messages without the
    // mutex (an enqueue may end an actor, whose exit calls back in here).
    while (!schedule_.empty() && schedule_.begin()->first <= t) {
      auto i = schedule_.begin();
      if (i->second->backlink != actor_lookup_.end())
        actor_lookup_.erase(i->second->backlink);
      due.push_back(std::move(i->second));
      schedule_.erase(i);
    }
    lk.unlock();
    for (auto& e : due)
      ship(*e);
    due.clear();
    lk.lock();
  }
  lk.unlock();
  if (sys != nullptr)
    sys->thread_terminates();
}

} // namespace mibyan
