#include "runtime/runtime.hpp"

#include <filesystem>
#include <unistd.h>
#include <thread>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "actors/kernel_registry.hpp"
#include "actors/tool_dispatcher.hpp"
#include "kernels/kernel_process.hpp"
#include "runtime/http_client.hpp"
#include "runtime/log.hpp"
#include "kernels/stub_generator.hpp"
#include "tools/execute_code.hpp"
#include "tools/registry.hpp"

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

  ~impl() {
    if (sys) {
      caf::anon_send_exit(dispatcher, caf::exit_reason::user_shutdown);
      caf::anon_send_exit(kernels, caf::exit_reason::user_shutdown);
      dispatcher = nullptr;
      kernels = nullptr;
    }
    // Stop blocking work first so no job outlives the system.
    sys.reset();
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

void runtime::interrupt(const std::string& session_id,
                        const std::string& reason) {
  caf::anon_send(impl_->dispatcher, interrupt_atom_v,
                 interrupt_request{session_id, reason});
}

void runtime::close_session(const std::string& session_id) {
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
