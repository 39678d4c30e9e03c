// File: storage/prompt_store.hpp
//
// The system prompts sessions started with (docs/storage.md, "Stored system
// prompts"): each distinct prompt text is stored once, under the lower-case
// hex SHA-256 of its bytes, and a session references at most one prompt.
// A resumed session replays its referenced prompt byte for byte
// (docs/agent_loop.md, "The frozen system prompt").
//
// Lifetime: a prompt lives while a session references it. Changing or
// dropping a session's reference deletes the prompt in the same
// transaction when it was the last reference; deleting a session drops its
// reference inside its delete transaction (the LMDB implementation
// registers a delete hook on the session store when it is opened).
// `collect` removes what a crash, or a delete through a store on which no
// prompt store was opened, may have left: references of sessions that no
// longer exist and prompts nothing references.
//
// Thread safety: every member may be called from any thread; each call is
// one transaction, committed (fsync'd) before a write returns. Calls block
// on disk I/O: never call them from a CAF scheduler thread. Nothing
// throws; errors are values naming the operation.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "storage/store_result.hpp"

namespace mibyan {

class session_store;

class prompt_store {
public:
  virtual ~prompt_store() = default;

  /// Stores `text` (unless a prompt of the same hash is stored) and makes
  /// it the prompt of `session_id`, replacing an earlier reference.
  /// Returns the hash. The session need not exist yet (`collect` removes
  /// a reference whose session was never created). Errors: empty id,
  /// read-only store, I/O.
  virtual store_result<std::string> put(const std::string& session_id,
                                        const std::string& text)
    = 0;

  /// Makes the stored prompt `hash` the prompt of `session_id` (a
  /// compressed session's continuation keeps its prompt). Errors:
  /// not_found when no prompt of that hash is stored.
  virtual store_status reference(const std::string& session_id,
                                 const std::string& hash)
    = 0;

  /// The hash `session_id` references; not_found when none.
  virtual store_result<std::string>
  hash_of(const std::string& session_id) const = 0;

  /// The prompt text stored under `hash`; not_found when it is missing,
  /// data_corrupt when its record is damaged or does not match its hash.
  virtual store_result<std::string> get(const std::string& hash) const = 0;

  /// Drops the reference of `session_id` (and the prompt when it was the
  /// last one). Ok when the session referenced nothing.
  virtual store_status drop(const std::string& session_id) = 0;

  /// Removes references of sessions that do not exist and prompts that no
  /// session references. Returns how many prompts were removed.
  virtual store_result<size_t> collect() = 0;

  /// Stored prompts (for tests and `verify`).
  virtual store_result<size_t> count() const = 0;
};

/// The prompt store of `store`'s backend, on the same storage (`store`
/// must outlive it); for LMDB storage/lmdb/lmdb_prompt_store.hpp. Open it
/// while setting up. Errors: the backend keeps no prompts
/// (status_code::unavailable), or its storage refuses.
store_result<std::unique_ptr<prompt_store>>
open_prompt_store(session_store& store);

} // namespace mibyan
