// File: storage/session_lease_lmdb.hpp
//
// The LMDB side of leases (storage/session_lease.hpp) that the LMDB session
// store needs inside its own write transactions: the fencing check of
// store_write::fence. Internal to storage/.
#pragma once

#include <cstdint>
#include <string>

#include <lmdb.h>

namespace mibyan {

/// The lease name of a session's conversation.
std::string session_lease_name(const std::string& session_id);

/// Inside write transaction `txn`: 0 when `token` is the current token of
/// session `session_id`'s lease in txn's environment, or when no lease
/// store was opened on that environment in this process (nothing to fence
/// against); 1 with `error` set when a newer token exists (the write must
/// be refused: permission_denied, fenced_prefix); an LMDB code on a read
/// failure.
int lmdb_check_fence(MDB_txn* txn, const std::string& session_id,
                     uint64_t token, std::string& error);

} // namespace mibyan
