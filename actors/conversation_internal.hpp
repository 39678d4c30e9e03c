// File: actors/conversation_internal.hpp
//
// Private to the conversation actor (actors/conversation*.cpp); nothing
// else includes it. The actor is split by concern:
//
//   conversation.cpp          actor shell: loads the session, message
//                             handlers (turn, interrupt, delta), spawn,
//                             system prompt
//   conversation_turn.cpp     the turn state machine: start, model call,
//                             answer / tool calls / summary, end, deliver
//   conversation_tools.cpp    one tool round: plan segments, run them
//                             through the dispatcher, shape and persist
//                             the results
//   conversation_persist.cpp  the store glue: appends through the session
//                             writer, usage accounting
//   conversation_spill.cpp    where oversized tool results are saved
//   conversation_answer.cpp   final-answer recovery: empty, reasoning-only
//                             and length-cut answers, cut tool calls
//   conversation_compress.cpp context compression and the session chain
//   conversation_delegate.cpp delegate_task: child conversations
//   conversation_background.cpp background deliveries: notices kept for
//                             the next turn, merged, recovered from the
//                             store; background task status
//
// Threading: every function here runs inside the actor (on its scheduler
// thread) and takes the actor's pointer; none may block.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "caf/all.hpp"

#include "actors/conversation.hpp"
#include "actors/provider.hpp"
#include "agent/answer_recovery.hpp"
#include "agent/batch_plan.hpp"
#include "agent/iteration_budget.hpp"
#include "agent/tool_call_repair.hpp"
#include "agent/tool_guardrails.hpp"
#include "agent/tool_result_shaping.hpp"
#include "agent/turn_result.hpp"
#include "base/json.hpp"
#include "base/strings.hpp"
#include "storage/session_record.hpp"

namespace mibyan::conversation_detail {

struct delegation_run; // conversation_delegate.cpp

struct pending_turn {
  turn_request req;
  caf::typed_response_promise<turn_result> rp;
};

/// The running turn.
struct turn_state {
  uint64_t id = 0;
  // When the turn started (after any wait in the queue), for its latency.
  std::chrono::steady_clock::time_point started
    = std::chrono::steady_clock::now();
  pending_turn p;
  provider_actor provider;
  iteration_budget budget;
  bad_round_counter bad;
  turn_result res;
  // The conversation without the system prompt: history + this turn.
  std::vector<chat_message> msgs;
  bool user_persisted = false;
  std::string tools_json;
  tool_name_set valid;
  bool interrupted = false;
  std::string interrupt_reason;
  // Provider request in flight ("" = none).
  std::string inflight;
  int empty_retries = 0;
  int summary_retries = 0;
  // The current tool batch.
  tool_call_plan plan;
  std::vector<std::optional<std::string>> results;
  std::vector<batch_segment> segments; // indexes into plan.calls
  size_t seg = 0;
  size_t seq_pos = 0;
  size_t outstanding = 0;
  uint64_t batch = 0; // 0 = no batch running
  tool_guardrails guards; // agent/tool_guardrails.hpp
  // Results being shaped on the blocking pool (spilling writes files);
  // owned by the pool job until (done_atom, shaping_id) arrives.
  std::shared_ptr<std::vector<shaped_result>> shaping;
  uint64_t shaping_id = 0; // 0 = none
  // Final-answer recovery (agent/answer_recovery.hpp): its counters, the
  // synthetic messages appended to the request copy only (never stored,
  // dropped once a usable answer arrives) and the text of earlier
  // length-cut parts.
  answer_recovery recovery;
  std::vector<chat_message> scaffold;
  std::string length_parts;
  // Compressions done in this turn (docs/agent_loop.md, at most 3); set
  // when compression cannot help in this turn.
  int compressions = 0;
  bool compress_skip = false;
  // Compress before the next call whatever the estimate (the provider
  // said the context overflowed); such retries made in this turn.
  bool force_compress = false;
  int overflow_retries = 0;
  // Prompt tokens the provider reported for the latest model call of the
  // loop (0 when unknown or since the last compression): a lower bound of
  // the context, used with the character estimate.
  int64_t reported_prompt_tokens = 0;
  // delegate_task children running for this turn's batch.
  std::vector<std::shared_ptr<delegation_run>> delegations;
  // Tool results whose commit overlaps the next model call
  // (docs/agent_loop.md, "Persist before execute"): appends not yet
  // acknowledged, the steps waiting for them (when_stored) and whether one
  // failed (the turn then ends failed instead of going on).
  size_t unacked = 0;
  std::vector<std::function<void()>> after_stored;
  bool store_failed = false;
};

/// What the conversation knows of one turn key (turn_request::turn_key).
struct keyed_turn {
  /// An assistant message without tool calls followed the key's user
  /// message: the turn was answered (`answer` is its text).
  bool answered = false;
  std::string answer;
  /// A later user message followed while the turn had no answer.
  bool superseded = false;
};

struct conversation_state {
  conversation_deps deps;
  std::string cwd;
  std::string system_prompt;
  std::vector<chat_message> history;
  std::string load_error;
  std::deque<pending_turn> queue;
  std::unique_ptr<turn_state> cur;
  uint64_t next_turn = 1;
  uint64_t next_batch = 1;
  uint64_t next_request = 1;
  // The session id tools run under (kernels, processes, approvals): the
  // first session of the chain, unchanged when compression continues the
  // conversation in a child session (deps.session_id).
  std::string tool_session;
  // Compressions in a row that left the context above the threshold;
  // at 2 compression is off for this conversation.
  int ineffective_compressions = 0;
  // Background work (docs/agent_loop.md, "Background deliveries"): the
  // background children running now, by task id (= the child's session
  // id); notices waiting for the next turn (oldest first, at most
  // delegation.max_pending_notices); the sessions of this conversation's
  // chain (a task's parent must be one of them); the running children's
  // sessions, shared with the exit handler that ends them in the store
  // when the conversation dies first.
  std::map<std::string, std::shared_ptr<delegation_run>> background;
  std::deque<background_notice> notices;
  std::set<std::string> chain_ids;
  std::shared_ptr<std::set<std::string>> live_children
    = std::make_shared<std::set<std::string>>();
  // Idempotent turns (conversation_keys.cpp): the turn keys this session
  // holds, and the key of the last user message when it had one ("" when
  // the last user message had none).
  std::map<std::string, keyed_turn> turn_keys;
  std::string last_key;

