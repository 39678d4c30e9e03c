// File: runtime/runtime_turns.cpp
//
// The turns of a runtime: validating a turn call and resolving its provider
// connection, the short-lived driver actor that creates the session (and
// stores a stateless request's history), sends the turn to the session's
// conversation and forwards its deltas and tool events, and the trajectory
// written after it. `run_turn` is `run_turn_async` plus a wait.
//
// Thread safety: run_turn_async may be called from any thread; callbacks
// run on runtime threads (docs/embedding.md).
#include "runtime/runtime.hpp"

#include <ctime>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "caf/all.hpp"

#include "actors/conversation.hpp"
#include "actors/outside_spawn.hpp"
#include "actors/provider.hpp"
#include "actors/session_writer.hpp"
#include "base/json.hpp"
#include "base/log.hpp"
#include "base/redact_slot.hpp"
#include "base/runtime_metrics.hpp"
#include "config/env_reload.hpp"
#include "agent/history_repair.hpp"
#include "agent/turn_result.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/session_lease_keeper.hpp"
#include "runtime/session_prompt.hpp"
#include "storage/prompt_store.hpp"
#include "runtime/turn_events.hpp"
#include "storage/session_lease.hpp"
#include "storage/session_store.hpp"
#include "storage/trajectory.hpp"
#include "tools/agent/agent_tool_state.hpp"
#include "tools/toolsets.hpp"

namespace mibyan {

namespace {

// A turn that passed validation, ready to be sent.
struct prepared_turn {
  /// The session row must be created first (with `meta`).
  bool create = false;
  session_meta meta;
  /// Messages stored after creating the session, before the turn
  /// (turn_call::history).
  std::vector<chat_message> seed;
  /// The request, without its sink.
  turn_request req;
  /// No conversation of the session ran yet: it starts with the system
  /// prompt resolved for `prompt_req` (runtime/session_prompt.hpp) on the
  /// blocking pool, into `prompt`.
  bool fresh = false;
  session_prompt_request prompt_req;
  std::shared_ptr<session_prompt> prompt;
};

// Validates `call` and resolves its provider connection (the synchronous,
// non-blocking part of a turn). Returns false with `out.error` set when
// the turn cannot start.
bool prepare_turn(runtime_impl& p, const turn_call& call, prepared_turn& t,
                  turn_result& out) {
  auto fail = [&](std::string msg, bool config) {
    out.error = std::move(msg);
    out.config_error = config;
    return false;
  };
  if (call.prompt.empty())
    return fail("the prompt is empty", true);
  if (!valid_turn_key(call.turn_key))
    return fail("the turn key must be 1 to 200 printable ASCII characters "
                "without spaces",
                true);
  // The provider connection: the configuration with the call's overrides.
  options opts = p.svc->cfg;
  // Keys added to .env since start-up count from this turn on.
  if (auto reloaded = reload_env_file(opts); !reloaded.ok())
    MIBYAN_LOG(warning, "config", reloaded.error);
  else if (p.svc->redact)
    p.svc->redact->update(opts.env_file); // ...and are redacted
  if (!call.provider.provider.empty())
    opts.model.provider = call.provider.provider;
  if (!call.provider.model.empty())
    opts.model.default_model = call.provider.model;
  if (!call.provider.base_url.empty())
    opts.model.base_url = call.provider.base_url;
  auto settings = make_provider_settings(
    opts, call.provider.api_key.empty() ? p.default_api_key
                                        : call.provider.api_key);
  settings.clock = p.svc->clock;
  if (!settings.main.ok())
    return fail(settings.main.error, true);
  // Toolsets (docs/tools.md, "Toolsets"): an unknown name fails the turn.
  if (auto offered = offered_tool_names(p.svc->toolsets.get(), p.svc->tools,
                                        p.svc->cfg, call.toolsets);
      !offered)
    return fail(offered.error, true);
  if (!p.store || !p.writer)
    return fail("the session store is unavailable: " + p.store_error, false);
  // The session row must exist before the conversation loads it.
  out.session_id = call.session_id;
  auto existing = call.session_id.empty()
                    ? store_result<session_info>::failure(
                      status_code::not_found, "new session")
                    : p.store->get_session(call.session_id);
  if (!existing) {
    t.create = true;
    t.meta.id = call.session_id;
    t.meta.source = call.source;
    t.meta.model = settings.main->model;
    t.meta.provider = settings.main->provider;
    t.meta.cwd = p.svc->default_cwd;
    if (!call.cwd.empty()) {
      std::error_code ec;
      if (!std::filesystem::is_directory(call.cwd, ec))
        return fail("the working directory '" + call.cwd
                      + "' does not exist or is not a directory",
                    true);
      t.meta.cwd = call.cwd;
    }
    t.meta.metadata_json = call.metadata;
    for (auto& m : call.history) {
      if (m.role == "system")
        return fail("bad history: a system message (the session has its "
                    "own system prompt)",
                    false);
      t.seed.push_back(m);
    }
  }
  auto& ep = *settings.main;
  auto key = ep.provider + "\n" + ep.base_url + "\n" + ep.model + "\n"
             + ep.api_key;
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    if (p.closing)
      return fail("the runtime is shutting down", false);
    auto& slot = p.providers[key];
    if (!slot)
      slot = spawn_provider(*p.sys, p.svc->http, settings);
    t.req.provider = caf::actor_cast<caf::actor>(slot);
    // Smart-mode reviews of this session's commands use its provider; a
    // session whose id is generated later is reviewed by the main model.
    if (!call.session_id.empty())
      p.session_providers[call.session_id] = slot;
  }
  t.req.text = call.prompt;
  t.req.max_iterations = call.max_iterations;
  t.req.toolsets = call.toolsets;
  t.req.turn_key = call.turn_key;
  // A conversation that starts now gets its frozen system prompt: the
  // session's stored one, else a new one with the context files and the
  // memory snapshot (docs/agent_loop.md). Resolved by the driver on the
  // blocking pool: it reads files and may write the store.
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    t.fresh = p.conversations.count(out.session_id) == 0;
  }
  if (t.fresh) {
    auto& pr = t.prompt_req;
    pr.exists = !t.create;
    if (existing) {
      pr.cwd = existing->cwd.empty() ? p.svc->default_cwd : existing->cwd;
      pr.message_count = existing->message_count;
    } else {
      pr.cwd = t.meta.cwd;
    }
    // A stateless serve request's session is deleted after its turn and
    // never resumed: its prompt is not worth a store write.
    pr.store = call.source != "api-stateless";
  }
  t.req.stream = call.stream;
  t.req.endpoint = {ep.provider, ep.model, ep.base_url, {}};
  return true;
}

