// File: storage/lmdb/lmdb_session_lease.hpp
//
// The LMDB leases (storage/session_lease.hpp): the lease store on an LMDB
// session store's environment, and the fencing check of store_write::fence
// that the LMDB session store runs inside its own write transactions.
// Internal to storage/.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <lmdb.h>

#include "storage/session_lease.hpp"

namespace mibyan {

class lmdb_session_store;

/// The lease store on `store`'s environment (named database "leases",
/// created unless it exists). Call during set-up. Errors: a read-only store.
result<std::shared_ptr<session_lease_store>>
open_lmdb_session_leases(lmdb_session_store& store,
                         std::function<int64_t()> now_ms);

/// Inside write transaction `txn`: 0 when `token` is the current token of
/// session `session_id`'s lease in txn's environment, or when no lease
/// store was opened on that environment in this process (nothing to fence
/// against); 1 with `error` set when a newer token exists (the write must
/// be refused: permission_denied, fenced_prefix); an LMDB code on a read
/// failure.
int lmdb_check_fence(MDB_txn* txn, const std::string& session_id,
                     uint64_t token, std::string& error);

} // namespace mibyan
