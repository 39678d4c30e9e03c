// The kernel broker's side of checkpoints (actors/kernel.hpp, protocol;
// docs/kernel_protocol.md, section 3.1): adopting a session, restoring its
// latest checkpoint before the first cell, asking for a checkpoint after
// each cell, and handing the checkpoint file to the blocking pool, which
// reads it, seals it (HMAC) and stores it (actors/kernel_checkpoints.hpp).
// Nothing here blocks the broker's thread: files, HMAC and the store are
// pool work whose results come back as messages.
#include "actors/kernel_broker.hpp"

#include <fstream>
#include <sstream>

#include <unistd.h>

#include "actors/exit_timer.hpp"
#include "actors/kernel_checkpoints.hpp"
#include "base/log.hpp"
#include "base/private_file.hpp"

namespace mibyan::kernel_detail {

namespace {

// Seconds a value may take to pickle before it is left out (a __reduce__
// that hangs); the runner enforces it with SIGALRM. Generous: a large
// value on a loaded machine must not be mistaken for a hang.
constexpr double reduce_timeout_seconds = 10.0;

std::shared_ptr<kernel_checkpoints> hub_of(kernel_broker* self) {
  auto& svc = self->state.svc;
  return svc ? svc->checkpoints : nullptr;
}

// Weak: a pool job that finishes after the broker (or the whole actor
// system) is gone must not send to it.
caf::actor_addr me(kernel_broker* self) {
  return self->address();
}

template <class... Ts>
void tell(const caf::actor_addr& addr, Ts&&... xs) {
  if (auto broker = caf::actor_cast<caf::actor>(addr))
    caf::anon_send(broker, std::forward<Ts>(xs)...);
}

// Runs `job` on the blocking pool; false when the pool refused it (shut
// down).
template <class F>
bool on_pool(kernel_broker* self, F job) {
  auto& svc = self->state.svc;
  return svc && svc->pool && svc->pool->submit(std::move(job));
}

std::string line_id(kernel_broker* self, const char* kind) {
  auto& st = self->state;
  return std::to_string(st.opts.proc.pid) + "-" + kind
         + std::to_string(++st.cell_seq) + "-" + random_token(6);
}

void write_line(kernel_broker* self, const json::value& line) {
  auto text = line.dump() + "\n";
  self->write(self->state.in_hdl, text.size(), text.data());
  self->flush(self->state.in_hdl);
}

json::value checkpoint_spec(kernel_broker* self) {
  auto& st = self->state;
  json::value spec;
  spec["file"] = "checkpoint-" + std::to_string(++st.ckpt_files) + ".bin";
  auto hub = hub_of(self);
  spec["max_bytes"] = hub ? hub->max_bytes() : int64_t{0};
  spec["timeout"] = reduce_timeout_seconds;
  return spec;
}

void deliver_all(std::vector<caf::typed_response_promise<bool>>& v, bool ok) {
  auto waiters = std::move(v);
  v.clear();
  for (auto& rp : waiters)
    if (rp.pending())
      rp.deliver(ok);
}

// Sends an explicit checkpoint line when a flush waits and the kernel is
// idle.
void checkpoint_if_idle(kernel_broker* self) {
  auto& st = self->state;
  if (st.ckpt_waiters.empty() || st.cell || st.ckpt_pending || st.restoring
      || st.dead || !st.ready || !st.queue.empty())
    return;
  json::value line;
  st.ckpt_op = line_id(self, "c");
  line["id"] = st.ckpt_op;
  line["op"] = "checkpoint";
  line["checkpoint"] = checkpoint_spec(self);
  st.ckpt_pending = true;
  write_line(self, line);
}

} // namespace

void adopt_session(kernel_broker* self, std::string session, bool restore) {
  auto& st = self->state;
  auto hub = hub_of(self);
  if (!hub || !hub->enabled() || st.dead || session.empty())
    return;
  st.ckpt_session = session;
  st.restoring = true;
  auto actor = me(self);
  auto dir = st.opts.proc.staging_dir;
  auto file = "restore-" + random_token(6) + ".bin";
  bool queued = on_pool(self, [=] {
    if (!restore) {
      // reset: true; the session starts over, its checkpoints go first so
      // no later cell can find them.
      if (auto s = hub->drop(session); !s)
        MIBYAN_LOG(warning, "kernel", "session " << session
                   << ": cannot drop its checkpoints: " << s.error);
      tell(actor, restore_atom_v, false, std::string{},
                     std::string{}, int64_t{0});
      return;
    }
    auto r = hub->fetch(session);
    if (!r.found || !r.refused.empty()) {
      if (!r.refused.empty())
        MIBYAN_LOG(warning, "kernel", "session " << session
                   << ": checkpoint refused: " << r.refused);
      tell(actor, restore_atom_v, r.found, std::string{},
                     r.refused, int64_t{0});
      return;
    }
    // Read by the kernel, which is the only one who may unpickle it; the
    // staging dir is private (0700) and the file 0600.
    if (auto st = write_private_file(dir + "/" + file, r.payload);
        !st.ok()) {
      tell(actor, restore_atom_v, true, std::string{},
                     "cannot hand the checkpoint to the kernel: " + st.error,
                     int64_t{0});
      return;
    }
    tell(actor, restore_atom_v, true, file, std::string{},
                   r.age_cells);
  });
  if (!queued)
    st.restoring = false;
}

void restore_ready(kernel_broker* self, bool found, std::string file,
                   std::string refused, int64_t age_cells) {
  auto& st = self->state;
  if (!st.restoring)
    return;
  if (!file.empty()) {
    st.restore_file = std::move(file);
    st.restore_report = std::make_unique<restore_summary>();
    st.restore_report->age_cells = age_cells;
    send_restore(self);
    return;
  }
  st.restoring = false;
  if (found && !refused.empty()) {
    st.restore_report = std::make_unique<restore_summary>();
    st.restore_report->refused = std::move(refused);
  }
  start_next(self);
}

void send_restore(kernel_broker* self) {
  auto& st = self->state;
  if (!st.ready || st.restore_file.empty() || st.dead)
    return;
  json::value line;
  st.restore_op = line_id(self, "r");
  line["id"] = st.restore_op;
  line["op"] = "restore";
  line["file"] = st.restore_file;
  // Per value; the whole restore is bounded by the cell's wall clock below.
  line["timeout"] = static_cast<double>(st.svc->cfg.code_execution.timeout);
  st.restore_file.clear();
  write_line(self, line);
  // Unpickling runs user code (a __setstate__, a reduce callable); it
  // gets the cell's wall clock. Past it the kernel is stopped and the
  // checkpoint dropped, so the next kernel starts fresh.
  auto limit = std::chrono::seconds(st.svc->cfg.code_execution.timeout);
  auto op = st.restore_op;
  start_exit_timer(self, limit, [self, op] {
    auto& s = self->state;
    if (!s.restoring || s.restore_op != op)
      return;
    auto hub = hub_of(self);
    auto session = s.ckpt_session;
    MIBYAN_LOG(warning, "kernel", "session " << session
               << ": restoring its checkpoint did not finish in time");
    if (hub)
      on_pool(self, [hub, session] { (void) hub->drop(session); });
    kill_kernel(self, cell_status::error,
                "Restoring this session's kernel checkpoint did not finish "
                "in time; the kernel was stopped and the checkpoint dropped.");
  });
}

bool checkpoint_blocks(kernel_broker* self) {
  return self->state.restoring;
}

void add_checkpoint_request(kernel_broker* self, json::value& line) {
  auto& st = self->state;
  if (st.ckpt_session.empty() || !st.cell)
    return;
  line["checkpoint"] = checkpoint_spec(self);
  st.cell->checkpoint = true;
}

void expect_checkpoint(kernel_broker* self, const json::value& frame) {
  auto& st = self->state;
  if (!st.cell || !st.cell->checkpoint)
    return;
  auto mark = frame.get_string("checkpoint");
  if (mark == "follows") {
    st.ckpt_pending = true;
  } else if (mark == "unchanged") {
    // The stored checkpoint holds this cell's state already.
    if (auto hub = hub_of(self))
      hub->note_covered(st.ckpt_session,
                        frame.get_int("execution_count", 0));
  }
}

void on_checkpoint_frame(kernel_broker* self, const json::value& frame) {
  auto& st = self->state;
  auto status = frame.get_string("status");
  auto hub = hub_of(self);
  if (status == "restored") {
    if (!st.restoring || frame.get_string("id") != st.restore_op)
      return;
    st.restoring = false;
    st.execution_count = frame.get_int("execution_count", st.execution_count);
    if (!st.restore_report)
      st.restore_report = std::make_unique<restore_summary>();
    auto& r = *st.restore_report;
    auto error = frame.get_string("error");
    if (!error.empty()) {
      r.restored = false;
      r.refused = error;
    } else {
      r.restored = true;
      if (auto names = frame.find("restored"); names && names->is_array())
        r.names = static_cast<int64_t>(names->as_array().size());
      if (auto lost = frame.find("not_restored"); lost && lost->is_array())
        for (auto& e : lost->as_array())
          if (e.is_object())
            r.not_restored.push_back({e.get_string("name"),
                                      e.get_string("type"),
                                      e.get_string("reason")});
    }
    if (hub)
      hub->note_count(st.ckpt_session, st.execution_count);
    MIBYAN_LOG(info, "kernel", "session " << st.ckpt_session
               << ": checkpoint restored (" << r.names << " names, "
               << r.not_restored.size() << " not restored)");
    checkpoint_if_idle(self);
    start_next(self);
    return;
  }
  // status == "checkpoint"
  if (!st.ckpt_pending)
    return;
  st.ckpt_pending = false;
  st.ckpt_op.clear();
  auto error = frame.get_string("error");
  auto file = frame.get_string("file");
  bool changed = frame.get_bool("changed", false);
  auto waiters = std::move(st.ckpt_waiters);
  st.ckpt_waiters.clear();
  if (!error.empty()) {
    MIBYAN_LOG(warning, "kernel", "session " << st.ckpt_session
               << ": the kernel could not take a checkpoint: " << error);
    deliver_all(waiters, false);
  } else if (changed && !file.empty() && hub) {
    auto session = st.ckpt_session;
    auto seq = hub->next_seq();
    auto count = frame.get_int("execution_count", st.execution_count);
    auto path = st.opts.proc.staging_dir + "/" + file;
    auto actor = me(self);
    ++st.ckpt_saving;
    for (auto& w : waiters)
      st.ckpt_after_save.push_back(std::move(w));
    bool queued = on_pool(self, [=] {
      std::string payload;
      {
        std::ifstream in(path, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        payload = ss.str();
      }
      ::unlink(path.c_str());
      auto s = payload.empty()
                 ? status::failure(status_code::data_corrupt,
                                   "the checkpoint file is empty")
                 : hub->save(session, seq, count, payload);
      tell(actor, checkpoint_atom_v, s.ok(), s.error);
    });
    if (!queued) {
      --st.ckpt_saving;
      ::unlink(path.c_str());
      deliver_all(st.ckpt_after_save, false);
    }
  } else if (st.ckpt_saving > 0) {
    // Unchanged, but the previous one is still being stored.
    for (auto& w : waiters)
      st.ckpt_after_save.push_back(std::move(w));
    if (hub)
      hub->note_covered(st.ckpt_session,
                        frame.get_int("execution_count", 0));
  } else {
    // Unchanged: the stored checkpoint holds this cell's state too.
    if (hub)
      hub->note_covered(st.ckpt_session,
                        frame.get_int("execution_count", 0));
    deliver_all(waiters, true);
  }
  // A cell whose line went out before this frame arrived waited in the
  // runner for the checkpoint (at most this long).
  if (st.cell && !st.cell->checkpoint_waited) {
    st.cell->checkpoint_waited = true;
    auto waited = clock_type::now() - st.cell->start;
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(waited)
                .count();
    if (ns > 0) {
      st.opts.usage->checkpoint_waits.fetch_add(1);
      st.opts.usage->checkpoint_wait_ns.fetch_add(ns);
      st.cell->ckpt_wait_ms = static_cast<double>(ns) / 1e6;
    }
  }
  checkpoint_if_idle(self);
  start_next(self);
}

void checkpoint_saved(kernel_broker* self, bool ok, const std::string& error) {
  auto& st = self->state;
  if (st.ckpt_saving > 0)
    --st.ckpt_saving;
  if (!ok)
    MIBYAN_LOG(warning, "kernel", "session " << st.ckpt_session
               << ": checkpoint not stored: " << error);
  if (st.ckpt_saving == 0 || !ok)
    deliver_all(st.ckpt_after_save, ok);
}

void flush_checkpoint(kernel_broker* self,
                      caf::typed_response_promise<bool> rp) {
  auto& st = self->state;
  if (st.ckpt_session.empty() || st.dead || st.exited) {
    rp.deliver(false);
    return;
  }
  st.ckpt_waiters.push_back(std::move(rp));
  checkpoint_if_idle(self);
}

void report_restore(kernel_broker* self, cell_outcome& c) {
  auto& st = self->state;
  if (st.restore_report && !st.restoring)
    c.restore = st.restore_report.get();
  if (!st.ckpt_session.empty())
    if (auto hub = hub_of(self))
      hub->note_count(st.ckpt_session, c.execution_count);
}

void fail_checkpoint_waiters(kernel_broker* self) {
  auto& st = self->state;
  deliver_all(st.ckpt_waiters, false);
  deliver_all(st.ckpt_after_save, false);
}

} // namespace mibyan::kernel_detail