// The conversation of `sid`, spawned on first use; invalid once the
// runtime is shutting down.
conversation_actor conversation_for(runtime_impl& p, const std::string& sid,
                                    session_prompt* prompt) {
  std::lock_guard<std::mutex> guard{p.mtx};
  if (p.closing)
    return {};
  auto& c = p.conversations[sid];
  if (!c) {
    conversation_deps deps;
    deps.svc = p.svc;
    deps.dispatcher = p.dispatcher;
    deps.writer = p.writer;
    deps.store = p.store;
    deps.store_error = p.store_error;
    deps.session_id = sid;
    deps.kernels = p.kernels;
    if (prompt != nullptr) {
      deps.frozen_prompt = std::move(prompt->text);
      deps.prompt_hash = prompt->hash;
      deps.prompt_notice = prompt->notice();
    }
    deps.prompts = p.prompts;
    c = spawn_conversation(*p.sys, std::move(deps));
  }
  return c;
}

// Appends the finished turn to its trajectory file when asked for. Blocks
// on file I/O: runs on the blocking pool.
void save_trajectory(const runtime_services& svc, const turn_call& call,
                     turn_result& out) {
  if (!out.started
      || !(call.save_trajectory || svc.cfg.agent.save_trajectories))
    return;
  std::vector<trajectory_tool> offered;
  if (auto names = offered_tool_names(svc.toolsets.get(), svc.tools, svc.cfg,
                                      call.toolsets))
    for (auto& n : *names)
      if (auto t = svc.tools.find(n))
        offered.push_back({t->name(), t->description(), t->schema()});
  out.trajectory_error = append_trajectory_line(
    svc.cfg.agent.trajectory_dir,
    out.completed ? trajectory_samples_file : failed_trajectories_file,
    trajectory_line(turn_result_json(out), offered, std::time(nullptr)))
      .error;
  if (!out.trajectory_error.empty())
    MIBYAN_LOG(warning, "runtime",
               "trajectory not saved: " << out.trajectory_error);
}

