// File: actors/kernel_broker.hpp
//
// Internals of the kernel broker (actors/kernel.hpp), shared by its files:
// actors/kernel.cpp (the behavior and the kernel's end),
// actors/kernel_cells.cpp (the running cell: start, deadline, answer),
// actors/kernel_rpc.cpp (the script's RPC connections and tool calls) and
// actors/kernel_lifetime.cpp (when descriptors may close and the broker
// may quit). Only those include it. Thread safety: everything here runs on the
// broker's own thread (the middleman's).
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "actors/kernel.hpp"
#include "actors/script_calls.hpp"
#include "base/head_tail_buffer.hpp"
#include "base/json.hpp"
#include "base/runtime_metrics.hpp"
#include "kernels/cell_result.hpp"
#include "kernels/direct_writes.hpp"
#include "kernels/frame_parser.hpp"
#include "kernels/rpc_connections.hpp"
#include "messages/type_ids.hpp"

namespace mibyan::kernel_detail {

using clock_type = std::chrono::steady_clock;

// Raw fd-level output kept per cell (head + tail); the rest is counted.
constexpr size_t raw_keep = 5000000;

// The execute_code result of a cell this kernel never ran (or never
// answered): an error with `error`, no tool calls, no time.
inline std::string unrun_cell_result(const std::string& error) {
  json::value r;
  r["status"] = "error";
  r["error"] = error;
  r["tool_calls_made"] = 0;
  r["duration_seconds"] = 0;
  return r.dump();
}

struct pending_cell {
  exec_cell cell;
  caf::typed_response_promise<tool_response> rp;
};

struct running_cell {
  exec_cell cell;
  caf::typed_response_promise<tool_response> rp;
  std::string id;
  clock_type::time_point start;
  int64_t tool_calls = 0;
  std::set<std::string> seen_ids;
  head_tail_buffer raw_out{raw_keep * 4 / 10, raw_keep * 6 / 10};
  head_tail_buffer raw_err{raw_keep * 4 / 10, raw_keep * 6 / 10};
  // Set when the cell is being ended by the host.
  cell_status forced = cell_status::success;
  bool forcing = false;
  std::string reason;
  // The cell line asked for a checkpoint; how long the cell waited for the
  // previous one (milliseconds).
  bool checkpoint = false;
  double ckpt_wait_ms = 0;
  bool checkpoint_waited = false;
};

struct kernel_state {
  // Counts the kernel started and alive while the broker's state lives.
  metrics::live_kernel alive;
  services_ptr svc;
  kernel_actor_options opts;
  caf::io::connection_handle in_hdl, out_hdl, err_hdl;
  caf::io::accept_handle rpc_hdl;
  std::unique_ptr<rpc_connection_table<caf::io::connection_handle>> conns;
  std::unique_ptr<frame_parser> parser;
  std::deque<pending_cell> queue;
  std::unique_ptr<running_cell> cell;
  // The script's tool calls in flight, each with its invocation actor
  // (actors/tool_invocation.hpp), by sequence number: where its answer
  // goes, and whom to interrupt when the cell ends.
  struct script_call {
    caf::io::connection_handle conn;
    std::string id; // the script's request id
    caf::actor invocation;
  };
  std::unordered_map<uint64_t, script_call> calls;
  uint64_t call_seq = 0;
  int64_t execution_count = 0;
  uint64_t cell_seq = 0;
  // The random part of the next cell's id, drawn after a cell line went
  // out (a getrandom call off the path from a cell to its line).
  std::string next_token;
  // The running cell's wall-clock deadline, and the fire times of the
  // deadline timers in flight (arm_cell_timer): a timer is armed only when
  // none fires at or before the new deadline, so back-to-back cells do
  // not cost a timer (a wake-up of CAF's clock thread) each.
  clock_type::time_point cell_deadline;
  std::multiset<uint64_t> cell_timers;
  // The host's own duplicate of the kernel's stdin socket, for writing a
  // cell line in the handler that starts the cell (start_next); the
  // scribe `in_hdl` takes what does not fit at once.
  int in_fd = -1;
  // RPC replies written from the handler (kernels/direct_writes.hpp), and
  // the RPC socket's path, which identifies its connections.
  direct_writes<caf::io::connection_handle> direct;
  std::string rpc_path;
  bool ready = false;         // the runner announced itself
  bool dead = false;          // the process is gone or being killed
  bool exited = false;        // the script called sys.exit()
  std::string last_stderr;    // tail of stderr between cells, for "died"
  std::string death_reason;
  // Broker lifetime (docs/kernel_protocol.md §7.1, actors/kernel_lifetime.cpp):
  // closes and the quit wait until the loop provably has each descriptor
  // and the listener's backlog is empty, or until `defer_until`.
  bool in_loop = false;            // an event came from our descriptors
  // Launched connections without an event yet, with their launch time.
  std::map<caf::io::connection_handle, clock_type::time_point> fresh;
  std::set<caf::io::connection_handle> close_when_seen; // of `fresh`
  int rpc_raw_fd = -1;             // the listener's fd, owned by CAF
  bool listener_open = false;
  bool listener_close_wanted = false;
  bool quit_pending = false;
  caf::error quit_reason;
  bool retry_armed = false;
  clock_type::time_point defer_until{};

