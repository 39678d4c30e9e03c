#include "actors/kernel_start.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include "caf/actor_system.hpp"

#include "actors/kernel.hpp"
#include "actors/outside_spawn.hpp"
#include "base/env_filter.hpp"
#include "base/host_hardening.hpp"
#include "base/log.hpp"
#include "kernels/interpreter_cache.hpp"
#include "kernels/kernel_process.hpp"
#include "tools/script_sandbox.hpp"

namespace mibyan {

namespace {

// Resolves the interpreter and starts the process (staging files, fork,
// exec). On failure returns pid -1 with `*error` set.
kernel_process launch_kernel(const kernel_start_plan& plan,
                             const kernel_shape& shape, std::string* error,
                             std::string* resolved) {
  auto& svc = *plan.svc;
  kernel_spawn_options so;
  so.python = interpreter_for(svc, plan.default_python, shape);
  *resolved = so.python;
  so.cwd = shape.cwd;
  so.tools = plan.tools;
  so.inherited_env = current_environment();
  so.passthrough = svc.cfg.terminal.env_passthrough;
  so.passthrough.insert(so.passthrough.end(), shape.skill_env.begin(),
                        shape.skill_env.end());
  so.rpc_timeout = static_cast<double>(svc.cfg.code_execution.timeout);
  so.extra_tools = svc.script_host_tools;
  std::string isolation_error;
  so.bwrap = script_sandbox_bwrap(svc.cfg, &isolation_error);
  if (!isolation_error.empty()) {
    *error = isolation_error;
    return {};
  }
  if (so.bwrap.empty())
    become_subreaper(); // the fallback hunts orphaned daemons at teardown
  so.strict = shape.mode == "strict";
  so.home = svc.cfg.home;
  so.limits = script_limits(svc.cfg);
  auto proc = spawn_kernel(so, error);
  if (proc.pid < 0)
    return proc;
  if (!proc.dropped_env.empty() && log::enabled(log::level::debug)) {
    std::string names;
    for (auto& n : proc.dropped_env)
      names += (names.empty() ? "" : ", ") + n;
    MIBYAN_LOG(debug, "kernel", "execute_code: dropped "
               << proc.dropped_env.size() << " environment variable(s): "
               << names << " (re-allow with terminal.env_passthrough)");
  }
  MIBYAN_LOG(debug, "kernel", "started pid " << proc.pid << " ("
             << so.python << ") in " << proc.cwd);
  return proc;
}

// Ends a started kernel that no broker took over: its group, its
// daemons, its descriptors and staging dir.
void discard_kernel(kernel_process& p) {
  if (p.watchdog_fd >= 0) { // the runner kills its own group on EOF
    ::close(p.watchdog_fd);
    p.watchdog_fd = -1;
  }
  end_kernel_processes(p.pid, p.sandboxed, p.marker, p.cgroup_dir);
  int status = 0;
  ::waitpid(p.pid, &status, 0);
  close_kernel_fds(p);
  remove_staging_dir(p.staging_dir);
}

} // namespace

std::string interpreter_for(const runtime_services& svc,
                            const std::string& default_python,
                            const kernel_shape& shape) {
  auto cwd = shape.cwd.empty() ? svc.default_cwd : shape.cwd;
  auto& home = svc.cfg.home;
  if (shape.python.empty())
    return resolve_project_interpreter(default_python, home, cwd);
  return resolve_interpreter_cached(shape.python, home, cwd);
}

void run_kernel_start(caf::actor_system& sys, const kernel_start_plan& plan,
                      std::shared_ptr<kernel_usage> usage,
                      kernel_start_slot& slot,
                      const kernel_start_report& report) {
  std::string err, tried, note;
  auto proc = launch_kernel(plan, plan.shape, &err, &tried);
  if (plan.fallback) {
    for (auto& candidate : {plan.default_python, std::string{"python3"}}) {
      if (proc.pid >= 0 || candidate == plan.shape.python || candidate == tried)
        continue;
      MIBYAN_LOG(warning, "kernel", "cannot start " << tried
                 << " (" << err << "); falling back to " << candidate);
      auto fallback = plan.shape;
      fallback.python = candidate;
      std::string err2, resolved2;
      proc = launch_kernel(plan, fallback, &err2, &resolved2);
      if (proc.pid >= 0)
        note = "The configured interpreter " + tried
               + " could not be started (" + err + "); this session's "
               "kernel runs " + candidate + " instead.";
      else
        err += "; " + candidate + ": " + err2;
    }
  }
  caf::actor handle;
  {
    std::lock_guard<std::mutex> guard{slot.mtx};
    if (slot.registry_gone) {
      // The actor system may be ending too: spawn nothing.
      if (proc.pid >= 0)
        discard_kernel(proc);
      return;
    }
    if (proc.pid >= 0) {
      kernel_actor_options ko;
      ko.proc = std::move(proc);
      ko.tools = plan.tools;
      ko.kill_grace_seconds = plan.svc->cfg.terminal.kill_grace;
      ko.usage = std::move(usage);
      outside_spawn_guard guard; // a pool thread (actors/outside_spawn.hpp)
      handle = spawn_kernel_actor(sys, plan.svc, std::move(ko));
      slot.handle = handle;
    }
  }
  report(std::move(handle), std::move(tried), std::move(err), std::move(note));
}

} // namespace mibyan
