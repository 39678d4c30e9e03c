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
#include "base/redact_slot.hpp"
#include "kernels/cell_result.hpp"
#include "kernels/direct_writes.hpp"
#include "kernels/frame_parser.hpp"
#include "kernels/rpc_codec.hpp"
#include "kernels/rpc_connections.hpp"
#include "messages/type_ids.hpp"
#include "base/head_tail_buffer.hpp"
#include "base/io_poll_hint.hpp"
#include "base/log.hpp"
#include "base/private_file.hpp"
#include "base/runtime_metrics.hpp"
#include "kernels/script_catalog.hpp"
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

std::string spill_to_cache(const std::string& home, const std::string& text,
                           const std::string& tag) {
  auto dir = home + "/cache/exec";
  if (!make_private_dirs(dir).ok())
    return {};
  auto path = dir + "/stdout-" + tag + "-" + random_token(6) + ".txt";
  return write_private_file(path, text, true).ok() ? path : std::string{};
}

// Answers every queued cell with an error: this kernel cannot run them.
void settle_queue(kernel_broker* self) {
  auto& st = self->state;
  while (!st.queue.empty()) {
    auto p = std::move(st.queue.front());
    st.queue.pop_front();
    st.answer(p.rp, tool_response{p.cell.call_id, "execute_code",
                                  unrun_cell_result(
                                    "The session kernel ended before this "
                                    "cell ran; retry the call to start a "
                                    "fresh kernel."),
                                  0, false, true});
  }
}

