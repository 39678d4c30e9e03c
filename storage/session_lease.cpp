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

status session_lease_store::check(const std::string& name,
                                  uint64_t token) const {
  auto row = get(name);
  if (!row)
    return row.code == status_code::not_found ? status{} : row.get_status();
  if (row->token > token)
    return status::failure(status_code::permission_denied,
                           std::string{fenced_prefix} + "lease '" + name
                             + "' has token " + std::to_string(row->token)
                             + " (held by " + row->holder
                             + "); this writer holds "
                             + std::to_string(token));
  return {};
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
