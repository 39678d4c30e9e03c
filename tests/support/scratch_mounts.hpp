// File: tests/support/scratch_mounts.hpp
//
// File systems that fail writes on purpose, for the full-disk and
// no-permission tests: a tiny tmpfs mounted over a directory (root only,
// else not available), and a directory made read-only (a read-only bind
// mount as root, where permissions do not stop writes; chmod 0555
// otherwise). Both are undone when the object goes. `ok()` says whether it
// could be set up; tests that need it say so with a message and skip that
// part.
#pragma once

#include <cstddef>
#include <string>

namespace mibyan::test {

/// `n` pseudo-random bytes (xorshift, the same every call) that no
/// compression shrinks: what fills a tmpfs_mount to the brim.
std::string incompressible_bytes(size_t n);

class tmpfs_mount {
public:
  /// Mounts a tmpfs of `bytes` bytes on the existing directory `dir`.
  tmpfs_mount(std::string dir, size_t bytes);
  ~tmpfs_mount();
  tmpfs_mount(const tmpfs_mount&) = delete;
  tmpfs_mount& operator=(const tmpfs_mount&) = delete;
  bool ok() const { return mounted_; }
  const std::string& why() const { return why_; }

private:
  std::string dir_;
  bool mounted_ = false;
  std::string why_;
};

class readonly_dir {
public:
  explicit readonly_dir(std::string dir);
  ~readonly_dir();
  readonly_dir(const readonly_dir&) = delete;
  readonly_dir& operator=(const readonly_dir&) = delete;
  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }

private:
  std::string dir_;
  bool bind_ = false;
  bool chmod_ = false;
  bool ok_ = false;
  std::string why_;
};

} // namespace mibyan::test
