#include "actors/tool_dispatcher.hpp"

#include <map>
#include <set>

#include "caf/all.hpp"

#include "tools/script_sandbox.hpp"

#include "actors/tool_invocation.hpp"
#include "base/json.hpp"

namespace mibyan {

namespace {

struct dispatcher_state {
  // Running invocations per session, for interrupts, and the call id of
  // each (per-call cancellation).
  std::map<std::string, std::set<caf::actor>> running;
  std::map<caf::actor_addr, std::string> session_of;
  std::map<caf::actor_addr, std::string> call_of;
  tool_dispatcher_actor code_exec;
  static const char* name;
};

const char* dispatcher_state::name = "tool_dispatcher";

tool_dispatcher_actor::behavior_type
dispatcher(tool_dispatcher_actor::stateful_pointer<dispatcher_state> self,
           services_ptr svc, tool_dispatcher_actor code_exec) {
  self->state.code_exec = std::move(code_exec);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    auto i = st.session_of.find(dm.source);
    if (i == st.session_of.end())
      return;
    auto j = st.running.find(i->second);
    if (j != st.running.end()) {
      for (auto k = j->second.begin(); k != j->second.end(); ++k) {
        if (k->address() == dm.source) {
          j->second.erase(k);
          break;
        }
      }
      if (j->second.empty())
        st.running.erase(j);
    }
    st.session_of.erase(i);
    st.call_of.erase(dm.source);
  });
  return {
    [=](invoke_atom, tool_request& req) -> caf::result<tool_response> {
      auto& st = self->state;
      if (req.tool == "execute_code" && st.code_exec) {
        // The backend applies the whole-script guard itself (so the
        // runtime facade can call it directly): script_guard_response.
        return self->delegate(st.code_exec, invoke_atom_v, std::move(req));
      }
      auto inv = spawn_tool_invocation(self, svc);
      st.running[req.session_id].insert(inv);
      st.session_of.emplace(inv.address(), req.session_id);
      st.call_of.emplace(inv.address(), req.call_id);
      return self->delegate(caf::actor_cast<tool_invoker_actor>(inv),
                            invoke_atom_v, std::move(req));
    },
    [=](interrupt_atom, interrupt_request& req) {
      auto& st = self->state;
      if (auto i = st.running.find(req.session_id); i != st.running.end())
        for (auto& inv : i->second) {
          if (!req.call_id.empty()) {
            auto c = st.call_of.find(inv.address());
            if (c == st.call_of.end() || c->second != req.call_id)
              continue; // another call of the session: it goes on
          }
          caf::anon_send(inv, interrupt_atom_v, req.reason);
        }
      if (st.code_exec)
        caf::anon_send(st.code_exec, interrupt_atom_v, req);
    },
  };
}

} // namespace

tool_dispatcher_actor spawn_tool_dispatcher(caf::actor_system& sys,
                                            services_ptr svc,
                                            tool_dispatcher_actor code_exec) {
  return sys.spawn(dispatcher, std::move(svc), std::move(code_exec));
}

std::optional<tool_response> script_guard_response(const runtime_services& svc,
                                                   const tool_request& req) {
  if (!svc.approvals)
    return std::nullopt;
  // The whole-script guard (docs/approvals.md); never blocks (the sandbox
  // probe ran at start-up).
  approval_call call{req.session_id, req.from_script, nullptr};
  // A project-mode kernel working at $HOME or above it (such as "/") sees
  // the user's whole home, so it is not approved as isolated.
  auto cwd = req.cwd.empty() ? svc.default_cwd : req.cwd;
  bool exposes_home = svc.cfg.code_execution.mode != "strict"
                      && workdir_contains_home(cwd);
  auto bwrap = script_sandbox_bwrap(svc.cfg);
  call.isolated = bwrap.ok() && !bwrap->empty() && !exposes_home;
  auto v = svc.approvals->check_script(call);
  if (v.approved)
    return std::nullopt;
  json::value r;
  r["status"] = "blocked";
  r["output"] = "";
  r["error"] = v.message;
  r["approved"] = false;
  return tool_response{req.call_id, req.tool, r.dump(), 0, false};
}

} // namespace mibyan
