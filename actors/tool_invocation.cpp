#include "actors/tool_invocation.hpp"
#include "actors/exit_timer.hpp"

#include "actors/script_calls.hpp"

#include <atomic>
#include <chrono>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "messages/type_ids.hpp"
#include "base/io_poll_hint.hpp"
#include "base/log.hpp"
#include "tools/agent/agent_tool_state.hpp"
#include "tools/argument_limit.hpp"
#include "tools/registry.hpp"

namespace mibyan {

namespace {

using clock_type = std::chrono::steady_clock;

struct invocation_state {
  caf::typed_response_promise<tool_response> rp;
  std::shared_ptr<std::atomic<bool>> cancel
    = std::make_shared<std::atomic<bool>>(false);
  // The runtime's clock (actors/services.hpp): the start and the reported
  // durations; the deadline itself is the exit timer's (CAF's clock).
  clock_ptr clock;
  clock_type::time_point start;
  std::string call_id;
  std::string tool;
  bool answered = false;
  static const char* name;
};

const char* invocation_state::name = "tool_invocation";

using invocation_actor = caf::stateful_actor<invocation_state>;

void answer(invocation_actor* self, std::string result_json, bool timed_out) {
  auto& st = self->state;
  if (st.answered)
    return;
  st.answered = true;
  tool_response res;
  res.call_id = st.call_id;
  res.tool = st.tool;
  res.result_json = std::move(result_json);
  res.duration_us = std::chrono::duration_cast<std::chrono::microseconds>(
                      st.clock->steady_now() - st.start).count();
  res.timed_out = timed_out;
  st.rp.deliver(std::move(res));
  self->quit();
}

// The call passed its deadline: cancel it and answer with a timeout.
void on_deadline(invocation_actor* self) {
  auto& st = self->state;
  if (st.answered)
    return;
  st.cancel->store(true);
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(
                st.clock->steady_now() - st.start).count();
  MIBYAN_LOG(warning, "tool", st.tool << " call " << st.call_id
             << " passed its deadline after " << secs << " s");
  answer(self, call_timeout_result(st.tool, secs), true);
}

caf::behavior invocation(invocation_actor* self, services_ptr svc) {
  return {
    exit_timer_handler(self),
    [=](invoke_atom, tool_request& req) -> caf::result<tool_response> {
      auto& st = self->state;
      st.rp = self->make_response_promise<tool_response>();
      st.clock = svc->clock;
      st.start = st.clock->steady_now();
      st.call_id = req.call_id;
      st.tool = req.tool;
      // Every caller's arguments pass here: refuse oversized ones before
      // parsing (docs/configuration.md, tools.max_argument_bytes).
      if (auto size = check_argument_size(req.args_json.size(),
                                          svc->cfg.tools.max_argument_bytes);
          !size) {
        answer(self, error_result(size.error).dump(), false);
        return st.rp;
      }
      // Parse once here (simdjson is fast) so the deadline can depend on
      // the arguments, e.g. terminal's own timeout.
      auto parsed = json::parse(req.args_json.empty() ? "{}" : req.args_json);
      // A tool of the session's own set (agent_tool_state::session_tools)
      // when the runtime's registry has none of that name.
      std::shared_ptr<const tool_registry> own;
      if (!svc->tools.find(req.tool) && svc->agent_tools)
        if (auto set = svc->agent_tools->session_tools(req.session_id);
            set && set->find(req.tool))
          own = std::move(set);
      const tool_registry& reg = own ? *own : svc->tools;
      std::chrono::milliseconds limit{60000};
      if (auto t = reg.find(req.tool); t && parsed && parsed.v->is_object())
        limit = t->deadline(*parsed.v, svc->cfg);
      auto cancel = st.cancel;
      auto deadline = clock_type::now() + limit;
      auto me = caf::actor{self};
      auto job = [svc, own, req = std::move(req), parsed = std::move(parsed),
                  cancel, deadline, me]() mutable {
        const tool_registry& reg = own ? *own : svc->tools;
        auto ctx = make_call_context(*svc, req, cancel.get(), deadline);
        json::value result;
        if (cancel->load())
          return; // the answer was already given
        if (parsed)
          result = dispatch_tool(reg, req.tool, std::move(*parsed.v), ctx);
        else
          result = dispatch_tool(reg, req.tool,
                                 std::string_view{req.args_json}, ctx);
        caf::anon_send(me, done_atom_v, result.dump());
      };
      if (!svc->pool->submit(std::move(job)))
        answer(self, error_result("The runtime is shutting down; the tool "
                                  "was not run.").dump(), false);
      else
        // Ends with the actor (actors/exit_timer.hpp): an early answer
        // frees the invocation at once, not after the deadline.
        start_exit_timer(self, limit, [self] { on_deadline(self); });
      return st.rp;
    },
    [=](done_atom, std::string& result_json) {
      answer(self, std::move(result_json), false);
    },
    [=](interrupt_atom, const std::string& reason) {
      auto& st = self->state;
      if (st.answered)
        return;
      st.cancel->store(true);
      answer(self, call_cancelled_result(reason), true);
    },
  };
}

// -- a script's call: the same actor on the middleman's I/O thread ----------

struct script_invocation_state {
  services_ptr svc;
  // The runtime's clock (actors/services.hpp): the start and the reported
  // duration; the deadline itself is the exit timer's (CAF's clock), and
  // the tool's own deadline (tool_context) is on the steady clock.
  std::shared_ptr<std::atomic<bool>> cancel
    = std::make_shared<std::atomic<bool>>(false);
  clock_type::time_point start;
  std::string call_id;
  std::string tool;
  caf::actor_addr reply_to; // the kernel broker, weakly
  uint64_t seq = 0;
  bool answered = false;    // answered, or let go by an interrupt
  static const char* name;

