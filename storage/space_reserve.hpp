// File: storage/space_reserve.hpp
//
// Disk space kept in reserve next to the session store, so that deleting
// sessions works on a full disk (docs/storage.md, "Full disk").
//
// LMDB never updates a page in place: even a delete writes new copies of
// the pages it touches (and grows the free list) before the old ones can
// be reused, so on a full file system a delete fails with ENOSPC like any
// write. The store therefore keeps a file of real, allocated blocks
// (`reserve`, 8 MiB) in its directory. Every ordinary write competes for
// the space without it; `delete_session` removes the file first, deletes,
// then tries to allocate it again (which fails quietly while the disk is
// still full and is retried on the next read-write open).
//
// Thread safety: none needed (file operations only); blocking I/O.
#pragma once

#include <cstdint>
#include <string>

namespace mibyan {

/// Size of the reserve file.
constexpr uint64_t store_reserve_bytes = uint64_t{8} << 20;

/// `<dir>/reserve`.
std::string reserve_path(const std::string& dir);

/// Creates the reserve file (0600, blocks allocated) unless it exists with
/// the full size. Returns "" or why it could not (e.g. ENOSPC); a partial
/// file is removed.
std::string ensure_reserve(const std::string& dir,
                           uint64_t bytes = store_reserve_bytes);

/// Removes the reserve file, handing its blocks back to the file system.
void release_reserve(const std::string& dir);

} // namespace mibyan
