// File: messages/kernel_info.hpp
#pragma once

#include <cstdint>
#include <string>

#include "caf/meta/type_name.hpp"

namespace mibyan {

/// One session kernel as the registry reports it (actors/kernel_registry.hpp,
/// `kernels_atom`); the operator console's kernels page (docs/serve.md).
struct kernel_info {
  /// The owner: a session id, or "<session>::child::<id>" for a subagent.
  std::string session_id;
  int64_t pid = 0;
  /// "project" or "strict" (code_execution.mode).
  std::string mode;
  /// "bwrap" or "none".
  std::string sandbox;
  /// Since the process started, in milliseconds.
  int64_t uptime_ms = 0;
  /// Cells handed to the kernel so far.
  int64_t cells = 0;
  /// A cell is queued or running now.
  bool busy = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kernel_info& x) {
  return f(caf::meta::type_name("mibyan::kernel_info"), x.session_id, x.pid,
           x.mode, x.sandbox, x.uptime_ms, x.cells, x.busy);
}

} // namespace mibyan
