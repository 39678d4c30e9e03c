// File: acp/acp_updates.hpp
//
// Mibyan's turn events and stored messages as ACP `session/update`
// payloads (docs/acp.md, "Tools as ACP updates"). Pure functions over JSON:
// no I/O, no state, so the mapping is testable without a client.
//
//   * tool kinds: read_file -> read, write_file / patch -> edit,
//     search_files / web_search / session_search -> search, terminal /
//     process / execute_code -> execute, web_extract -> fetch, todo /
//     delegate_task -> think, the rest (memory, skills, clarify, MCP tools)
//     -> other;
//   * a tool_start event -> `tool_call` (status in_progress, title, kind,
//     rawInput, locations, the command or script as content);
//   * a tool_end event -> `tool_call_update` (completed / failed, the
//     output as content, diffs of the files an edit changed, rawOutput);
//   * a todo result -> `plan`.
//
// Thread safety: pure functions; any thread.
#pragma once

#include <string>
#include <vector>

#include "base/json.hpp"
#include "mibyan/turn.hpp"

namespace mibyan {

/// One file an edit changed (tools/client_files.hpp, `changed`).
struct acp_file_diff {
  std::string path;
  bool has_old = false; // false: a new file (oldText null)
  std::string old_text;
  std::string new_text;
};

/// The ACP ToolKind of a Mibyan tool.
const char* acp_tool_kind(const std::string& tool);

/// A short human title for a call ("Run `ls -la`", "Read src/a.cpp").
std::string acp_tool_title(const std::string& tool, const json::value& args);

/// The `tool_call` update of a tool_start event. `args` is the parsed
/// arguments object (null when they were no JSON).
json::value acp_tool_call(const std::string& id, const std::string& tool,
                          const json::value& args);

/// The `tool_call_update` of a tool_end event: status completed or failed
/// (an "error" member that is a non-empty string or an object), the output
/// as text content (at most `max_text` bytes), then `diffs`.
json::value acp_tool_call_done(const std::string& id, const std::string& tool,
                               const json::value& args,
                               const std::string& result_json,
                               const std::vector<acp_file_diff>& diffs,
                               size_t max_text = 64 * 1024);

/// Whether a tool result reports an error.
bool acp_result_failed(const json::value& result);

/// The `plan` update of a todo result ({"todos":[{id,content,status}]});
/// null when `result` holds no list. Cancelled items are left out.
json::value acp_plan_from_todo(const json::value& result);

/// A text chunk update: `kind` is user_message_chunk, agent_message_chunk
/// or agent_thought_chunk.
json::value acp_text_chunk(const char* kind, const std::string& text);

/// The ACP stopReason of a finished turn's result (docs/acp.md, "Stop
/// reasons"): end_turn, cancelled, max_turn_requests, max_tokens or
/// refusal; "" when the turn failed, with `error` saying why.
/// `final_text` receives the final answer ("" when none).
std::string acp_stop_reason(const turn_result& result, std::string& error,
                            std::string& final_text);

/// The files a call names (path arguments and V4A patch headers), for
/// `locations`.
std::vector<std::string> acp_call_paths(const std::string& tool,
                                        const json::value& args);

} // namespace mibyan
