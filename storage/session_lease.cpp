// The backend dispatch of leases (storage/session_lease.hpp).
#include "storage/session_lease.hpp"

#include "storage/lmdb/lmdb_session_lease.hpp"
#include "storage/lmdb/lmdb_session_store.hpp"
#include "storage/postgres/pg_session_store.hpp"
#include "storage/postgres/pg_side_stores.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

std::string session_lease_name(const std::string& session_id) {
  return "session:" + session_id;
}

result<std::shared_ptr<session_lease_store>>
open_session_leases(session_store& store, std::function<int64_t()> now_ms) {
  if (auto* lmdb = dynamic_cast<lmdb_session_store*>(&store))
    return open_lmdb_session_leases(*lmdb, std::move(now_ms));
  if (auto* pg = dynamic_cast<pg_session_store*>(&store))
    return open_pg_session_leases(*pg, std::move(now_ms));
  return status::failure(status_code::unavailable,
                         "leases: this store backend has none");
}

} // namespace mibyan
