// File: messages/tool_request.hpp
#pragma once

#include <cstdint>
#include <string>

#include "caf/meta/type_name.hpp"

namespace mibyan {

/// One tool call to run: from the model (agent loop), from an execute_code
/// script (kernel actor) or from `mibyan tool`. Arguments stay JSON text so
/// the message is plain data that crosses nodes.
struct tool_request {
  /// Session the call belongs to; selects the kernel for execute_code.
  std::string session_id;
  /// The model's tool call id (or a generated one); echoed in the response.
  std::string call_id;
  /// Tool name, exactly as called.
  std::string tool;
  /// Arguments as JSON text (an object; anything else is rejected by the
  /// dispatcher with a result error, not a failed request).
  std::string args_json;
  /// Working directory for relative paths ("" = the runtime's default).
  std::string cwd;
  /// True when the call comes from an execute_code script.
  bool from_script = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_request& x) {
  return f(caf::meta::type_name("mibyan::tool_request"), x.session_id,
           x.call_id, x.tool, x.args_json, x.cwd, x.from_script);
}

} // namespace mibyan
