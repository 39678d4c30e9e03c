#include "node/runtime.hpp"

#include <ctime>
#include <optional>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <unistd.h>
#include <thread>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "actors/conversation.hpp"
#include "actors/kernel_registry.hpp"
#include "actors/provider.hpp"
#include "actors/session_writer.hpp"
#include "actors/tool_dispatcher.hpp"
#include "kernels/kernel_process.hpp"
#include "base/http_client.hpp"
#include "base/log.hpp"
#include "kernels/stub_generator.hpp"
#include "tools/execute_code.hpp"
#include "storage/session_store.hpp"
#include "storage/trajectory.hpp"
#include "tools/registry.hpp"
#include "node/openai_chat.hpp"

namespace fs = std::filesystem;

namespace mibyan {

namespace {

caf::actor_system_config& configure(caf::actor_system_config& cfg,
                                    const options& opts) {
  cfg.add_message_types<caf::id_block::mibyan>();
  cfg.add_error_category(
    caf::atom("mibyan"),
    [](uint8_t code, caf::atom_value, const caf::message& ctx) {
      auto text = "mibyan::" + to_string(static_cast<ec>(code));
      if (!ctx.empty())
        text += caf::deep_to_string(ctx);
      return text;
    });
  auto threads = opts.runtime.scheduler_threads;
  if (threads <= 0)
    threads = std::max<int64_t>(2, std::thread::hardware_concurrency());
  cfg.set("scheduler.max-threads", static_cast<size_t>(threads));
  // A flooded actor must not monopolise one of only two workers.
  cfg.set("scheduler.max-throughput", size_t{300});
  // Request/response latency dominates an agent runtime; the sharing
  // scheduler halves it on small machines (caf-0.17.md, section 3.1).
  cfg.set("scheduler.policy", caf::atom("sharing"));
  cfg.set("middleman.workers", size_t{1});
  cfg.set("middleman.app-identifiers",
          std::vector<std::string>{"mibyan-v1"});
  cfg.load<caf::io::middleman>();
  return cfg;
}

// Returns the interpreter for project mode: the active virtualenv's or conda
// env's python when it runs and is >= 3.8, else `fallback`.
std::string project_python(const std::string& fallback) {
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    const char* dir = std::getenv(var);
    if (dir == nullptr || *dir == '\0')
      continue;
    for (const char* name : {"/bin/python3", "/bin/python"}) {
      auto candidate = std::string{dir} + name;
      if (::access(candidate.c_str(), X_OK) == 0 && probe_python(candidate))
        return candidate;
    }
    MIBYAN_LOG(warning, "kernel", var << "=" << dir << " has no usable "
               "Python >= 3.8; execute_code uses " << fallback);
  }
  return fallback;
}

} // namespace

struct runtime::impl {
  caf::actor_system_config cfg;
  std::shared_ptr<runtime_services> svc;
  std::unique_ptr<caf::actor_system> sys; // destroyed before cfg
  tool_dispatcher_actor dispatcher;
  kernel_registry_actor kernels;
  // Sessions: the store (null when it could not be opened, with the reason
  // in store_error), its single writer, one conversation per session and
  // one provider connection per distinct endpoint, created on first use.
  std::shared_ptr<session_store> store;
  std::string store_error;
  session_writer_actor writer;
  std::mutex mtx; // guards conversations and providers
  std::map<std::string, conversation_actor> conversations;
  std::map<std::string, provider_actor> providers;

  ~impl() {
    if (sys) {
      {
        std::lock_guard<std::mutex> guard{mtx};
        for (auto& [id, c] : conversations)
          caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
        for (auto& [key, p] : providers)
          caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
        conversations.clear();
        providers.clear();
      }
      if (writer)
        caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
      writer = nullptr;
      caf::anon_send_exit(dispatcher, caf::exit_reason::user_shutdown);
      caf::anon_send_exit(kernels, caf::exit_reason::user_shutdown);
      dispatcher = nullptr;
      kernels = nullptr;
    }
    // Stop blocking work first so no job outlives the system.
    sys.reset();
    // Wait here for tool jobs still running (a cancelled call may take a
    // moment to stop): a job holds a reference to the services, and the
    // pool must not be destroyed by one of its own threads.
    if (svc)
      svc->pool.reset();
  }
};

