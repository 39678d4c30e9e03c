#include "tools/script_sandbox.hpp"

#include <algorithm>
#include <atomic>

#include "config/options.hpp"
#include "base/env_filter.hpp"
#include "base/log.hpp"
#include "base/subprocess.hpp"
#include "tools/tool.hpp"

namespace mibyan {

result<std::string> script_sandbox_bwrap(const options& cfg) {
  auto setting = parse_sandbox_setting(cfg.code_execution.sandbox);
  if (setting == sandbox_setting::off)
    return std::string{};
  const auto& support = probe_sandbox();
  if (support.available)
    return support.bwrap;
  if (setting == sandbox_setting::required)
    return result<std::string>::failure(
      status_code::unavailable,
      "code_execution.sandbox is 'required' but the bubblewrap "
      "sandbox is unavailable: " + support.reason
        + ". Install bubblewrap and allow unprivileged user "
          "namespaces, or set code_execution.sandbox to 'auto'.");
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    MIBYAN_LOG(warning, "sandbox", "execute_code runs WITHOUT a sandbox: "
               << support.reason << ". Scripts can see this user's "
               "processes and files (see docs/security.md); set "
               "code_execution.sandbox: required to refuse instead.");
  return std::string{};
}

sandbox_limits script_limits(const options& cfg) {
  const auto& ce = cfg.code_execution;
  sandbox_limits l;
  l.memory_bytes = static_cast<uint64_t>(ce.max_memory_mb) << 20;
  l.processes = static_cast<uint64_t>(ce.max_processes);
  l.open_files = static_cast<uint64_t>(ce.max_open_files);
  return l;
}

status sandbox_script_command(subprocess_options& so,
                              const tool_context& ctx) {
  if (ctx.cfg == nullptr)
    return {};
  auto found = script_sandbox_bwrap(*ctx.cfg);
  if (!found)
    return found.get_status();
  auto& bwrap = *found;
  if (bwrap.empty())
    return {};
  bool strict = ctx.cfg->code_execution.mode == "strict";
  sandbox_policy pol;
  pol.view = strict ? sandbox_view::strict : sandbox_view::project;
  pol.workdir = so.cwd.empty() ? ctx.cwd : so.cwd;
  if (!ctx.cwd.empty())
    pol.writable.push_back(ctx.cwd);
  add_state_paths(pol, ctx.home);
  pol.network = !strict;
  std::vector<std::string> command;
  if (!so.shell_command.empty()) {
    auto shell = find_executable("bash");
    if (shell.empty())
      shell = "/bin/sh";
    command = {shell, "-c", so.shell_command};
    so.shell_command.clear();
  } else {
    command = so.argv;
  }
  so.argv = sandbox_argv(bwrap, pol, command);
  // /tmp is private (project) or read-only (strict, where the kernel's
  // staging dir is the writable place).
  if (!so.env)
    so.env = current_environment();
  auto& env = *so.env;
  env.erase(std::remove_if(env.begin(), env.end(),
                           [](const std::string& e) {
                             return e.rfind("TMPDIR=", 0) == 0;
                           }),
            env.end());
  env.push_back("TMPDIR=" + (strict ? ctx.cwd : std::string{"/tmp"}));
  return {};
}

} // namespace mibyan
