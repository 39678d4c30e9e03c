// Conversation actor, part: the turn state machine (how the actor is split:
// actors/conversation_internal.hpp).
//
// A turn: start_next -> persist the user message -> iterate (model call)
// -> on_answer | on_tool_calls (-> tool round -> iterate) | summarize when
// the budget is spent -> finish (close a dangling tool tail) -> deliver.
#include "actors/conversation_internal.hpp"

#include <algorithm>
#include <utility>

#include "agent/history_repair.hpp"
#include "agent/tool_result_shaping.hpp"
#include "base/json.hpp"
#include "base/log.hpp"
#include "base/runtime_metrics.hpp"
#include "tools/agent/agent_tool_state.hpp"
#include "tools/file_checkpointer.hpp"
#include "tools/registry.hpp"

namespace mibyan::conversation_detail {

namespace {

constexpr const char* budget_summary_prompt
  = "You have reached the iteration limit of this turn. Do not call any "
    "tools. Give your final answer now: summarise what you found and what "
    "you did, and say what is left to do.";


void deliver(conv_pointer self);

} // namespace

void end_turn(conv_pointer self, turn_exit exit, std::string error,
              bool failed) {
  auto& t = *self->state.cur;
  t.res.exit = exit;
  t.res.error = std::move(error);
  if (failed)
    t.res.failed = true;
  else
    t.res.partial = true;
  finish(self);
}

void end_interrupted(conv_pointer self) {
  auto& t = *self->state.cur;
  t.res.interrupted = true;
  t.res.partial = true;
  t.res.exit = turn_exit::interrupted_by_user;
  t.res.interrupt_message = t.interrupt_reason;
  t.res.error = "Interrupted by the user: " + t.interrupt_reason;
  finish(self);
}

namespace {

void deliver(conv_pointer self) {
  auto& st = self->state;
  auto& t = *st.cur;
  t.res.session_id = st.deps.session_id;
  t.res.max_iterations = t.budget.max();
  // Moved, not copied: the messages may be tens of megabytes.
  t.res.messages = std::move(t.msgs);
  t.res.completed = compute_completed(t.res);
  t.res.started = true;
  // Every turn of a conversation ends here, once (docs/metrics.md).
  metrics::count_turn(t.res.interrupted ? "interrupted"
                      : t.res.failed    ? "failed"
                      : t.res.partial   ? "partial"
                                        : "ok",
                      to_string(t.res.exit),
                      std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - t.started)
                        .count());
  if (t.user_persisted)
    note_turn_delivered(st, t);
  // The conversation keeps the history and the caller gets its copy.
  if (t.user_persisted)
    st.history = t.res.messages;
  t.p.rp.deliver(std::move(t.res));
  st.cur.reset();
  start_next(self);
}

} // namespace

void finish(conv_pointer self) {
  auto& t = *self->state.cur;
  // No caller is answered before every message of its turn is stored.
  if (t.unacked > 0) {
    auto id = t.id;
    t.after_stored.push_back([self, id] {
      if (current(self, id) != nullptr)
        finish(self);
    });
    return;
  }
  t.inflight.clear();
  // A delivered answer, an interrupt or a failure after tool results:
  // close the tail so the next user message never follows a tool message.
  if (!t.msgs.empty() && t.msgs.back().role == "tool") {
    chat_message close;
    close.role = "assistant";
    if (t.res.final_response)
      close.content = *t.res.final_response;
    else if (t.res.interrupted)
      close.content = "Operation interrupted.";
    else
      close.content = "The turn ended early: " + t.res.error;
    close.timestamp_ms = now_ms();
    t.msgs.push_back(close);
    auto id = t.id;
    persist(self, {close}, [self, id](std::vector<std::string> errors) {
      auto tp = current(self, id);
      if (tp == nullptr)
        return;
      persist_failed(*tp, "closing assistant message", errors);
      deliver(self);
    });
    return;
  }
  deliver(self);
}

