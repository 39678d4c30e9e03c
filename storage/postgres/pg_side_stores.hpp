// File: storage/postgres/pg_side_stores.hpp
//
// The PostgreSQL implementations of the small per-session stores other
// parts keep beside the session store, on the same database and
// connection pool (tables in storage/postgres/pg_schema.hpp):
//   prompt_store      (storage/prompt_store.hpp)     mibyan_prompts,
//                                                    mibyan_session_prompts
//   checkpoint_store  (storage/checkpoint_store.hpp) mibyan_checkpoints
//   session_lease_store (storage/session_lease.hpp)  mibyan_leases
//   user_state_store (storage/user_state_store.hpp)  mibyan_user_state
//                                                    (not per session)
// pg_session_store::delete_session removes a session's rows of all three
// kinds in its own transaction (no delete hook needed).
//
// The returned object borrows `store`, which must outlive it. Thread safety: as the session store (any thread; calls
// block on the network).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "storage/store_result.hpp"

namespace mibyan {

class pg_session_store;
class prompt_store;
class checkpoint_store;
class session_lease_store;
class user_state_store;

store_result<std::unique_ptr<prompt_store>>
open_pg_prompt_store(pg_session_store& store);

/// `owner` (may be null) is kept alive as long as the checkpoint store:
/// open_checkpoint_store passes the shared session store.
store_result<std::unique_ptr<checkpoint_store>>
open_pg_checkpoint_store(pg_session_store& store,
                         std::shared_ptr<void> owner = nullptr);

/// `now_ms` (null = the database server's clock, shared by every gateway)
/// is the clock of lease expiries.
store_result<std::shared_ptr<session_lease_store>>
open_pg_session_leases(pg_session_store& store,
                       std::function<int64_t()> now_ms = nullptr);

store_result<std::unique_ptr<user_state_store>>
open_pg_user_state(pg_session_store& store);

} // namespace mibyan
