// File: agent/history_repair.hpp
//
// Repairs a conversation before it is sent to a provider (docs/agent_loop.md
// §3 steps 9-11), so that a history damaged by a crash, an interrupt, a
// compression or a misbehaving provider is still accepted, and so that
// the same history always serialises to the same bytes (prompt caching).
//
// In order:
//   1. drop messages whose role is not system, user, assistant, tool,
//      function or developer;
//   2. rename empty tool-call names to "invalid_tool_call"; give calls
//      without an id, or with an id used by an earlier call, a
//      deterministic unique id (`assign_call_ids` rules, per message);
//   3. pair tool results with calls: a tool message answers the earliest
//      still unanswered call with its id that was declared before it;
//      results matching no such call (orphans, second answers) are
//      dropped; each assistant message is followed by exactly one result
//      per call, in the model's order, and a call without a result gets a
//      stub saying the result is unavailable;
//   4. trim leading and trailing whitespace of every content;
//   5. drop assistant messages with no visible content and no tool calls
//      (thinking-only or empty turns);
//   6. merge adjacent user messages (contents joined by a blank line);
//   7. re-serialise every tool-call `arguments` as compact JSON with
//      object keys sorted; empty arguments become "{}"; unparseable ones
//      stay as they are.
//
// Postcondition: every tool-call id of an assistant message is unique and
// answered by exactly one tool message that directly follows that message
// (after its earlier siblings' results); no tool message is unanswered.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "messages/chat.hpp"
#include "base/json.hpp"

namespace mibyan {

/// What `repair_history` changed (for logs and tests).
struct history_repair_stats {
  size_t invalid_roles_dropped = 0;
  size_t empty_names_renamed = 0;
  size_t ids_assigned = 0;
  size_t orphan_results_dropped = 0;
  size_t stub_results_inserted = 0;
  size_t contents_trimmed = 0;
  size_t empty_assistants_dropped = 0;
  size_t user_messages_merged = 0;
  size_t arguments_canonicalized = 0;

  /// Returns whether anything changed.
  bool changed() const;
};

/// Name given to tool calls whose name is empty.
constexpr const char* invalid_tool_call_name = "invalid_tool_call";

/// Content of the stub result inserted for an unanswered call.
extern const char* const missing_tool_result_text;

/// Returns whether `role` is one of system, user, assistant, tool,
/// function, developer.
bool is_valid_role(const std::string& role);

/// Returns `v` with the members of every object sorted by key (stable, so
/// duplicate keys keep their order), recursively.
json::value sort_keys(const json::value& v);

/// Returns the canonical form of tool-call arguments: compact JSON with
/// sorted keys; "{}" for empty or whitespace-only text; `arguments`
/// unchanged when it does not parse.
std::string canonical_arguments(const std::string& arguments);

/// The text of the result given to a tool call that a lost gateway left
/// unanswered (docs/cluster.md, "Failover"): names the node, says the call
/// was not run again and that its outcome is unknown.
std::string gateway_loss_result_text(const std::string& node);

/// Tool results (role tool, content `text`) for the calls of the last
/// assistant message with tool calls that no later tool message answers,
/// in the model's order; empty when every call is answered. For a session
/// taken over from a lost gateway: its calls are reported, never re-run.
std::vector<chat_message>
unanswered_call_results(const std::vector<chat_message>& messages,
                        const std::string& text);

/// Repairs `messages` in place (see the file comment). Idempotent:
/// repairing a repaired history changes nothing.
history_repair_stats repair_history(std::vector<chat_message>& messages);

} // namespace mibyan