namespace {

// Builds the request copy of the conversation: system prompt first, then
// the repaired history.
std::vector<chat_message> request_messages(conv_pointer self,
                                           const std::vector<chat_message>&
                                             msgs) {
  std::vector<chat_message> out;
  out.reserve(msgs.size() + 1);
  chat_message sys;
  sys.role = "system";
  sys.content = self->state.system_prompt;
  out.push_back(std::move(sys));
  out.insert(out.end(), msgs.begin(), msgs.end());
  repair_history(out);
  for (auto& m : out) {
    m.timestamp_ms = 0;
    m.finish_reason.clear();
  }
  return out;
}

// -- provider answers ---------------------------------------------------------

void on_tool_calls(conv_pointer self, chat_response& r) {
  auto& t = *self->state.cur;
  bool truncated = response_truncated(r.finish_reason, t.p.req.stream);
  auto plan = plan_tool_calls(std::move(r.tool_calls), t.valid, truncated);
  if (plan.next == tool_call_plan::action::truncated) {
    recover_truncated_calls(self);
    return;
  }
  t.scaffold.clear(); // a usable answer: the recovery scaffolding goes
  if (t.bad.record(plan)) {
    end_turn(self, turn_exit::invalid_tool_calls,
             plan.invalid_call_message(), false);
    return;
  }
  chat_message am;
  am.role = "assistant";
  am.content = r.content;
  am.reasoning = r.reasoning;
  am.finish_reason = r.finish_reason;
  am.tool_calls = plan.assistant_calls();
  am.timestamp_ms = now_ms();
  t.msgs.push_back(am);
  t.plan = std::move(plan);
  auto id = t.id;
  // Persist before execute: the store must know which calls were issued
  // before any of them has a side effect.
  persist(self, {am}, [self, id](std::vector<std::string> errors) {
    auto tp = current(self, id);
    if (tp == nullptr)
      return;
    if (!errors.empty()) {
      tp->msgs.pop_back();
      end_turn(self, turn_exit::error,
               "cannot persist the assistant message, no tool was run: "
                 + errors.front(),
               true);
      return;
    }
    execute_batch(self);
  });
}

void on_answer(conv_pointer self, chat_response& r) {
  auto& t = *self->state.cur;
  if (recover_answer(self, r))
    return;
  // The answer may be tens of megabytes: it is moved where it can be and
  // copied only for the result and for the writer.
  chat_message am;
  am.role = "assistant";
  am.content = std::move(r.content);
  am.reasoning = std::move(r.reasoning);
  am.finish_reason = r.finish_reason;
  am.timestamp_ms = now_ms();
  t.res.final_response = am.content;
  if (!am.reasoning.empty())
    t.res.last_reasoning = am.reasoning;
  t.res.exit = turn_exit::completed;
  t.res.exit_detail = text_response_reason(r.finish_reason);
  auto id = t.id;
  std::vector<chat_message> to_store(1, am);
  t.msgs.push_back(std::move(am));
  persist(self, std::move(to_store), [self, id](std::vector<std::string> errors) {
    auto tp = current(self, id);
    if (tp == nullptr)
      return;
    persist_failed(*tp, "final answer", errors);
    finish(self);
  });
}

void on_provider_error(conv_pointer self, const caf::error& err) {
  auto& t = *self->state.cur;
  if (t.interrupted || is_ec(err, ec::interrupted)) {
    if (!t.interrupted) {
      t.interrupted = true;
      t.interrupt_reason = "provider request cancelled";
    }
    end_interrupted(self);
    return;
  }
  auto exit = is_ec(err, ec::config_invalid) ? turn_exit::provider_error
                                             : turn_exit::error;
  end_turn(self, exit, "provider: " + error_text(self->system(), err), true);
}

// The budget is spent: one tool-free call asking for a summary.
void summarize(conv_pointer self) {
  auto& st = self->state;
  auto& t = *st.cur;
  auto used = t.budget.used();
  auto max = t.budget.max();
  t.res.exit = turn_exit::max_iterations_reached;
  t.res.exit_detail = max_iterations_reason(used, max);
  chat_request req;
  req.request_id = st.deps.session_id + "-" + std::to_string(
                     st.next_request++);
  req.model = t.p.req.endpoint.model;
  req.messages = request_messages(self, t.msgs);
  chat_message nudge;
  nudge.role = "user";
  nudge.content = budget_summary_prompt;
  req.messages.push_back(std::move(nudge)); // request copy only
  req.stream = false;
  t.inflight = req.request_id;
  ++t.res.api_calls;
  auto id = t.id;
  auto done = [self, id](std::string text, std::string reasoning,
                         std::string error) {
    auto tp = current(self, id);
    if (tp == nullptr)
      return;
    auto& tt = *tp;
    tt.inflight.clear();
    // An empty summary is retried once (docs/agent_loop.md, "Budget-exhausted summary").
    if (strings::trim(text).empty() && error.empty()
        && tt.summary_retries++ == 0) {
      summarize(self);
      return;
    }
    if (strings::trim(text).empty())
      text = "The iteration limit of this turn (" + std::to_string(
               tt.budget.max())
             + ") was reached and no summary could be produced"
             + (error.empty() ? std::string{"."} : ": " + error);
    chat_message am;
    am.role = "assistant";
    am.content = text;
    am.reasoning = reasoning;
    am.timestamp_ms = now_ms();
    tt.msgs.push_back(am);
    tt.res.final_response = text;
    persist(self, {am}, [self, id](std::vector<std::string> errors) {
      auto tp2 = current(self, id);
      if (tp2 == nullptr)
        return;
      persist_failed(*tp2, "summary", errors);
      finish(self);
    });
  };
  self->request(t.provider, caf::infinite, complete_atom_v, std::move(req))
    .then(
      [self, id, done](chat_response& r) {
        auto tp = current(self, id);
        if (tp == nullptr)
          return;
        record_usage(self, r);
        if (tp->interrupted) {
          end_interrupted(self);
          return;
        }
        done(r.error.empty() ? r.content : std::string{}, r.reasoning,
             r.error);
      },
      [self, id, done](caf::error& err) {
        auto tp = current(self, id);
        if (tp == nullptr)
          return;
        if (tp->interrupted || is_ec(err, ec::interrupted)) {
          on_provider_error(self, err);
          return;
        }
        done({}, {}, error_text(self->system(), err));
      });
}

} // namespace

