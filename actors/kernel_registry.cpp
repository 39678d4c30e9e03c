#include "actors/kernel_registry.hpp"

#include <algorithm>
#include <map>
#include <mutex>

#include "caf/all.hpp"

#include "actors/exit_timer.hpp"
#include "actors/kernel.hpp"
#include "actors/kernel_start.hpp"
#include "actors/warm_kernels.hpp"
#include "kernels/cell_result.hpp"
#include "kernels/stub_generator.hpp"
#include "messages/type_ids.hpp"
#include "base/log.hpp"

namespace mibyan {

namespace {

using clock_type = std::chrono::steady_clock;

// The registry's private interface: its public one plus timer messages
// and the end of a kernel start on the blocking pool:
// (done_atom, start id, broker or null, interpreter, error, fallback note).
using registry_impl_actor = kernel_registry_actor::extend<
  caf::reacts_to<timer_atom>,
  caf::reacts_to<done_atom, uint64_t, caf::actor, std::string, std::string,
                 std::string>>;

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

// A cell that waits for its kernel to start.
struct waiting_cell {
  exec_cell cell;
  caf::typed_response_promise<tool_response> rp;
};

// A kernel being started on the blocking pool.
struct pending_start {
  std::string key;        // "" for a spare
  std::string owner;
  std::string shape_text; // spares: the shape it is for
  std::shared_ptr<kernel_usage> usage;
  std::shared_ptr<kernel_start_slot> slot;
  std::vector<waiting_cell> cells;
  int64_t queued = 0;     // cells queued here so far (answered or not)
  bool cancelled = false; // its session ended: stop the kernel on arrival
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
  // Kernels being started on the blocking pool, by start id. Kept until
  // the job's answer arrives, even when cancelled (the broker is stopped
  // then).
  std::map<uint64_t, pending_start> starting;
  uint64_t next_start = 1;
  int64_t spawned = 0, evicted = 0, reaped = 0;
  // The kernels of `kernels` offered to the call facade's fast path, and
  // the key computation shared with it (actors/warm_kernels.hpp). Every
  // change to `kernels` is mirrored here.
  std::shared_ptr<warm_kernel_index> warm;

