// The actor-level API (include/mibyan/actors.hpp): a runtime wired into the
// application's own actor system, and two gateway actors that speak a
// protocol of plain strings to the application.
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
  std::map<uint64_t, caf::response_promise> pending;
};

caf::behavior
conversation_gateway(caf::stateful_actor<conversation_state>* self,
                     runtime* rt, agent_config cfg, caf::actor listener) {
  if (listener) {
    auto send = [listener](const char* kind) {
      return [listener, kind](const std::string& text) {
        caf::anon_send(listener, event_atom_v, std::string{kind}, text);
      };
    };
    cfg.on_text = send("text");
    cfg.on_reasoning = send("reasoning");
    cfg.on_tool_start = [listener](const tool_event& ev) {
      json::value v;
      v["id"] = ev.call_id;
      v["name"] = ev.tool;
      v["arguments"] = ev.args_json;
      caf::anon_send(listener, event_atom_v, std::string{"tool_start"},
                     v.dump());
    };
    cfg.on_tool_end = [listener](const tool_event& ev) {
      json::value v;
      v["id"] = ev.call_id;
      v["name"] = ev.tool;
      v["result"] = ev.result_json;
      v["duration_us"] = ev.duration_us;
      caf::anon_send(listener, event_atom_v, std::string{"tool_end"},
                     v.dump());
    };
  }
  // When this actor exits, the agent's destructor closes the session
  // (without blocking).
  self->state.conv = std::make_shared<agent>(*rt, std::move(cfg));
  return {
    [self](run_atom, std::string& prompt) -> caf::result<std::string> {
      auto& st = self->state;
      auto id = st.next_id++;
      auto rp = self->make_response_promise<std::string>();
      st.pending.emplace(id, rp);
      caf::actor me = caf::actor_cast<caf::actor>(self);
      st.conv->run(std::move(prompt), turn_options{},
                   [me, id](turn_result r) {
                     auto text = !r.result_json.empty()
                                   ? r.result_json
                                   : error_json(r.error);
                     caf::anon_send(me, turn_done_atom::value, id, text);
                   });
      return rp;
    },
    [self](turn_done_atom, uint64_t id, std::string& result_json) {
      auto& st = self->state;
      auto i = st.pending.find(id);
      if (i == st.pending.end())
        return;
      i->second.deliver(std::move(result_json));
      st.pending.erase(i);
    },
    [self](cancel_atom, std::string& reason) {
      self->state.conv->interrupt(reason);
    },
  };
}

caf::behavior tool_gateway(caf::event_based_actor* self,
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

std::unique_ptr<runtime> attach(caf::actor_system& sys,
                                const runtime_config& cfg,
                                std::string* error) {
  return create_runtime(cfg, &sys, error);
}

caf::actor spawn_conversation(runtime& rt, agent_config cfg,
                              caf::actor listener) {
  auto& p = runtime_access::of(rt);
  outside_spawn_guard guard; // an application's thread (actors/outside_spawn.hpp)
  return p.sys->spawn(conversation_gateway, &rt, std::move(cfg),
                      std::move(listener));
}

caf::actor spawn_tool_actor(runtime& rt) {
  auto& p = runtime_access::of(rt);
  outside_spawn_guard guard; // an application's thread (actors/outside_spawn.hpp)
  return p.sys->spawn(tool_gateway, p.dispatcher);
}

} // namespace actors

caf::actor_system& actor_system_of(runtime& rt) {
  return *runtime_access::of(rt).sys;
}

} // namespace mibyan