// Compression continues a conversation in a new session
// (docs/agent_loop.md, "Context compression"): the outcome names the new
// id, and the conversation answers to it too.
void follow_compression(runtime_impl& p, const conversation_actor& conv,
                        const std::string& asked, const turn_result& out) {
  const auto& sid = out.session_id;
  if (sid.empty() || sid == asked)
    return;
  std::lock_guard<std::mutex> guard{p.mtx};
  if (!p.closing)
    p.conversations[sid] = conv;
}

// One turn in flight: shared by its driver actor's handlers.
struct turn_job {
  runtime_impl* p;
  std::shared_ptr<runtime_services> svc;
  session_writer_actor writer;
  turn_call call;
  prepared_turn t;
  turn_result out;
  std::function<void(turn_result)> done;
  /// The runtime's turn-event hub; `event_token` is this turn's entry in
  /// its running table (0: not started), `event_sid` its session then.
  std::shared_ptr<turn_event_hub> events;
  uint64_t event_token = 0;
  std::string event_sid;
  /// The keeper that admitted this turn here (runtime/session_lease_keeper)
  /// and the session whose lease it holds; told once when the turn ends.
  /// Weak: the runtime owns the keeper, and a job may outlive it.
  std::weak_ptr<session_lease_keeper> keeper;
  std::string lease_sid;

  void end_lease() {
    if (auto k = keeper.lock())
      k->finished(lease_sid);
    keeper.reset();
  }

  // `done` runs exactly once: a job dropped unanswered (the runtime was
  // destroyed while the turn ran, and its driver went with the actor
  // system) answers with an error (docs/embedding.md, "Callbacks").
  ~turn_job() {
    end_lease();
    if (event_token != 0 && events)
      events->turn_ended(event_token, "error");
    if (!done)
      return;
    auto fn = std::move(done);
    done = nullptr;
    if (out.error.empty())
      out.error = "the runtime was shut down before the turn finished";
    try {
      fn(std::move(out));
    } catch (...) {
    }
  }
};

// How a turn ended, for the turn_end event: "error" (it could not run),
// "interrupted", "failed" or "completed".
std::string turn_outcome_name(const turn_result& out) {
  if (!out.started)
    return "error";
  if (out.interrupted)
    return "interrupted";
  if (out.failed)
    return "failed";
  return out.completed ? "completed" : "failed";
}

void finish_turn(caf::event_based_actor* self, std::shared_ptr<turn_job> job) {
  self->quit();
  job->end_lease();
  if (job->event_token != 0) {
    auto& hub = *job->events;
    hub.turn_ended(job->event_token,
                   hub.active() ? turn_outcome_name(job->out) : "");
    job->event_token = 0;
  }
  // A turn that produced a result was counted by its conversation.
  if (!job->out.started)
    metrics::count_turn_not_started();
  // The job may outlive the actor system on the pool: no handles in it.
  job->writer = nullptr;
  job->t.req = turn_request{};
  auto deliver = [job] {
    save_trajectory(*job->svc, job->call, job->out);
    auto done = std::move(job->done);
    job->done = nullptr;
    done(std::move(job->out));
  };
  if (job->out.started
      && (job->call.save_trajectory || job->svc->cfg.agent.save_trajectories)) {
    if (job->svc->pool && job->svc->pool->submit(deliver))
      return;
    job->out.trajectory_error = "the runtime is shutting down";
  }
  auto done = std::move(job->done);
  job->done = nullptr;
  done(std::move(job->out));
}

