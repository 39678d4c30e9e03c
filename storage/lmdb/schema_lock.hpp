// File: storage/lmdb/schema_lock.hpp
//
// The lock that makes a schema migration of the session store the work of
// one process (docs/storage.md, "Several processes"). LMDB serialises
// write transactions, but a migration is several transactions (the index
// rebuild commits in chunks): two processes opening an old store at once
// would both migrate it, each undoing the other's progress. A migrating
// process holds an exclusive flock(2) on `<store dir>/schema.lock` from
// before it re-reads the schema version until the last step committed;
// the next one then finds the current version and does nothing.
//
// The lock is released by the destructor, or by the kernel when the
// process dies (a `kill -9` never leaves it held). The file stays.
//
// Thread safety: one object per migration; not shared. `acquire` blocks
// (it waits for another process's migration to end): call it while
// opening the store, never on a CAF scheduler thread.
#pragma once

#include <string>

#include "storage/store_result.hpp"

namespace mibyan {

class schema_lock {
public:
  /// `<dir>/schema.lock`.
  static std::string path_in(const std::string& dir);

  /// Opens (creating, 0600) the lock file in the store directory `dir`
  /// and waits for the exclusive lock. Errors: the file cannot be created
  /// or opened (permission_denied for EACCES/EPERM/EROFS), flock fails.
  static store_result<schema_lock> acquire(const std::string& dir);

  schema_lock(schema_lock&& other) noexcept;
  schema_lock& operator=(schema_lock&& other) noexcept;
  schema_lock(const schema_lock&) = delete;
  schema_lock& operator=(const schema_lock&) = delete;
  /// Releases the lock.
  ~schema_lock();

private:
  explicit schema_lock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

} // namespace mibyan
