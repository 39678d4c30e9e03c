// The running cell of a kernel broker (actors/kernel.hpp): the queue's next
// cell is written to the runner (start_next), its deadline is armed and
// enforced, and its frame (or the kernel's death) is turned into the
// execute_code answer (settle). Every cell taken is answered exactly once,
// here or by kernel_state's destructor. Thread: the broker's own (the
// middleman's); nothing here blocks (one non-blocking send, small file
// writes for spilled output and a changed tool stub).
#include "actors/kernel_broker.hpp"

#include <chrono>
#include <string>

#include <sys/socket.h>

#include "actors/exit_timer.hpp"
#include "base/io_poll_hint.hpp"
#include "base/log.hpp"
#include "base/private_file.hpp"
#include "base/redact_slot.hpp"
#include "base/runtime_metrics.hpp"
#include "kernels/cell_result.hpp"
#include "kernels/kernel_process.hpp"
#include "kernels/script_catalog.hpp"

namespace mibyan::kernel_detail {

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

} // namespace mibyan::kernel_detail
