// When the kernel broker may close its descriptors and quit
// (docs/kernel_protocol.md §7.1). CAF 0.17's event loop loses a descriptor
// for good in two cases: one added and removed in the same loop turn, and
// a connection it accepts for a listener closed in the same turn. The
// functions here defer closes and the quit until neither can happen.
// Thread: the broker's own (the middleman's).
#include "actors/kernel_broker.hpp"

#include <poll.h>
#include <unistd.h>

#include <csignal>

#include "kernels/kernel_process.hpp"

namespace mibyan::kernel_detail {

namespace {

// How long a launched connection may still be in the turn that launched
// it, as far as the broker can tell without an event of it.
constexpr auto fresh_window = std::chrono::milliseconds(20);
// The bound on any deferral, and the retry period until then.
constexpr auto defer_bound = std::chrono::milliseconds(200);
constexpr auto retry_period = std::chrono::milliseconds(5);

// Whether a connection waits in the listener's backlog.
bool backlog_pending(int fd) {
  pollfd p{fd, POLLIN, 0};
  return fd >= 0 && ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
}

void start_deferral(kernel_state& st) {
  if (st.defer_until == clock_type::time_point{})
    st.defer_until = clock_type::now() + defer_bound;
}

} // namespace

void arm_retry(kernel_broker* self) {
  auto& st = self->state;
  if (st.retry_armed)
    return;
  st.retry_armed = true;
  self->delayed_send(self, retry_period, in_loop_atom_v);
}

bool progress(kernel_broker* self) {
  auto& st = self->state;
  if (st.in_loop && st.fresh.empty() && !st.quit_pending
      && !st.listener_close_wanted)
    return true; // the common case: nothing waits
  auto now = clock_type::now();
  bool force = st.defer_until != clock_type::time_point{}
               && now >= st.defer_until;
  if (force) {
    st.in_loop = true;
    for (auto& hdl : st.close_when_seen)
      self->close(hdl);
    st.close_when_seen.clear();
    st.fresh.clear();
  }
  // A connection launched a while ago is in the loop even without an
  // event of its own (an idle stub connection): its turn has long ended.
  for (auto i = st.fresh.begin(); i != st.fresh.end();) {
    if (now - i->second < fresh_window) {
      ++i;
      continue;
    }
    if (st.close_when_seen.erase(i->first) != 0)
      self->close(i->first);
    i = st.fresh.erase(i);
  }
  if (st.listener_close_wanted && st.listener_open && st.in_loop
      && (force || !backlog_pending(st.rpc_raw_fd))) {
    self->close(st.rpc_hdl);
    st.listener_open = false;
  }
  if (st.quit_pending && st.in_loop && st.fresh.empty()
      && !st.listener_open) {
    self->quit(std::move(st.quit_reason));
    return false;
  }
  if (st.quit_pending || !st.close_when_seen.empty()
      || (st.listener_close_wanted && st.listener_open))
    arm_retry(self);
  return true;
}

void close_listener(kernel_broker* self) {
  auto& st = self->state;
  if (st.listener_close_wanted)
    return;
  st.listener_close_wanted = true;
  // Nothing new can connect after this; the backlog drains through the
  // loop (new connections of a dead kernel are closed unlaunched).
  if (!st.rpc_path.empty())
    ::unlink(st.rpc_path.c_str());
  start_deferral(st);
  progress(self);
}

void end_broker(kernel_broker* self, caf::error reason) {
  auto& st = self->state;
  if (st.quit_pending)
    return;
  st.quit_pending = true;
  st.quit_reason = std::move(reason);
  start_deferral(st);
  // Before any event proved the loop has our descriptors, the closing
  // stdout of a killed kernel is that proof.
  if (!st.in_loop && st.opts.proc.pid > 0)
    signal_kernel(st.opts.proc.pid, SIGKILL);
  if (st.listener_close_wanted)
    progress(self);
  else
    close_listener(self);
}

bool mark_in_loop(kernel_broker* self) {
  self->state.in_loop = true;
  return progress(self);
}

bool mark_conn_seen(kernel_broker* self, caf::io::connection_handle hdl) {
  auto& st = self->state;
  if (st.fresh.erase(hdl) == 0)
    return true;
  bool closed = st.close_when_seen.erase(hdl) != 0;
  if (closed)
    self->close(hdl);
  return progress(self) && !closed;
}

void launched_conn(kernel_broker* self, caf::io::connection_handle hdl) {
  self->state.fresh.emplace(hdl, clock_type::now());
}

void close_scribe(kernel_broker* self, caf::io::connection_handle hdl) {
  auto& st = self->state;
  if (st.fresh.count(hdl) != 0) {
    st.close_when_seen.insert(hdl);
    arm_retry(self);
  } else {
    self->close(hdl);
  }
}

} // namespace mibyan::kernel_detail
