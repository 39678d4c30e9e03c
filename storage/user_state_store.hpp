// File: storage/user_state_store.hpp
//
// Per-user state that a turn reads, kept in the session store's database so
// that every gateway over one store sees the same (docs/storage.md,
// "Per-user state"): the memory files (kind memory: MEMORY.md, USER.md),
// the skills' files (kind skill: "[<category>/]<name>/<path in the skill>")
// and the command allowlist's permanent grants (kind allowlist: one
// document per pattern key, empty bytes).
//
// A document is (kind, name) -> bytes with a version. Versions come from
// one counter of the store that only grows (never reused, also after a
// delete), so a version a reader saw names exactly one state of the
// document: a write that passes the version it read (compare-and-set) is
// refused when anyone wrote or deleted the document since, and no update is
// lost when two gateways change one document at once.
//
// Contract (every backend; tests/store_contract_test.cpp runs it on each):
//   - `write` applies its changes in ONE transaction, all or nothing,
//     committed before it returns; a change whose `expected` version does
//     not match fails the whole batch with status_code::already_exists and
//     a message starting "conflict: " naming the document.
//   - Names: 1..max_name_bytes bytes of UTF-8 without NUL, control
//     characters or a leading '/'; bytes at most max_doc_bytes; at most
//     max_batch changes a batch. Else invalid_argument, nothing written.
//   - A backend that cannot be reached gives status_code::unavailable
//     (retryable) and nothing is half-written.
//
// Thread safety: every member may be called from any thread; calls block on
// disk or network I/O (never call them on a CAF scheduler thread). Nothing
// throws.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "storage/store_result.hpp"

namespace mibyan {

class session_store;

enum class user_state_kind : uint8_t { memory = 1, skill = 2, allowlist = 3 };

/// "memory", "skill", "allowlist".
const char* to_string(user_state_kind k);
/// Every kind, in numeric order (store copy walks them).
const std::vector<user_state_kind>& user_state_kinds();

struct user_doc {
  std::string name;
  /// Empty when listed without bytes.
  std::string bytes;
  /// > 0 for a stored document.
  uint64_t version = 0;
  /// Milliseconds since the epoch of the last write.
  int64_t updated_at_ms = 0;
};

/// `expected` for a write that does not compare.
constexpr uint64_t user_doc_any_version = UINT64_MAX;

/// One change of a batch.
struct user_doc_write {
  std::string name;
  std::string bytes;
  /// Delete the document (bytes ignored). Deleting a missing document with
  /// `expected` any or 0 succeeds.
  bool erase = false;
  /// The version the caller read: 0 = the document must not exist,
  /// user_doc_any_version = no comparison.
  uint64_t expected = user_doc_any_version;
};

class user_state_store {
public:
  static constexpr size_t max_name_bytes = 512;
  static constexpr size_t max_doc_bytes = size_t{4} << 20;
  static constexpr size_t max_batch = 1024;

  virtual ~user_state_store() = default;

  /// Errors: a malformed name (invalid_argument), no such document
  /// (not_found), damaged record (data_corrupt).
  virtual store_result<user_doc> get(user_state_kind kind,
                                     const std::string& name) const = 0;
  /// The documents of `kind` in name order (bytes only `with_bytes`).
  virtual store_result<std::vector<user_doc>>
  list(user_state_kind kind, bool with_bytes) const = 0;
  /// Applies `changes` (see the contract above). Returns the new version of
  /// each change in input order (0 for a delete).
  virtual store_result<std::vector<uint64_t>>
  write(user_state_kind kind, const std::vector<user_doc_write>& changes) = 0;
};

/// Checks a batch the way every backend does (the contract's limits);
/// `what` names the operation in the message.
store_status check_user_doc_writes(const std::vector<user_doc_write>& changes,
                                   const char* what);
/// Checks one name.
store_status check_user_doc_name(const std::string& name, const char* what);

/// The user-state store of `store`'s backend, on the same database (`store`
/// must outlive it): the LMDB environment's `user_state` database or
/// PostgreSQL's mibyan_user_state table. Errors: a backend without one
/// (unavailable), a read-only store written before the database existed
/// (unavailable).
store_result<std::unique_ptr<user_state_store>>
open_user_state_store(session_store& store);

} // namespace mibyan