void send_turn(caf::event_based_actor* self, std::shared_ptr<turn_job> job) {
  auto conv = conversation_for(*job->p, job->out.session_id,
                               job->t.prompt.get());
  if (!conv) {
    job->out.error = "the runtime is shutting down";
    finish_turn(self, job);
    return;
  }
  auto req = job->t.req;
  // Always: the turn's events also go to the hub (runtime/turn_events.hpp),
  // whose watchers may subscribe while it runs.
  req.sink = caf::actor_cast<caf::actor>(self);
  job->event_sid = job->out.session_id;
  job->event_token = job->events->turn_started(
    running_turn{job->event_sid, 0, job->call.prompt, job->t.req.endpoint.model,
                 job->call.source});
  self->request(conv, caf::infinite, turn_atom_v, std::move(req))
    .then(
      [self, job, conv](turn_result& res) {
        // Compression continues in a new session: the result names it.
        auto asked = std::move(job->out.session_id);
        job->out = std::move(res);
        if (job->out.session_id.empty())
          job->out.session_id = asked;
        follow_compression(*job->p, conv, asked, job->out);
        finish_turn(self, job);
      },
      [self, job](caf::error& e) {
        job->out.error = "the turn failed: " + self->system().render(e);
        finish_turn(self, job);
      });
}

// Stores the seed messages of a new session (the writer applies them in
// arrival order), then sends the turn; a failed append fails the turn.
void seed_history(caf::event_based_actor* self,
                  std::shared_ptr<turn_job> job) {
  auto seed = std::move(job->t.seed);
  job->t.seed.clear();
  if (seed.empty()) {
    send_turn(self, job);
    return;
  }
  auto left = std::make_shared<size_t>(seed.size());
  auto errors = std::make_shared<std::string>();
  auto one_done = [self, job, left, errors] {
    if (--*left > 0)
      return;
    if (errors->empty()) {
      send_turn(self, job);
    } else {
      job->out.error = *errors;
      finish_turn(self, job);
    }
  };
  for (auto& m : seed)
    self->request(job->writer, caf::infinite, append_atom_v,
                  message_append{job->out.session_id, std::move(m), {}})
      .then([one_done](uint64_t) { one_done(); },
            [self, errors, one_done](caf::error& e) {
              if (errors->empty())
                *errors = "cannot store the history: "
                          + self->system().render(e);
              one_done();
            });
}

// Resolves the system prompt of a conversation that starts with this turn
// (runtime/session_prompt.hpp) on the blocking pool, once the session row
// exists, then seeds the history. The pool job owns `job->t.prompt` until
// its (done_atom) arrives; nothing else touches it meanwhile.
void resolve_prompt(caf::event_based_actor* self,
                    std::shared_ptr<turn_job> job) {
  auto* pool = job->svc->pool.get();
  if (!job->t.fresh || pool == nullptr) {
    seed_history(self, job);
    return;
  }
  auto slot = std::make_shared<session_prompt>();
  job->t.prompt = slot;
  auto req = job->t.prompt_req;
  req.session_id = job->out.session_id;
  // The services (held by the job) own the shared per-user state.
  if (job->svc->agent_tools)
    req.user_state = job->svc->agent_tools->user_state.get();
  // The store is held too: the prompt store lives on its environment.
  auto work = [slot, req, svc = job->svc, store = job->p->store,
               prompts = job->p->prompts,
               hdl = caf::actor_cast<caf::actor>(self)] {
    *slot = resolve_session_prompt(svc->cfg, store.get(), prompts.get(), req,
                                   &build_system_prompt);
    caf::anon_send(hdl, done_atom_v);
  };
  if (!pool->submit(std::move(work))) {
    // The runtime is shutting down: the conversation builds a plain one.
    job->t.prompt.reset();
    seed_history(self, job);
  }
}

