// File: actors/conversation.hpp
//
// One conversation (session): runs the agent loop of docs/agent_loop.md for
// each user turn, one turn at a time.
//
// Protocol:
//   (turn_atom, turn_request) -> turn_result
//       Runs one user turn and answers with its result (mibyan/turn.hpp;
//       `started` is set, `session_id` is this conversation's). Turns of one conversation run in arrival
//       order: a turn that arrives while another runs waits for it. A
//       turn that cannot run (no store, bad provider handle) answers with
//       a failed turn result, never with an error.
//   (interrupt_atom, std::string reason)
//       Interrupts the running turn: cancels the provider call in flight,
//       interrupts the session's tools through the dispatcher, gives every
//       unfinished tool call a "cancelled" result and ends the turn as
//       partial with exit reason interrupted_by_user. Ignored when idle.
//   (delta_atom, request_id, kind, text)
//       Streamed fragments from the provider; forwarded to the turn's sink
//       as (delta_atom, session_id, kind, text).
//   (notice_atom, background_notice)
//       Background work of this conversation ended (a notify_on_complete
//       process; its own background children report internally): kept,
//       announced on svc->background, and delivered as a user-role message
//       at the start of the next turn (docs/agent_loop.md, "Background
//       deliveries").
//
// Persistence: the session row must exist in the store before the first
// turn. The actor loads the stored messages (repaired with repair_history)
// when it starts, persists the user message before the first model call
// and every assistant message before its tool calls run, awaiting the
// writer's acknowledgement each time, and every tool result after it.
//
// The system prompt is fixed when the conversation starts: the session's
// stored prompt handed in by the runtime (deps.frozen_prompt), else one
// built from the working directory; it stays byte-identical, and a
// compressed continuation references the same stored prompt.
#pragma once

#include <memory>
#include <string>

#include "caf/fwd.hpp"
#include "caf/replies_to.hpp"
#include "caf/typed_actor.hpp"

#include "actors/kernel_registry.hpp"
#include "actors/session_writer.hpp"
#include "actors/tool_dispatcher.hpp"
#include "messages/type_ids.hpp"
#include "actors/services.hpp"

namespace mibyan {

class session_store;
class prompt_store;

using conversation_actor = caf::typed_actor<
  caf::replies_to<turn_atom, turn_request>::with<turn_result>,
  caf::reacts_to<interrupt_atom, std::string>,
  caf::reacts_to<delta_atom, std::string, std::string, std::string>,
  caf::reacts_to<notice_atom, background_notice>>;

/// What a conversation actor works with.
struct conversation_deps {
  services_ptr svc;
  tool_dispatcher_actor dispatcher;
  /// The single store writer; an invalid handle fails every turn with
  /// `store_error`.
  session_writer_actor writer;
  /// Read access to the store (null when it could not be opened).
  std::shared_ptr<session_store> store;
  /// Why the store is unavailable (shown in failed turns).
  std::string store_error;
  std::string session_id;
  /// The execute_code backend; a delegate_task child's kernels are
  /// disposed through it when the child ends (may be invalid).
  kernel_registry_actor kernels;
  /// 0 for a top-level conversation, 1 for a delegate_task child.
  int depth = 0;
  /// The memory files as read when the session started (docs/tools.md,
  /// "memory"): appended to the system prompt and never re-read, so the
  /// prompt stays byte-identical for the conversation's life.
  std::string memory_snapshot;
  /// The session's frozen system prompt (runtime/session_prompt.hpp):
  /// when set, used verbatim instead of building one (memory_snapshot is
  /// then ignored). Its hash in the prompt store ("" = not stored).
  std::string frozen_prompt;
  std::string prompt_hash;
  /// Shown to the first turn's sink as a (delta_atom, sid, "context",
  /// text) event: the files loaded and any warning ("" = nothing).
  std::string prompt_notice;
  /// Where a compressed session's continuation records that it keeps the
  /// prompt (null: not recorded). Used from the blocking pool only.
  std::shared_ptr<prompt_store> prompts;
};

/// Spawns the conversation of `deps.session_id`. The caller owns it and
/// ends it with an exit message.
conversation_actor spawn_conversation(caf::actor_system& sys,
                                      conversation_deps deps);

/// Returns the system prompt of a conversation whose working directory is
/// `cwd` (deterministic: the same input gives the same bytes).
std::string build_system_prompt(const std::string& cwd);

} // namespace mibyan
