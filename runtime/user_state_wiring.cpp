// Per-user state in a shared store (docs/storage.md, "Per-user state";
// storage/user_state_store.hpp): with a store that several gateways share
// (PostgreSQL), the memory tool and the system prompt's memory block, the
// skill tools and the approvals' permanent allowlist read and write the
// store, so a memory, skill or "always" grant made through one gateway is
// what a turn on any other gateway uses. On LMDB (one node) they stay the
// files of $MIBYAN_HOME.
#include "runtime/runtime_impl.hpp"

#include "actors/services.hpp"
#include "approvals/approval_service.hpp"
#include "base/blocking_pool.hpp"
#include "base/log.hpp"
#include "storage/session_store.hpp"
#include "storage/user_state_store.hpp"
#include "tools/agent/agent_tool_state.hpp"
#include "tools/agent/memory_store.hpp"
#include "tools/agent/skill_sync.hpp"

namespace mibyan {

void attach_user_state(runtime_services& svc,
                       const std::shared_ptr<session_store>& store) {
  if (!store || std::string{store->backend()} == "lmdb")
    return;
  auto opened = open_user_state_store(*store);
  if (!opened) {
    MIBYAN_LOG(warning, "runtime",
               "per-user state stays in this node's files: " << opened.error);
    return;
  }
  // The store is held too: the user-state store borrows it.
  std::shared_ptr<user_state_store> us{
    opened->release(), [store](user_state_store* p) { delete p; }};
  if (svc.agent_tools)
    svc.agent_tools->user_state = us;
  if (svc.approvals) {
    approval_service::shared_allowlist a;
    std::weak_ptr<user_state_store> weak = us;
    a.load = [weak]() -> result<std::vector<std::string>> {
      auto s = weak.lock();
      if (!s)
        return result<std::vector<std::string>>::failure(
          status_code::unavailable, "the runtime is shutting down");
      auto docs = s->list(user_state_kind::allowlist, false);
      if (!docs)
        return result<std::vector<std::string>>{docs.get_status()};
      std::vector<std::string> keys;
      for (auto& d : *docs)
        keys.push_back(d.name);
      return result<std::vector<std::string>>{std::move(keys)};
    };
    a.add = [weak](const std::string& key) -> status {
      auto s = weak.lock();
      if (!s)
        return status::failure(status_code::unavailable,
                               "the runtime is shutting down");
      user_doc_write w;
      w.name = key;
      auto r = s->write(user_state_kind::allowlist, {w});
      return r ? status{} : r.get_status();
    };
    svc.approvals->set_shared_allowlist(std::move(a));
  }
  // The first gateway on a shared store brings its home's memory and
  // skills along (what the store already has wins), off the caller.
  if (svc.pool) {
    auto home = svc.cfg.home;
    svc.pool->submit([us, home] {
      if (auto n = import_memory_files(home, *us); !n)
        MIBYAN_LOG(warning, "runtime", "memory files not imported into the "
                                       "shared store: " << n.error);
      else if (*n > 0)
        MIBYAN_LOG(info, "runtime", "imported " << *n << " memory files "
                                    "into the shared store");
      if (auto s = sync_skills(home, *us); !s)
        MIBYAN_LOG(warning, "runtime", "skills not synced with the shared "
                                       "store: " << s.error);
    });
  }
}

} // namespace mibyan
