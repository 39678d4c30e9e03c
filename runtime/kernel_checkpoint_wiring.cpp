// Kernel checkpoints in the runtime (docs/execute_code.md, "Checkpoints"):
// the checkpoint hub's store and key, the stored history a restore counts
// cells from, and the last checkpoints stored before a runtime ends.
#include <chrono>
#include <memory>
#include <string>

#include "caf/all.hpp"

#include "actors/kernel_checkpoints.hpp"
#include "base/json.hpp"
#include "base/log.hpp"
#include "runtime/runtime_impl.hpp"
#include "storage/checkpoint_store.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

namespace {

// How long a runtime that ends waits for its kernels' last checkpoints.
constexpr auto final_checkpoint_wait = std::chrono::seconds(10);

// The execution count of the last execute_code result in a session's
// stored history (-1: none): after a restart, how many cells ran past a
// checkpoint (kernel_checkpoints::set_history_count). Blocking; results
// that do not parse are skipped.
int64_t last_recorded_execution_count(session_store& store,
                                      const std::string& session) {
  auto msgs = store.load_messages(session);
  if (!msgs)
    return -1;
  for (auto it = msgs->rbegin(); it != msgs->rend(); ++it) {
    const auto& m = it->message;
    if (m.role != "tool" || m.tool_name != "execute_code")
      continue;
    auto parsed = json::parse(m.content);
    if (!parsed || !parsed.v->is_object())
      continue;
    if (auto k = parsed.v->find("kernel"); k && k->is_object())
      if (auto n = k->get_int("execution_count", -1); n >= 0)
        return n;
  }
  return -1;
}

} // namespace

// Kernel checkpoints live in the session store's environment; the key is
// read (made on first use) only when checkpoints are on.
void attach_checkpoint_store(runtime_services& svc,
                             const std::shared_ptr<session_store>& store) {
  // Kept alive with the checkpoint store (pool jobs may still store one
  // while the runtime ends), as agent_tools->store keeps it.
  auto opened = open_checkpoint_store(store);
  if (!opened) {
    MIBYAN_LOG(warning, "runtime", "kernel checkpoints unavailable: "
                                     << opened.error);
    return;
  }
  svc.checkpoints->set_store(std::shared_ptr<checkpoint_store>(
    std::move(*opened)));
  // Weak: the hub outlives nothing that needs the store.
  std::weak_ptr<session_store> weak = store;
  svc.checkpoints->set_history_count(
    [weak](const std::string& session) -> int64_t {
      auto s = weak.lock();
      return s ? last_recorded_execution_count(*s, session) : -1;
    });
  if (!svc.checkpoints->enabled() || svc.checkpoints->has_key())
    return; // off, or a cluster's key (cluster/node.cpp)
  auto key = kernel_checkpoints::load_or_create_key(svc.cfg.home);
  if (!key) {
    MIBYAN_LOG(warning, "runtime", "kernel checkpoints off: " << key.error);
    svc.checkpoints->set_enabled(false);
    return;
  }
  svc.checkpoints->set_key(std::move(*key));
}

void store_final_kernel_checkpoints(runtime_impl& p) {
  // Kernel state outlives the process (docs/execute_code.md,
  // "Checkpoints"): the checkpoint a cell's answer left pending, or each
  // idle session kernel's final one, is stored before the kernels stop.
  // Bounded: a cell still running or a store that hangs cannot hold the
  // exit for longer than final_checkpoint_wait.
  if (p.sys && p.kernels && p.svc && p.svc->checkpoints
      && p.svc->checkpoints->enabled()) {
    caf::scoped_actor self{*p.sys};
    self->request(p.kernels, final_checkpoint_wait, checkpoint_atom_v)
      .receive(
        [](bool ok) {
          if (!ok)
            MIBYAN_LOG(warning, "runtime", "not every kernel checkpoint "
                                           "was stored before exit");
        },
        [&p](caf::error& e) {
          MIBYAN_LOG(warning, "runtime", "kernel checkpoints before exit: "
                                           << p.sys->render(e));
        });
  }
}

} // namespace mibyan
