#include "runtime/tool_call_facade.hpp"

#include <map>
#include <mutex>
#include <vector>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "actors/warm_kernels.hpp"
#include "base/json.hpp"
#include "messages/type_ids.hpp"

namespace mibyan {

namespace {

tool_outcome error_outcome(const std::string& text) {
  json::value r;
  r["error"] = "Runtime error: " + text;
  return tool_outcome{r.dump(), 0, false};
}

} // namespace

struct tool_call_facade::pending_calls {
  std::mutex mtx;
  uint64_t next_id = 0;
  bool closed = false;
  std::map<uint64_t, std::function<void(tool_outcome)>> waiting;
  caf::actor actor; // null once closed

  /// Registers `done` and returns its id and the actor to send it to; 0
  /// when closed (the caller answers `done` itself).
  uint64_t add(std::function<void(tool_outcome)>& done, caf::actor& to) {
    std::lock_guard<std::mutex> guard{mtx};
    if (closed || !actor)
      return 0;
    auto id = ++next_id;
    waiting.emplace(id, std::move(done));
    to = actor;
    return id;
  }

  /// Runs the callback of `id` once (no-op when already answered).
  void complete(uint64_t id, tool_outcome out) {
    std::function<void(tool_outcome)> done;
    {
      std::lock_guard<std::mutex> guard{mtx};
      auto i = waiting.find(id);
      if (i == waiting.end())
        return;
      done = std::move(i->second);
      waiting.erase(i);
    }
    done(std::move(out));
  }

  /// Closes and answers everything still waiting with `text`; returns
  /// the actor (to be stopped by the caller).
  caf::actor close(const std::string& text) {
    std::vector<std::function<void(tool_outcome)>> left;
    caf::actor was;
    {
      std::lock_guard<std::mutex> guard{mtx};
      closed = true;
      was.swap(actor);
      for (auto& [id, done] : waiting)
        left.push_back(std::move(done));
      waiting.clear();
    }
    for (auto& done : left)
      done(error_outcome(text));
    return was;
  }
};

namespace {

struct facade_state {
  std::shared_ptr<tool_call_facade::pending_calls> pending;
  ~facade_state() {
    // However the actor ends, nobody waits for ever.
    if (pending)
      pending->close("the runtime is shutting down");
  }
  static const char* name;
};

const char* facade_state::name = "tool_call_facade";

caf::behavior
facade_impl(caf::io::stateful_broker<facade_state>* self,
            std::shared_ptr<tool_call_facade::pending_calls> pending,
            tool_dispatcher_actor dispatcher, kernel_registry_actor kernels,
            std::shared_ptr<warm_kernel_index> warm) {
  self->state.pending = pending;
  // Sends `req` to the registry (execute_code) or the dispatcher.
  auto route = [=](uint64_t id, tool_request req) {
    auto target = dispatcher;
    // execute_code straight to its backend, one hop less (the dispatcher
    // only delegates it: actors/tool_dispatcher.hpp).
    if (req.tool == "execute_code" && kernels)
      target = caf::actor_cast<tool_dispatcher_actor>(kernels);
    if (!target) {
      pending->complete(id, error_outcome("the runtime is shutting down"));
      return;
    }
    self->request(target, caf::infinite, invoke_atom_v, std::move(req))
      .then(
        [=](tool_response& res) {
          pending->complete(id, tool_outcome{std::move(res.result_json),
                                             res.duration_us,
                                             res.timed_out});
        },
        [=](caf::error& err) {
          pending->complete(id, error_outcome(self->system().render(err)));
        });
  };
  return {
    [=](invoke_atom, uint64_t id, tool_request& req) {
      // A warm cell goes straight to its kernel broker, on this same
      // thread: no message to the registry (actors/warm_kernels.hpp).
      if (req.tool == "execute_code" && warm) {
        if (auto hit = warm->take(req)) {
          self->request(hit->kernel, caf::infinite, exec_atom_v,
                        std::move(hit->cell))
            .then(
              [=](tool_response& res) {
                pending->complete(id, tool_outcome{std::move(res.result_json),
                                                   res.duration_us,
                                                   res.timed_out});
              },
              [=](caf::error&) mutable {
                // The kernel ended before it took the cell (a kernel
                // answers every cell it takes): the registry starts a
                // fresh one.
                route(id, std::move(req));
              });
          return;
        }
      }
      route(id, std::move(req));
    },
  };
}

} // namespace

tool_call_facade::tool_call_facade(caf::actor_system& sys,
                                   tool_dispatcher_actor dispatcher,
                                   kernel_registry_actor kernels,
                                   std::shared_ptr<warm_kernel_index> warm)
    : pending_(std::make_shared<pending_calls>()) {
  auto actor = sys.middleman().spawn_broker(facade_impl, pending_,
                                            std::move(dispatcher),
                                            std::move(kernels),
                                            std::move(warm));
  std::lock_guard<std::mutex> guard{pending_->mtx};
  pending_->actor = std::move(actor);
}

tool_call_facade::~tool_call_facade() {
  stop();
}

void tool_call_facade::call(tool_request req,
                            std::function<void(tool_outcome)> done) {
  caf::actor to;
  auto id = pending_->add(done, to);
  if (id == 0) {
    done(error_outcome("the runtime is shutting down"));
    return;
  }
  caf::anon_send(to, invoke_atom_v, id, std::move(req));
}

void tool_call_facade::stop() {
  if (auto actor = pending_->close("the runtime is shutting down"))
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
}

} // namespace mibyan
