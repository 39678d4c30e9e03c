// File: mcp_server/backend.hpp
//
// What the MCP server core (mcp_server/server_core.hpp) needs from the
// agent runtime, as plain hooks: the tools offered now, running one call,
// interrupting and closing a Mibyan session, and installing a session's
// approval and clarify channels. mcp_server/runtime_backend.hpp binds them
// to a `mibyan::runtime`; tests bind them to fakes. CAF-free.
//
// Threads: every hook may be called from any thread of the core (a
// transport's I/O thread, the core's ticker, a blocking-pool thread) and
// must not block for long: `call_tool` returns at once and answers later
// through `done` (exactly once, on any thread).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/json.hpp"
#include "base/status.hpp"
#include "mibyan/approval.hpp"
#include "mibyan/clarify.hpp"

namespace mibyan {

/// One tool as the MCP client sees it: tools/list's name, description and
/// inputSchema (the tool's own schema(), the one source of its signature).
struct mcp_offered_tool {
  std::string name;
  std::string title;
  std::string description;
  json::value input_schema;
  bool read_only = false; // annotations.readOnlyHint
};

/// One tools/call as the core hands it on.
struct mcp_tool_call {
  std::string session_id; // the Mibyan session of the MCP session
  std::string call_id;    // unique per call
  std::string tool;
  std::string args_json;  // a JSON object
};

/// The answer: the tool's result object as JSON text (tool errors are
/// {"error": ...}), and whether the call ran out of time.
struct mcp_tool_answer {
  std::string result_json;
  bool timed_out = false;
};

/// One transcript resource (a stored session), for resources/list.
struct mcp_transcript_info {
  std::string session_id;
  std::string title;
  std::string updated; // ISO-8601, "" when unknown
};

struct mcp_backend {
  /// The tools offered now, sorted by name; an error when the toolset
  /// selection cannot be resolved (an unknown toolset name).
  std::function<result<std::vector<mcp_offered_tool>>()> list_tools;
  /// Runs one call; `done` exactly once, any thread, never blocking.
  std::function<void(mcp_tool_call, std::function<void(mcp_tool_answer)>)>
    call_tool;
  /// Interrupts the running calls (and execute_code cells) of a session.
  std::function<void(const std::string& session_id, const std::string& why)>
    interrupt;
  /// Cancels one call of a session (the call_id of its mcp_tool_call);
  /// the session's other calls go on. Empty: `interrupt` is used.
  std::function<void(const std::string& session_id,
                     const std::string& call_id, const std::string& why)>
    cancel_call;
  /// Calls `fn` after every change of the runtime's tool registry (an MCP
  /// server's tools/list_changed, ...), on the changing thread: quick, no
  /// blocking. Returns an id for unwatch_tools. Empty: the core only polls.
  std::function<uint64_t(std::function<void()>)> watch_tools;
  /// Stops the calls of a watch_tools id; waits for a running one.
  std::function<void(uint64_t)> unwatch_tools;
  /// Ends a Mibyan session: its kernels go, its stored history stays.
  std::function<void(const std::string& session_id)> close_session;
  /// Installs the approval and clarify channels of a session (empty
  /// functions: nobody can answer there; approvals then follow the
  /// unattended default, clarify is unavailable).
  std::function<void(const std::string& session_id, approval_callback,
                     clarify_callback)>
    set_channels;
  std::function<void(const std::string& session_id)> clear_channels;
  /// Runs `job` on a blocking pool (for store reads); false when stopping.
  /// May be empty: resources are then not offered.
  std::function<bool(std::function<void()>)> run_blocking;
  /// Stored sessions, newest first, `offset`..`offset+limit` (blocking:
  /// called from `run_blocking`). May be empty (no resources).
  std::function<result<std::vector<mcp_transcript_info>>(size_t offset,
                                                          size_t limit)>
    list_transcripts;
  /// A stored session's messages as a JSON array text (blocking);
  /// not_found for an unknown id.
  std::function<result<std::string>(const std::string& session_id)>
    read_transcript;
};

} // namespace mibyan
