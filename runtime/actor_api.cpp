// The actor-level API (include/mibyan/actors.hpp): a runtime wired into the
// application's own actor system, and two typed gateway actors that speak
// the public protocol (strings and the value types of mibyan/turn.hpp).
#include "mibyan/actors.hpp"

#include <map>

#include "caf/all.hpp"

#include "actors/outside_spawn.hpp"
#include "base/json.hpp"
#include "messages/type_ids.hpp"
#include "runtime/runtime_impl.hpp"

namespace mibyan {

namespace actors {

namespace {

// A finished turn, sent by the agent's completion to its gateway (the
// promise is delivered on the gateway's own thread).
using turn_done_atom = caf::atom_constant<caf::atom("mb_tdone")>;

std::string error_json(const std::string& message) {
  json::value r;
  r["error"] = message;
  return r.dump();
}

struct conversation_state {
  std::shared_ptr<agent> conv;
  uint64_t next_id = 0;
  std::map<uint64_t, caf::typed_response_promise<turn_result>> pending;
};

// The gateway's own protocol: the public one plus the completions its
// agent sends to itself.
using conversation_gateway_actor = conversation_handle::extend<
  caf::reacts_to<turn_done_atom, uint64_t, turn_result>>;

conversation_gateway_actor::behavior_type conversation_gateway(
  conversation_gateway_actor::stateful_pointer<conversation_state> self,
  runtime* rt, agent_config cfg, event_listener listener) {
  if (listener) {
    auto send = [listener](const char* kind) {
      return [listener, kind](const std::string& text) {
        caf::anon_send(listener, event_atom_v, std::string{kind}, text);
      };
    };
    cfg.on_text = send("text");
    cfg.on_reasoning = send("reasoning");
    auto tool = [listener](const tool_event& ev) {
      caf::anon_send(listener, event_atom_v, ev);
    };
    cfg.on_tool_start = tool;
    cfg.on_tool_end = tool;
  }
  // When this actor exits, the agent's destructor closes the session
  // (without blocking).
  self->state.conv = std::make_shared<agent>(*rt, std::move(cfg));
  return {
    [self](run_atom, std::string& prompt) -> caf::result<turn_result> {
      auto& st = self->state;
      auto id = st.next_id++;
      auto rp = self->make_response_promise<turn_result>();
      st.pending.emplace(id, rp);
      auto me = caf::actor_cast<conversation_gateway_actor>(self);
      st.conv->run(std::move(prompt), turn_options{},
                   [me, id](turn_result r) {
                     caf::anon_send(me, turn_done_atom::value, id,
                                    std::move(r));
                   });
      return rp;
    },
    [self](turn_done_atom, uint64_t id, turn_result& r) {
      auto& st = self->state;
      auto i = st.pending.find(id);
      if (i == st.pending.end())
        return;
      i->second.deliver(std::move(r));
      st.pending.erase(i);
    },
    [self](cancel_atom, std::string& reason) {
      self->state.conv->interrupt(reason);
    },
  };
}

tool_handle::behavior_type tool_gateway(tool_handle::pointer self,
                                        tool_dispatcher_actor dispatcher) {
  return {
    [self, dispatcher](tool_atom, std::string& session, std::string& tool,
                       std::string& args_json) -> caf::result<std::string> {
      auto rp = self->make_response_promise<std::string>();
      static std::atomic<uint64_t> seq{0};
      tool_request req{session, "actor-" + std::to_string(++seq), tool,
                       args_json, "", false};
      self->request(dispatcher, caf::infinite, invoke_atom_v, std::move(req))
        .then(
          [rp](tool_response& res) mutable {
            rp.deliver(std::move(res.result_json));
          },
          [self, rp](caf::error& err) mutable {
            rp.deliver(error_json("Runtime error: "
                                  + self->system().render(err)));
          });
      return rp;
    },
  };
}

} // namespace

void configure(caf::actor_system_config& cfg) {
  configure_actor_system(cfg, nullptr);
}

result<std::unique_ptr<runtime>> attach(caf::actor_system& sys,
                                        const runtime_config& cfg) {
  return create_runtime(cfg, &sys);
}

conversation_handle spawn_conversation(runtime& rt, agent_config cfg,
                                       event_listener listener) {
  auto& p = runtime_access::of(rt);
  outside_spawn_guard guard; // an application's thread (actors/outside_spawn.hpp)
  auto gw = p.sys->spawn(conversation_gateway, &rt, std::move(cfg),
                         std::move(listener));
  return caf::actor_cast<conversation_handle>(gw);
}

tool_handle spawn_tool_actor(runtime& rt) {
  auto& p = runtime_access::of(rt);
  outside_spawn_guard guard; // an application's thread (actors/outside_spawn.hpp)
  return p.sys->spawn(tool_gateway, p.dispatcher);
}

} // namespace actors

caf::actor_system& actor_system_of(runtime& rt) {
  return *runtime_access::of(rt).sys;
}

} // namespace mibyan
