// The kernel broker's side of the script's RPC connections (docs/
// execute_code.md, "Per-cell budgets" and "Script tool calls"): replies,
// closing, the checks of a request and handing it to its invocation actor.
#include "actors/kernel_broker.hpp"
#include "actors/tool_invocation.hpp"

#include <algorithm>

#include "base/log.hpp"
#include "kernels/rpc_codec.hpp"
#include "tools/argument_limit.hpp"

namespace mibyan::kernel_detail {

// Writes a reply line: straight from this handler when the socket takes
// it at once, else (the rest) through the connection's scribe.
void write_conn(kernel_broker* self, caf::io::connection_handle hdl,
                const std::string& line) {
  if (!self->state.conns->contains(hdl))
    return; // the script's connection is gone
  auto sent = self->state.direct.write(hdl, line);
  if (sent == line.size())
    return;
  self->write(hdl, line.size() - sent, line.data() + sent);
  self->flush(hdl);
}

// Closes an RPC connection: the scribe and the direct writer's duplicate
// (the script sees the close only when both are gone).
void close_conn(kernel_broker* self, caf::io::connection_handle hdl) {
  self->state.direct.close(hdl);
  close_scribe(self, hdl); // actors/kernel_lifetime.cpp
}

// Sends an error line (id null) on a connection the table has already
// forgotten, then closes it once the line is out.
void refuse_conn(kernel_broker* self, caf::io::connection_handle hdl,
                 rpc_verdict why) {
  auto line = encode_rpc_error("", rpc_limit_message(why,
                                                     self->state.conns
                                                       ->limits()));
  self->state.direct.close(hdl);
  self->write(hdl, line.size(), line.data());
  self->flush(hdl);
  close_scribe(self, hdl);
}

// Closes every RPC connection: a cell's connections end with the cell, and
// those opened between cells are not the next cell's (docs/kernel_protocol.md
// §5.1). The stub reconnects on its next call.
void close_rpc_conns(kernel_broker* self) {
  for (auto& hdl : self->state.conns->take_all())
    close_conn(self, hdl);
}

void interrupt_script_calls(kernel_state& st, const std::string& reason) {
  for (auto& kv : st.calls)
    caf::anon_send(kv.second.invocation, interrupt_atom_v, reason);
  st.calls.clear();
}

void script_call_done(kernel_broker* self, uint64_t seq,
                      const std::string& result_json) {
  auto& calls = self->state.calls;
  auto i = calls.find(seq);
  if (i == calls.end())
    return; // let go with its cell
  auto c = std::move(i->second);
  calls.erase(i);
  write_conn(self, c.conn, encode_rpc_response(c.id, result_json));
}

void handle_rpc_line(kernel_broker* self, caf::io::connection_handle hdl,
                     std::string_view line) {
  auto& st = self->state;
  rpc_request req;
  // Refuse an oversized request before parsing it (memory amplification);
  // the JSON envelope around the arguments is far below the slack.
  auto max_args = st.svc->cfg.tools.max_argument_bytes;
  if (auto size = check_argument_size(line.size(), max_args + 65536);
      !size) {
    write_conn(self, hdl, encode_rpc_error(peek_rpc_id(line), size.error));
    return;
  }
  if (auto decoded = decode_rpc_request(line, req); !decoded) {
    write_conn(self, hdl, encode_rpc_error(req.id, "Invalid RPC request: "
                                                     + decoded.error));
    return;
  }
  if (!token_matches(st.opts.proc.token, req.token)) {
    write_conn(self, hdl, encode_rpc_error(req.id, "Unauthorized RPC request"));
    return;
  }
  // A call names its cell (the stub tags each thread with the cell that
  // started it): a call left over from an earlier cell never runs under,
  // or counts against, the current one.
  if (!st.cell || st.cell->forcing
      || (!req.cell.empty() && req.cell != st.cell->id)) {
    write_conn(self, hdl,
               encode_rpc_error(req.id,
                                "No active execute_code cell: the cell this "
                                "kernel call belonged to has settled, so its "
                                "tool authority is retired."));
    return;
  }
  auto& allowed = st.opts.tools;
  if (std::find(allowed.begin(), allowed.end(), req.tool) == allowed.end()) {
    std::string list;
    for (auto& t : allowed)
      list += (list.empty() ? "" : ", ") + t;
    write_conn(self, hdl,
               encode_rpc_error(req.id, "Tool '" + req.tool
                                          + "' is not available in "
                                            "execute_code. Available: "
                                          + (list.empty() ? "(none)" : list)));
    return;
  }
  auto& cell = *st.cell;
  if (!cell.seen_ids.insert(req.id).second) {
    write_conn(self, hdl, encode_rpc_error(req.id, "Duplicate RPC request id; "
                                                   "the call was not "
                                                   "dispatched again."));
    return;
  }
  if (cell.tool_calls >= cell.cell.max_tool_calls) {
    write_conn(self, hdl,
               encode_rpc_error(req.id,
                                "Tool call limit reached ("
                                  + std::to_string(cell.cell.max_tool_calls)
                                  + "). No more tool calls allowed in this "
                                    "execution."));
    return;
  }
  if (auto size = check_argument_size(req.args_json.size(), max_args);
      !size) {
    write_conn(self, hdl, encode_rpc_error(req.id, size.error));
    return;
  }
  ++cell.tool_calls;
  tool_request tr{cell.cell.session_id, req.id, req.tool,
                  std::move(req.args_json), st.opts.proc.cwd, true};
  // Every call gets its invocation actor (actors/tool_invocation.hpp), on
  // this same thread: its answer comes back as (done_atom, seq, result).
  auto seq = ++st.call_seq;
  auto inv = spawn_script_invocation(self->system(), st.svc, std::move(tr),
                                     self->address(), seq);
  st.calls.emplace(seq, kernel_state::script_call{hdl, std::move(req.id),
                                                  std::move(inv)});
}

} // namespace mibyan::kernel_detail
