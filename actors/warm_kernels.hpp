// File: actors/warm_kernels.hpp
//
// Where a cell of `execute_code` runs, computed the same way by the kernel
// registry and by the fast path of the runtime's call facade
// (runtime/tool_call_facade.hpp), and the index of the kernels that are up:
//   * `kernel_routing`: the kernel key of a call (session, mode,
//     interpreter, working directory, tool set, active skills' variables;
//     docs/execute_code.md, "Kernel registry"). Immutable; any thread.
//   * `warm_kernel_index`: key -> running kernel, mirrored by the registry
//     (the one owner of kernels) whenever it adds or drops one. `take`
//     hands a warm cell straight to its kernel without a message to the
//     registry; it accepts only the plain case (valid `code`, no `reset`,
//     the script guard passes, a kernel for the key that has not ended)
//     and leaves everything else to the registry. Eviction and reaping go
//     through `remove_if_idle`, under the same lock as `take`, so a kernel
//     is never stopped between a `take` and its cell. Any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "caf/actor.hpp"

#include "actors/kernel.hpp"
#include "actors/services.hpp"
#include "messages/type_ids.hpp"

namespace mibyan {

struct kernel_shape {
  std::string mode;   // project | strict
  std::string python;
  std::string cwd;    // "" in strict mode: the kernel's own staging dir
  /// Variables of the session's active skills (docs/tools.md, "Skills"):
  /// part of the key, so a kernel started before a skill became active
  /// (or a spare) is not used for it.
  std::vector<std::string> skill_env;

  std::string text(const std::vector<std::string>& tools) const;
};

struct kernel_routing {
  services_ptr svc;
  /// Interpreter specs: project mode ("" = the active venv/conda env's),
  /// strict mode and fallback.
  std::string python;
  std::string default_python;
  /// The kernels' tool allow-list, sorted.
  std::vector<std::string> tools;

  kernel_shape shape_for(const tool_request& req) const;

  /// "default" for a call without a session.
  static std::string owner_of(const tool_request& req);

  std::string key_for(const std::string& owner,
                      const kernel_shape& shape) const {
    return owner + "|" + shape.text(tools);
  }
};

/// A warm cell handed to its kernel by `warm_kernel_index::take`.
struct warm_cell {
  kernel_cell_actor kernel;
  exec_cell cell;
};

class warm_kernel_index {
public:
  explicit warm_kernel_index(kernel_routing routing)
      : routing_(std::move(routing)) {}

  const kernel_routing& routing() const { return routing_; }

  /// The fast path: the cell for `req` and its kernel, with the kernel's
  /// use recorded (attached, last handed over); nothing when the registry
  /// must decide.
  std::optional<warm_cell> take(const tool_request& req);

  /// Registry side: a kernel serves `key` now.
  void put(const std::string& key, caf::actor handle,
           std::shared_ptr<kernel_usage> usage);

  /// Registry side: drops `key` if it still names `handle`.
  void remove(const std::string& key, const caf::actor& handle);

  /// Registry side: drops `key` if it names `handle` and no cell is
  /// attached; true when dropped (the kernel may then be stopped).
  bool remove_if_idle(const std::string& key, const caf::actor& handle);

private:
  struct entry {
    caf::actor handle;
    std::shared_ptr<kernel_usage> usage;
  };
  kernel_routing routing_;
  std::mutex mtx_;
  std::map<std::string, entry> kernels_;
};

/// `clock`'s steady time now in nanoseconds (the unit of kernel_usage's
/// times; the runtime's clock, actors/services.hpp).
int64_t usage_clock_now(const runtime_clock& clock);

} // namespace mibyan
