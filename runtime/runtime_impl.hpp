// File: runtime/runtime_impl.hpp
//
// The wiring inside a `runtime`, shared by the files of runtime/ that build
// the facade (runtime.cpp, agent.cpp) and the actor-level API
// (actor_api.cpp). Includes CAF: only .cpp files of runtime/, cluster/ and cli/,
// the benchmarks and the tests include it.
#pragma once

#include <atomic>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "caf/actor_system.hpp"
#include "caf/actor_system_config.hpp"

#include "base/metrics.hpp"
#include "actors/conversation.hpp"
#include "actors/kernel_registry.hpp"
#include "actors/provider.hpp"
#include "actors/guardian_call.hpp"
#include "actors/session_writer.hpp"
#include "actors/tool_dispatcher.hpp"
#include "runtime/pending_approvals.hpp"
#include "runtime/runtime.hpp"
#include "runtime/tool_call_facade.hpp"
#include "runtime/turn_events.hpp"

namespace mibyan {

struct cron_host;
class cron_service;
class lease_tokens;
class session_lease_store;
class session_lease_keeper;
class background_router;

struct runtime::impl {
  caf::actor_system_config cfg;
  std::shared_ptr<runtime_services> svc;
  /// The system this runtime created (null when it runs in a host's
  /// system, see mibyan/actors.hpp); destroyed before cfg.
  std::unique_ptr<caf::actor_system> own_sys;
  /// The system the actors live in: own_sys or the host's.
  caf::actor_system* sys = nullptr;
  tool_dispatcher_actor dispatcher;
  kernel_registry_actor kernels;
  // Sessions: the store (null when it could not be opened, with the reason
  // in store_error), its single writer, one conversation per session and
  // one provider connection per distinct endpoint, created on first use.
  std::shared_ptr<session_store> store;
  std::string store_error;
  /// The sessions' stored system prompts, on the store's environment
  /// (null without a store).
  std::shared_ptr<prompt_store> prompts;
  session_writer_actor writer;
  /// The store's leases (null when it has none) and the tokens this process
  /// holds, which the writer stamps into each write (storage/session_lease.hpp).
  std::shared_ptr<session_lease_store> leases;
  std::shared_ptr<lease_tokens> lease_tokens_held;
  /// Set by a cluster gateway among several (runtime/session_lease_keeper.hpp):
  /// every turn takes its session's lease first. Null otherwise.
  std::shared_ptr<session_lease_keeper> keeper;
  std::mutex mtx; // guards conversations, providers, closing
  std::map<std::string, conversation_actor> conversations;
  std::map<std::string, provider_actor> providers;
  /// Set by the destructor: no new conversation or provider is spawned
  /// (it would never get its exit message).
  bool closing = false;
  // Smart-mode approval reviews (docs/approvals.md): the provider of each
  // session's latest turn reviews that session's commands, else the
  // configured main model (`guardian`, spawned at start-up in smart mode).
  // Guarded by mtx. The relay makes the review calls from pool threads.
  std::map<std::string, provider_actor> session_providers;
  provider_actor guardian;
  std::unique_ptr<guardian_relay> relay;
  std::atomic<bool> stopping{false};
  /// The MCP upkeep actors and the sampling provider (runtime/mcp_wiring).
  std::vector<caf::actor> mcp_actors;
  /// Every turn of run_turn_async publishes here (runtime/turn_events.hpp);
  /// shared with the turns' drivers, which may outlive a host's runtime.
  std::shared_ptr<turn_event_hub> events = std::make_shared<turn_event_hub>();
  /// Approvals and questions waiting for an answer from a program
  /// (runtime/pending_approvals.hpp); shut down first by the destructor.
  std::shared_ptr<pending_approvals> pending
    = std::make_shared<pending_approvals>();
  /// The scheduled jobs' scheduler and verbs (runtime/cron_internal.hpp),
  /// made on first use under mtx; stopped first by the destructor.
  std::shared_ptr<cron_host> cron;
  /// Routes notify_on_complete process ends to conversations
  /// (runtime/background.hpp); detached first by the destructor.
  std::shared_ptr<background_router> background;

