// The runtime (runtime/runtime.hpp): its start - the services wired to
// the store, approvals, actors and cron (wire_runtime, create) - its
// teardown order (~impl), and the public calls on a running runtime (tool
// calls, interrupts, session close, callbacks). What it is built from is
// in runtime/runtime_setup.cpp; turns are in runtime/runtime_turns.cpp.
#include "runtime/runtime.hpp"

#include <ctime>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <unistd.h>
#include <thread>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "actors/conversation.hpp"
#include "actors/guardian_call.hpp"
#include "actors/kernel_registry.hpp"
#include "actors/outside_spawn.hpp"
#include "actors/provider.hpp"
#include "actors/session_writer.hpp"
#include "actors/tool_dispatcher.hpp"
#include "kernels/kernel_process.hpp"
#include "base/env_filter.hpp"
#include "base/http_client.hpp"
#include "base/log.hpp"
#include "base/runtime_metrics.hpp"
#include "base/subprocess.hpp"
#include "base/process_registry.hpp"
#include "kernels/stub_generator.hpp"
#include "runtime/session_lease_keeper.hpp"
#include "storage/prompt_store.hpp"
#include "storage/session_lease.hpp"
#include "storage/session_store.hpp"
#include "storage/checkpoint_store.hpp"
#include "actors/kernel_checkpoints.hpp"
#include "tools/agent/agent_tools.hpp"
#include "tools/file_checkpointer.hpp"
#include "tools/read_tracker.hpp"
#include "tools/registry.hpp"
#include "mibyan/actors.hpp"
#include "runtime/host_tool_adapter.hpp"
#include "runtime/mcp_wiring.hpp"
#include "tools/mcp/mcp_tools.hpp"
#include "runtime/pending_json.hpp"
#include "runtime/background.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/store_config.hpp"

namespace fs = std::filesystem;

