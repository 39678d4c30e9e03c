// File: tools/client_files.hpp
//
// File access through a client that holds the files (an editor speaking
// ACP, docs/acp.md "File access"): a session may carry a
// `client_file_access` whose functions read_file, write_file and patch use
// instead of the disk, so the editor's unsaved buffers are what the model
// reads and edits. The path policy (read/write refusals, cross-profile
// checks, approvals of sensitive writes) is applied by the tools before
// these functions are called. Calls from execute_code scripts keep direct
// disk access (tool_context::from_script).
//
// The hooks are set per session by a front end through the runtime
// (runtime/session_access.hpp) and kept in agent_tool_state.
//
// Thread safety: the functions are called on blocking-pool threads, calls
// of one session may overlap; implementations must be thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "base/status.hpp"

namespace mibyan {

struct tool_context;

struct client_file_access {
  /// Reads the whole text of absolute `path` as the client holds it.
  /// Blocks; returns within the client's own timeout and soon after
  /// `*cancelled` (never null) turns true. Empty: tools read the disk.
  std::function<result<std::string>(const std::string& path,
                                    const std::atomic<bool>* cancelled)>
    read;
  /// Replaces the text of absolute `path` with `content` through the
  /// client. Same blocking contract as `read`. Empty: tools write the disk.
  std::function<status(const std::string& path, const std::string& content,
                       const std::atomic<bool>* cancelled)>
    write;
  /// Told after a successful edit of `path` by tool call `call_id` (a
  /// direct call, not a script's): the text before (null for a new file or
  /// one too large to keep) and after. Quick and non-blocking. May be
  /// empty.
  std::function<void(const std::string& call_id, const std::string& path,
                     const std::string* old_text, const std::string& new_text)>
    changed;
};

/// The client file access of the call's session (a delegate_task child,
/// "<parent>::child::<n>", uses its parent's), or null when there is none,
/// the call comes from a script or has no agent state.
std::shared_ptr<const client_file_access>
client_files_of(const tool_context& ctx);

/// Reports an edit to the session's `changed` hook, if any (no-op for
/// script calls).
void report_file_change(const tool_context& ctx, const std::string& path,
                        const std::string* old_text,
                        const std::string& new_text);

} // namespace mibyan
