#include "actors/warm_kernels.hpp"

#include <chrono>

#include "caf/actor_cast.hpp"

#include "actors/tool_dispatcher.hpp"
#include "base/json.hpp"

namespace mibyan {

namespace {

std::string join(const std::vector<std::string>& xs) {
  std::string out;
  for (auto& x : xs)
    out += (out.empty() ? "" : ",") + x;
  return out;
}

} // namespace

int64_t usage_clock_now(const runtime_clock& clock) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           clock.steady_now().time_since_epoch())
    .count();
}

std::string kernel_shape::text(const std::vector<std::string>& tools) const {
  auto t = mode + "|" + python + "|" + cwd + "|" + join(tools);
  return skill_env.empty() ? t : t + "|env:" + join(skill_env);
}

kernel_shape kernel_routing::shape_for(const tool_request& req) const {
  auto& cfg = svc->cfg.code_execution;
  kernel_shape s;
  s.mode = cfg.mode == "strict" ? "strict" : "project";
  if (s.mode == "strict") {
    s.python = default_python;
  } else {
    s.python = python;
    s.cwd = req.cwd.empty() ? svc->default_cwd : req.cwd;
  }
  if (svc->agent_tools && !req.session_id.empty())
    s.skill_env = svc->agent_tools->skill_env(req.session_id);
  return s;
}

std::string kernel_routing::owner_of(const tool_request& req) {
  return req.session_id.empty() ? std::string{"default"} : req.session_id;
}

std::optional<warm_cell> warm_kernel_index::take(const tool_request& req) {
  // Only the plain case; the registry gives every other one its answer
  // (bad arguments, reset, a blocked script, no kernel yet).
  auto args = json::parse(req.args_json.empty() ? "{}" : req.args_json);
  if (!args || !args.v->is_object())
    return std::nullopt;
  auto code = args.v->find("code");
  if (code == nullptr || !code->is_string()
      || code->as_string().find_first_not_of(" \t\r\n") == std::string::npos)
    return std::nullopt;
  if (auto r = args.v->find("reset"); r && !(r->is_bool() && !r->as_bool()))
    return std::nullopt;
  auto& svc = *routing_.svc;
  auto owner = kernel_routing::owner_of(req);
  auto key = routing_.key_for(owner, routing_.shape_for(req));
  auto live = [&]() -> entry* {
    auto i = kernels_.find(key);
    if (i == kernels_.end() || i->second.usage->ended.load())
      return nullptr;
    return &i->second;
  };
  caf::actor handle;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto e = live();
    if (e == nullptr)
      return std::nullopt;
    handle = e->handle;
  }
  // The script guard only once a kernel is up (its sandbox probe, which
  // may run bwrap, has then run) and outside the lock.
  if (script_guard_response(svc, req))
    return std::nullopt;
  warm_cell out;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto e = live();
    if (e == nullptr || e->handle != handle)
      return std::nullopt;
    e->usage->attached.fetch_add(1);
    e->usage->last_handed_ns.store(usage_clock_now(*svc.clock));
    e->usage->cells.fetch_add(1, std::memory_order_relaxed);
    out.kernel = caf::actor_cast<kernel_cell_actor>(e->handle);
  }
  auto& ce = svc.cfg.code_execution;
  out.cell.session_id = owner;
  out.cell.call_id = req.call_id;
  out.cell.code = code->as_string();
  out.cell.timeout_ms = ce.timeout * 1000;
  out.cell.max_tool_calls = ce.max_tool_calls;
  out.cell.reused = true;
  return out;
}

void warm_kernel_index::put(const std::string& key, caf::actor handle,
                            std::shared_ptr<kernel_usage> usage) {
  std::lock_guard<std::mutex> guard{mtx_};
  kernels_[key] = entry{std::move(handle), std::move(usage)};
}

void warm_kernel_index::remove(const std::string& key,
                               const caf::actor& handle) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (auto i = kernels_.find(key); i != kernels_.end()
                                   && i->second.handle == handle)
    kernels_.erase(i);
}

bool warm_kernel_index::remove_if_idle(const std::string& key,
                                       const caf::actor& handle) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = kernels_.find(key);
  if (i == kernels_.end() || i->second.handle != handle)
    return true; // not offered to the fast path
  if (i->second.usage->attached.load() > 0)
    return false;
  kernels_.erase(i);
  return true;
}

} // namespace mibyan