// The driver of one turn: creates the session row if needed, sends the
// turn, forwards the conversation's deltas and tool events to the call's
// callbacks (they arrive before the answer: one sender, one mailbox) and
// answers `done`.
caf::behavior turn_driver(caf::event_based_actor* self,
                          std::shared_ptr<turn_job> job) {
  if (job->t.create) {
    self->request(job->writer, caf::infinite, create_atom_v, job->t.meta)
      .then(
        [self, job](std::string& id) {
          job->out.session_id = std::move(id);
          resolve_prompt(self, job);
        },
        [self, job](caf::error& e) {
          auto& sid = job->out.session_id;
          if (!sid.empty() && job->p->store->get_session(sid)) {
            resolve_prompt(self, job);
            return;
          }
          job->out.error = "cannot create session: "
                           + self->system().render(e);
          finish_turn(self, job);
        });
  } else {
    resolve_prompt(self, job);
  }
  return {
    [self, job](done_atom) { seed_history(self, job); },
    [job](delta_atom, const std::string&, const std::string& kind,
          const std::string& text) {
      // The prompt's notice is for the caller only, not the live view.
      if (job->events->active() && kind != "context")
        job->events->delta(job->event_sid, kind, text);
      if (job->call.on_delta)
        job->call.on_delta(kind, text);
    },
    [job](tool_event_atom, const std::string&, const tool_event& ev) {
      if (job->events->active())
        job->events->tool(job->event_sid, ev);
      if (job->call.on_tool)
        job->call.on_tool(ev);
    },
  };
}

// Forgets the cached conversation of `sid` (and the other ids it answers
// to): the session was written under another lease token since it loaded
// its history, so the next turn spawns one that loads it again.
void drop_conversation(runtime_impl& p, const std::string& sid) {
  std::lock_guard<std::mutex> guard{p.mtx};
  auto it = p.conversations.find(sid);
  if (it == p.conversations.end())
    return;
  auto conv = it->second;
  for (auto i = p.conversations.begin(); i != p.conversations.end();)
    i = i->second == conv ? p.conversations.erase(i) : std::next(i);
  caf::anon_send_exit(conv, caf::exit_reason::user_shutdown);
}

// A session taken over from a lost gateway: every tool call that gateway
// persisted without a result gets one saying so (docs/cluster.md,
// "Failover"), written under the new token before the turn runs, so the
// model sees what happened and nothing is re-run silently. Blocking store
// work: runs on the keeper's thread.
status report_interrupted_calls(runtime_impl& p, const std::string& sid,
                                uint64_t token, const std::string& lost) {
  auto loaded = p.store->load_messages(sid);
  if (!loaded)
    return loaded.code == status_code::not_found ? status{}
                                                 : loaded.get_status();
  std::vector<chat_message> history;
  history.reserve(loaded->size());
  for (auto& m : *loaded)
    history.push_back(std::move(m.message));
  auto results = unanswered_call_results(history,
                                         gateway_loss_result_text(lost));
  if (results.empty())
    return {};
  std::vector<store_write> writes;
  for (auto& r : results) {
    store_write w;
    w.what = store_write::kind::append;
    w.append.session_id = sid;
    w.append.message = std::move(r);
    w.fence = token;
    writes.push_back(std::move(w));
  }
  if (auto st = p.store->commit_group(writes); !st)
    return st;
  for (auto& w : writes)
    if (!w.status.ok())
      return w.status;
  MIBYAN_LOG(warning, "cluster", "session " << sid << " taken over from lost "
                                 "gateway " << lost << ": " << writes.size()
                                 << " interrupted tool call(s) reported");
  return {};
}

void start_driver(runtime_impl& p, std::shared_ptr<turn_job> job) {
  outside_spawn_guard guard;
  p.sys->spawn(turn_driver, job);
}

void fail_job(std::shared_ptr<turn_job> job, std::string error) {
  metrics::count_turn_not_started();
  auto done = std::move(job->done);
  job->done = nullptr;
  job->out.error = std::move(error);
  done(std::move(job->out));
}

