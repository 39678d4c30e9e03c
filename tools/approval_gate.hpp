// File: tools/approval_gate.hpp
//
// The one call a command-running tool makes before it runs anything
// (docs/approvals.md): `terminal` (foreground and background starts) and
// any future process starter. Runs on the tool's blocking-pool thread.
#pragma once

#include <optional>
#include <string>

#include "base/json.hpp"
#include "tools/tool.hpp"

namespace mibyan {

/// Checks `command` for the call described by `ctx` (its session, whether
/// it comes from a script, its cancel flag). Returns the tool result to
/// give instead of running the command when it is blocked:
///   {"output": "", "exit_code": -1, "error": <message>,
///    "status": "blocked", "approved": false, "hardline": <bool>}
/// or nothing when it may run. Without an approval service in `ctx`
/// (tools used outside a runtime), hardline patterns and deny rules still
/// apply.
std::optional<json::value> check_command(const std::string& command,
                                         const tool_context& ctx);

/// Checks a write of `abs_path` by `tool_name` (write_file, patch) under
/// the one write policy (tools/path_policy.hpp, write_approval_key): a
/// path that needs no approval passes; a flagged one goes through the
/// approval service as the same write through terminal would
/// (approval_service::check_write). `preview` (e.g. the new content or
/// the diff, clipped) is shown to the reviewer and the human. Returns the
/// error text when the write is blocked, nothing when it may go ahead.
/// Without an approval service in `ctx` flagged writes pass, as flagged
/// terminal commands do. Blocking; runs on the tool's blocking-pool
/// thread.
std::optional<std::string> check_write(const std::string& abs_path,
                                       const std::string& tool_name,
                                       const std::string& preview,
                                       const tool_context& ctx);

/// The same check with the approval key already known (write_policy_of's
/// `approval_key` for this path): no second resolution of the path.
std::optional<std::string> check_write_keyed(
  const std::string& abs_path, const std::optional<std::string>& key,
  const std::string& tool_name, const std::string& preview,
  const tool_context& ctx);

} // namespace mibyan
