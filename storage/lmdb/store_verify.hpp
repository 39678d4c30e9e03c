// File: storage/lmdb/store_verify.hpp
//
// Checks an LMDB environment's files before LMDB maps them
// (docs/storage.md, "Verification on open"). LMDB trusts its files: a
// FIFO in place of data.mdb blocks the open forever, a truncated file
// raises SIGBUS on the first access past its end, and a zeroed file is
// reported as a generic error. The checks, on `<dir>/data.mdb`:
//   - it is a regular file (not a FIFO, device, directory or symlink),
//     and so is `lock.mdb` when present;
//   - it holds both meta pages, each with LMDB's magic and data version 1
//     and a page size that is a power of two from 512 to 64 KiB;
//   - it is at least as long as the newest valid meta page's last page
//     says (last_pg + 1 pages).
// An empty data.mdb (size 0) is what LMDB itself creates before the first
// commit and passes.
//
// Thread safety: none needed. Blocking file I/O (two small reads).
#pragma once

#include <string>

namespace mibyan {

/// Returns "" when `<dir>/data.mdb` is missing or looks like a sound LMDB
/// data file, else a message naming the file and the problem.
std::string verify_lmdb_files(const std::string& dir);

} // namespace mibyan
