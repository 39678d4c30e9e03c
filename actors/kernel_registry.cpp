#include "actors/kernel_registry.hpp"

#include <algorithm>
#include <map>

#include "caf/all.hpp"

#include "actors/exit_timer.hpp"
#include "actors/kernel_checkpoints.hpp"
#include "actors/kernel.hpp"
#include "actors/warm_kernels.hpp"
#include "kernels/interpreter_cache.hpp"
#include "kernels/stub_generator.hpp"
#include "messages/type_ids.hpp"
#include "base/env_filter.hpp"
#include "base/host_hardening.hpp"
#include "base/log.hpp"
#include "base/runtime_metrics.hpp"
#include "kernels/script_catalog.hpp"
#include "tools/script_sandbox.hpp"

namespace mibyan {

namespace {

using clock_type = std::chrono::steady_clock;

// The registry's private interface: its public one plus timer messages.
using registry_impl_actor = kernel_registry_actor::extend<
  caf::reacts_to<timer_atom>>;

struct kernel_record {
  std::string key;
  std::string owner;
  caf::actor handle;
  // Cells in flight, end, last answer: written by the kernel broker,
  // which answers cells straight to their callers (actors/kernel.hpp).
  std::shared_ptr<kernel_usage> usage;
  bool pinned = false;    // subagent kernel: exempt from the LRU cap
  clock_type::time_point last_used; // created or last handed a cell here

  /// Cells queued or running.
  int attached() const { return usage->attached.load(); }

  /// When the kernel was last busy: its last cell handed over (here or by
  /// the fast path) or answered.
  clock_type::time_point idle_since() const {
    auto at = [](int64_t ns) {
      return clock_type::time_point{clock_type::duration{ns}};
    };
    return std::max({last_used, at(usage->last_handed_ns.load()),
                     at(usage->last_answer_ns.load())});
  }
};

// A kernel started ahead of demand, not yet owned by a session.
struct spare_kernel {
  std::string shape;      // mode|python|cwd|tools
  caf::actor handle;
  std::string resolved;   // the interpreter it runs
  std::shared_ptr<kernel_usage> usage;
};

struct registry_state {
  services_ptr svc;
  // Interpreter specs (names or paths), resolved only when a kernel starts
  // (kernels/interpreter_cache.hpp); `python` "" = the active venv/conda
  // env's, else `default_python`.
  std::string python;
  std::string default_python;
  std::vector<std::string> tools;
  std::map<std::string, kernel_record> kernels; // by key
  std::vector<spare_kernel> spares;
  int64_t spawned = 0, evicted = 0, reaped = 0;
  // The kernels of `kernels` offered to the call facade's fast path, and
  // the key computation shared with it (actors/warm_kernels.hpp). Every
  // change to `kernels` is mirrored here.
  std::shared_ptr<warm_kernel_index> warm;
  // Spawns the actor of a started kernel (empty: spawn_kernel_actor).
  kernel_actor_factory spawn_kernel;

