// Conversation actor, part: one tool round (how the actor is split:
// actors/conversation_internal.hpp).
//
// execute_batch splits the planned calls into segments (parallel-safe runs
// and sequential runs), invokes them through the dispatcher, and
// finish_batch shapes the results (spilling oversized ones), persists them
// and hands the turn back to the state machine.
#include "actors/conversation_internal.hpp"

#include <utility>

#include "agent/tool_result_shaping.hpp"
#include "base/json.hpp"
#include "tools/registry.hpp"

namespace mibyan::conversation_detail {

namespace {

std::string cancelled_result(const std::string& tool,
                             const std::string& reason) {
  return error_result("Tool execution cancelled: " + tool
                      + " did not finish because the user interrupted the "
                        "turn ("
                      + reason + ")")
    .dump();
}


void run_segment(conv_pointer self);

} // namespace

void finish_batch(conv_pointer self) {
  auto& st = self->state;
  auto& t = *st.cur;
  t.batch = 0; // late responses of this batch are ignored
  std::vector<shaped_result> shaped;
  for (size_t i = 0; i < t.plan.calls.size(); ++i) {
    auto& c = t.plan.calls[i].call;
    std::string content = t.results[i]
                            ? std::move(*t.results[i])
                            : cancelled_result(c.name, t.interrupt_reason);
    shaped.push_back(shaped_result{c.name, c.id, std::move(content), false});
  }
  t.shaping = std::make_shared<std::vector<shaped_result>>(std::move(shaped));
  t.shaping_id = st.next_batch++;
  auto limits = limits_for_context(0);
  // Without a result to spill, shaping is a little CPU work: done here,
  // without a round trip through the blocking pool.
  if (!shaping_may_write(*t.shaping, limits)) {
    shape_tool_results(*t.shaping, limits, nullptr);
    results_shaped(self);
    return;
  }
  auto writer = result_saver(self);
  // Spilling writes files: never on a scheduler thread. The job owns
  // `t.shaping` until it reports back; nothing else touches it meanwhile.
  if (auto& pool = st.deps.svc->pool) {
    auto job = [work = t.shaping, writer, limits, sid = t.shaping_id,
                me = caf::actor_cast<conversation_impl_actor>(self)] {
      shape_tool_results(*work, limits, writer);
      caf::anon_send(me, done_atom_v, sid);
    };
    if (pool->submit(std::move(job)))
      return;
  }
  shape_tool_results(*t.shaping, limits, writer);
  results_shaped(self);
}

void results_shaped(conv_pointer self) {
  auto& t = *self->state.cur;
  auto shaped = std::move(t.shaping);
  t.shaping_id = 0;
  std::vector<chat_message> tool_msgs;
  for (auto& r : *shaped) {
    chat_message m;
    m.role = "tool";
    m.content = std::move(r.content);
    m.tool_call_id = r.call_id;
    m.tool_name = r.tool_name;
    m.timestamp_ms = now_ms();
    t.msgs.push_back(m);
    tool_msgs.push_back(std::move(m));
  }
  auto id = t.id;
  if (!t.interrupted && !t.guards.halted() && !tool_msgs.empty()) {
    // The usual case: the next model call goes out while the results
    // commit. Whatever follows its answer (storing the answer, running
    // tools, answering the caller) waits for the commit (when_stored); a
    // result that cannot be stored ends the turn there.
    ++t.unacked;
    persist(self, std::move(tool_msgs),
            [self, id](std::vector<std::string> errors) {
              auto tp = current(self, id);
              if (tp == nullptr)
                return;
              --tp->unacked;
              if (persist_failed(*tp, "tool results", errors)) {
                tp->store_failed = true;
                if (!tp->inflight.empty())
                  self->send(tp->provider, cancel_atom_v, tp->inflight);
              }
              if (tp->unacked > 0)
                return;
              auto ks = std::move(tp->after_stored);
              tp->after_stored.clear();
              for (auto& k : ks) {
                if (current(self, id) == nullptr)
                  return;
                when_stored(self, std::move(k));
              }
            });
    iterate(self);
    return;
  }
  persist(self, std::move(tool_msgs),
          [self, id](std::vector<std::string> errors) {
            auto tp = current(self, id);
            if (tp == nullptr)
              return;
            // A tool result that cannot be stored stops the turn: going on
            // would leave the stored session silently incomplete.
            if (persist_failed(*tp, "tool results", errors))
              finish(self);
            else if (tp->interrupted)
              end_interrupted(self);
            else if (tp->guards.halted()) {
              tp->res.final_response = tp->guards.halt_message();
              tp->res.exit = turn_exit::guardrail_halt;
              tp->res.exit_detail = "guardrail_halt";
              tp->res.partial = true;
              finish(self);
            } else
              iterate(self);
          });
}

// Runs plan call `idx` through the dispatcher; `then` runs on its answer
// unless the batch was abandoned meanwhile.
namespace {

void invoke(conv_pointer self, size_t idx, std::function<void()> then) {
  auto& st = self->state;
  auto& t = *st.cur;
  auto& c = t.plan.calls[idx].call;
  if (auto blocked = t.guards.before_call(c.name, c.arguments)) {
    // Not run; still counted, so a model that keeps trying gets halted.
    t.results[idx] = t.guards.after_call(c.name, c.arguments,
                                         std::move(*blocked));
    then();
    return;
  }
  if (c.name == "delegate_task") { // an agent-loop tool: child conversations
    start_delegation(self, idx, std::move(then));
    return;
  }
  tool_request req{st.tool_session, c.id, c.name, c.arguments, st.cwd,
                   false};
  auto id = t.id;
  auto batch = t.batch;
  auto alive = [self, id, batch]() -> turn_state* {
    auto tp = current(self, id);
    return tp != nullptr && tp->batch == batch ? tp : nullptr;
  };
  // Tool activity for the turn's sink (docs/embedding.md, "Tool events").
  auto sink = t.p.req.sink;
  auto sid = st.deps.session_id;
  auto event = [sink, sid, call_id = c.id, name = c.name,
                depth = st.deps.depth](tool_event ev) {
    ev.call_id = call_id;
    ev.tool = name;
    ev.depth = depth; // > 0: a delegate_task child's call
    caf::anon_send(sink, tool_event_atom_v, sid, std::move(ev));
  };
  if (sink) {
    tool_event ev;
    ev.args_json = c.arguments;
    event(std::move(ev));
  }
  self->request(st.deps.dispatcher, caf::infinite, invoke_atom_v,
                std::move(req))
    .then(
      [alive, idx, then, sink, event, name = c.name, args = c.arguments](
        tool_response& resp) {
        if (sink) {
          tool_event ev;
          ev.what = tool_event::phase::end;
          ev.result_json = resp.result_json;
          ev.duration_us = resp.duration_us;
          event(std::move(ev));
        }
        if (auto tp = alive()) {
          tp->results[idx] = tp->guards.after_call(
            name, args, std::move(resp.result_json));
          then();
        }
      },
      [self, alive, idx, then](caf::error& err) {
        if (auto tp = alive()) {
          tp->results[idx] = error_result("Runtime error: "
                                          + error_text(self->system(), err))
                               .dump();
          then();
        }
      });
}

void run_sequential(conv_pointer self) {
  auto& t = *self->state.cur;
  auto& seg = t.segments[t.seg];
  if (t.interrupted) {
    finish_batch(self);
    return;
  }
  if (t.seq_pos >= seg.calls.size()) {
    ++t.seg;
    run_segment(self);
    return;
  }
  invoke(self, seg.calls[t.seq_pos], [self] {
    ++self->state.cur->seq_pos;
    run_sequential(self);
  });
}

void run_segment(conv_pointer self) {
  auto& t = *self->state.cur;
  if (t.interrupted || t.seg >= t.segments.size()) {
    finish_batch(self);
    return;
  }
  auto& seg = t.segments[t.seg];
  if (!seg.parallel) {
    t.seq_pos = 0;
    run_sequential(self);
    return;
  }
  t.outstanding = seg.calls.size();
  for (auto idx : seg.calls)
    invoke(self, idx, [self] {
      auto& tt = *self->state.cur;
      if (--tt.outstanding == 0) {
        ++tt.seg;
        run_segment(self);
      }
    });
}

} // namespace

void execute_batch(conv_pointer self) {
  auto& st = self->state;
  auto& t = *st.cur;
  auto n = t.plan.calls.size();
  t.results.assign(n, std::nullopt);
  std::vector<tool_call> runnable;
  std::vector<size_t> index;
  for (size_t i = 0; i < n; ++i) {
    auto& pc = t.plan.calls[i];
    if (pc.runs()) {
      runnable.push_back(pc.call);
      index.push_back(i);
    } else {
      t.results[i] = pc.result;
    }
  }
  if (batch_refunds_iteration(runnable))
    t.budget.refund();
  batch_plan_options bo;
  bo.cwd = st.cwd;
  auto svc = st.deps.svc;
  bo.parallel_safe = [svc](std::string_view name) {
    auto tl = svc->tools.find(name);
    return tl != nullptr && tl->parallel_safe();
  };
  t.segments = plan_batch(runnable, bo);
  for (auto& seg : t.segments)
    for (auto& i : seg.calls)
      i = index[i];
  t.seg = 0;
  t.batch = st.next_batch++;
  run_segment(self);
}

} // namespace mibyan::conversation_detail
