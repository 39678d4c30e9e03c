// File: messages/tool_response.hpp
#pragma once

#include <cstdint>
#include <string>

#include "caf/meta/type_name.hpp"

namespace mibyan {

/// The outcome of one tool call. A tool's own failure is a result object
/// with an "error" member, not a failed request: the model must see it.
struct tool_response {
  /// Echo of tool_request::call_id.
  std::string call_id;
  /// Echo of tool_request::tool.
  std::string tool;
  /// The result object as JSON text.
  std::string result_json;
  /// Wall-clock time spent, in microseconds.
  int64_t duration_us = 0;
  /// True when the runtime's deadline or an interrupt ended the call.
  bool timed_out = false;
  /// execute_code only: the kernel that ran the cell is gone (timeout,
  /// interrupt, exit, death); the next call needs a fresh one.
  bool kernel_ended = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_response& x) {
  return f(caf::meta::type_name("mibyan::tool_response"), x.call_id, x.tool,
           x.result_json, x.duration_us, x.timed_out, x.kernel_ended);
}

} // namespace mibyan
