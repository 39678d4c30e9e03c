// The kernel broker (actors/kernel.hpp): its behavior (the runner's
// stdout frames, cell requests, interrupts, kills and reaping), the end of
// its kernel process (kill_kernel, on_stdout_closed) and the teardown in
// kernel_state's destructor, which answers every cell still taken. The
// running cell itself is in actors/kernel_cells.cpp. Thread: the broker's
// own (the middleman's); waits for a process go to the blocking pool.
#include "actors/kernel.hpp"
#include "actors/kernel_broker.hpp"

#include <chrono>
#include <csignal>
#include <deque>
#include <filesystem>
#include <map>
#include <set>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "actors/exit_timer.hpp"
#include "actors/kernel_checkpoints.hpp"
#include "actors/script_calls.hpp"
#include "actors/tool_dispatcher.hpp"
#include "kernels/cell_result.hpp"
#include "kernels/direct_writes.hpp"
#include "kernels/frame_parser.hpp"
#include "kernels/rpc_codec.hpp"
#include "kernels/rpc_connections.hpp"
#include "messages/type_ids.hpp"
#include "base/head_tail_buffer.hpp"
#include "base/log.hpp"
#include "base/runtime_metrics.hpp"
#include "tools/argument_limit.hpp"

namespace fs = std::filesystem;

