// File: tools/file_lock.hpp
//
// An exclusive advisory lock (flock) on a lock file, held for the object's
// lifetime: serialises read-modify-write cycles on a file shared by
// several threads or processes (memory files, docs/tools.md "Memory";
// skill files, "Skills"). The lock file is created 0600 if missing and
// never removed (removing it would let two holders lock different inodes).
//
// Thread safety: one object per holder; flock locks belong to the open
// file description, so two objects in one process exclude each other too.
// Blocks the calling thread until the lock is granted: call from tool
// worker threads, never from a CAF scheduler thread.
#pragma once

#include <string>

namespace mibyan {

class file_lock {
public:
  /// Opens (creating) `path` and waits for the exclusive lock. `what`
  /// names the protected data in error messages ("the memory file").
  explicit file_lock(const std::string& path,
                     const std::string& what = "the file");
  ~file_lock();
  file_lock(const file_lock&) = delete;
  file_lock& operator=(const file_lock&) = delete;

  /// "" when the lock is held; otherwise why not.
  const std::string& error() const { return error_; }

private:
  int fd_ = -1;
  std::string error_;
};

} // namespace mibyan