  // The registry owns its kernels: when it goes, they go (otherwise the
  // actor system would wait for them forever at shutdown).
  ~registry_state() {
    for (auto& [key, rec] : kernels)
      caf::anon_send_exit(rec.handle, caf::exit_reason::user_shutdown);
    for (auto& spare : spares)
      caf::anon_send_exit(spare.handle, caf::exit_reason::user_shutdown);
    for (auto& [id, start] : starting) {
      std::lock_guard<std::mutex> guard{start.slot->mtx};
      start.slot->registry_gone = true;
      if (start.slot->handle)
        caf::anon_send_exit(start.slot->handle,
                            caf::exit_reason::user_shutdown);
    }
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

std::string interpreter_for(registry_pointer self, const kernel_shape& shape) {
  return interpreter_for(*self->state.svc, self->state.default_python, shape);
}

// Queues a kernel start on the blocking pool. Returns its id, or 0 when
// the pool refused the job (the runtime is shutting down).
uint64_t begin_start(registry_pointer self, const kernel_shape& shape,
                     std::string key, std::string owner, bool fallback) {
  auto& st = self->state;
  auto id = st.next_start++;
  pending_start start;
  start.key = std::move(key);
  start.owner = std::move(owner);
  start.shape_text = shape.text(st.tools);
  start.usage = std::make_shared<kernel_usage>();
  start.slot = std::make_shared<kernel_start_slot>();
  kernel_start_plan plan{st.svc, shape, st.default_python, st.tools,
                         fallback};
  auto job = [sys = &self->system(),
              me = caf::actor_cast<registry_impl_actor>(self), id,
              plan = std::move(plan), usage = start.usage,
              slot = start.slot]() mutable {
    run_kernel_start(*sys, plan, usage, *slot,
                     [&](caf::actor handle, std::string resolved,
                         std::string error, std::string note) {
                       caf::anon_send(me, done_atom_v, id, std::move(handle),
                                      std::move(resolved), std::move(error),
                                      std::move(note));
                     });
  };
  if (!st.svc->pool->submit(std::move(job)))
    return 0;
  st.starting.emplace(id, std::move(start));
  return id;
}

// The start under way for `key`, if any (not a cancelled one).
pending_start* start_for(registry_pointer self, const std::string& key) {
  for (auto& [id, start] : self->state.starting)
    if (!start.key.empty() && start.key == key && !start.cancelled)
      return &start;
  return nullptr;
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
  for (auto& [id, start] : st.starting)
    if (start.key.empty() && start.shape_text == text)
      ++have;
  for (; have < want; ++have)
    if (begin_start(self, shape, {}, {}, false) == 0)
      return;
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
  auto now = clock_type::now();
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

// The reap tick: an exit timer (actors/exit_timer.hpp), so a registry
// that ended is freed at once, not after up to a reap period.
void arm_reap_timer(registry_pointer self) {
  start_exit_timer(self, reap_period(self->state.svc->cfg), [self] {
    reap_idle(self);
    refill_spares(self);
    arm_reap_timer(self);
  });
}

// Makes `handle` the kernel of `key` (a spare taken or a start that
// arrived) and enforces the cap.
kernel_record& adopt_kernel(registry_pointer self, const std::string& key,
                            const std::string& owner, caf::actor handle,
                            std::shared_ptr<kernel_usage> usage) {
  auto& st = self->state;
  kernel_record rec;
  rec.key = key;
  rec.owner = owner;
  rec.handle = std::move(handle);
  rec.usage = std::move(usage);
  rec.pinned = is_subagent_owner(owner);
  rec.last_used = clock_type::now();
  auto& stored = st.kernels[key] = std::move(rec);
  st.warm->put(key, stored.handle, stored.usage);
  enforce_cap(self, key);
  return stored;
}

// Hands a cell to its kernel. The kernel answers the caller directly
// (the promise is delegated): the registry is not on the reply path, and
// learns about the answer through the kernel's usage record.
void run_cell(kernel_record& rec, exec_cell cell,
              caf::typed_response_promise<tool_response> rp) {
  rec.usage->attached.fetch_add(1);
  rec.last_used = clock_type::now();
  rec.usage->last_handed_ns.store(usage_clock_now());
  rp.delegate(caf::actor_cast<kernel_cell_actor>(rec.handle), exec_atom_v,
              std::move(cell));
}

// As run_cell, and adds `note` (the interpreter fallback) to the result:
// then the answer passes here.
void run_cell_with_note(registry_pointer self, kernel_record& rec,
                        exec_cell cell,
                        caf::typed_response_promise<tool_response> rp,
                        std::string note) {
  if (note.empty()) {
    run_cell(rec, std::move(cell), std::move(rp));
    return;
  }
  rec.usage->attached.fetch_add(1);
  rec.last_used = clock_type::now();
  rec.usage->last_handed_ns.store(usage_clock_now());
  auto call_id = cell.call_id;
  self->request(rec.handle, caf::infinite, exec_atom_v, std::move(cell))
    .then(
      [=](tool_response& res) mutable {
        if (auto r = json::parse(res.result_json); r && r.v->is_object()) {
          (*r.v)["note"] = note;
          res.result_json = r.v->dump();
        }
        rp.deliver(std::move(res));
      },
      [=](caf::error& err) mutable {
        rp.deliver(tool_response{call_id, "execute_code",
                                 early_error("The session kernel died: "
                                             + self->system().render(err))
                                   .dump(),
                                 0, false});
      });
}

// Answers a cell that will not run on the kernel it waited for.
void answer_unrun(waiting_cell& w, const std::string& error) {
  w.rp.deliver(tool_response{w.cell.call_id, "execute_code",
                             early_error(error).dump(), 0, false});
}

// Answers a waiting cell of an interrupted session: interrupted, as a cell
// the kernel was running would be (kernels/cell_result.hpp).
void answer_interrupted(registry_pointer self, waiting_cell& w,
                        const std::string& reason) {
  cell_outcome c;
  c.status = cell_status::interrupted;
  c.exit_code = -1;
  c.error = "Interrupted before the cell ran.";
  c.interrupt_reason = reason;
  c.tools = self->state.tools;
  cell_limits lim;
  auto result = build_cell_result(c, lim, [](const std::string&) {
    return std::string{};
  });
  w.rp.deliver(tool_response{w.cell.call_id, "execute_code", result.dump(),
                             0, true});
}

// A start job reported. Hands the waiting cells to the new kernel in the
// order they came, or answers them with the error.
void on_started(registry_pointer self, uint64_t id, caf::actor handle,
                std::string resolved, std::string error, std::string note) {
  auto& st = self->state;
  auto i = st.starting.find(id);
  if (i == st.starting.end()) { // cannot happen: the registry owns the ids
    if (handle)
      caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
    return;
  }
  auto start = std::move(i->second);
  st.starting.erase(i);
  if (handle) {
    ++st.spawned;
    self->monitor(handle);
  }
  if (start.cancelled) {
    if (handle)
      stop_kernel(self, handle);
    return;
  }
  if (start.key.empty()) { // a spare
    if (handle)
      st.spares.push_back(spare_kernel{start.shape_text, handle, resolved,
                                       start.usage});
    else
      MIBYAN_LOG(warning, "kernel", "cannot pre-start a kernel: " << error);
    return;
  }
  if (!handle) {
    for (auto& w : start.cells)
      answer_unrun(w, "execute_code is unavailable in this environment ("
                        + error + "). Use normal tool calls (terminal, "
                        "read_file, write_file, ...) instead.");
    return;
  }
  if (start.usage->ended.load()) {
    // It died while starting (the down message follows): a broker that
    // ended takes no cells.
    for (auto& w : start.cells)
      answer_unrun(w, "The session kernel ended as it started; retry the "
                      "call to start a fresh kernel.");
    return;
  }
  auto& stored = adopt_kernel(self, start.key, start.owner, handle,
                              start.usage);
  // The note goes with the first cell the kernel runs.
  for (auto& w : start.cells) {
    run_cell_with_note(self, stored, std::move(w.cell), std::move(w.rp),
                       std::move(note));
    note.clear();
  }
}

} // namespace

registry_impl_actor::behavior_type
registry_behavior(registry_pointer self,
                  std::shared_ptr<warm_kernel_index> warm) {
  auto& st = self->state;
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
        run_cell(i->second, std::move(cell), rp);
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
      // A kernel of this key is starting: wait for it. A reset answers
      // the cells queued so far as a reset kills the cells of a running
      // kernel; the kernel itself is fresh anyway.
      if (auto* pending = start_for(self, key)) {
        if (reset) {
          for (auto& w : pending->cells)
            answer_unrun(w, "The session kernel was reset by a later "
                            "execute_code call before this cell ran.");
          pending->cells.clear();
          cell.state_reset = true;
        }
        cell.reused = pending->queued > 0;
        ++pending->queued;
        pending->cells.push_back(waiting_cell{std::move(cell), rp});
        return rp;
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
      if (handle) {
        run_cell(adopt_kernel(self, key, owner, handle, usage),
                 std::move(cell), rp);
      } else {
        // Start one on the blocking pool (resolving the interpreter, fork
        // and exec take milliseconds, a pyenv shim tens of them); the cell
        // waits for it, and so do later cells of the same key.
        auto id = begin_start(self, shape, key, owner, true);
        if (id == 0) {
          rp.deliver(respond(req, early_error(
            "The runtime is shutting down; the cell was not run.")));
          return rp;
        }
        auto& start = s.starting.at(id);
        ++start.queued;
        start.cells.push_back(waiting_cell{std::move(cell), rp});
      }
      // Start the replacement spare a moment later, so its interpreter
      // start-up does not compete with this first cell for the CPU.
      if (s.svc->cfg.code_execution.prestart_kernels > 0)
        // An exit timer, as the reap tick (arm_reap_timer).
        start_exit_timer(self, std::chrono::milliseconds(50),
                         [self] { refill_spares(self); });
      return rp;
    },
    [=](interrupt_atom, interrupt_request& req) {
      auto& s = self->state;
      auto reason = req.reason.empty() ? std::string{"user sent a new message"}
                                       : req.reason;
      for (auto& [key, rec] : s.kernels)
        if (rec.owner == req.session_id && rec.attached() > 0)
          caf::anon_send(rec.handle, interrupt_atom_v, reason);
      // Cells still waiting for their kernel are answered now; the kernel
      // stays the session's (it has no state to lose yet).
      for (auto& [id, start] : s.starting)
        if (start.owner == req.session_id) {
          for (auto& w : start.cells)
            answer_interrupted(self, w, reason);
          start.cells.clear();
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
      for (auto& [id, start] : s.starting) {
        auto& o = start.owner;
        if (!start.key.empty() && (o == owner || o.rfind(prefix, 0) == 0)) {
          for (auto& w : start.cells)
            answer_unrun(w, "The session ended before its kernel started.");
          start.cells.clear();
          start.cancelled = true;
        }
      }
    },
    [=](done_atom, uint64_t id, caf::actor& handle, std::string& resolved,
        std::string& error, std::string& note) {
      on_started(self, id, std::move(handle), std::move(resolved),
                 std::move(error), std::move(note));
    },
    [=](stats_atom) -> std::string {
      auto& s = self->state;
      json::value r;
      r["kernels"] = static_cast<int64_t>(s.kernels.size());
      r["prestarted"] = static_cast<int64_t>(s.spares.size());
      r["starting"] = static_cast<int64_t>(s.starting.size());
      r["spawned"] = s.spawned;
      r["evicted"] = s.evicted;
      r["reaped"] = s.reaped;
      return r.dump();
    },
  };
}

kernel_registry_actor
spawn_kernel_registry(caf::actor_system& sys, services_ptr svc,
                      std::string python, std::string default_python,
                      std::shared_ptr<warm_kernel_index>* warm) {
  kernel_routing routing;
  std::vector<std::string> enabled;
  for (auto t : svc->tools.all())
    enabled.push_back(t->name());
  routing.tools = effective_script_tools(enabled);
  for (auto& h : svc->script_host_tools)
    routing.tools.push_back(h.name);
  std::sort(routing.tools.begin(), routing.tools.end());
  routing.svc = std::move(svc);
  routing.python = std::move(python);
  routing.default_python = std::move(default_python);
  auto index = std::make_shared<warm_kernel_index>(std::move(routing));
  if (warm)
    *warm = index;
  // On the scheduler: kernel starts (interpreter resolution, staging
  // files, fork, exec) run on the blocking pool (begin_start), so its
  // handlers never block (docs/architecture.md, "Actors").
  auto impl = sys.spawn(registry_behavior, std::move(index));
  return caf::actor_cast<kernel_registry_actor>(impl);
}

} // namespace mibyan