  ~impl();
  /// The actor behind call_tool_async (runtime/tool_call_facade.hpp); stopped
  /// before the dispatcher.
  std::unique_ptr<tool_call_facade> calls;
  /// runtime_config::provider.api_key: the key of turns that name none
  /// ("" = the provider's key variable). Set once at creation.
  std::string default_api_key;
  /// Scrape-time gauges of this runtime (store, MCP;
  /// runtime/metrics_hooks.cpp). Last member: detached first, before what
  /// they read goes away.
  std::vector<metrics::callback_family::handle> metric_hooks;
};

/// Attaches the runtime's scrape-time gauges (docs/metrics.md).
void attach_metrics(runtime_impl& p);

/// Kernel checkpoints (runtime/kernel_checkpoint_wiring.cpp): gives the
/// services' checkpoint hub its store (in `store`'s backend), its key and
/// the stored history it counts a restored checkpoint's age from.
void attach_checkpoint_store(runtime_services& svc,
                             const std::shared_ptr<session_store>& store);
/// Per-user state (runtime/user_state_wiring.cpp): with a store shared by
/// several gateways (not LMDB), the memory and skill tools, the prompt's
/// memory block and the approvals' allowlist use the store's
/// user_state_store; imports the home's memory and skills on the pool.
void attach_user_state(runtime_services& svc,
                       const std::shared_ptr<session_store>& store);
/// Before the kernels of `p` stop: their pending and final checkpoints are
/// stored (bounded; a no-op with checkpoints off). Blocks the caller.
void store_final_kernel_checkpoints(runtime_impl& p);

/// Stops the scheduler of `p` if it runs (runtime/cron_scheduler.cpp):
/// its runs are interrupted and stay "running" in the store.
void stop_cron(runtime_impl& p);
/// The verbs of `p`'s jobs (runtime/cron_service.cpp); never null.
std::shared_ptr<cron_service> cron_service_of(runtime_impl& p);


/// Reads the configuration `cfg` names (its file, home and overrides).
/// Fails with config_invalid on a missing or bad file.
result<options> options_from_config(const runtime_config& cfg);

/// The shared services of a runtime: core tools, `extra_tools`, the stubs
/// of the tools scripts may call (the built-in ones from their schemas, then
/// `script_host_tools`, already among `extra_tools`) and execute_code.
/// Fails when $MIBYAN_HOME may not hold state (check_state_dir's code) or
/// cannot be created (the error's code), or with unavailable when
/// `code_execution.sandbox: required` cannot be met.
result<std::shared_ptr<runtime_services>>
make_services(options opts, std::vector<std::unique_ptr<tool>> extra_tools,
              std::vector<script_tool_spec> script_host_tools);

/// Registers Mibyan's message types and error category on `cfg` and loads
/// the middleman (the kernel brokers need it). With `opts` (a system of
/// Mibyan's own) it also sizes and tunes the scheduler; a host's system
/// (null) keeps its own scheduler settings.
void configure_actor_system(caf::actor_system_config& cfg,
                            const options* opts);

/// Loads the middleman with Mibyan's event loop (runtime/io_loop.cpp): CAF's
/// epoll loop that keeps polling for `spin_us` microseconds after each
/// burst of work before it sleeps (0: never, as CAF's own).
void load_middleman(caf::actor_system_config& cfg, int64_t spin_us);

/// Spawns the long-lived actors of `p` into `*p.sys` (after the message
/// self-test) and opens the session store. Fails (internal) when the
/// self-test fails, and with config_invalid when the store's settings are
/// unusable.
status wire_runtime(runtime_impl& p);

/// Builds a runtime from `cfg` in `host` (null: its own system). Errors:
/// config_invalid (the configuration or a host tool), internal (start-up).
result<std::unique_ptr<runtime>> create_runtime(const runtime_config& cfg,
                                                caf::actor_system* host);

} // namespace mibyan
