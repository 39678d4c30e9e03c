#include "actors/session_writer.hpp"

#include "caf/all.hpp"

#include "actors/error_mapping.hpp"
#include "base/log.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

namespace {

caf::error storage_error(const status& st) {
  return to_actor_error(st);
}

session_writer_actor::behavior_type
writer(session_writer_actor::pointer self,
       std::shared_ptr<session_store> store) {
  (void) self;
  return {
    [=](create_atom, const session_meta& m) -> caf::result<std::string> {
      new_session s;
      s.id = m.id;
      s.source = m.source;
      s.model = m.model;
      s.provider = m.provider;
      s.cwd = m.cwd;
      s.title = m.title;
      s.parent_session_id = m.parent_session_id;
      auto r = store->create_session(s);
      if (!r)
        return storage_error(r.get_status());
      return r->id;
    },
    [=](append_atom, const message_append& a) -> caf::result<uint64_t> {
      auto r = store->append_message(a.session_id, a.message, a.key);
      if (!r) {
        MIBYAN_LOG(error, "store", "append to " << a.session_id
                   << " failed: " << r.error);
        return storage_error(r.get_status());
      }
      return r->id;
    },
    [=](usage_atom, const usage_update& u) -> caf::result<bool> {
      if (auto st = store->add_usage(u.session_id, u.usage, u.api_calls); !st)
        return storage_error(st);
      return true;
    },
    [=](end_atom, const std::string& id,
        const std::string& reason) -> caf::result<bool> {
      if (auto st = store->end_session(id, reason); !st)
        return storage_error(st);
      return true;
    },
  };
}

} // namespace

session_writer_actor spawn_session_writer(caf::actor_system& sys,
                                          std::shared_ptr<session_store> store) {
  return sys.spawn<caf::detached>(writer, std::move(store));
}

} // namespace mibyan