namespace mibyan {

namespace kernel_detail {

const char* kernel_state::name = "kernel";

kernel_state::~kernel_state() {
  interrupt_script_calls(*this, "the session kernel ended"); // tools stop
  // Every cell taken is answered, whichever way the broker ends (its
  // caller waits without a timeout: actors/kernel_registry.cpp).
  if (opts.usage) {
    opts.usage->ended.store(true);
    answer_unsettled();
  }
  for (auto* v : {&ckpt_waiters, &ckpt_after_save})
    for (auto& rp : *v)
      if (rp.pending())
        rp.deliver(false);
  // The kernel died while it restored the session's checkpoint: drop the
  // checkpoint, or every retry would start a kernel that dies the same way.
  if (restoring && !restore_op.empty() && svc && svc->checkpoints
      && svc->pool) {
    auto hub = svc->checkpoints;
    auto session = ckpt_session;
    MIBYAN_LOG(warning, "kernel", "session " << session << ": the kernel "
               "ended while restoring its checkpoint; the checkpoint is "
               "dropped");
    (void) svc->pool->submit([hub, session] { (void) hub->drop(session); });
  }
  if (in_fd >= 0)
    ::close(in_fd);
  auto& p = opts.proc;
  // Close the watchdog first: the runner kills its own group on EOF.
  if (p.watchdog_fd >= 0) {
    ::close(p.watchdog_fd);
    p.watchdog_fd = -1;
  }
  if (p.pid > 0)
    signal_kernel(p.pid, SIGKILL);
  if (!p.sandboxed || !p.cgroup_dir.empty()) {
    auto end_rest = [sb = p.sandboxed, m = p.marker, cg = p.cgroup_dir] {
      end_kernel_processes(-1, sb, m, cg); // docs/security.md
    };
    // A pool that is shut down (the runtime went first, in a host's actor
    // system) refuses the job: then it runs here, once, at exit.
    if (!(svc && svc->pool && svc->pool->submit(end_rest)))
      end_rest();
  }
  if (p.rpc_fd >= 0)
    ::close(p.rpc_fd); // normally owned by the doorman already
  // This destructor runs on the middleman's epoll thread: never wait
  // there for long. A SIGKILLed process is normally gone within a few
  // milliseconds; if not, a blocking-pool thread reaps it.
  if (p.pid > 0) {
    int status = 0;
    bool reaped = false;
    for (int i = 0; i < 20 && !reaped; ++i) {
      reaped = ::waitpid(p.pid, &status, WNOHANG) != 0;
      if (!reaped)
        ::usleep(500);
    }
    auto pid = p.pid;
    if (!reaped && !(svc && svc->pool
                     && svc->pool->submit([pid] {
                          int st = 0;
                          ::waitpid(pid, &st, 0);
                        })))
      ::waitpid(pid, &status, 0);
  }
  // A few small files; removing them is quick.
  remove_staging_dir(p.staging_dir);
}

// Ends the kernel: SIGTERM to the group now, SIGKILL after the grace.
void kill_kernel(kernel_broker* self, cell_status why, std::string reason) {
  auto& st = self->state;
  if (st.cell && !st.cell->forcing) {
    st.cell->forcing = true;
    st.cell->forced = why;
    st.cell->reason = std::move(reason);
  }
  if (st.dead)
    return;
  st.mark_dead();
  close_listener(self); // stop accepting RPC (actors/kernel_lifetime.cpp)
  // Ask the runner's watchdog thread to ship the cell's output so far and
  // end its process group; SIGTERM after a second, SIGKILL after the grace.
  if (st.opts.proc.watchdog_fd >= 0) {
    char k = 'K';
    if (::write(st.opts.proc.watchdog_fd, &k, 1) != 1)
      signal_kernel(st.opts.proc.pid, SIGTERM);
  }
  self->delayed_send(self, std::chrono::seconds(1), kill_atom_v, false);
  self->delayed_send(self,
                     std::chrono::seconds(1 + st.opts.kill_grace_seconds),
                     kill_atom_v, true);
  // Poll briefly for the exit: the runner dies within milliseconds of
  // SIGTERM unless it is stuck in C code.
  self->delayed_send(self, std::chrono::milliseconds(5), reap_atom_v);
}

void on_stdout_closed(kernel_broker* self) {
  auto& st = self->state;
  frame_parser::callbacks cb;
  cb.on_raw = [&](std::string_view raw) {
    if (st.cell)
      st.cell->raw_out.append(raw);
  };
  cb.on_frame = [](std::string) {};
  cb.on_error = [](std::string) {};
  st.parser->finish(cb);
  st.mark_dead();
  int status = 0;
  if (reap_kernel(st.opts.proc.pid, &status))
    st.opts.proc.pid = -1;
  settle(self, nullptr);
  end_broker(self);
}

caf::behavior kernel_impl(kernel_broker* self, services_ptr svc,
                          kernel_actor_options opts) {
  auto& st = self->state;
  st.svc = std::move(svc);
  st.opts = std::move(opts);
  auto& p = st.opts.proc;
  st.parser = std::make_unique<frame_parser>(p.sentinel);
  auto& ce = st.svc->cfg.code_execution;
  rpc_limits lim;
  lim.max_connections = static_cast<size_t>(ce.max_rpc_connections);
  lim.max_frame = static_cast<size_t>(ce.max_rpc_frame_bytes);
  lim.max_buffered = static_cast<size_t>(ce.max_rpc_buffered_bytes);
  st.conns = std::make_unique<rpc_connection_table<caf::io::connection_handle>>(
    lim);
  st.in_fd = ::fcntl(p.stdin_fd, F_DUPFD_CLOEXEC, 3); // -1: scribe only
  st.in_hdl = self->add_scribe(p.stdin_fd);
  st.out_hdl = self->add_scribe(p.stdout_fd);
  st.err_hdl = self->add_scribe(p.stderr_fd);
  st.rpc_path = unix_socket_path(p.rpc_fd);
  st.rpc_raw_fd = p.rpc_fd;
  st.rpc_hdl = self->add_doorman(p.rpc_fd);
  st.listener_open = true;
  p.stdin_fd = p.stdout_fd = p.stderr_fd = p.rpc_fd = -1; // now the broker's
  // A scribe is launched by its first configure_read; until then writes
  // stay buffered. The kernel never writes to its stdin, so nothing is read.
  self->configure_read(st.in_hdl, caf::io::receive_policy::at_most(1024));
  // Each scribe keeps a read buffer of its at_most size for the kernel's
  // life: stdout carries the frames and bulk output, so it reads 64 KiB at
  // a time; stderr is mostly quiet, and 8 KiB reads save 56 KiB per kernel.
  self->configure_read(st.out_hdl, caf::io::receive_policy::at_most(65536));
  self->configure_read(st.err_hdl, caf::io::receive_policy::at_most(8192));
  // Stopped by the registry (reset, eviction, a closed session) or at
  // shutdown: every cell taken must still be answered, or its caller waits
  // for its request timeout (minutes). A running cell ends as interrupted
  // through the normal kill sequence (bounded by the kill grace), which
  // also answers the queue and quits; otherwise the queue is answered here.
  self->set_exit_handler([=](caf::exit_msg& em) {
    auto& s = self->state;
    if (s.cell && !s.dead && s.opts.proc.pid > 0) {
      MIBYAN_LOG(info, "kernel", "pid " << s.opts.proc.pid
                 << " stopped while a cell ran");
      kill_kernel(self, cell_status::interrupted,
                  "the session's kernel was stopped (reset, evicted or "
                  "closed) while this cell ran");
      return;
    }
    s.mark_dead();
    settle_queue(self);
    end_broker(self, std::move(em.reason));
  });
  return {
    exit_timer_handler(self),
    [=](exec_atom, exec_cell& cell) -> caf::result<tool_response> {
      auto& s = self->state;
      auto rp = self->make_response_promise<tool_response>();
      if (s.dead || s.exited) {
        s.answer(rp, tool_response{cell.call_id, "execute_code",
                                   unrun_cell_result(
                                     "The session kernel is gone; retry the "
                                     "call to start a fresh kernel."),
                                   0, false, true});
        return rp;
      }
      MIBYAN_LOG(debug, "kernel", "pid " << s.opts.proc.pid << ": queued");
      s.queue.push_back(pending_cell{std::move(cell), rp});
      start_next(self);
      return rp;
    },
    [=](checkpoint_atom, std::string& session, bool restore) {
      adopt_session(self, std::move(session), restore);
    },
    [=](restore_atom, bool found, std::string& file, std::string& refused,
        int64_t age_cells) {
      restore_ready(self, found, std::move(file), std::move(refused),
                    age_cells);
    },
    [=](checkpoint_atom, bool ok, std::string& error) {
      checkpoint_saved(self, ok, error);
    },
    [=](checkpoint_atom) -> caf::result<bool> {
      auto rp = self->make_response_promise<bool>();
      flush_checkpoint(self, rp);
      return rp;
    },
    [=](done_atom, uint64_t seq, std::string& result_json) {
      // A script call's invocation answered (its result, its deadline's or
      // its failure's); dropped when the call was let go with its cell.
      script_call_done(self, seq, result_json);
    },
    [=](interrupt_atom, interrupt_request& req) {
      // One call (runtime::cancel_call): its running cell kills the kernel
      // like an interrupt; a queued one is dropped; others go on.
      auto& s = self->state;
      if (s.cell && s.cell->cell.call_id == req.call_id) {
        MIBYAN_LOG(info, "kernel", "pid " << s.opts.proc.pid
                   << " interrupted (call " << req.call_id << "): "
                   << req.reason);
        kill_kernel(self, cell_status::interrupted, std::move(req.reason));
        return;
      }
      for (auto i = s.queue.begin(); i != s.queue.end(); ++i) {
        if (i->cell.call_id != req.call_id)
          continue;
        auto p = std::move(*i);
        s.queue.erase(i);
        json::value r;
        r["status"] = "interrupted";
        r["error"] = "The cell was cancelled before it ran: " + req.reason;
        r["tool_calls_made"] = 0;
        r["duration_seconds"] = 0;
        // Cancelled by its caller; the kernel goes on with the others.
        s.answer(p.rp, tool_response{p.cell.call_id, "execute_code", r.dump(),
                                     0, true, false});
        return;
      }
    },
    [=](interrupt_atom, std::string& reason) {
      auto& s = self->state;
      MIBYAN_LOG(info, "kernel", "pid " << s.opts.proc.pid
                 << " interrupted: " << reason);
      kill_kernel(self, cell_status::interrupted, std::move(reason));
    },
    [=](reap_atom) {
      auto& s = self->state;
      int status = 0;
      if (s.opts.proc.pid > 0 && reap_kernel(s.opts.proc.pid, &status)) {
        // The main process is gone; make sure the group is too.
        signal_kernel(s.opts.proc.pid, SIGKILL);
        s.opts.proc.pid = -1;
        settle(self, nullptr);
        end_broker(self);
        return;
      }
      self->delayed_send(self, std::chrono::milliseconds(20), reap_atom_v);
    },
    [=](kill_atom, bool hard) {
      auto& s = self->state;
      if (s.opts.proc.pid <= 0)
        return;
      signal_kernel(s.opts.proc.pid, hard ? SIGKILL : SIGTERM);
      if (hard) {
        settle(self, nullptr);
        end_broker(self);
      }
    },
    [=](in_loop_atom) {
      self->state.retry_armed = false;
      progress(self); // actors/kernel_lifetime.cpp
    },
    [=](caf::io::new_data_msg& msg) {
      if (!mark_in_loop(self))
        return;
      auto& s = self->state;
      if (msg.handle == s.out_hdl) {
        frame_parser::callbacks cb;
        cb.on_raw = [&](std::string_view raw) {
          if (s.cell)
            s.cell->raw_out.append(raw);
        };
        cb.on_frame = [&](std::string body) {
          auto parsed = json::parse(body);
          if (!parsed || !parsed.v->is_object()) {
            kill_kernel(self, cell_status::error,
                        "The kernel sent an unreadable reply frame.");
            return;
          }
          auto status = parsed.v->get_string("status");
          MIBYAN_LOG(debug, "kernel", "pid " << s.opts.proc.pid
                     << ": frame " << status);
          if (status == "ready") {
            s.ready = true;
            send_restore(self);
            start_next(self);
          } else if (status == "checkpoint" || status == "restored") {
            on_checkpoint_frame(self, *parsed.v);
          } else if (s.cell && parsed.v->get_string("id") != s.cell->id) {
            // A frame for another cell (a cell that forged its own reply
            // and ran on): the stream cannot be trusted any more.
            kill_kernel(self, cell_status::error,
                        "The kernel sent a reply frame for another cell.");
          } else if (s.cell && (!s.cell->forcing || status == "killed")) {
            if (!s.cell->forcing)
              expect_checkpoint(self, *parsed.v);
            settle(self, &*parsed.v);
          }
        };
        cb.on_error = [&](std::string err) {
          kill_kernel(self, cell_status::error,
                      "Kernel protocol error: " + err);
        };
        cb.on_oversized = [&](uint64_t size) {
          // The runner clips its replies, so this is a bug or a forgery;
          // the body was skipped and the kernel is still in step.
          if (!s.cell || s.cell->forcing)
            return;
          json::value frame;
          frame["status"] = "error";
          frame["traceback"] = "The kernel's reply for this cell was "
                               + std::to_string(size)
                               + " bytes, over the reply size limit, and "
                                 "was discarded. The kernel is still usable.";
          frame["execution_count"] = s.execution_count + 1;
          settle(self, &frame);
        };
        s.parser->feed(std::string_view{msg.buf.data(), msg.buf.size()}, cb);
        return;
      }
      if (msg.handle == s.err_hdl) {
        std::string_view chunk{msg.buf.data(), msg.buf.size()};
        if (s.cell)
          s.cell->raw_err.append(chunk);
        s.last_stderr.append(chunk);
        if (s.last_stderr.size() > 4000)
          s.last_stderr.erase(0, s.last_stderr.size() - 4000);
        return;
      }
      auto hdl = msg.handle;
      if (!mark_conn_seen(self, hdl))
        return;
      auto verdict = s.conns->feed(
        hdl, std::string_view{msg.buf.data(), msg.buf.size()},
        [&](std::string_view line) { handle_rpc_line(self, hdl, line); });
      if (verdict != rpc_verdict::ok)
        refuse_conn(self, hdl, verdict);
    },
    [=](caf::io::new_connection_msg& msg) {
      if (!mark_in_loop(self))
        return;
      auto& s = self->state;
      if (s.dead) {
        // From the backlog of a kernel being ended: closed unlaunched.
        self->close(msg.handle);
        return;
      }
      // A refused connection is never launched for reading: closing a
      // scribe in the handler that launched it leaves its descriptor open
      // (observed with CAF 0.17.6). The refusal line is still written.
      if (auto v = s.conns->admit(msg.handle); v != rpc_verdict::ok) {
        refuse_conn(self, msg.handle, v);
        return;
      }
      // CAF 0.17 numbers a connection by its descriptor; checked (the
      // socket must be one of this kernel's RPC connections) before
      // replies are written to a duplicate of it.
      if (s.direct.has_room())
        s.direct.add(msg.handle,
                     dup_unix_connection(msg.handle.id(), s.rpc_path));
      self->configure_read(msg.handle,
                           caf::io::receive_policy::at_most(65536));
      launched_conn(self, msg.handle);
    },
    [=](caf::io::connection_closed_msg& msg) {
      if (!mark_in_loop(self))
        return;
      auto& s = self->state;
      if (msg.handle == s.out_hdl) {
        on_stdout_closed(self);
        return;
      }
      s.conns->remove(msg.handle);
      s.direct.close(msg.handle);
      // Closed by the peer: CAF has let it go already.
      s.fresh.erase(msg.handle);
      s.close_when_seen.erase(msg.handle);
      progress(self);
    },
    [=](caf::io::acceptor_closed_msg&) {
      // Closed by close_listener; nothing else to do.
      mark_in_loop(self);
    },
  };
}

} // namespace kernel_detail

caf::actor spawn_kernel_actor(caf::actor_system& sys, services_ptr svc,
                              kernel_actor_options opts) {
  if (!opts.usage)
    opts.usage = std::make_shared<kernel_usage>();
  return sys.middleman().spawn_broker(kernel_detail::kernel_impl,
                                      std::move(svc),
                                      std::move(opts));
}

} // namespace mibyan
