// File: storage/lmdb/lmdb_inspect.hpp
//
// Raw access to an LMDB session store's environment for tests, benchmarks
// and diagnostics, without <lmdb.h>: read, write and drop records of its
// named databases, and read the environment's figures (map size, pages,
// last transaction). Production code never writes through it; tests use
// it to damage or downgrade a store on purpose.
//
// Every function takes the store through the interface and fails with
// invalid_argument when it is not an LMDB store. Each call is one LMDB
// transaction (see lmdb_env: any thread).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "storage/session_store.hpp"

namespace mibyan::lmdb_inspect {

/// The schema version this build writes (lmdb_session_store has it too).
constexpr int schema_version_current = 2;

/// One change of a raw write.
struct change {
  enum class kind : uint8_t {
    /// Sets `key` to `value` in `db` (created when missing).
    put,
    /// Deletes `key` from `db` (a missing key is an error).
    del,
    /// Empties `db` (keeps the database).
    drop,
  };
  kind what = kind::put;
  std::string db;
  std::string key;
  std::string value;
};

/// Applies `changes` in order in ONE write transaction: all or nothing.
store_status write(session_store& s, const std::vector<change>& changes);

/// The value of `key` in `db` (nullopt when missing; an error when the
/// database does not exist).
store_result<std::optional<std::string>>
get(const session_store& s, const std::string& db, const std::string& key);

/// Every (key, value) of `db` whose key starts with `prefix`, in key order.
store_result<std::vector<std::pair<std::string, std::string>>>
scan(const session_store& s, const std::string& db,
     const std::string& prefix = {});

/// Figures of one named database (0 entries when it does not exist).
struct db_figures {
  uint64_t entries = 0;
  /// Branch, leaf and overflow pages.
  uint64_t pages = 0;
  /// The same, one kind at a time, and the B-tree's depth.
  uint64_t branch_pages = 0;
  uint64_t leaf_pages = 0;
  uint64_t overflow_pages = 0;
  uint32_t depth = 0;
};
store_result<db_figures> database(const session_store& s,
                                  const std::string& db);

/// Figures of the environment.
struct env_figures {
  /// Current map size in bytes.
  uint64_t map_size = 0;
  uint64_t page_size = 0;
  /// Last used page + 1 (the data file's high-water mark).
  uint64_t high_water = 0;
  /// Pages on LMDB's free list.
  uint64_t free_pages = 0;
  /// The id of the last committed transaction.
  uint64_t last_txn = 0;
  /// Bytes the data file occupies on disk.
  uint64_t disk_bytes = 0;
  uint64_t used_pages() const { return high_water - free_pages; }
};
store_result<env_figures> environment(const session_store& s);

/// Adds a delete hook (lmdb_session_store::add_delete_hook) that deletes,
/// in delete_session's transaction, the entries of `db` whose key is the
/// session id or starts with the id and a '\0' (the layout of a store
/// keyed by session); with `fail_with` set it fails with that message
/// instead, which must abort the whole delete.
store_status add_delete_hook(session_store& s, const std::string& db,
                             const std::string& fail_with = {});

/// Creates an LMDB environment in `dir` with no databases, and closes it:
/// what a process that creates a store leaves before its set-up commits.
store_status create_bare_environment(const std::string& dir);

} // namespace mibyan::lmdb_inspect