// Answers the running cell. `frame` is the runner's reply (may be null when
// the host ended the cell).
void settle(kernel_broker* self, const json::value* frame) {
  auto& st = self->state;
  if (!st.cell)
    return;
  auto cell = std::move(st.cell); // a deadline timer now finds no cell
  close_rpc_conns(self);
  // Cancel tool calls the cell left running; they belong to it. Their
  // connections are closed, so no answer is written.
  interrupt_script_calls(st, "the execute_code cell ended");
  cell_outcome c;
  c.tools = st.opts.tools;
  c.mode = st.opts.mode;
  c.reused = cell->cell.reused;
  c.state_reset = cell->cell.state_reset;
  c.tool_calls = cell->tool_calls;
  c.duration_seconds = std::chrono::duration<double>(clock_type::now()
                                                     - cell->start).count();
  if (frame) {
    c.stdout_text = frame->get_string("stdout");
    c.stdout_total = static_cast<uint64_t>(
      std::max<int64_t>(frame->get_int("stdout_total", 0),
                        static_cast<int64_t>(c.stdout_text.size())));
    c.stderr_text = frame->get_string("stderr");
    c.stderr_total = static_cast<uint64_t>(
      std::max<int64_t>(frame->get_int("stderr_total", 0),
                        static_cast<int64_t>(c.stderr_text.size())));
    c.traceback = frame->get_string("traceback");
    st.execution_count = frame->get_int("execution_count",
                                        st.execution_count + 1);
  }
  c.execution_count = st.execution_count;
  report_restore(self, c); // actors/kernel_checkpoint_io.cpp
  c.checkpoint_wait_ms = cell->ckpt_wait_ms;
  // fd-level output follows the Python-level output.
  auto raw_out = cell->raw_out.joined();
  if (cell->raw_out.truncated())
    raw_out = cell->raw_out.head() + "\n[... "
              + std::to_string(cell->raw_out.omitted())
              + " bytes of fd-level output omitted ...]\n"
              + cell->raw_out.tail();
  c.stdout_text += raw_out;
  c.stdout_total += cell->raw_out.total();
  auto raw_err = cell->raw_err.joined();
  c.stderr_text = raw_err + c.stderr_text;
  c.stderr_total += cell->raw_err.total();
  auto status = frame ? frame->get_string("status") : std::string{};
  if (cell->forcing) {
    c.status = cell->forced;
    c.exit_code = -1;
    if (c.status == cell_status::timeout)
      c.error = "Cell timed out after "
                + std::to_string(cell->cell.timeout_ms / 1000)
                + "s; the session kernel was killed and its state was lost. "
                  "The next execute_code call starts a fresh kernel.";
    else if (c.status == cell_status::interrupted) {
      c.error = "Interrupted; the session kernel was killed and its state "
                "was lost.";
      c.interrupt_reason = cell->reason;
    } else {
      c.error = cell->reason;
    }
    c.ended = true;
  } else if (status == "ok") {
    c.status = cell_status::success;
    c.exit_code = 0;
  } else if (status == "exit") {
    c.exit_code = frame->get_int("exit_code", 0);
    c.status = c.exit_code == 0 ? cell_status::success : cell_status::error;
    c.ended = true;
    st.exited = true;
    st.opts.usage->ended.store(true);
  } else if (status == "error") {
    c.status = cell_status::error;
    c.exit_code = 1;
    if (c.traceback.empty())
      c.error = "Cell raised an exception.";
  } else if (status == "protocol-error") {
    c.status = cell_status::error;
    c.exit_code = -1;
    c.error = "The kernel rejected the cell: " + c.traceback;
  } else {
    // No frame: the kernel died under the cell.
    c.status = cell_status::error;
    c.exit_code = -1;
    auto tail = c.stderr_text.empty() ? st.last_stderr : c.stderr_text;
    if (tail.size() > 2000)
      tail = tail.substr(tail.size() - 2000);
    c.error = "The session kernel died while running the cell"
              + (tail.empty() ? std::string{"."} : ": " + tail);
    c.ended = true;
  }
  cell_limits lim;
  auto& ce = st.svc->cfg.code_execution;
  lim.max_stdout_bytes = static_cast<uint64_t>(ce.max_stdout_bytes);
  lim.max_stderr_bytes = static_cast<uint64_t>(ce.max_stderr_bytes);
  lim.max_spill_bytes = static_cast<uint64_t>(ce.max_spill_bytes);
  lim.redact = st.svc->redact ? st.svc->redact->get() : nullptr;
  auto home = st.svc->cfg.home;
  auto tag = std::to_string(st.opts.proc.pid) + "-"
             + std::to_string(st.execution_count);
  auto result = build_cell_result(c, lim, [&](const std::string& text) {
    return spill_to_cache(home, text, tag);
  });
  if (c.restore != nullptr)
    st.restore_report.reset(); // reported once, on the first cell
  tool_response res;
  res.call_id = cell->cell.call_id;
  res.tool = "execute_code";
  res.result_json = result.dump();
  res.duration_us = static_cast<int64_t>(c.duration_seconds * 1e6);
  res.timed_out = c.status == cell_status::timeout
                  || c.status == cell_status::interrupted;
  res.kernel_ended = c.ended;
  // Every cell that ran ends here (docs/metrics.md).
  metrics::count_tool_call("execute_code",
                           c.status == cell_status::success   ? "ok"
                           : c.status == cell_status::error   ? "error"
                           : c.status == cell_status::timeout ? "timeout"
                                                              : "interrupted",
                           c.duration_seconds);
  st.answer(cell->rp, std::move(res));
  if (st.dead || st.exited) {
    settle_queue(self);
    end_broker(self);
    return;
  }
  start_next(self);
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

uint64_t timer_key(clock_type::time_point t) {
  return static_cast<uint64_t>(t.time_since_epoch().count());
}

void on_cell_deadline(kernel_broker* self, uint64_t key);

// Makes sure a deadline timer fires at or before the running cell's
// deadline (kernel_state::cell_timers).
void arm_cell_timer(kernel_broker* self) {
  auto& st = self->state;
  auto key = timer_key(st.cell_deadline);
  if (!st.cell_timers.empty() && *st.cell_timers.begin() <= key)
    return;
  st.cell_timers.insert(key);
  auto delay = st.cell_deadline - clock_type::now();
  // Ends with the broker (actors/exit_timer.hpp): a kernel that ended is
  // freed at once, not after its cell's deadline.
  start_exit_timer(self, delay,
                   [self, key] { on_cell_deadline(self, key); });
}

// A deadline timer fired (arm_cell_timer).
void on_cell_deadline(kernel_broker* self, uint64_t key) {
  auto& s = self->state;
  if (auto i = s.cell_timers.find(key); i != s.cell_timers.end())
    s.cell_timers.erase(i);
  if (!s.cell || s.cell->forcing)
    return;
  if (clock_type::now() < s.cell_deadline) {
    arm_cell_timer(self); // armed for an earlier cell
    return;
  }
  MIBYAN_LOG(info, "kernel", "pid " << s.opts.proc.pid
             << ": cell timed out after "
             << s.cell->cell.timeout_ms << " ms");
  kill_kernel(self, cell_status::timeout, {});
}

// Writes a cell line: as much as the socket takes at once straight from
// this handler (one system call, no epoll round trip), the rest through
// the scribe. The scribe holds nothing older: the previous line was read
// whole before its frame arrived, and the next line is written only
// after that frame (docs/kernel_protocol.md, section 3).
void write_cell_line(kernel_broker* self, const std::string& text) {
  auto& st = self->state;
  size_t sent = 0;
  if (st.in_fd >= 0) {
    auto n = ::send(st.in_fd, text.data(), text.size(),
                    MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0)
      sent = static_cast<size_t>(n);
  }
  if (sent < text.size()) {
    self->write(st.in_hdl, text.size() - sent, text.data() + sent);
    self->flush(st.in_hdl);
  }
}

// Before a cell: when the script catalog moved on since this kernel's stub
// was written, the new `mibyan_tools` goes into the staging dir and the
// allow-list follows; true when the runner must load it again. A failed
// write keeps the old set (tried again before the next cell).
bool refresh_script_tools(kernel_broker* self) {
  auto& st = self->state;
  if (!st.svc->scripts || st.opts.stub_generation == 0)
    return false;
  auto snap = st.svc->scripts->current();
  if (snap->generation == st.opts.stub_generation)
    return false;
  // A few KiB, only after a tool list change.
  auto written = write_private_file(
    st.opts.proc.staging_dir + "/mibyan_tools.py", snap->stub);
  if (!written.ok()) {
    MIBYAN_LOG(warning, "kernel", "pid " << st.opts.proc.pid
               << ": cannot write the new mibyan_tools: " << written.error);
    return false;
  }
  st.opts.tools = snap->names;
  st.opts.stub_generation = snap->generation;
  MIBYAN_LOG(debug, "kernel", "pid " << st.opts.proc.pid
             << ": script tools now at generation " << snap->generation);
  return true;
}

void start_next(kernel_broker* self) {
  auto& st = self->state;
  if (st.cell || st.queue.empty() || st.dead || !st.ready)
    return;
  // A restore comes first. The previous cell's checkpoint does not hold
  // the line back: the runner takes it before it reads the next line, so
  // the next cell still starts after it, without a round trip in between
  // (the wait is measured when the checkpoint frame arrives).
  if (checkpoint_blocks(self))
    return;
  auto next = std::move(st.queue.front());
  st.queue.pop_front();
  auto cell = std::make_unique<running_cell>();
  cell->cell = std::move(next.cell);
  cell->rp = std::move(next.rp);
  cell->start = clock_type::now();
  if (st.next_token.empty())
    st.next_token = random_token(6);
  cell->id = std::to_string(st.opts.proc.pid) + "-" + std::to_string(
               ++st.cell_seq) + "-" + st.next_token; // unpredictable
  st.next_token.clear();
  json::value line;
  line["id"] = cell->id;
  line["code"] = cell->cell.code;
  line["timeout"] = static_cast<double>(cell->cell.timeout_ms) / 1000.0;
  if (refresh_script_tools(self))
    line["reload_tools"] = true;
  auto timeout = std::chrono::milliseconds(cell->cell.timeout_ms);
  close_rpc_conns(self);
  st.cell = std::move(cell);
  add_checkpoint_request(self, line);
  auto text = line.dump() + "\n";
  MIBYAN_LOG(debug, "kernel", "pid " << st.opts.proc.pid << ": cell "
             << st.cell->id << " (" << text.size() << " bytes)");
  write_cell_line(self, text);
  expect_answer_soon(); // the frame follows within microseconds if warm
  st.cell_deadline = st.cell->start + timeout;
  arm_cell_timer(self);
  st.next_token = random_token(6); // while the kernel runs the cell
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
