// File: storage/lmdb/space_reserve.hpp
//
// Disk space kept in reserve next to the session store, so that deleting
// sessions works on a full disk (docs/storage.md, "Full disk").
//
// LMDB never updates a page in place: even a delete writes new copies of
// the pages it touches (and grows the free list) before the old ones can
// be reused, so on a full file system a delete fails with ENOSPC like any
// write. The store therefore keeps a file of real, allocated blocks
// (`reserve`) in its directory. Every ordinary write competes for the
// space without it; `delete_session` removes the file first, deletes, then
// tries to allocate it again (which fails quietly while the disk is still
// full and is retried on the next read-write open).
//
// Size (reserve_size): a delete copies the pages it touches (in the index,
// about one per distinct word of the session), so the reserve follows the
// store: max(8 MiB, store / 16), at most 64 MiB, and at most a quarter of
// the file system, so that a small disk (a few MiB) still gets one; never
// under 64 KiB. A reserve that is too small is grown
// in place; a new one is allocated as `reserve.<pid>.tmp` and renamed, so
// a crash never leaves a partial `reserve` behind (stale temporary files
// of dead processes are removed by the next ensure_reserve).
//
// Thread safety: none needed (file operations only); several processes
// may call ensure_reserve on one directory at once. Blocking I/O.
#pragma once

#include <cstdint>
#include <string>

namespace mibyan {

/// The reserve for a store of `store_bytes` on a file system of
/// `fs_bytes` (0 = unknown: no file-system cap), rounded up to 4 KiB.
uint64_t reserve_size(uint64_t store_bytes, uint64_t fs_bytes);

/// The reserve for the store in `dir`: reserve_size of its data.mdb's
/// allocated bytes and of the size of the file system holding `dir`.
uint64_t reserve_size_for(const std::string& dir);

/// `<dir>/reserve`.
std::string reserve_path(const std::string& dir);

/// Makes `<dir>/reserve` a regular file (0600) with at least `bytes`
/// allocated (0 = reserve_size_for(dir)): keeps one that is big enough,
/// grows a smaller one in place, or allocates a new one under a temporary
/// name and renames it. Returns "" or why it could not (e.g. ENOSPC); a
/// reserve that could not be grown keeps its old size.
std::string ensure_reserve(const std::string& dir, uint64_t bytes = 0);

/// Removes the reserve file, handing its blocks back to the file system.
void release_reserve(const std::string& dir);

/// Whether the file system holding `dir` has less room left for this
/// user than twice the reserve the store needs (reserve_size_for): only
/// then does a delete need the reserve's blocks. True when it cannot tell.
bool space_is_short(const std::string& dir);

} // namespace mibyan