void iterate(conv_pointer self) {
  auto& st = self->state;
  auto& t = *st.cur;
  if (t.interrupted) {
    end_interrupted(self);
    return;
  }
  if (maybe_compress(self)) // it iterates again once done
    return;
  if (!t.budget.consume()) {
    auto id = t.id;
    when_stored(self, [self, id] {
      if (current(self, id) != nullptr)
        summarize(self);
    });
    return;
  }
  ++t.res.api_calls;
  chat_request req;
  req.request_id = st.deps.session_id + "-" + std::to_string(
                     st.next_request++);
  req.model = t.p.req.endpoint.model;
  req.messages = request_messages(self, t.msgs);
  req.messages.insert(req.messages.end(), t.scaffold.begin(),
                      t.scaffold.end());
  req.max_tokens = t.recovery.max_tokens();
  req.tools_json = t.tools_json;
  req.stream = t.p.req.stream;
  if (req.stream)
    req.sink = caf::actor_cast<caf::actor>(self);
  t.inflight = req.request_id;
  auto id = t.id;
  // The answer is handled once the previous tool results are stored
  // (when_stored): they may still be committing while this call runs.
  auto on_response = [self, id](chat_response& r) {
        auto tp = current(self, id);
        if (tp == nullptr)
          return;
        tp->inflight.clear();
        record_usage(self, r);
        tp->reported_prompt_tokens = tp->res.last_prompt_tokens;
        if (tp->interrupted) {
          end_interrupted(self);
          return;
        }
        if (!r.error.empty()) {
          if (compress_after_overflow(self, r.error))
            return;
          tp->res.retryable = r.retryable;
          end_turn(self, turn_exit::provider_error, r.error, true);
          return;
        }
        if (!r.tool_calls.empty())
          on_tool_calls(self, r);
        else
          on_answer(self, r);
  };
  self->request(t.provider, caf::infinite, complete_atom_v, std::move(req))
    .then(
      [self, id, on_response](chat_response& r) {
        auto tp = current(self, id);
        if (tp == nullptr)
          return;
        if (tp->unacked == 0 && !tp->store_failed) {
          on_response(r);
          return;
        }
        tp->inflight.clear();
        when_stored(self, [self, id, on_response,
                           r = std::move(r)]() mutable {
          if (current(self, id) != nullptr)
            on_response(r);
        });
      },
      [self, id](caf::error& err) {
        auto tp = current(self, id);
        if (tp == nullptr)
          return;
        tp->inflight.clear();
        when_stored(self, [self, id, err] {
          if (current(self, id) != nullptr)
            on_provider_error(self, err);
        });
      });
}

// -- turns --------------------------------------------------------------------

