// File: storage/lmdb/lmdb_user_state.hpp
//
// The LMDB implementation of user_state_store (storage/user_state_store.hpp)
// on an lmdb_session_store's environment, in the named database
// `user_state`:
//   kind byte + name  -> record version byte (1), varint document version,
//                        svarint updated_at_ms, then the document's bytes
//   "\0"              -> be64 of the last version handed out (the counter
//                        that only grows)
// Created by the first read-write open; a read-only store written before it
// has no documents (reads find nothing, writes are refused).
//
// Thread safety: see user_state_store. Open it while setting up (it opens
// its database), before the environment is shared with other threads.
#pragma once

#include <memory>

#include "storage/user_state_store.hpp"

namespace mibyan {

class lmdb_session_store;

/// `store` must outlive the result. Errors: LMDB refuses to open the
/// database.
store_result<std::unique_ptr<user_state_store>>
open_lmdb_user_state(lmdb_session_store& store);

} // namespace mibyan