std::unique_ptr<runtime>
runtime::create(options opts, std::string* error,
                std::vector<std::unique_ptr<tool>> extra_tools) {
  auto p = std::make_unique<impl>();
  std::error_code ec;
  fs::create_directories(opts.home, ec);
  if (ec) {
    if (error)
      *error = "cannot create MIBYAN_HOME " + opts.home + ": " + ec.message();
    return nullptr;
  }
  fs::permissions(opts.home, fs::perms::owner_all, fs::perm_options::replace,
                  ec);
  auto svc = std::make_shared<runtime_services>();
  svc->default_cwd = fs::current_path(ec).string();
  svc->pool = std::make_unique<blocking_pool>(
    static_cast<size_t>(std::max<int64_t>(1, opts.runtime.blocking_threads)));
  svc->cfg = std::move(opts);
  if (!svc->http)
    svc->http = std::make_shared<http_client>();
  register_core_tools(svc->tools);
  for (auto& t : extra_tools)
    svc->tools.add(std::move(t));
  {
    std::vector<std::string> enabled;
    for (auto t : svc->tools.all())
      enabled.push_back(t->name());
    svc->tools.add(make_execute_code_tool(svc->cfg,
                                          effective_script_tools(enabled)));
  }
  p->svc = svc;
  configure(p->cfg, svc->cfg);
  p->sys = std::make_unique<caf::actor_system>(p->cfg);
  if (auto failures = message_self_test(*p->sys); !failures.empty()) {
    std::string text = "message type self-test failed:";
    for (auto& f : failures)
      text += "\n  " + f;
    if (error)
      *error = text;
    return nullptr;
  }
  auto& ce = svc->cfg.code_execution;
  auto default_python = resolve_interpreter(ce.python.empty()
                                              ? std::string{"python3"}
                                              : ce.python);
  p->kernels = spawn_kernel_registry(*p->sys, svc,
                                     project_python(default_python),
                                     default_python);
  p->dispatcher = spawn_tool_dispatcher(*p->sys, svc, p->kernels);
  {
    // Without a store the runtime still runs tools; turns fail clearly.
    session_store_options so;
    so.dir = session_store::default_dir(svc->cfg.home);
    auto opened = session_store::open(std::move(so));
    if (opened) {
      p->store = std::shared_ptr<session_store>(std::move(*opened));
      p->writer = spawn_session_writer(*p->sys, p->store);
    } else {
      p->store_error = opened.error;
      MIBYAN_LOG(warning, "runtime",
                 "session store unavailable: " << opened.error);
    }
  }
  return std::unique_ptr<runtime>(new runtime(std::move(p)));
}

