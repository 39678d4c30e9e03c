// File: tools/terminal_background.hpp
//
// The background half of `terminal` (background=true) and the output
// rendering shared with the `process` tool. The process itself is owned by
// the runtime's process_registry (base/process_registry.hpp); see
// docs/tools.md, "Background processes".
#pragma once

#include <string>
#include <string_view>

#include "base/json.hpp"
#include "tools/tool.hpp"

namespace mibyan {

/// Starts `command` in `workdir` as a tracked background process of
/// ctx.session_id and returns the terminal result
/// {"output":"Background process started","session_id","pid","exit_code":0,
///  "error":null} (plus the echoed `pty`, `notify_on_complete`,
/// `watch_patterns`). Refused from execute_code scripts, when the runtime
/// has no process registry, and at the process cap.
json::value start_background_command(const json::value& args,
                                     const tool_context& ctx,
                                     const std::string& command,
                                     const std::string& workdir);

/// Process output as shown to the model: ANSI sequences stripped, CR LF
/// (from a pseudo-terminal) turned into LF, valid UTF-8.
std::string render_process_output(std::string_view raw);

} // namespace mibyan
