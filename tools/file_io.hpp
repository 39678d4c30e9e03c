// File: tools/file_io.hpp
//
// File-system helpers shared by the file tools (read_file, write_file,
// patch): path resolution, whole-file reads, binary and image sniffing,
// similar-name lookup and the atomic write.
//
// All functions are thread-safe (no shared state) and never throw; failures
// come back as messages a model can act on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "tools/tool.hpp"

namespace mibyan {

/// Longest path text the file tools accept, in bytes.
constexpr size_t max_path_chars = 4096;

/// Fails with invalid_argument and a message when `path` cannot name a
/// file: empty, longer than `max_path_chars`, or containing a NUL byte.
status check_path_text(std::string_view path);

/// Returns `path` as an absolute, lexically normalised path (no "." or ".."
/// components, no trailing slash). "~" and "~/..." expand to $HOME; other
/// relative paths resolve against `cwd`, or the process working directory
/// when `cwd` is empty. Symlinks are not resolved.
std::string resolve_path(std::string_view path, std::string_view cwd);

/// Returns `$MIBYAN_HOME` for a call: `ctx.home`, else `ctx.cfg->home`, else
/// the environment, else the default state directory (`$HOME/.mibyan`, see
/// base/state_dir.hpp).
std::string mibyan_home_of(const tool_context& ctx);

/// Reads the whole regular file at `path`. Fails when it cannot be opened
/// or read (the errno's code), is not a regular file (invalid_argument), or
/// is larger than `max_bytes` (resource_exhausted).
result<std::string> read_whole_file(const std::string& path,
                                    size_t max_bytes);

/// Returns true when `head` (the first bytes of a file, typically 8 KiB)
/// looks binary: it contains a NUL byte, or more than 30 % of it is control
/// bytes or invalid UTF-8.
bool looks_binary(std::string_view head);

/// Returns the MIME type when `path` names an image, judged by extension or
/// by the magic bytes in `head`; "" otherwise. SVG counts as text.
std::string image_mime_type(const std::string& path, std::string_view head);

/// Returns up to `max` existing entries of the directory of `path` whose
/// names resemble the file name of `path` (case-insensitive equality, a
/// shared stem, substring or small edit distance), best first, as absolute
/// paths. Empty when the directory cannot be listed.
std::vector<std::string> similar_files(const std::string& path, size_t max);

/// What a successful `atomic_write` did.
struct write_outcome {
  /// Number of parent directories that had to be created.
  int dirs_created = 0;
  /// The file actually replaced (the target when `path` is a symlink).
  std::string written_path;
  /// The identity of the file written (device, inode) and its size, for
  /// checking cheaply that it is still the one at `path`.
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t size = 0;
};

/// Replaces the file at `path` with `content` atomically: creates missing
/// parent directories, writes a temporary file in the target directory,
/// fsyncs it, gives it the mode of the file it replaces (or 0666 minus the
/// umask for a new file), renames it over the target and fsyncs the
/// directory. A symlink at `path` is followed, so the link stays a link.
/// Concurrent writers never leave a mixed file: the last rename wins.
/// Fails without touching anything (invalid_argument) when `path` is a
/// directory or not a regular file, or a parent component is not a
/// directory; other failures carry the errno's code and replace nothing.
result<write_outcome> atomic_write(const std::string& path,
                                   std::string_view content);

} // namespace mibyan