  static const char* name;
};

/// The actor's own interface: the public one plus the blocking pool's
/// report that the results of shaping job `id` are ready.
using conversation_impl_actor
  = conversation_actor::extend<caf::reacts_to<done_atom, uint64_t>>;

using conv_pointer
  = conversation_impl_actor::stateful_pointer<conversation_state>;

// -- small helpers ------------------------------------------------------------

inline int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

/// The message text of a caf::error (the context string when there is one).
inline std::string error_text(caf::actor_system& sys, const caf::error& err) {
  if (!err)
    return "unknown error";
  auto& ctx = err.context();
  if (!ctx.empty() && ctx.match_element<std::string>(0))
    return ctx.get_as<std::string>(0);
  return sys.render(err);
}

inline bool is_ec(const caf::error& err, ec code) {
  return err && err.category() == caf::atom("mibyan")
         && err.code() == static_cast<uint8_t>(code);
}

/// Returns the running turn if it is turn `id`.
inline turn_state* current(conv_pointer self, uint64_t id) {
  auto& cur = self->state.cur;
  return cur && cur->id == id ? cur.get() : nullptr;
}

// -- conversation_turn.cpp ----------------------------------------------------

/// Starts the next queued turn when none runs.
void start_next(conv_pointer self);
/// One model call of the running turn (or the summary when the budget is
/// spent).
void iterate(conv_pointer self);
/// Ends the running turn with `exit`; `failed` marks it failed rather than
/// partial.
void end_turn(conv_pointer self, turn_exit exit, std::string error,
              bool failed);
/// Ends the running turn as interrupted by the user.
void end_interrupted(conv_pointer self);
/// Ends the running turn with its result as it stands (closes a dangling
/// tool tail, then delivers).
void finish(conv_pointer self);

// -- conversation_tools.cpp ---------------------------------------------------

/// Runs the tool calls of `cur->plan` and continues the turn afterwards.
void execute_batch(conv_pointer self);
/// Closes the running batch: every call without a result gets a
/// "cancelled" result; results are shaped on the blocking pool (spilling
/// oversized ones to files), then `results_shaped` continues.
void finish_batch(conv_pointer self);
/// The shaped results of the running turn are ready: they are persisted,
/// then the turn goes on (or ends when interrupted or not stored).
void results_shaped(conv_pointer self);

// -- conversation_persist.cpp -------------------------------------------------

/// Appends `msgs` through the writer in order and calls `done(errors)` once
/// every append is acknowledged (errors: one text per failed append).
/// `last_key` is stored as the idempotency key of the last message ("" =
/// none).
void persist(conv_pointer self, std::vector<chat_message> msgs,
             std::function<void(std::vector<std::string>)> done,
             std::string last_key = {});
/// Runs `k` once every tool result of the running turn that was sent to the
/// writer ahead of the next model call is acknowledged: at once when none
/// is outstanding, else from the last acknowledgement. When one of them
/// failed, the turn ends (finish) instead and `k` is dropped. `k` must
/// check that its turn is still current if it can outlive it.
void when_stored(conv_pointer self, std::function<void()> k);
/// Records failed appends of `what` ("answer", "tool result", ...) in the
/// running turn: the turn becomes failed with exit `error` and an error
/// naming the first failure (docs/storage.md: a message that cannot be
/// stored is never dropped silently). Returns whether `errors` was
/// non-empty.
bool persist_failed(turn_state& t, const std::string& what,
                    const std::vector<std::string>& errors);
/// Adds the usage of `r` to the turn result and records it in the store.
void record_usage(conv_pointer self, const chat_response& r);

// -- conversation_keys.cpp ----------------------------------------------------

/// The store's idempotency key of a turn's user message: "turn:" + key.
std::string turn_store_key(const std::string& turn_key);
/// Reads the turn keys of a stored history (in order) into `st`.
void index_turn_keys(conversation_state& st,
                     const std::vector<stored_message>& msgs);
/// A user message was stored under `turn_key` ("" = none).
void note_user_message(conversation_state& st, const std::string& turn_key);
/// The running turn delivers: when its last message answers it, its key
/// (if any) is answered.
void note_turn_delivered(conversation_state& st, const turn_state& t);
/// Called when the running turn starts, before its user message is
/// stored. Returns true when the turn's key is already held: the turn then
/// either was answered here (the earlier answer delivered, `st.cur` gone,
/// the next turn started) or resumes the earlier attempt (the model is
/// called on the stored history, nothing new stored).
bool take_keyed_turn(conv_pointer self);

// -- conversation_answer.cpp --------------------------------------------------

/// The recovery gates of docs/agent_loop.md ("Final answer recovery") for
/// an answer without tool calls. Returns true when it took the answer over
/// (another call is made or the turn ended); false when `r` is a usable
/// final answer (its content then holds the joined, visible text).
bool recover_answer(conv_pointer self, chat_response& r);
/// A tool-call answer cut at the length limit: retries with a larger
/// output budget, or ends the turn as truncated. Always takes over.
void recover_truncated_calls(conv_pointer self);

// -- conversation_delegate.cpp ------------------------------------------------

/// Runs the delegate_task call `idx` of the running batch as child
/// conversations; stores its result in `results[idx]`, then calls `then`.
void start_delegation(conv_pointer self, size_t idx,
                      std::function<void()> then);
/// Interrupts the running children of the turn and gives their calls a
/// result now (unfinished tasks: "interrupted").
void interrupt_delegations(conv_pointer self, const std::string& reason);

/// delegate_task(action="status"|"cancel") and background children: see
/// conversation_delegate.cpp. A background child ended: its notice.
void background_child_ended(conv_pointer self, const std::string& task_id,
                            const std::string& goal,
                            const json::value& entry, bool cancelled);

// -- conversation_background.cpp ---------------------------------------------

/// The marker that opens a delivered notice: "[background <kind> <id>:".
std::string notice_marker(const std::string& kind, const std::string& id);
/// The notice of a background child that ended with `status`.
background_notice delegate_notice(const std::string& session_id,
                                  const std::string& task_id,
                                  const std::string& goal,
                                  const std::string& status,
                                  const std::string& summary,
                                  const std::string& error);
/// Keeps `n` for the next turn (merging the oldest beyond
/// delegation.max_pending_notices) and announces it. A notice whose
/// session is gone from the store is announced and dropped (the child's
/// own session keeps its summary).
void queue_notice(conv_pointer self, background_notice n);
/// The waiting notices as user-role messages, oldest first (emptied).
std::vector<chat_message> take_notices(conv_pointer self);
/// At start-up: notices of background children of this conversation's
/// chain that ended (or died with an earlier process) and were never
/// delivered; a child left running by a dead process is ended as
/// "interrupted" in the store. Blocking LMDB reads, like the history load.
void recover_background(conv_pointer self);
/// The status of a task that does not run here, from the store: null when
/// `id` is no background task of this conversation's chain.
std::optional<json::value> stored_task_status(conv_pointer self,
                                              const std::string& id);

// -- conversation_compress.cpp ------------------------------------------------

/// Compresses the running turn's history when its estimate reached the
/// threshold (docs/agent_loop.md, "Context compression"): summarises the
/// middle with one model call, continues in a new session whose parent is
/// the old one, then calls iterate() again. Returns false (nothing
/// started) when no compression is due.
bool maybe_compress(conv_pointer self);
/// The provider refused the call because the context overflowed
/// (`error` names the context_overflow class): refunds the iteration and
/// compresses, then retries (at most 3 times a turn). Returns false when
/// it cannot help (the caller then fails the turn).
bool compress_after_overflow(conv_pointer self, const std::string& error);

// -- conversation_spill.cpp ---------------------------------------------------

/// The writer that saves this session's oversized tool results privately
/// under $MIBYAN_HOME/cache/results/<session>/; it returns "" when a result
/// could not be saved (the shaper then truncates it inline).
result_writer result_saver(conv_pointer self);

} // namespace mibyan::conversation_detail