  void send_answer(std::string result_json) {
    answered = true;
    if (auto to = caf::actor_cast<caf::actor>(reply_to))
      caf::anon_send(to, done_atom_v, seq, std::move(result_json));
  }

  // Whichever way the actor ends (an exception escaping a handler
  // included), a call not yet answered gets an error result: the script
  // never waits for a call whose invocation is gone.
  ~script_invocation_state() {
    if (answered || !reply_to)
      return;
    cancel->store(true);
    send_answer(error_result("Tool '" + tool + "' failed: its invocation "
                             "ended without a result.").dump());
  }
};

const char* script_invocation_state::name = "tool_invocation";

using script_invocation_actor
  = caf::io::stateful_broker<script_invocation_state>;

// Answers, then ends with the next turn of the I/O loop rather than at once:
// CAF wakes its clock thread whenever an actor ends (it cancels the actor's
// timeouts, armed or not), and the kernel broker's write of the reply, queued
// on this thread before our own message, thus goes out first.
void script_answer(script_invocation_actor* self, std::string result_json) {
  auto& st = self->state;
  if (st.answered)
    return;
  st.send_answer(std::move(result_json));
  caf::anon_send(caf::actor_cast<caf::actor>(self), done_atom_v);
}

// The behavior of an invocation that has answered and waits for its own
// (done_atom) to end; an interrupt that arrives first is dropped.
caf::behavior answered_behavior(script_invocation_actor* self) {
  return {
    [=](done_atom) { self->quit(); },
    [=](interrupt_atom, const std::string&) {},
  };
}

caf::behavior script_invocation(script_invocation_actor* self,
                                services_ptr svc, tool_request req,
                                caf::actor_addr reply_to, uint64_t seq) {
  auto& st = self->state;
  st.svc = svc;
  st.start = svc->clock->steady_now();
  st.call_id = req.call_id;
  st.tool = req.tool;
  st.reply_to = std::move(reply_to);
  st.seq = seq;
  // The kernel broker checked the argument size before admitting the call
  // (actors/kernel_rpc.cpp), against the same limit.
  auto call = prepare_call(*svc, std::move(req));
  auto limit = call.limit;
  auto deadline = clock_type::now() + limit;
  if (call.non_blocking) {
    // Microseconds by the tool's own contract: no deadline timer (the
    // handler returns before any deadline could fire).
    script_answer(self, run_prepared_call(*svc, call, st.cancel.get(),
                                          deadline));
    return answered_behavior(self);
  }
  auto cancel = st.cancel;
  auto me = caf::actor_cast<caf::actor>(self);
  auto job = [svc, call = std::move(call), cancel, deadline, me]() mutable {
    if (cancel->load())
      return; // answered already (deadline or interrupt)
    auto result = run_prepared_call(*svc, call, cancel.get(), deadline);
    caf::anon_send(me, done_atom_v, std::move(result));
  };
  if (!svc->pool->submit(std::move(job))) {
    script_answer(self, error_result("The runtime is shutting down; the "
                                     "tool was not run.").dump());
    return answered_behavior(self);
  }
  // A fast tool's answer comes back from the pool within microseconds:
  // the I/O loop polls for it briefly instead of sleeping and being woken
  // by the pool thread (base/io_poll_hint.hpp, runtime.io_spin_us).
  expect_answer_soon();
  // Ends with the actor (actors/exit_timer.hpp).
  start_exit_timer(self, limit, [self] {
    auto& st = self->state;
    if (st.answered)
      return;
    st.cancel->store(true);
    auto secs = std::chrono::duration_cast<std::chrono::seconds>(
                  st.svc->clock->steady_now() - st.start).count();
    MIBYAN_LOG(warning, "tool", st.tool << " call " << st.call_id
               << " passed its deadline after " << secs << " s");
    script_answer(self, call_timeout_result(st.tool, secs));
  });
  return {
    exit_timer_handler(self),
    [=](done_atom, std::string& result_json) {
      script_answer(self, std::move(result_json));
    },
    [=](done_atom) { self->quit(); },
    [=](interrupt_atom, const std::string&) {
      // The kernel broker let the call go (its cell ended): stop the tool,
      // answer nobody.
      auto& st = self->state;
      st.cancel->store(true);
      st.answered = true;
      self->quit();
    },
  };
}

} // namespace

caf::actor spawn_script_invocation(caf::actor_system& sys, services_ptr svc,
                                   tool_request req, caf::actor_addr reply_to,
                                   uint64_t seq) {
  return sys.middleman().spawn_broker(script_invocation, std::move(svc),
                                      std::move(req), std::move(reply_to),
                                      seq);
}

caf::actor spawn_tool_invocation(caf::local_actor* parent, services_ptr svc) {
  return parent->spawn<caf::monitored>(invocation, std::move(svc));
}

} // namespace mibyan
