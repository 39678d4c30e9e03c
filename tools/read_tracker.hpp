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

#include <string>

#include "tools/tool.hpp"

namespace mibyan {

/// Records that the caller's session has seen `path` (absolute) as it is on
/// disk now. Called by read_file after it returned content.
void note_file_read(const tool_context& ctx, const std::string& path);

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
