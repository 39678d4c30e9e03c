// What a runtime is built from (runtime/runtime_impl.hpp): the
// configuration a runtime_config names, resolved to options
// (options_from_config); the actor system's settings
// (configure_actor_system); and the shared services - tools, the script
// catalog, MCP servers, approvals, the blocking pool - with the host's
// protections and the sandbox decision made first (make_services).
// Start-up only: called before any actor of the runtime runs, on the
// creating thread; each failure is a status, nothing is half-installed in
// the process but the once-only host hardening.
#include "runtime/runtime_impl.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "base/credential_vault.hpp"
#include "base/errno_status.hpp"
#include "base/host_hardening.hpp"
#include "base/http_client.hpp"
#include "base/log.hpp"
#include "base/process_registry.hpp"
#include "base/redact_slot.hpp"
#include "base/runtime_metrics.hpp"
#include "base/state_dir.hpp"
#include "base/subprocess.hpp"
#include "config/loader.hpp"
#include "config/option_bounds.hpp"
#include "actors/kernel_checkpoints.hpp"
#include "kernels/kernel_process.hpp"
#include "kernels/script_catalog.hpp"
#include "kernels/staging_dirs.hpp"
#include "messages/type_ids.hpp"
#include "runtime/lean_scheduler.hpp"
#include "runtime/mcp_wiring.hpp"
#include "tools/agent/agent_tools.hpp"
#include "tools/agent/delegate_task.hpp"
#include "tools/execute_code.hpp"
#include "tools/file_checkpointer.hpp"
#include "tools/mcp/mcp_tools.hpp"
#include "tools/registry.hpp"
#include "tools/script_sandbox.hpp"
#include "tools/script_specs.hpp"

namespace fs = std::filesystem;

