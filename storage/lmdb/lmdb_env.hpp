// File: storage/lmdb/lmdb_env.hpp
//
// RAII owner of the process's one LMDB environment (one `MDB_env` per
// directory per process: LMDB's locks break if a process opens the same
// environment twice, so a second `open` of the same directory fails).
//
// Transactions never outlive one call: `read` and `write` begin a
// transaction, run a callback with it, and commit or abort before they
// return. The environment is opened with MDB_NOTLS, so read transactions
// may run on any thread, concurrently with each other and with the single
// writer. Commits are synchronous (MDB_NOSYNC is never used): once `write`
// returns success the transaction survives a crash of the process.
//
// The map (8 GiB by default, sparse) grows by doubling when a write fails
// with MDB_MAP_FULL; the write callback is then run again from scratch in a
// new transaction, so it must not have side effects outside the
// transaction.
//
// Thread safety: all member functions may be called from any thread once
// the named databases were opened (`open_dbi` is for set-up, before the
// environment is shared).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>

#include <lmdb.h>

#include "storage/store_result.hpp"

namespace mibyan {

struct lmdb_options {
  /// Directory holding data.mdb and lock.mdb; created (0700) if missing
  /// unless `read_only`.
  std::string dir;
  /// Initial map size in bytes (address space, not disk: the file is
  /// sparse).
  uint64_t map_size = uint64_t{8} << 30;
  /// Largest map size that automatic growth may reach.
  uint64_t max_map_size = uint64_t{1} << 40;
  /// Number of named databases that can be opened.
  unsigned max_dbs = 32;
  /// Opens with MDB_RDONLY: `write` fails, nothing is created.
  bool read_only = false;
};

class lmdb_env {
public:
  /// Returned by a transaction callback that has put its own message into
  /// `error`: abort, do not retry.
  static constexpr int user_error = -1;
  /// Returned by a transaction function when the record it was asked for
  /// does not exist (`error` names it); reported as status_code::not_found.
  static constexpr int missing_error = -2;

  /// The status code for an LMDB or errno return code (not 0).
  static status_code code_of(int rc);

  /// A transaction callback: returns 0 to commit (or, for reads, success),
  /// an LMDB/errno code to abort (then `error`, if set, names the failing
  /// step), or `user_error`.
  using txn_fn = std::function<int(MDB_txn* txn, std::string& error)>;

  /// Opens (creating unless read-only) the environment in `opts.dir`.
  /// Errors: the directory cannot be created or is not accessible, the
  /// environment is already open in this process, LMDB refuses the files
  /// (version mismatch, not an LMDB file). Read-only, a missing directory
  /// or data.mdb is status_code::not_found.
  static store_result<std::unique_ptr<lmdb_env>>
  open(const lmdb_options& opts);

  ~lmdb_env();
  lmdb_env(const lmdb_env&) = delete;
  lmdb_env& operator=(const lmdb_env&) = delete;

  /// Opens the named database, creating it unless read-only. With
  /// MDB_DUPSORT etc. in `flags`. Read-only: a missing database is an
  /// error naming it. Not thread-safe: call during set-up.
  store_result<MDB_dbi> open_dbi(const char* name, unsigned flags = 0);

  /// For set-up (before the environment is shared): runs `fn` in ONE
  /// transaction that is committed, so the database handles `fn` opens
  /// (mdb_dbi_open) stay valid afterwards. Read-write, it is a write
  /// transaction (see `write`): everything `fn` creates appears to other
  /// processes at once or not at all. Read-only, a read transaction.
  store_status setup(const txn_fn& fn, const char* what);

  /// Runs `fn` in a write transaction and commits it (one fsync). Retries
  /// from scratch after growing the map when it is full. Errors: read-only
  /// environment, the callback's error, commit failure (disk full, I/O).
  store_status write(const txn_fn& fn, const char* what);

  /// Runs `fn` in a read-only transaction (any thread).
  store_status read(const txn_fn& fn, const char* what) const;

  bool read_only() const { return read_only_; }
  const std::string& dir() const { return dir_; }
  /// Bytes the store's data take now: `pages().used()` pages (0 when
  /// LMDB cannot say).
  uint64_t used_bytes() const;
  /// Current map size in bytes.
  uint64_t map_size() const;
  /// Bytes the data file occupies on disk (allocated blocks).
  uint64_t disk_bytes() const;
  /// The pages of the data file: the high-water mark (last used page + 1,
  /// which never shrinks, like the file) and how many of them are on
  /// LMDB's free list (reused by later writes). `used()` is what the
  /// store's data take now.
  struct page_counts {
    uint64_t page_size = 0;
    uint64_t high_water = 0;
    uint64_t free = 0;
    uint64_t used() const { return high_water - free; }
  };
  /// Reads them in one read transaction (any thread).
  store_result<page_counts> pages() const;
  /// The raw handle, for diagnostics and benchmarks. Never close it.
  MDB_env* raw() const { return env_; }

  // -- helpers for callbacks --------------------------------------------------

  static MDB_val val(std::string_view s) {
    return MDB_val{s.size(), const_cast<char*>(s.data())};
  }
  static std::string_view view(const MDB_val& v) {
    return {static_cast<const char*>(v.mv_data), v.mv_size};
  }
  /// mdb_get; `out` points into the map and is valid until the
  /// transaction ends.
  static int get(MDB_txn* txn, MDB_dbi dbi, std::string_view key,
                 std::string_view& out);
  static int put(MDB_txn* txn, MDB_dbi dbi, std::string_view key,
                 std::string_view value, unsigned flags = 0);
  /// mdb_del; MDB_NOTFOUND is returned, not hidden.
  static int del(MDB_txn* txn, MDB_dbi dbi, std::string_view key);

  /// Returns "<what>: <step>: <mdb_strerror(rc)>".
  static std::string describe(const char* what, const std::string& step,
                              int rc);

private:
  lmdb_env() = default;
  store_status grow(uint64_t failed_size);

  MDB_env* env_ = nullptr;
  std::string dir_;
  std::string registry_key_;
  bool read_only_ = false;
  uint64_t max_map_size_ = 0;
  // Shared by every transaction; taken exclusively to change the map size,
  // which LMDB only allows while this process has no transaction open.
  mutable std::shared_mutex resize_mutex_;
};

} // namespace mibyan