runtime::runtime(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

runtime::~runtime() = default;

tool_outcome runtime::call_tool(const tool_call_request& call) {
  caf::scoped_actor self{*impl_->sys};
  tool_request req{call.session_id, call.call_id, call.tool, call.args_json,
                   call.cwd, false};
  tool_outcome out;
  self->request(impl_->dispatcher, caf::infinite, invoke_atom_v,
                std::move(req))
    .receive(
      [&](tool_response& res) {
        out.result_json = std::move(res.result_json);
        out.duration_us = res.duration_us;
        out.timed_out = res.timed_out;
      },
      [&](caf::error& err) {
        json::value r;
        r["error"] = "Runtime error: " + impl_->sys->render(err);
        out.result_json = r.dump();
      });
  return out;
}

void runtime::call_tool_async(const tool_call_request& call,
                              std::function<void(tool_outcome)> done) {
  tool_request req{call.session_id, call.call_id, call.tool, call.args_json,
                   call.cwd, false};
  auto dispatcher = impl_->dispatcher;
  auto sys = impl_->sys.get();
  impl_->sys->spawn([=](caf::event_based_actor* self) mutable {
    self->request(dispatcher, caf::infinite, invoke_atom_v, std::move(req))
      .then(
        [=](tool_response& res) {
          done(tool_outcome{std::move(res.result_json), res.duration_us,
                            res.timed_out});
        },
        [=](caf::error& err) {
          json::value r;
          r["error"] = "Runtime error: " + sys->render(err);
          done(tool_outcome{r.dump(), 0, false});
        });
  });
}

turn_outcome runtime::run_turn(const turn_call& call) {
  auto& p = *impl_;
  turn_outcome out;
  auto fail = [&](std::string msg, bool config) {
    out.error = std::move(msg);
    out.config_error = config;
    return out;
  };
  if (call.prompt.empty())
    return fail("the prompt is empty", true);
  // The provider connection: the configuration with the call's overrides.
  options opts = p.svc->cfg;
  if (!call.provider.empty())
    opts.model.provider = call.provider;
  if (!call.model.empty())
    opts.model.default_model = call.model;
  if (!call.base_url.empty())
    opts.model.base_url = call.base_url;
  auto settings = make_provider_settings(opts, call.api_key);
  if (!settings.main.ok())
    return fail(settings.main.error, true);
  std::set<std::string> toolsets;
  for (auto t : p.svc->tools.all())
    toolsets.insert(t->toolset());
  for (auto& ts : call.toolsets) {
    if (toolsets.count(ts) == 0) {
      std::string names;
      for (auto& n : toolsets)
        names += (names.empty() ? "" : ", ") + n;
      return fail("unknown toolset '" + ts + "' (known toolsets: " + names
                    + ")",
                  true);
    }
  }
  if (!p.store || !p.writer)
    return fail("the session store is unavailable: " + p.store_error, false);
  caf::scoped_actor self{*p.sys};
  // The session row must exist before the conversation loads it.
  auto sid = call.session_id;
  if (sid.empty() || !p.store->get_session(sid)) {
    session_meta meta;
    meta.id = sid;
    meta.source = call.source;
    meta.model = settings.main.endpoint.model;
    meta.provider = settings.main.endpoint.provider;
    meta.cwd = p.svc->default_cwd;
    std::string err;
    self->request(p.writer, caf::infinite, create_atom_v, std::move(meta))
      .receive([&](std::string& id) { sid = std::move(id); },
               [&](caf::error& e) { err = p.sys->render(e); });
    if (!err.empty() && !p.store->get_session(sid))
      return fail("cannot create session: " + err, false);
  }
  out.session_id = sid;
  auto& ep = settings.main.endpoint;
  auto key = ep.provider + "\n" + ep.base_url + "\n" + ep.model + "\n"
             + ep.api_key;
  conversation_actor conv;
  provider_actor prov;
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    auto& slot = p.providers[key];
    if (!slot)
      slot = spawn_provider(*p.sys, p.svc->http, settings);
    prov = slot;
    auto& c = p.conversations[sid];
    if (!c)
      c = spawn_conversation(*p.sys, conversation_deps{p.svc, p.dispatcher,
                                                       p.writer, p.store,
                                                       p.store_error, sid});
    conv = c;
  }
  turn_request req;
  req.text = call.prompt;
  req.max_iterations = call.max_iterations;
  req.toolsets = call.toolsets;
  req.stream = call.stream;
  req.provider = caf::actor_cast<caf::actor>(prov);
  req.model = ep.model;
  req.provider_name = ep.provider;
  req.base_url = ep.base_url;
  // Deltas go through a forwarding actor; the final flush below makes
  // every delta reach the callback before this function returns.
  caf::actor sink;
  if (call.on_delta) {
    auto cb = call.on_delta;
    sink = p.sys->spawn([cb](caf::event_based_actor*) -> caf::behavior {
      return {
        [cb](delta_atom, const std::string&, const std::string& kind,
             const std::string& text) { cb(kind, text); },
        [](done_atom) { return true; },
      };
    });
    req.sink = sink;
  }
  self->request(conv, caf::infinite, turn_atom_v, std::move(req))
    .receive([&](std::string& res) { out.result_json = std::move(res); },
             [&](caf::error& e) {
               out.error = "the turn failed: " + p.sys->render(e);
             });
  if (sink) {
    self->request(sink, caf::infinite, done_atom_v)
      .receive([](bool) {}, [](caf::error&) {});
    self->send_exit(sink, caf::exit_reason::user_shutdown);
  }
  if (!out.result_json.empty()
      && (call.save_trajectory || p.svc->cfg.agent.save_trajectories)) {
    auto res = json::parse(out.result_json);
    std::vector<trajectory_tool> offered;
    for (auto t : p.svc->tools.all()) {
      bool wanted = call.toolsets.empty();
      for (auto& ts : call.toolsets)
        wanted = wanted || ts == t->toolset();
      if (wanted)
        offered.push_back({t->name(), t->description(), t->schema()});
    }
    if (res && res.v->is_object()) {
      auto completed = res.v->get_bool("completed", false);
      out.trajectory_error = append_trajectory_line(
        p.svc->cfg.agent.trajectory_dir,
        completed ? trajectory_samples_file : failed_trajectories_file,
        trajectory_line(*res.v, offered, std::time(nullptr)));
    } else {
      out.trajectory_error = "the turn result is not a JSON object";
    }
    if (!out.trajectory_error.empty())
      MIBYAN_LOG(warning, "runtime",
                 "trajectory not saved: " << out.trajectory_error);
  }
  return out;
}

