// File: tools/read_tracker.hpp
//
// The write-after-read check of write_file and patch (docs/tools.md,
// "Stale writes"): per session, what version of each file the model last
// saw (read it with read_file, or wrote it itself). A write or patch of a
// file whose version on disk changed since then gets a `_warning` in its
// result, because the model's edit was based on content that is no longer
// there (another process, a terminal command or a parallel session changed
// it). The write itself still happens.
//
// A version is (mtime in ns, size, inode) plus a 64-bit hash of the content
// for files up to 8 MB, so a touched-but-identical file does not warn.
//
// Memory is bounded: at most 2,048 files per session and 256 sessions; the
// least recently used are forgotten (a forgotten file never warns).
//
// Thread safety: all functions may be called concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <sys/stat.h>

#include "tools/tool.hpp"

namespace mibyan {

/// Records that the caller's session has seen `path` (absolute) as it is on
/// disk now (a stat and, up to read_tracker_hash_bytes, a read of the whole
/// file for its hash).
void note_file_read(const tool_context& ctx, const std::string& path);

/// Files up to this size are remembered with their content hash.
constexpr int64_t read_tracker_hash_bytes = 8 << 20;

/// The same record from what the caller already knows: `st` is fstat of
/// the file it read and `hash` content_hasher's value of the bytes it read
/// (tools/line_index.hpp; nullopt for a file over read_tracker_hash_bytes).
/// No system call. Called by read_file.
void note_file_read(const tool_context& ctx, const std::string& path,
                    const struct stat& st, std::optional<uint64_t> hash);

/// Returns the `_warning` text for writing `path` (absolute) now, or "" when
/// the session never saw the file or it is unchanged since.
std::string stale_write_warning(const tool_context& ctx,
                                const std::string& path);

/// Records that the session just wrote `path` (its version on disk now is
/// known to the model). Called after a successful write or patch.
void note_file_written(const tool_context& ctx, const std::string& path);

/// Forgets everything about `session_id`.
void forget_session_reads(const std::string& session_id);

} // namespace mibyan
