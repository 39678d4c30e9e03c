// File: messages/exec_cell.hpp
#pragma once

#include <cstdint>
#include <string>

#include "caf/meta/type_name.hpp"

namespace mibyan {

/// One execute_code cell for a kernel actor, with the budgets that apply to
/// this cell (read per cell, so config changes take effect at once).
struct exec_cell {
  /// Session (owner) the cell runs for; tool calls are made in its name.
  std::string session_id;
  /// The model's tool call id of the execute_code call.
  std::string call_id;
  /// Python source.
  std::string code;
  /// Wall-clock limit of the cell in milliseconds.
  int64_t timeout_ms = 300000;
  /// Tool calls dispatched at most during the cell.
  int64_t max_tool_calls = 50;
  /// Kernel info reported in the result (known to the registry).
  bool reused = false;
  bool state_reset = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_cell& x) {
  return f(caf::meta::type_name("mibyan::exec_cell"), x.session_id,
           x.call_id, x.code, x.timeout_ms, x.max_tool_calls, x.reused,
           x.state_reset);
}

} // namespace mibyan