namespace mibyan {

runtime_impl::~impl() {
  // No process end reaches a conversation any more.
  if (background)
    background->detach();
  // The scheduler first: it starts turns and reads the store.
  if (cron)
    stop_cron(*this);
  // Then the lease keeper: turns waiting for a lease fail, held leases are
  // released (runtime/session_lease_keeper.hpp).
  keeper.reset();
  stopping = true;
  // Tool calls waiting for an answer go on with a deny at once.
  if (pending)
    pending->shutdown();
  // Pending call_tool_async callbacks are answered here, not under mtx
  // (a callback may call back into the runtime).
  if (calls)
    calls->stop();
  metric_hooks.clear(); // a scrape no longer reads this runtime
  store_final_kernel_checkpoints(*this);
  if (sys) {
    {
      std::lock_guard<std::mutex> guard{mtx};
      closing = true;
      session_providers.clear();
      if (guardian)
        caf::anon_send_exit(guardian, caf::exit_reason::user_shutdown);
      guardian = nullptr;
      if (relay)
        relay->stop();
      for (auto& [id, c] : conversations)
        caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
      for (auto& [key, p] : providers)
        caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
      conversations.clear();
      providers.clear();
    }
    // Handles go before the system: an actor must not outlive it through
    // a handle. Under the lock, as close_session and interrupt read them
    // from runtime threads (a turn's completion may call them now).
    std::lock_guard<std::mutex> guard{mtx};
    if (writer)
      caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
    if (dispatcher)
      caf::anon_send_exit(dispatcher, caf::exit_reason::user_shutdown);
    if (kernels)
      caf::anon_send_exit(kernels, caf::exit_reason::user_shutdown);
    for (auto& a : mcp_actors)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    mcp_actors.clear();
    writer = nullptr;
    dispatcher = nullptr;
    kernels = nullptr;
  }
  // Background processes die with the runtime; this also ends process
  // waits still running on the blocking pool.
  if (svc && svc->processes)
    svc->processes->shutdown();
  // MCP servers too: sessions closed, stdio process groups killed.
  if (svc && svc->mcp)
    svc->mcp->shutdown();
  // Checkpoint store jobs message the cluster member: done before the
  // system goes.
  if (svc && svc->checkpoints)
    svc->checkpoints->stop_store_jobs();
  // Our own system ends here, with every actor of ours (in a host's
  // system, which outlives this runtime, our actors only exit).
  own_sys.reset();
  sys = nullptr;
  // Wait here for tool jobs still running (a cancelled call may take a
  // moment to stop): a job holds a reference to the services, and the
  // pool must not be destroyed by one of its own threads. Stopped, not
  // destroyed: in a host's system our actors may still be exiting and
  // submit to it (refused now); it goes with the services.
  if (svc && svc->pool)
    svc->pool->shutdown();
}

namespace {

// Connects the approval service to the session store (session grants) and
// to provider connections (smart-mode reviews); docs/approvals.md.
void install_approval_hooks(runtime_impl& p) {
  approval_service::hooks h;
  std::weak_ptr<session_store> store = p.store;
  h.load_session = [store](const std::string& sid) {
    std::vector<std::string> out;
    if (auto s = store.lock()) {
      auto r = s->get_approvals(sid);
      if (r)
        out = std::move(*r);
      else
        MIBYAN_LOG(warning, "approvals", r.error);
    }
    return out;
  };
  h.save_session = [store](const std::string& sid,
                           const std::vector<std::string>& keys) {
    if (auto s = store.lock())
      if (auto st = s->set_approvals(sid, keys); !st)
        MIBYAN_LOG(warning, "approvals", st.error);
  };
  auto* pp = &p;
  h.guardian = [pp](const std::string& sid, const std::string& system,
                    const std::string& user, std::chrono::milliseconds timeout,
                    const std::atomic<bool>* cancelled) -> guardian_reply {
    if (pp->stopping)
      return guardian_reply::failure(status_code::unavailable,
                                     "the runtime is shutting down");
    provider_actor prov;
    {
      std::lock_guard<std::mutex> guard{pp->mtx};
      if (auto i = pp->session_providers.find(sid);
          i != pp->session_providers.end())
        prov = i->second;
      else
        prov = pp->guardian;
    }
    return pp->relay->ask(prov, system, user, timeout, cancelled);
  };
  p.svc->approvals->set_hooks(std::move(h));
}

} // namespace

status wire_runtime(runtime_impl& p) {
  auto& svc = p.svc;
  if (auto failures = message_self_test(*p.sys); !failures.empty()) {
    std::string text = "message type self-test failed:";
    for (auto& f : failures)
      text += "\n  " + f;
    return status::failure(status_code::internal, text);
  }
  // Pending approvals and questions appear on the live stream. The watch
  // lives as long as the registry; the hub is held weakly.
  p.pending->watch([hub = std::weak_ptr<turn_event_hub>(p.events)](
                     const pending_event& e) {
    if (auto h = hub.lock(); h && h->active())
      h->other(e.request.kind == pending_kind::approval ? "approval"
                                                        : "clarify",
               pending_event_json(e).dump());
  });
  // Interpreters are resolved when a kernel starts, not here
  // (kernels/interpreter_cache.hpp): "" = project mode's venv/conda lookup.
  auto& ce = svc->cfg.code_execution;
  std::shared_ptr<warm_kernel_index> warm;
  p.kernels = spawn_kernel_registry(*p.sys, svc, std::string{},
                                    ce.python.empty() ? std::string{"python3"}
                                                      : ce.python,
                                    &warm);
  p.dispatcher = spawn_tool_dispatcher(*p.sys, svc, p.kernels);
  p.calls = std::make_unique<tool_call_facade>(*p.sys, p.dispatcher,
                                               p.kernels, std::move(warm));
  {
    // Without a store the runtime still runs tools; turns fail clearly.
    // A configuration the store cannot be opened with at all (section
    // `storage`) stops the start instead.
    auto so = store_options_from(svc->cfg);
    if (!so)
      return so.get_status();
    auto opened = open_session_store(*so);
    if (!opened && opened.code == status_code::config_invalid)
      return opened.get_status();
    if (opened) {
      p.store = std::shared_ptr<session_store>(std::move(*opened));
      // Leases share the store's environment; opened here, during set-up.
      if (auto leases = open_session_leases(*p.store))
        p.leases = std::move(*leases);
      else
        MIBYAN_LOG(warning, "runtime", "session leases unavailable: "
                                         << leases.error);
      p.lease_tokens_held = std::make_shared<lease_tokens>();
      // Opens its named database: before the store is shared.
      attach_checkpoint_store(*svc, p.store);
      attach_user_state(*svc, p.store);
      if (auto prompts = open_prompt_store(*p.store)) {
        p.prompts = std::shared_ptr<prompt_store>(std::move(*prompts));
        // Leftovers of a crash (docs/storage.md, "Stored system
        // prompts"), off the caller's thread.
        if (svc->pool)
          // The store is held too: the prompt store lives on its
          // environment.
          svc->pool->submit([prompts = p.prompts, store = p.store] {
            auto n = prompts->collect();
            if (!n)
              MIBYAN_LOG(warning, "runtime",
                         "collecting unreferenced prompts: " << n.error);
            else if (*n > 0)
              MIBYAN_LOG(info, "runtime",
                         "removed " << *n << " unreferenced system prompts");
          });
      } else {
        MIBYAN_LOG(warning, "runtime",
                   "system prompts will not be stored: " << prompts.error);
      }
      p.writer = spawn_session_writer(*p.sys, p.store, p.lease_tokens_held);
      svc->agent_tools->store = p.store;
    } else {
      p.store_error = opened.error;
      MIBYAN_LOG(warning, "runtime",
                 "session store unavailable: " << opened.error);
    }
  }
  if (svc->cfg.approvals.mode == "smart") {
    auto settings = make_provider_settings(svc->cfg);
    settings.clock = svc->clock;
    if (settings.main.ok())
      p.guardian = spawn_provider(*p.sys, svc->http, std::move(settings));
  }
  p.relay = std::make_unique<guardian_relay>(*p.sys);
  install_approval_hooks(p);
  // The cronjob tool's verbs (cron/cron_service.hpp).
  svc->agent_tools->cron = cron_service_of(p);
  // Background deliveries (runtime/background.hpp).
  p.background = wire_background(p);
  wire_mcp(p);
  attach_metrics(p);
  return {};
}

namespace {

result<std::unique_ptr<runtime>>
start(result<std::shared_ptr<runtime_services>> made,
      caf::actor_system* host) {
  if (!made)
    return made.get_status();
  auto svc = std::move(*made);
  // The system's constructor and the wiring spawn on this thread, which
  // need not be the one that destroys the runtime (actors/outside_spawn.hpp).
  outside_spawn_guard guard;
  auto p = std::make_unique<runtime_impl>();
  p->svc = svc;
  if (host != nullptr) {
    p->sys = host;
  } else {
    configure_actor_system(p->cfg, &svc->cfg);
    p->own_sys = std::make_unique<caf::actor_system>(p->cfg);
    p->sys = p->own_sys.get();
  }
  if (auto wired = wire_runtime(*p); !wired.ok())
    return wired;
  return runtime_access::make(std::move(p));
}

} // namespace

result<std::unique_ptr<runtime>> create_runtime(const runtime_config& cfg,
                                                caf::actor_system* host) {
  auto opts = options_from_config(cfg);
  if (!opts)
    return opts.get_status();
  std::vector<std::unique_ptr<tool>> tools;
  std::vector<script_tool_spec> scripts;
  if (auto made = make_host_tools(cfg.tools, &tools, &scripts); !made)
    return made;
  auto rt = start(make_services(std::move(*opts), std::move(tools),
                                std::move(scripts)),
                  host);
  if (!rt)
    return rt;
  runtime_access::of(**rt).default_api_key = cfg.provider.api_key;
  return rt;
}

result<std::unique_ptr<runtime>> runtime::create(const runtime_config& cfg) {
  return create_runtime(cfg, nullptr);
}

result<std::unique_ptr<runtime>>
create_runtime(options opts, std::vector<std::unique_ptr<tool>> extra_tools) {
  return start(make_services(std::move(opts), std::move(extra_tools), {}),
               nullptr);
}

std::unique_ptr<runtime> runtime_access::make(std::unique_ptr<impl> p) {
  return std::unique_ptr<runtime>(new runtime(std::move(p)));
}

runtime::runtime(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

runtime::~runtime() = default;

tool_outcome runtime::call_tool(const tool_call_request& call) {
  // A thin wrapper over the callback path: a blocking scoped_actor request
  // costs about 0.1 ms more per call (docs/benchmarks-history.md, bridge section).
  std::promise<tool_outcome> result;
  auto answer = result.get_future();
  call_tool_async(call, [&result](tool_outcome out) {
    result.set_value(std::move(out));
  });
  return answer.get();
}

void runtime::call_tool_async(const tool_call_request& call,
                              std::function<void(tool_outcome)> done) {
  // One long-lived actor sends the call and runs `done`
  // (runtime/tool_call_facade.hpp).
  impl_->calls->call(tool_request{call.session_id, call.call_id, call.tool,
                                  call.args_json, call.cwd, false},
                     std::move(done));
}


std::shared_ptr<session_store> session_store_of(runtime& rt) {
  return runtime_access::of(rt).store;
}

std::shared_ptr<file_checkpointer> checkpointer_of(runtime& rt) {
  return runtime_access::of(rt).svc->agent_tools->checkpoints;
}

std::shared_ptr<kernel_checkpoints> kernel_checkpoints_of(runtime& rt) {
  return runtime_access::of(rt).svc->checkpoints;
}

toolset_catalog& toolsets_of(runtime& rt) {
  return *runtime_access::of(rt).svc->toolsets;
}

void runtime::interrupt(const std::string& session_id,
                        const std::string& reason) {
  {
    // The conversation first: it must know of the interrupt before its
    // tools answer with "cancelled".
    std::lock_guard<std::mutex> guard{impl_->mtx};
    auto i = impl_->conversations.find(session_id);
    if (i != impl_->conversations.end())
      caf::anon_send(i->second, interrupt_atom_v, reason);
    if (impl_->dispatcher)
      caf::anon_send(impl_->dispatcher, interrupt_atom_v,
                     interrupt_request{session_id, reason, {}});
  }
  // A call waiting for an approval or an answer stops waiting now.
  impl_->pending->cancel_session(session_id);
}

void runtime::cancel_call(const std::string& session_id,
                          const std::string& call_id,
                          const std::string& reason) {
  if (call_id.empty())
    return; // an empty id would mean the whole session
  std::lock_guard<std::mutex> guard{impl_->mtx};
  if (impl_->dispatcher)
    caf::anon_send(impl_->dispatcher, interrupt_atom_v,
                   interrupt_request{session_id, reason, call_id});
}

void runtime::close_session(const std::string& session_id) {
  // The session and the other ids of its conversation: compression
  // continues a conversation in a new session, and its tools keep running
  // under the first id (docs/agent_loop.md, "Context compression").
  std::vector<std::string> ids{session_id};
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    auto i = impl_->conversations.find(session_id);
    if (i != impl_->conversations.end()) {
      auto conv = i->second;
      caf::anon_send_exit(conv, caf::exit_reason::user_shutdown);
      for (auto j = impl_->conversations.begin();
           j != impl_->conversations.end();) {
        if (j->second != conv) {
          ++j;
          continue;
        }
        if (j->first != session_id)
          ids.push_back(j->first);
        j = impl_->conversations.erase(j);
      }
    }
    for (auto& id : ids) {
      if (impl_->kernels)
        caf::anon_send(impl_->kernels, dispose_atom_v, id);
      impl_->session_providers.erase(id);
    }
  }
  for (auto& id : ids) {
    impl_->pending->cancel_session(id);
    impl_->svc->approvals->forget_session(id);
    impl_->svc->agent_tools->forget_session(id);
    if (impl_->svc->agent_tools->checkpoints)
      impl_->svc->agent_tools->checkpoints->forget(id);
    if (impl_->svc->processes)
      impl_->svc->processes->close_session(id);
    forget_session_reads(id);
  }
}

void runtime::set_approval_callback(approval_callback cb) {
  impl_->svc->approvals->set_callback(std::move(cb));
}

void runtime::set_clarify_callback(clarify_callback cb) {
  impl_->svc->agent_tools->set_clarify(std::move(cb));
}

void runtime::set_approval_context(approval_context c) {
  impl_->svc->approvals->set_context(c);
}

void runtime::set_session_channels(const std::string& session_id,
                                   session_channels ch) {
  impl_->svc->approvals->channels()->set(
    session_id, session_channel{std::move(ch.approval), ch.context,
                                std::move(ch.clarify), ch.approve_scripts});
}

void runtime::clear_session_channels(const std::string& session_id) {
  impl_->svc->approvals->channels()->clear(session_id);
}

void runtime::set_session_yolo(const std::string& session_id, bool on) {
  impl_->svc->approvals->set_session_yolo(session_id, on);
}

std::string runtime::kernel_stats() {
  caf::scoped_actor self{*impl_->sys};
  std::string out;
  self->request(impl_->kernels, std::chrono::seconds(5), stats_atom_v)
    .receive([&](std::string& s) { out = std::move(s); },
             [&](caf::error&) { out = "{}"; });
  return out;
}

const tool_registry& tools_of(const runtime& rt) {
  return runtime_access::of(const_cast<runtime&>(rt)).svc->tools;
}

const options& config_of(const runtime& rt) {
  return runtime_access::of(const_cast<runtime&>(rt)).svc->cfg;
}

} // namespace mibyan