  // Checkpoints (actors/kernel_checkpoint_io.cpp). `ckpt_session` is ""
  // until the registry adopts the kernel for a session with checkpoints
  // on. Cells wait while a restore is prepared or runs; the next cell's
  // line may go out while the previous cell's checkpoint frame is
  // outstanding (the runner reads it only after the checkpoint).
  std::string ckpt_session;
  bool restoring = false;        // restore being prepared, sent or run
  std::string restore_file;      // written, to send once the kernel is ready
  std::string restore_op;        // id of the restore line sent
  bool ckpt_pending = false;     // a checkpoint frame is expected
  std::string ckpt_op;           // id of an explicit checkpoint line
  uint64_t ckpt_files = 0;
  int ckpt_saving = 0;           // saves running on the pool
  bool ckpt_want_flush = false;  // a flush waits for the next checkpoint
  std::vector<caf::typed_response_promise<bool>> ckpt_waiters;
  std::vector<caf::typed_response_promise<bool>> ckpt_after_save;
  std::unique_ptr<restore_summary> restore_report; // for the next cell

  ~kernel_state(); // actors/kernel.cpp
  static const char* name;

  // Answers a cell taken by this kernel (every answer goes through here,
  // exactly once per cell): the shared usage record first, so a caller
  // that sends its next cell on this answer finds the kernel marked ended
  // (actors/kernel.hpp, kernel_usage).
  void answer(caf::typed_response_promise<tool_response>& rp,
              tool_response res) {
    auto& u = *opts.usage;
    if (res.kernel_ended)
      u.ended.store(true);
    u.last_answer_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
      svc->clock->steady_now().time_since_epoch()).count());
    rp.deliver(std::move(res));
    u.attached.fetch_sub(1);
  }

  // No more cells: the process is gone or going.
  void mark_dead() {
    dead = true;
    opts.usage->ended.store(true);
  }

private:
  void answer_unsettled() {
    auto text = unrun_cell_result(
      "The session kernel ended before this cell could be answered; retry "
      "the call to start a fresh kernel.");
    if (cell && cell->rp.pending())
      answer(cell->rp, tool_response{cell->cell.call_id, "execute_code", text,
                                     0, false, true});
    for (auto& p : queue)
      if (p.rp.pending())
        answer(p.rp, tool_response{p.cell.call_id, "execute_code", text, 0,
                                   false, true});
  }
};

using kernel_broker = caf::io::stateful_broker<kernel_state>;

// actors/kernel_cells.cpp
/// Writes the next queued cell to the runner when none runs and the
/// kernel is ready (a checkpoint restore goes first).
void start_next(kernel_broker* self);
/// Answers the running cell from the runner's frame, or (null) as ended
/// by the host or the kernel's death; then starts the next cell or ends
/// the broker.
void settle(kernel_broker* self, const json::value* frame);
/// Answers every queued cell with an error: this kernel cannot run them.
void settle_queue(kernel_broker* self);

// actors/kernel.cpp

// -- checkpoints (actors/kernel_checkpoint_io.cpp) ---------------------------

void adopt_session(kernel_broker* self, std::string session, bool restore);
void restore_ready(kernel_broker* self, bool found, std::string file,
                   std::string refused, int64_t age_cells);
/// Sends the restore line if one is waiting for the ready frame.
void send_restore(kernel_broker* self);
/// True while cells must wait (a restore being prepared or run).
bool checkpoint_blocks(kernel_broker* self);
/// Adds the "checkpoint" member to a cell line when this kernel
/// checkpoints.
void add_checkpoint_request(kernel_broker* self, json::value& line);
/// The cell's frame arrived: a checkpoint frame follows when it says
/// "checkpoint": "follows"; "unchanged" means the stored one holds it.
void expect_checkpoint(kernel_broker* self, const json::value& frame);
/// A "checkpoint" or "restored" frame.
void on_checkpoint_frame(kernel_broker* self, const json::value& frame);
/// A save finished on the pool.
void checkpoint_saved(kernel_broker* self, bool ok, const std::string& error);
/// (checkpoint_atom) -> bool
void flush_checkpoint(kernel_broker* self,
                      caf::typed_response_promise<bool> rp);
/// Fills the restore report into a cell's outcome (the first after a
/// restore) and notes the session's execution count.
void report_restore(kernel_broker* self, cell_outcome& c);
/// The broker ends: flush waiters get false.
void fail_checkpoint_waiters(kernel_broker* self);
void kill_kernel(kernel_broker* self, cell_status why, std::string reason);

// actors/kernel_lifetime.cpp (docs/kernel_protocol.md §7.1)
bool progress(kernel_broker* self);
void arm_retry(kernel_broker* self);
void close_listener(kernel_broker* self);
void end_broker(kernel_broker* self, caf::error reason = caf::error{});
bool mark_in_loop(kernel_broker* self);
bool mark_conn_seen(kernel_broker* self, caf::io::connection_handle hdl);
void launched_conn(kernel_broker* self, caf::io::connection_handle hdl);
void close_scribe(kernel_broker* self, caf::io::connection_handle hdl);

// actors/kernel_rpc.cpp
void write_conn(kernel_broker* self, caf::io::connection_handle hdl,
                const std::string& line);
void close_conn(kernel_broker* self, caf::io::connection_handle hdl);
void refuse_conn(kernel_broker* self, caf::io::connection_handle hdl,
                 rpc_verdict why);
void close_rpc_conns(kernel_broker* self);
/// Lets every script call in flight go: each invocation gets an interrupt
/// (its tool's cancel flag is set) and no answer is written. Safe from the
/// state's destructor.
void interrupt_script_calls(kernel_state& st, const std::string& reason);
/// An invocation answered call `seq`: writes the reply, unless the call
/// was let go.
void script_call_done(kernel_broker* self, uint64_t seq,
                      const std::string& result_json);
void handle_rpc_line(kernel_broker* self, caf::io::connection_handle hdl,
                     std::string_view line);

} // namespace mibyan::kernel_detail