namespace mibyan {


namespace {

// Host-side protections and the kernel sandbox decision; returns the error
// that stops start-up (`code_execution.sandbox: required` unmet) or "".
std::string isolate_scripts(const options& opts) {
  harden_host_process();
  seal_credentials();
  static std::once_flag hook_once;
  std::call_once(hook_once, [] { add_termination_hook(end_all_kernels_now); });
  // The sandbox probe runs bwrap (about 15 ms): at start-up only when
  // start-up depends on it; otherwise when the first kernel starts, which
  // also makes the host a subreaper for the unsandboxed fallback
  // (actors/kernel_registry.cpp).
  // Without bwrap on PATH the probe spawns nothing, so `auto` still warns
  // at start-up that scripts run unsandboxed.
  result<std::string> bwrap{std::string{}};
  metrics::note_sandbox(opts.code_execution.sandbox, "");
  auto setting = parse_sandbox_setting(opts.code_execution.sandbox);
  if ((setting == sandbox_setting::required
       || (setting == sandbox_setting::automatic
           && find_executable("bwrap").empty()))
      && (bwrap = script_sandbox_bwrap(opts)).ok() && bwrap->empty())
    become_subreaper(); // the fallback hunts orphaned daemons at teardown
  return bwrap.ok() ? std::string{} : bwrap.error;
}

} // namespace

void configure_actor_system(caf::actor_system_config& cfg,
                            const options* opts) {
  cfg.add_message_types<caf::id_block::mibyan>();
  cfg.add_error_category(
    caf::atom("mibyan"),
    [](uint8_t code, caf::atom_value, const caf::message& ctx) {
      auto text = "mibyan::" + to_string(static_cast<ec>(code));
      if (!ctx.empty())
        text += caf::deep_to_string(ctx);
      return text;
    });
  // A host's system (no options) keeps CAF's loop behaviour.
  load_middleman(cfg, opts != nullptr ? opts->runtime.io_spin_us : 0);
  if (opts == nullptr)
    return;
  auto threads = opts->runtime.scheduler_threads;
  if (threads <= 0)
    threads = std::max<int64_t>(2, std::thread::hardware_concurrency());
  cfg.set("scheduler.max-threads", static_cast<size_t>(threads));
  // A flooded actor must not monopolise one of only two workers.
  cfg.set("scheduler.max-throughput", size_t{300});
  // Request/response latency dominates an agent runtime; the sharing
  // scheduler halves it on small machines (docs/architecture.md, "Actor
  // system settings").
  cfg.set("scheduler.policy", caf::atom("sharing"));
  // The same work-sharing scheduler, with a clock whose timers cost the
  // caller no thread wake-up: a script's every tool call arms a deadline
  // and ends an actor (runtime/lean_clock.hpp).
  load_lean_scheduler(cfg);
  cfg.set("middleman.workers", size_t{1});
  // One read per readable event: the sockets carry small frames (cell
  // lines, RPC calls), and a second read only learns EAGAIN, a system call
  // on the path from a kernel's frame to its answer. A socket with more
  // data stays readable and is read again in the next loop turn
  // (docs/benchmarks-history.md, "Third round").
  cfg.set("middleman.max-consecutive-reads", size_t{1});
  cfg.set("middleman.app-identifiers",
          std::vector<std::string>{"mibyan-v1"});
}

result<options> options_from_config(const runtime_config& cfg) {
  auto home = cfg.home.empty() ? resolve_home() : cfg.home;
  std::error_code ec;
  home = fs::absolute(home, ec).lexically_normal().string();
  result<options> loaded;
  if (cfg.config_file.empty()) {
    loaded = load_options(home);
  } else {
    // The named file replaces config.yaml; secrets still come from the
    // home's .env (docs/embedding.md).
    std::ifstream in{cfg.config_file, std::ios::binary};
    if (!in)
      return status::failure(status_code::config_invalid,
                             "cannot read config file " + cfg.config_file);
    std::ostringstream text;
    text << in.rdbuf();
    loaded = parse_options(text.str(), cfg.config_file);
    if (loaded.ok()) {
      loaded->home = home;
      loaded->config_path = cfg.config_file;
      std::ifstream env{home + "/.env", std::ios::binary};
      if (env) {
        std::ostringstream env_text;
        env_text << env.rdbuf();
        std::vector<std::string> warnings;
        parse_env_file(env_text.str(), loaded->env_file, &warnings);
        for (auto& w : warnings)
          MIBYAN_LOG(warning, "config", home << "/.env: " << w);
      }
    }
  }
  if (!loaded.ok())
    return loaded;
  auto& o = *loaded;
  if (!cfg.provider.provider.empty())
    o.model.provider = cfg.provider.provider;
  if (!cfg.provider.model.empty())
    o.model.default_model = cfg.provider.model;
  if (!cfg.provider.base_url.empty())
    o.model.base_url = cfg.provider.base_url;
  if (cfg.scheduler_threads > 0)
    o.runtime.scheduler_threads = cfg.scheduler_threads;
  if (cfg.blocking_threads > 0)
    o.runtime.blocking_threads = cfg.blocking_threads;
  return loaded;
}

result<std::shared_ptr<runtime_services>>
make_services(options opts, std::vector<std::unique_ptr<tool>> extra_tools,
              std::vector<script_tool_spec> script_host_tools) {
  // Options built in code (or a host's overrides) get the loader's checks:
  // no code below clamps a value again (config/option_bounds.hpp).
  if (auto valid = validate_options(opts); !valid.ok())
    return valid;
  if (auto usable = check_state_dir(opts.home); !usable.ok())
    return usable;
  // Scripts must not reach the host's memory, credentials or signals
  // (docs/security.md).
  if (auto err = isolate_scripts(opts); !err.empty())
    return status::failure(status_code::unavailable, err);
  std::error_code ec;
  fs::create_directories(opts.home, ec);
  if (ec)
    return status::failure(errno_code(ec.value()),
                           "cannot create MIBYAN_HOME " + opts.home + ": "
                             + ec.message());
  fs::permissions(opts.home, fs::perms::owner_all, fs::perm_options::replace,
                  ec);
  // Kernel staging dirs left by hosts that died without cleaning up
  // (kill -9): a scan of $TMPDIR, quick (kernels/staging_dirs.hpp).
  sweep_stale_staging_dirs();
  auto svc = std::make_shared<runtime_services>();
  svc->default_cwd = fs::current_path(ec).string();
  svc->pool = std::make_unique<blocking_pool>(
    static_cast<size_t>(opts.runtime.blocking_threads));
  svc->cfg = std::move(opts);
  svc->approvals = std::make_unique<approval_service>(svc->cfg);
  if (!svc->http)
    svc->http = std::make_shared<http_client>();
  // config.yaml's secret values are redacted from the start
  // (config/secret_literals.hpp).
  svc->redact = std::make_shared<redactor_slot>(svc->cfg.env_file,
                                                svc->cfg.secret_literals);
  svc->processes = std::make_shared<process_registry>();
  register_core_tools(svc->tools);
  svc->tools.add(make_delegate_task_tool(svc->cfg));
  register_agent_tools(svc->tools);
  svc->agent_tools = std::make_shared<agent_tool_state>();
  svc->agent_tools->channels = svc->approvals->channels();
  svc->agent_tools->checkpoints
    = std::make_shared<file_checkpointer>(svc->cfg.home);
  svc->toolsets = std::make_shared<toolset_catalog>();
  // On for a single node only when asked; a cluster member turns "auto"
  // on (cluster/node.cpp).
  svc->checkpoints = std::make_shared<kernel_checkpoints>(
    checkpoints_wanted(svc->cfg.code_execution.checkpoint, false),
    svc->cfg.code_execution.checkpoint_max_mb * 1024 * 1024);
  for (auto& t : extra_tools)
    svc->tools.add(std::move(t));
  // The stubs scripts get: the built-in tools whose script() policy allows
  // them, generated from their schemas (tools/script_specs.hpp), then the
  // host's and the MCP servers' tools. A built-in name wins over a host
  // tool of the same name (generate_stub keeps the first).
  auto specs = builtin_script_specs(svc->tools);
  if (!specs)
    return status::failure(specs.code, "script stubs: " + specs.error);
  std::vector<script_tool_spec> script_tools = std::move(*specs);
  for (auto& h : script_host_tools)
    script_tools.push_back(std::move(h));
  auto without_mcp = script_tools; // what a tool list change keeps
  std::vector<script_tool_spec> mcp_specs;
  start_mcp(*svc, mcp_specs); // docs/mcp.md
  for (auto& h : mcp_specs)
    script_tools.push_back(std::move(h));
  svc->scripts = std::make_shared<script_catalog>(script_tools);
  {
    std::vector<std::string> in_scripts;
    for (auto& s : script_tools)
      in_scripts.push_back(s.name);
    std::sort(in_scripts.begin(), in_scripts.end());
    in_scripts.erase(std::unique(in_scripts.begin(), in_scripts.end()),
                     in_scripts.end());
    svc->tools.add(make_execute_code_tool(svc->cfg, std::move(in_scripts),
                                          script_tools, svc->scripts));
  }
  svc->script_tools = std::move(script_tools);
  if (svc->mcp && svc->cfg.code_execution.mcp_in_scripts) {
    // An MCP server's tool list changes reach the scripts: the catalog
    // is rebuilt from the registry (on the re-registering thread; the
    // registry is only read), and kernels take it before their next cell
    // (docs/mcp.md, "In scripts").
    std::weak_ptr<script_catalog> weak = svc->scripts;
    const tool_registry* reg = &svc->tools;
    svc->tools.subscribe([weak, reg, without_mcp] {
      auto catalog = weak.lock();
      if (!catalog)
        return;
      auto all = without_mcp;
      for (auto& s : mcp_script_specs(*reg))
        all.push_back(std::move(s));
      if (catalog->update(std::move(all)))
        MIBYAN_LOG(info, "mcp", "execute_code stubs follow the changed MCP "
                                "tools (generation "
                                  << catalog->current()->generation << ")");
    });
  }
  return svc;
}

} // namespace mibyan
