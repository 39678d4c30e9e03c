// File: acp/acp_session.hpp
//
// One ACP session of `mibyan acp` (acp/acp_agent.hpp): what the agent keeps
// between the protocol calls of a session and shares with the runtime's
// callbacks of its turns.
//
// Thread safety: `mtx` guards every mutable member; the atomics are read
// without it (the approval and file callbacks poll `cancelled`).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "acp/acp_updates.hpp"
#include "base/json.hpp"

namespace mibyan {

class acp_session_tools; // acp/acp_mcp.hpp

struct acp_session {
  /// The ACP session id (the runtime session it started as).
  std::string id;
  /// The working directory of its tools.
  std::string cwd;
  /// The runtime session its turns continue now (another id after context
  /// compression continued it in a new session).
  std::string runtime_id;

  std::mutex mtx;
  /// "ask" (flagged commands go to session/request_permission) or "yolo"
  /// (approved unless hardline or denied by a rule).
  std::string mode = "ask";
  /// A prompt turn runs (ACP allows one per session).
  bool running = false;
  /// The running turn was cancelled (session/cancel or the client left).
  std::atomic<bool> cancelled{false};
  /// Agent text streamed since the last tool event (to tell whether the
  /// final answer still has to be sent).
  std::string streamed;
  /// Tool calls of the running turn that started and did not end: id ->
  /// {tool name, parsed arguments}.
  std::map<std::string, std::pair<std::string, json::value>> calls;
  /// Edits reported by the file tools, by tool call id, until its end.
  std::map<std::string, std::vector<acp_file_diff>> diffs;
  /// Pattern descriptions the user rejected "always" in this session.
  std::set<std::string> denied;
  /// Permission requests asked (for generated tool call ids).
  uint64_t permissions = 0;

  /// The MCP servers the client gave for this session (null: none).
  std::shared_ptr<acp_session_tools> tools;
};

} // namespace mibyan