  // The registry owns its kernels: when it goes, they go (otherwise the
  // actor system would wait for them forever at shutdown).
  ~registry_state() {
    for (auto& [key, rec] : kernels)
      caf::anon_send_exit(rec.handle, caf::exit_reason::user_shutdown);
    for (auto& spare : spares)
      caf::anon_send_exit(spare.handle, caf::exit_reason::user_shutdown);
  }
  static const char* name;
};

const char* registry_state::name = "kernel_registry";

using registry_pointer = registry_impl_actor::stateful_pointer<registry_state>;

json::value early_error(const std::string& message) {
  json::value r;
  r["status"] = "error";
  r["error"] = message;
  r["tool_calls_made"] = 0;
  r["duration_seconds"] = 0;
  return r;
}

tool_response respond(const tool_request& req, const json::value& r) {
  return tool_response{req.call_id, req.tool, r.dump(), 0, false};
}

bool is_subagent_owner(const std::string& owner) {
  return owner.find("::child::") != std::string::npos;
}

kernel_shape shape_for(registry_pointer self, const tool_request& req) {
  return self->state.warm->routing().shape_for(req);
}

// The interpreter a new kernel of `shape` runs: resolved now, from the
// cache while nothing that selects the version changed.
std::string interpreter_for(registry_pointer self, const kernel_shape& shape) {
  auto& st = self->state;
  auto cwd = shape.cwd.empty() ? st.svc->default_cwd : shape.cwd;
  auto& home = st.svc->cfg.home;
  if (shape.python.empty())
    return resolve_project_interpreter(st.default_python, home, cwd);
  return resolve_interpreter_cached(shape.python, home, cwd);
}

caf::actor start_kernel(registry_pointer self, const kernel_shape& shape,
                        std::string* error, std::string* resolved = nullptr,
                        std::shared_ptr<kernel_usage>* usage = nullptr) {
  auto& st = self->state;
  kernel_spawn_options so;
  so.python = interpreter_for(self, shape);
  if (resolved)
    *resolved = so.python;
  so.cwd = shape.cwd;
  // The script tools as they are now (an MCP server's tools may have
  // changed since start-up); the kernel key keeps the start-up set.
  std::shared_ptr<const script_catalog::snapshot> scripts;
  if (st.svc->scripts)
    scripts = st.svc->scripts->current();
  so.tools = scripts ? scripts->names : st.tools;
  so.inherited_env = current_environment();
  so.passthrough = st.svc->cfg.terminal.env_passthrough;
  so.passthrough.insert(so.passthrough.end(), shape.skill_env.begin(),
                        shape.skill_env.end());
  so.rpc_timeout = static_cast<double>(st.svc->cfg.code_execution.timeout);
  so.specs = scripts ? scripts->specs : st.svc->script_tools;
  auto bwrap = script_sandbox_bwrap(st.svc->cfg);
  if (!bwrap) {
    if (error)
      *error = bwrap.error;
    return {};
  }
  so.bwrap = std::move(*bwrap);
  if (so.bwrap.empty())
    become_subreaper(); // the fallback hunts orphaned daemons at teardown
  so.strict = shape.mode == "strict";
  so.home = st.svc->cfg.home;
  so.limits = script_limits(st.svc->cfg);
  auto started = st.svc->launcher->start_kernel(so);
  if (!started) {
    if (error)
      *error = started.error;
    return {};
  }
  auto proc = std::move(*started);
  ++st.spawned;
  metrics::note_sandbox(st.svc->cfg.code_execution.sandbox,
                        so.bwrap.empty() ? "none" : "bwrap");
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
  kernel_actor_options ko;
  auto pid = proc.pid;
  auto sandboxed = proc.sandboxed;
  ko.proc = std::move(proc);
  ko.tools = so.tools;
  ko.stub_generation = scripts ? scripts->generation : 0;
  ko.kill_grace_seconds = st.svc->cfg.terminal.kill_grace;
  ko.usage = std::make_shared<kernel_usage>();
  ko.usage->pid = pid;
  ko.usage->sandboxed = sandboxed;
  ko.usage->mode = shape.mode.empty() ? "project" : shape.mode;
  ko.usage->started_ns = usage_clock_now(*st.svc->clock);
  if (usage)
    *usage = ko.usage;
  auto handle = st.spawn_kernel
                  ? st.spawn_kernel(self->system(), st.svc, std::move(ko))
                  : spawn_kernel_actor(self->system(), st.svc, std::move(ko));
  self->monitor(handle);
  return handle;
}

void refill_spares(registry_pointer self) {
  auto& st = self->state;
  auto want = st.svc->cfg.code_execution.prestart_kernels;
  if (want <= 0)
    return;
  tool_request none;
  auto shape = shape_for(self, none);
  auto text = shape.text(st.tools);
  auto have = std::count_if(st.spares.begin(), st.spares.end(),
                            [&](const spare_kernel& s) {
                              return s.shape == text;
                            });
  for (; have < want; ++have) {
    std::string err, resolved;
    std::shared_ptr<kernel_usage> usage;
    auto h = start_kernel(self, shape, &err, &resolved, &usage);
    if (!h) {
      MIBYAN_LOG(warning, "kernel", "cannot pre-start a kernel: " << err);
      return;
    }
    st.spares.push_back(spare_kernel{text, h, resolved, usage});
  }
}

void stop_kernel(registry_pointer self, const caf::actor& h) {
  self->demonitor(h);
  self->send_exit(h, caf::exit_reason::user_shutdown);
}

// Evicts least recently used idle top-level kernels beyond the cap, never
// `keep` and never one with a cell attached.
void enforce_cap(registry_pointer self, const std::string& keep) {
  auto& st = self->state;
  auto cap = st.svc->cfg.code_execution.max_session_kernels;
  for (;;) {
    int64_t live = 0;
    kernel_record* oldest = nullptr;
    for (auto& [key, rec] : st.kernels) {
      if (rec.pinned)
        continue;
      ++live;
      if (key == keep || rec.attached() > 0)
        continue;
      if (!oldest || rec.idle_since() < oldest->idle_since())
        oldest = &rec;
    }
    if (live <= cap || oldest == nullptr)
      return;
    // A fast-path cell may have been handed to it since: then it stays.
    if (!st.warm->remove_if_idle(oldest->key, oldest->handle))
      return;
    MIBYAN_LOG(info, "kernel", "evicting idle kernel of " << oldest->owner
               << " (max_session_kernels " << cap << ")");
    ++st.evicted;
    stop_kernel(self, oldest->handle);
    st.kernels.erase(oldest->key);
  }
}

void reap_idle(registry_pointer self) {
  auto& st = self->state;
  auto idle = std::chrono::seconds(
    st.svc->cfg.code_execution.kernel_idle_timeout);
  auto now = st.svc->clock->steady_now();
  for (auto i = st.kernels.begin(); i != st.kernels.end();) {
    if (i->second.attached() == 0 && now - i->second.idle_since() >= idle
        && st.warm->remove_if_idle(i->first, i->second.handle)) {
      MIBYAN_LOG(info, "kernel", "reaping idle kernel of " << i->second.owner);
      ++st.reaped;
      stop_kernel(self, i->second.handle);
      i = st.kernels.erase(i);
    } else {
      ++i;
    }
  }
}

std::chrono::milliseconds reap_period(const options& cfg) {
  // One sixth of the idle timeout, between 0.5 s and 300 s.
  auto ms = cfg.code_execution.kernel_idle_timeout * 1000 / 6;
  return std::chrono::milliseconds(std::clamp<int64_t>(ms, 500, 300000));
}

// How long the kernels must have been quiet before a replacement spare
// starts, and the longest it waits for that.
constexpr auto spare_refill_quiet = std::chrono::milliseconds(50);
constexpr auto spare_refill_limit = std::chrono::seconds(2);

// Starts the spare that replaces one a session took once no kernel has had
// a cell attached, handed over or answered for `spare_refill_quiet`, or at
// `latest`: its interpreter's start-up costs tens of milliseconds of CPU,
// which would otherwise slow the cells of the session that just began
// (docs/benchmarks-history.md, "Fourth round"). An exit timer, as the reap tick.
void refill_spares_when_quiet(registry_pointer self,
                              clock_type::time_point latest) {
  start_exit_timer(self, spare_refill_quiet, [self, latest] {
    auto now = self->state.svc->clock->steady_now();
    auto& kernels = self->state.kernels;
    bool busy = std::any_of(kernels.begin(), kernels.end(), [&](auto& kv) {
      return kv.second.attached() > 0
             || now - kv.second.idle_since() < spare_refill_quiet;
    });
    if (busy && now < latest)
      refill_spares_when_quiet(self, latest);
    else
      refill_spares(self);
  });
}

// The reap tick: an exit timer (actors/exit_timer.hpp), so a registry
// that ended is freed at once, not after up to a reap period.
void arm_reap_timer(registry_pointer self) {
  start_exit_timer(self, reap_period(self->state.svc->cfg), [self] {
    reap_idle(self);
    refill_spares(self);
    arm_reap_timer(self);
  });
}

// Whether kernels of `owner` take checkpoints: a real session's
// top-level kernels, with code_execution.checkpoint on.
bool checkpointed_owner(const registry_state& s, const std::string& owner) {
  return s.svc->checkpoints && s.svc->checkpoints->enabled()
         && owner != "default" && !is_subagent_owner(owner);
}

// Hands a cell to its kernel. The kernel answers the caller directly
// (the promise is delegated): the registry is not on the reply path, and
// learns about the answer through the kernel's usage record.
void run_cell(const runtime_clock& clock, kernel_record& rec, exec_cell cell,
              caf::typed_response_promise<tool_response> rp) {
  rec.usage->attached.fetch_add(1);
  rec.last_used = clock.steady_now();
  rec.usage->last_handed_ns.store(usage_clock_now(clock));
  rec.usage->cells.fetch_add(1, std::memory_order_relaxed);
  rp.delegate(caf::actor_cast<kernel_cell_actor>(rec.handle), exec_atom_v,
              std::move(cell));
}

} // namespace

registry_impl_actor::behavior_type
registry_behavior(registry_pointer self,
                  std::shared_ptr<warm_kernel_index> warm,
                  kernel_actor_factory spawn_kernel) {
  auto& st = self->state;
  st.spawn_kernel = std::move(spawn_kernel);
  auto& routing = warm->routing();
  st.svc = routing.svc;
  st.python = routing.python;
  st.default_python = routing.default_python;
  st.tools = routing.tools;
  st.warm = std::move(warm);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& s = self->state;
    for (auto i = s.kernels.begin(); i != s.kernels.end(); ++i) {
      if (i->second.handle.address() == dm.source) {
        s.warm->remove(i->first, i->second.handle);
        s.kernels.erase(i);
        return;
      }
    }
    auto& sp = s.spares;
    sp.erase(std::remove_if(sp.begin(), sp.end(),
                            [&](const spare_kernel& k) {
                              return k.handle.address() == dm.source;
                            }),
             sp.end());
  });
  refill_spares(self);
  arm_reap_timer(self);
  return {
    exit_timer_handler(self),
    [=](invoke_atom, tool_request& req) -> caf::result<tool_response> {
      auto& s = self->state;
      auto rp = self->make_response_promise<tool_response>();
      if (auto blocked = script_guard_response(*s.svc, req)) {
        rp.deliver(std::move(*blocked));
        return rp;
      }
      auto args = json::parse(req.args_json.empty() ? "{}" : req.args_json);
      if (!args || !args.v->is_object()) {
        rp.deliver(respond(req, early_error(
          "execute_code arguments must be a JSON object with a 'code' "
          "string.")));
        return rp;
      }
      auto code = args.v->find("code");
      if (code == nullptr && args.v->find("command") != nullptr) {
        rp.deliver(respond(req, early_error(
          "execute_code received a 'command' parameter, but it requires "
          "Python source in 'code'. Use terminal(command=...) for shell "
          "commands; for Python, retry as execute_code(code=...).")));
        return rp;
      }
      if (code != nullptr && !code->is_string() && !code->is_null()) {
        rp.deliver(respond(req, early_error(
          std::string{"execute_code received a "} + json::kind_name(code->type())
          + " in 'code', but it requires Python source as a string. Retry "
            "as execute_code(code=\"...\").")));
        return rp;
      }
      if (code == nullptr || code->is_null()
          || code->as_string().find_first_not_of(" \t\r\n")
               == std::string::npos) {
        rp.deliver(respond(req, early_error(
          "No code provided. execute_code requires a non-empty 'code' "
          "parameter containing Python source. To run shell commands, use "
          "terminal(command=...) instead.")));
        return rp;
      }
      bool reset = false;
      if (auto r = args.v->find("reset"); r && r->is_bool())
        reset = r->as_bool();
      else if (r && r->is_string())
        reset = r->as_string() == "true";
      auto shape = shape_for(self, req);
      auto owner = kernel_routing::owner_of(req);
      auto key = s.warm->routing().key_for(owner, shape);
      exec_cell cell;
      cell.session_id = owner;
      cell.call_id = req.call_id;
      cell.code = code->as_string();
      cell.timeout_ms = s.svc->cfg.code_execution.timeout * 1000;
      cell.max_tool_calls = s.svc->cfg.code_execution.max_tool_calls;
      auto i = s.kernels.find(key);
      if (i != s.kernels.end() && i->second.usage->ended.load()) {
        // Its last answer ended it (exit, timeout, interrupt, death): the
        // next cell gets a fresh kernel; the down message follows.
        s.warm->remove(i->first, i->second.handle);
        s.kernels.erase(i);
        i = s.kernels.end();
      }
      if (i != s.kernels.end() && reset) {
        cell.state_reset = true;
        s.warm->remove(i->first, i->second.handle);
        stop_kernel(self, i->second.handle);
        s.kernels.erase(i);
        i = s.kernels.end();
      }
      if (i != s.kernels.end()) {
        cell.reused = true;
        run_cell(*s.svc->clock, i->second, std::move(cell), rp);
        return rp;
      }
      // A skill became active since the session's kernel started: that
      // kernel lacks its variables and is never used again; stop it when
      // idle (docs/tools.md, "Skills").
      if (!shape.skill_env.empty()) {
        auto plain = shape;
        plain.skill_env.clear();
        auto base = owner + "|" + plain.text(s.tools);
        for (auto j = s.kernels.begin(); j != s.kernels.end();) {
          bool older = j->first == base
                       || j->first.rfind(base + "|env:", 0) == 0;
          if (older && j->second.attached() == 0) {
            cell.state_reset = true; // reported in the result's kernel info
            s.warm->remove(j->first, j->second.handle);
            stop_kernel(self, j->second.handle);
            j = s.kernels.erase(j);
          } else {
            ++j;
          }
        }
      }
      // A fresh kernel: take a pre-started one of the same shape if any.
      caf::actor handle;
      std::shared_ptr<kernel_usage> usage;
      auto text = shape.text(s.tools);
      for (auto j = s.spares.begin(); j != s.spares.end(); ++j) {
        if (j->shape == text) {
          // A spare started before the selected Python version changed
          // (pyenv files, PYENV_VERSION, venv) is not used.
          if (j->resolved == interpreter_for(self, shape)) {
            handle = j->handle;
            usage = j->usage;
          } else
            stop_kernel(self, j->handle);
          s.spares.erase(j);
          break;
        }
      }
      std::string note;
      if (!handle) {
        std::string err, tried;
        handle = start_kernel(self, shape, &err, &tried, &usage);
        // A broken venv or a wrong `code_execution.python` must not make
        // execute_code unusable: fall back to the default interpreter, then
        // to python3 on PATH, and say so in the result.
        for (auto& candidate : {s.default_python, std::string{"python3"}}) {
          if (handle || candidate == shape.python || candidate == tried)
            continue;
          MIBYAN_LOG(warning, "kernel", "cannot start " << tried
                     << " (" << err << "); falling back to " << candidate);
          auto fallback = shape;
          fallback.python = candidate;
          std::string err2;
          handle = start_kernel(self, fallback, &err2, nullptr, &usage);
          if (handle)
            note = "The configured interpreter " + tried
                   + " could not be started (" + err + "); this session's "
                   "kernel runs " + candidate + " instead.";
          else
            err += "; " + candidate + ": " + err2;
        }
        if (!handle) {
          rp.deliver(respond(req, early_error(
            "execute_code is unavailable in this environment (" + err
            + "). Use normal tool calls (terminal, read_file, write_file, "
              "...) instead.")));
          return rp;
        }
      }
      // The warning of a kernel that sees the whole home (docs/approvals.md,
      // "execute_code whole-script guard").
      if (shape.mode != "strict" && workdir_contains_home(shape.cwd))
        note += std::string{note.empty() ? "" : " "}
                + "This kernel's working directory is your home directory "
                  "or above it: the sandbox keeps the home read-only except "
                  "its visible entries, hides credential stores, and such a "
                  "script is not approved as isolated. Work in a project "
                  "directory below the home instead.";
      // Checkpoints (docs/execute_code.md, "Checkpoints"): told before the
      // kernel is in the warm index, so no cell can overtake it. After a
      // reset the session's checkpoints are dropped instead of restored.
      if (checkpointed_owner(s, owner))
        caf::anon_send(handle, checkpoint_atom_v, owner, !reset);
      kernel_record rec;
      rec.key = key;
      rec.owner = owner;
      rec.handle = handle;
      rec.usage = usage;
      rec.pinned = is_subagent_owner(owner);
      rec.last_used = s.svc->clock->steady_now();
      auto& stored = s.kernels[key] = std::move(rec);
      s.warm->put(key, stored.handle, stored.usage);
      enforce_cap(self, key);
      if (note.empty()) {
        run_cell(*s.svc->clock, stored, std::move(cell), rp);
      } else {
        // Add the note to the result (the kernel answers here).
        auto req_copy = req;
        stored.usage->attached.fetch_add(1);
        stored.usage->cells.fetch_add(1, std::memory_order_relaxed);
        stored.last_used = s.svc->clock->steady_now();
        self->request(handle, caf::infinite, exec_atom_v, std::move(cell))
          .then(
            [=](tool_response& res) mutable {
              if (auto r = json::parse(res.result_json); r && r.v->is_object()) {
                (*r.v)["note"] = note;
                res.result_json = r.v->dump();
              }
              rp.deliver(std::move(res));
            },
            [=](caf::error& err) mutable {
              rp.deliver(respond(req_copy, early_error(
                "The session kernel died: " + self->system().render(err))));
            });
      }
      if (s.svc->cfg.code_execution.prestart_kernels > 0)
        refill_spares_when_quiet(self,
                                 s.svc->clock->steady_now() + spare_refill_limit);
      return rp;
    },
    [=](interrupt_atom, interrupt_request& req) {
      auto& s = self->state;
      auto reason = req.reason.empty() ? std::string{"user sent a new message"}
                                       : req.reason;
      for (auto& [key, rec] : s.kernels)
        if (rec.owner == req.session_id && rec.attached() > 0) {
          if (req.call_id.empty()) {
            caf::anon_send(rec.handle, interrupt_atom_v, reason);
          } else {
            // One call: the kernel stops it only when the cell is its.
            req.reason = reason;
            caf::anon_send(rec.handle, interrupt_atom_v, req);
          }
        }
    },
    [=](dispose_atom, std::string& owner) {
      auto& s = self->state;
      auto prefix = owner + "::child::";
      for (auto i = s.kernels.begin(); i != s.kernels.end();) {
        auto& o = i->second.owner;
        if (o == owner || o.rfind(prefix, 0) == 0) {
          s.warm->remove(i->first, i->second.handle);
          stop_kernel(self, i->second.handle);
          i = s.kernels.erase(i);
        } else {
          ++i;
        }
      }
    },
    [=](stats_atom) -> std::string {
      auto& s = self->state;
      json::value r;
      r["kernels"] = static_cast<int64_t>(s.kernels.size());
      r["prestarted"] = static_cast<int64_t>(s.spares.size());
      r["spawned"] = s.spawned;
      r["evicted"] = s.evicted;
      r["reaped"] = s.reaped;
      int64_t waits = 0, wait_ns = 0;
      for (auto& [key, rec] : s.kernels) {
        waits += rec.usage->checkpoint_waits.load();
        wait_ns += rec.usage->checkpoint_wait_ns.load();
      }
      r["checkpoint_waits"] = waits;
      r["checkpoint_wait_ms"] = static_cast<double>(wait_ns) / 1e6;
      return r.dump();
    },
    [=](checkpoint_atom) -> caf::result<bool> {
      // Drain: each session kernel takes a final checkpoint and stores it.
      auto& s = self->state;
      auto rp = self->make_response_promise<bool>();
      auto left = std::make_shared<size_t>(0);
      auto all_ok = std::make_shared<bool>(true);
      std::vector<caf::actor> targets;
      for (auto& [key, rec] : s.kernels)
        if (checkpointed_owner(s, rec.owner) && !rec.usage->ended.load())
          targets.push_back(rec.handle);
      if (targets.empty()) {
        rp.deliver(true);
        return rp;
      }
      *left = targets.size();
      auto limit = std::chrono::seconds(
        std::max<int64_t>(5, s.svc->cfg.code_execution.timeout + 30));
      for (auto& h : targets)
        self->request(h, limit, checkpoint_atom_v)
          .then(
            [=](bool ok) mutable {
              *all_ok = *all_ok && ok;
              if (--*left == 0)
                rp.deliver(*all_ok);
            },
            [=](caf::error&) mutable {
              *all_ok = false;
              if (--*left == 0)
                rp.deliver(false);
            });
      return rp;
    },
    [=](kernels_atom) -> std::vector<kernel_info> {
      auto& s = self->state;
      auto now = usage_clock_now(*s.svc->clock);
      std::vector<kernel_info> out;
      for (auto& [key, rec] : s.kernels) {
        auto& u = *rec.usage;
        if (u.ended.load())
          continue;
        kernel_info k;
        k.session_id = rec.owner;
        k.pid = u.pid;
        k.mode = u.mode;
        k.sandbox = u.sandboxed ? "bwrap" : "none";
        k.uptime_ms = u.started_ns > 0 ? (now - u.started_ns) / 1000000 : 0;
        k.cells = u.cells.load(std::memory_order_relaxed);
        k.busy = u.attached.load() > 0;
        out.push_back(std::move(k));
      }
      return out;
    },
  };
}

kernel_registry_actor
spawn_kernel_registry(caf::actor_system& sys, services_ptr svc,
                      std::string python, std::string default_python,
                      std::shared_ptr<warm_kernel_index>* warm,
                      kernel_actor_factory spawn_kernel) {
  kernel_routing routing;
  for (auto& s : svc->script_tools)
    routing.tools.push_back(s.name);
  std::sort(routing.tools.begin(), routing.tools.end());
  routing.tools.erase(std::unique(routing.tools.begin(), routing.tools.end()),
                      routing.tools.end());
  routing.svc = std::move(svc);
  routing.python = std::move(python);
  routing.default_python = std::move(default_python);
  auto index = std::make_shared<warm_kernel_index>(std::move(routing));
  if (warm)
    *warm = index;
  // On the scheduler. Starting a kernel (staging files, fork, exec) blocks
  // this actor's thread for milliseconds; a detached registry was tried and
  // hung the system's shutdown under load (docs/architecture.md, "Actors").
  auto impl = sys.spawn(registry_behavior, std::move(index),
                       std::move(spawn_kernel));
  return caf::actor_cast<kernel_registry_actor>(impl);
}

} // namespace mibyan