void start_next(conv_pointer self) {
  auto& st = self->state;
  if (st.cur || st.queue.empty())
    return;
  auto t = std::make_unique<turn_state>();
  t->id = st.next_turn++;
  t->p = std::move(st.queue.front());
  st.queue.pop_front();
  auto& req = t->p.req;
  auto& cfg = st.deps.svc->cfg;
  t->budget = iteration_budget{req.max_iterations > 0 ? req.max_iterations
                                                      : cfg.agent.max_turns};
  t->res.provider = req.endpoint;
  t->provider = caf::actor_cast<provider_actor>(req.provider);
  // File checkpoints (docs/checkpoints.md): a rollback's marker, stored
  // by the rollback, joins the history; the tools learn the turn number
  // (user messages so far + 1) for one checkpoint per project per turn.
  if (st.deps.svc->agent_tools && st.deps.svc->agent_tools->checkpoints) {
    auto& cp = *st.deps.svc->agent_tools->checkpoints;
    for (auto* id : {&st.deps.session_id, &st.tool_session}) {
      for (auto& note : cp.take_notes(*id)) {
        chat_message m;
        m.role = "user";
        m.content = std::move(note);
        st.history.push_back(std::move(m));
      }
      if (st.deps.session_id == st.tool_session)
        break;
    }
    int64_t turn = 1;
    for (auto& m : st.history)
      turn += m.role == "user"
                  && m.content.rfind(rollback_marker_prefix, 0) != 0
                ? 1
                : 0;
    cp.begin_turn(st.tool_session, turn);
  }
  t->msgs = st.history;
  t->guards = tool_guardrails{cfg.tool_loop_guardrails};
  st.cur = std::move(t);
  auto& tt = *st.cur;
  // The first turn shows what the system prompt was made of (context
  // files, warnings; runtime/session_prompt.hpp).
  if (!st.deps.prompt_notice.empty()) {
    if (req.sink)
      caf::anon_send(req.sink, delta_atom_v, st.deps.session_id,
                     std::string{"context"}, st.deps.prompt_notice);
    st.deps.prompt_notice.clear();
  }
  // The tools offered this turn, in name order (byte-stable).
  json::value tools = json::value::make_array();
  // docs/tools.md, "Toolsets" (the runtime checked the names already).
  auto offered = offered_tool_names(st.deps.svc->toolsets.get(),
                                    st.deps.svc->tools, cfg, req.toolsets);
  // Adds one tool's function spec to the request and to the valid names.
  auto offer = [&](const auto& tl) {
    json::value fn;
    fn["name"] = tl.name();
    fn["description"] = tl.description();
    fn["parameters"] = tl.schema();
    json::value spec;
    spec["type"] = "function";
    spec["function"] = std::move(fn);
    tools.push_back(std::move(spec));
    tt.valid.insert(tl.name());
  };
  for (auto tl : st.deps.svc->tools.all()) {
    if (!offered
        || !std::binary_search(offered->begin(), offered->end(),
                               std::string{tl->name()}))
      continue;
    if (std::find(req.blocked_tools.begin(), req.blocked_tools.end(),
                  tl->name())
        != req.blocked_tools.end())
      continue;
    offer(*tl);
  }
  // The session's own tools (agent_tool_state::session_tools: MCP servers
  // an ACP client started for it), whatever the toolsets.
  if (st.deps.svc->agent_tools)
    if (auto own = st.deps.svc->agent_tools->session_tools(st.tool_session))
      for (auto tl : own->all()) {
        if (st.deps.svc->tools.find(tl->name()) != nullptr
            || std::find(req.blocked_tools.begin(), req.blocked_tools.end(),
                         tl->name())
                 != req.blocked_tools.end())
          continue;
        offer(*tl);
      }
  if (!tt.valid.empty())
    tt.tools_json = tools.dump();
  if (!st.deps.store || !st.deps.writer) {
    end_turn(self, turn_exit::error,
             "the session store is unavailable: " + st.deps.store_error,
             true);
    return;
  }
  if (!st.load_error.empty()) {
    end_turn(self, turn_exit::error,
             "cannot load session " + st.deps.session_id + ": "
               + st.load_error,
             true);
    return;
  }
  if (!tt.provider) {
    end_turn(self, turn_exit::error, "no provider connection for this turn",
             true);
    return;
  }
  // A turn whose key the session holds is not stored or run twice
  // (conversation_keys.cpp).
  if (take_keyed_turn(self))
    return;
  // Background work that ended since the last turn (docs/agent_loop.md,
  // "Background deliveries"): one user-role message each, before the
  // user's own, stored with it.
  auto to_store = take_notices(self);
  tt.msgs.insert(tt.msgs.end(), to_store.begin(), to_store.end());
  chat_message user;
  user.role = "user";
  user.content = req.text;
  user.timestamp_ms = now_ms();
  tt.msgs.push_back(user);
  to_store.push_back(user);
  auto id = tt.id;
  const auto& key = tt.p.req.turn_key;
  // Crash safety: the user message is durable before any model call.
  persist(
    self, std::move(to_store),
    [self, id](std::vector<std::string> errors) {
      auto tp = current(self, id);
      if (tp == nullptr)
        return;
      if (!errors.empty()) {
        end_turn(self, turn_exit::error,
                 "cannot persist the user message: " + errors.front(), true);
        return;
      }
      tp->user_persisted = true;
      note_user_message(self->state, tp->p.req.turn_key);
      iterate(self);
    },
    key.empty() ? std::string{} : turn_store_key(key));
}

} // namespace mibyan::conversation_detail
