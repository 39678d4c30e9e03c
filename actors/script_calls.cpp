#include "actors/script_calls.hpp"

#include "base/redact_slot.hpp"

namespace mibyan {

tool_context make_call_context(const runtime_services& svc,
                               const tool_request& req,
                               const std::atomic<bool>* cancel,
                               std::chrono::steady_clock::time_point deadline) {
  tool_context ctx;
  ctx.session_id = req.session_id;
  ctx.call_id = req.call_id;
  ctx.cwd = req.cwd.empty() ? svc.default_cwd : req.cwd;
  ctx.home = svc.cfg.home;
  ctx.cfg = &svc.cfg;
  ctx.http = svc.http.get();
  ctx.cancelled = cancel;
  ctx.deadline = deadline;
  ctx.from_script = req.from_script;
  ctx.redact = svc.redact ? svc.redact->get() : nullptr;
  ctx.processes = svc.processes.get();
  ctx.approvals = svc.approvals.get();
  ctx.agent = svc.agent_tools.get();
  ctx.launcher = svc.launcher.get();
  return ctx;
}

prepared_call prepare_call(const runtime_services& svc, tool_request req) {
  prepared_call c;
  c.parsed = json::parse(req.args_json.empty() ? "{}" : req.args_json);
  if (auto t = svc.tools.find(req.tool)) {
    // A script's call loses the arguments the tool's policy strips
    // (tools/tool.hpp, script_policy).
    if (req.from_script && c.parsed && c.parsed.v->is_object())
      for (auto& name : t->script().stripped)
        c.parsed.v->erase(name);
    if (c.parsed && c.parsed.v->is_object())
      c.limit = t->deadline(*c.parsed.v, svc.cfg);
    c.non_blocking = t->non_blocking();
  }
  c.req = std::move(req);
  return c;
}

std::string run_prepared_call(const runtime_services& svc,
                              prepared_call& call,
                              const std::atomic<bool>* cancel,
                              std::chrono::steady_clock::time_point deadline) {
  auto ctx = make_call_context(svc, call.req, cancel, deadline);
  auto result = call.parsed
                  ? dispatch_tool(svc.tools, call.req.tool,
                                  std::move(*call.parsed.v), ctx)
                  : dispatch_tool(svc.tools, call.req.tool,
                                  std::string_view{call.req.args_json}, ctx);
  return result.dump();
}

std::string call_timeout_result(const std::string& tool, int64_t seconds) {
  json::value r = error_result("Tool '" + tool + "' did not finish within "
                               "its deadline (" + std::to_string(seconds)
                               + " s) and was cancelled.");
  r["status"] = "timeout";
  return r.dump();
}

std::string call_cancelled_result(const std::string& reason) {
  json::value r = error_result("Tool call cancelled: " + reason);
  r["status"] = "cancelled";
  return r.dump();
}

} // namespace mibyan