void runtime::run_turn_async(const turn_call& call,
                             std::function<void(turn_outcome)> done) {
  auto& p = *impl_;
  turn_outcome out;
  auto fail = [&](std::string msg, bool config) {
    out.error = std::move(msg);
    out.config_error = config;
    done(std::move(out));
  };
  if (call.prompt.empty())
    return fail("the prompt is empty", true);
  // The provider connection: the configuration with the call's overrides.
  options opts = p.svc->cfg;
  if (!call.provider.empty())
    opts.model.provider = call.provider;
  if (!call.model.empty())
    opts.model.default_model = call.model;
  if (!call.base_url.empty())
    opts.model.base_url = call.base_url;
  auto settings = make_provider_settings(opts, call.api_key);
  if (!settings.main.ok())
    return fail(settings.main.error, true);
  std::set<std::string> toolsets;
  for (auto t : p.svc->tools.all())
    toolsets.insert(t->toolset());
  for (auto& ts : call.toolsets) {
    if (toolsets.count(ts) == 0) {
      std::string names;
      for (auto& n : toolsets)
        names += (names.empty() ? "" : ", ") + n;
      return fail("unknown toolset '" + ts + "' (known toolsets: " + names
                    + ")",
                  true);
    }
  }
  if (!p.store || !p.writer)
    return fail("the session store is unavailable: " + p.store_error, false);
  // A new session: its row and seed messages must exist before the
  // conversation loads it. (One LMDB read transaction here.)
  std::optional<session_meta> create;
  std::vector<chat_message> seed;
  if (call.session_id.empty() || !p.store->get_session(call.session_id)) {
    if (!call.history_json.empty()) {
      auto parsed = json::parse(call.history_json);
      std::string err;
      if (!parsed || !chat_messages_from_openai(*parsed.v, seed, err))
        return fail("bad history: " + (parsed ? err : parsed.error), false);
    }
    session_meta meta;
    meta.id = call.session_id;
    meta.source = call.source;
    meta.model = settings.main.endpoint.model;
    meta.provider = settings.main.endpoint.provider;
    meta.cwd = p.svc->default_cwd;
    create = std::move(meta);
  }
  auto& ep = settings.main.endpoint;
  auto key = ep.provider + "\n" + ep.base_url + "\n" + ep.model + "\n"
             + ep.api_key;
  provider_actor prov;
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    auto& slot = p.providers[key];
    if (!slot)
      slot = spawn_provider(*p.sys, p.svc->http, settings);
    prov = slot;
  }
  turn_request req;
  req.text = call.prompt;
  req.max_iterations = call.max_iterations;
  req.toolsets = call.toolsets;
  req.stream = call.stream;
  req.provider = caf::actor_cast<caf::actor>(prov);
  req.model = ep.model;
  req.provider_name = ep.provider;
  req.base_url = ep.base_url;
  // One short-lived actor drives the turn and is its delta sink: deltas
  // from the conversation arrive before its reply (same sender), so every
  // on_delta call happens before `done`.
  auto impl = impl_.get();
  p.sys->spawn([impl, create = std::move(create), seed = std::move(seed),
                sid = call.session_id, req = std::move(req),
                on_delta = call.on_delta,
                done = std::move(done)](caf::event_based_actor* self) mutable
               -> caf::behavior {
    auto fin = std::make_shared<std::function<void(turn_outcome)>>(
      std::move(done));
    auto finish = [self, fin](turn_outcome o) {
      (*fin)(std::move(o));
      self->quit();
    };
    if (on_delta)
      req.sink = caf::actor_cast<caf::actor>(self);
    auto run = [self, impl, finish, req](std::string id) mutable {
      conversation_actor conv;
      {
        std::lock_guard<std::mutex> guard{impl->mtx};
        auto& c = impl->conversations[id];
        if (!c)
          c = spawn_conversation(self->system(),
                                 conversation_deps{impl->svc,
                                                   impl->dispatcher,
                                                   impl->writer, impl->store,
                                                   impl->store_error, id});
        conv = c;
      }
      self->request(conv, caf::infinite, turn_atom_v, std::move(req))
        .then(
          [finish, id](std::string& res) {
            turn_outcome o;
            o.session_id = id;
            o.result_json = std::move(res);
            finish(std::move(o));
          },
          [finish, id, self](caf::error& e) {
            turn_outcome o;
            o.session_id = id;
            o.error = "the turn failed: " + self->system().render(e);
            finish(std::move(o));
          });
    };
    if (!create) {
      run(sid);
    } else {
      auto writer = impl->writer;
      auto store = impl->store;
      self->request(writer, caf::infinite, create_atom_v, std::move(*create))
        .then(
          [self, writer, run, seed, finish](std::string& id) mutable {
            // Seed messages: the writer applies them in arrival order.
            auto left = std::make_shared<size_t>(seed.size());
            auto errors = std::make_shared<std::string>();
            if (seed.empty())
              return run(id);
            for (auto& m : seed)
              self->request(writer, caf::infinite, append_atom_v,
                            message_append{id, std::move(m), {}})
                .then(
                  [=](uint64_t) mutable {
                    if (--*left == 0) {
                      if (errors->empty())
                        run(id);
                      else
                        finish(turn_outcome{{}, id, *errors, false, {}});
                    }
                  },
                  [=](caf::error& e) mutable {
                    if (errors->empty())
                      *errors = "cannot store the history: "
                                + self->system().render(e);
                    if (--*left == 0)
                      finish(turn_outcome{{}, id, *errors, false, {}});
                  });
          },
          [self, sid, store, run, finish](caf::error& e) mutable {
            // Lost a race with a concurrent create of the same id.
            if (!sid.empty() && store->get_session(sid))
              return run(sid);
            finish(turn_outcome{{}, sid,
                                "cannot create session: "
                                  + self->system().render(e),
                                false, {}});
          });
    }
    return {
      [on_delta](delta_atom, const std::string&, const std::string& kind,
                 const std::string& text) {
        if (on_delta)
          on_delta(kind, text);
      },
    };
  });
}

std::shared_ptr<session_store> runtime::sessions() const {
  return impl_->store;
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
  }
  caf::anon_send(impl_->dispatcher, interrupt_atom_v,
                 interrupt_request{session_id, reason});
}

void runtime::close_session(const std::string& session_id) {
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    auto i = impl_->conversations.find(session_id);
    if (i != impl_->conversations.end()) {
      caf::anon_send_exit(i->second, caf::exit_reason::user_shutdown);
      impl_->conversations.erase(i);
    }
  }
  caf::anon_send(impl_->kernels, dispose_atom_v, session_id);
}

std::string runtime::kernel_stats() {
  caf::scoped_actor self{*impl_->sys};
  std::string out;
  self->request(impl_->kernels, caf::infinite, stats_atom_v)
    .receive([&](std::string& s) { out = std::move(s); },
             [&](caf::error&) { out = "{}"; });
  return out;
}

const tool_registry& runtime::tools() const {
  return impl_->svc->tools;
}

const options& runtime::config() const {
  return impl_->svc->cfg;
}

caf::actor_system& runtime::system() {
  return *impl_->sys;
}

} // namespace mibyan