// Takes the session's lease before the turn runs (several gateways over one
// store): runs it here, forwards it to the live holder, or fails it.
void admit_turn(runtime_impl& p, std::shared_ptr<turn_job> job,
                bool may_forward) {
  auto owned = p.keeper;
  if (!owned) {
    fail_job(job, "the runtime is shutting down");
    return;
  }
  // The decision runs on the keeper's own thread while it lives: a raw
  // pointer, so no callback of its own ever holds it alive.
  auto* keeper = owned.get();
  std::weak_ptr<session_lease_keeper> weak = owned;
  auto sid = job->out.session_id;
  keeper->admit(sid, may_forward, [&p, job, keeper, weak,
                                   sid](lease_admission a) mutable {
    switch (a.what) {
      case lease_admission::kind::fail:
        fail_job(job, a.error.error);
        return;
      case lease_admission::kind::forward: {
        auto& fwd = keeper->settings().forward;
        fwd(a.node, job->call,
            [&p, job](bool delivered, turn_result out) {
              if (!delivered) {
                // The holder is gone or unreachable: wait for its lease.
                admit_turn(p, job, false);
                return;
              }
              auto done = std::move(job->done);
              job->done = nullptr;
              done(std::move(out));
            });
        return;
      }
      case lease_admission::kind::run_here:
        break;
    }
    job->keeper = weak;
    job->lease_sid = sid;
    if (a.took_over) {
      if (auto st = report_interrupted_calls(p, sid, a.token,
                                             a.previous_holder);
          !st) {
        fail_job(job, "store_unavailable: cannot take session '" + sid
                        + "' over: " + st.error);
        return;
      }
    }
    // Another gateway may have created the session meanwhile.
    auto existing = p.store->get_session(sid);
    if (job->t.create && existing)
      job->t.create = false;
    if (a.new_token) {
      // A conversation starts here again: it loads the history and
      // resolves its system prompt as a fresh one does (prepare_turn).
      drop_conversation(p, sid);
      if (!job->t.fresh) {
        job->t.fresh = true;
        auto& pr = job->t.prompt_req;
        pr.exists = !job->t.create;
        if (existing) {
          pr.cwd = existing->cwd.empty() ? p.svc->default_cwd
                                         : existing->cwd;
          pr.message_count = existing->message_count;
        } else {
          pr.cwd = job->t.meta.cwd;
        }
        pr.store = job->call.source != "api-stateless";
      }
    }
    start_driver(p, job);
  });
}

void run_turn_impl(runtime_impl& p, const turn_call& call,
                   std::function<void(turn_result)> done, bool may_forward) {
  // Spawns (the conversation, its provider, the turn's driver) from the
  // caller's thread: an application's or a pool thread
  // (actors/outside_spawn.hpp).
  outside_spawn_guard guard;
  auto job = std::make_shared<turn_job>();
  job->p = &p;
  job->svc = p.svc;
  job->events = p.events;
  if (!prepare_turn(p, call, job->t, job->out)) {
    metrics::count_turn_not_started();
    done(std::move(job->out));
    return;
  }
  job->writer = p.writer;
  job->call = call;
  job->done = std::move(done);
  // A new session with a generated id is nobody else's yet: its first
  // turn runs here; later turns name it and take its lease.
  if (p.keeper && !call.session_id.empty()) {
    admit_turn(p, job, may_forward);
    return;
  }
  p.sys->spawn(turn_driver, job);
}

} // namespace

void runtime::run_turn_async(const turn_call& call,
                             std::function<void(turn_result)> done) {
  run_turn_impl(*impl_, call, std::move(done), true);
}

turn_result runtime::run_turn(const turn_call& call) {
  auto result = std::make_shared<std::promise<turn_result>>();
  auto future = result->get_future();
  run_turn_async(call, [result](turn_result out) {
    result->set_value(std::move(out));
  });
  return future.get();
}

status enable_session_leases(runtime& rt, lease_keeper_settings s) {
  auto& p = runtime_access::of(rt);
  if (!p.store)
    return status::failure(status_code::unavailable,
                           "the session store is unavailable: "
                             + p.store_error);
  if (!p.leases)
    return status::failure(status_code::unavailable,
                           "the session store has no leases");
  p.keeper = std::make_shared<session_lease_keeper>(
    p.leases, p.lease_tokens_held, std::move(s));
  return {};
}

void run_forwarded_turn(runtime& rt, const turn_call& call,
                        std::function<void(turn_result)> done) {
  run_turn_impl(runtime_access::of(rt), call, std::move(done), false);
}

void session_holder_lost(runtime& rt, const std::string& node) {
  if (auto k = runtime_access::of(rt).keeper)
    k->holder_lost(node);
}

} // namespace mibyan
