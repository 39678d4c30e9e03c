// File: storage/file_checkpoint_git.hpp
//
// The libgit2 and file-system helpers of storage/file_checkpoint_store:
// the project walk, reading entries without following links, flattening a
// snapshot's tree, safe writes into a project and libgit2 error mapping.
// Internal to storage/file_checkpoint_*.cpp. Blocking; the caller holds
// the store's mutex (the repository is not thread-safe).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "storage/file_checkpoint_store.hpp"
#include "storage/libgit2_library.hpp"

namespace mibyan::file_checkpoint_detail {

/// git modes of what a snapshot holds.
constexpr uint32_t mode_file = 0100644;
constexpr uint32_t mode_exec = 0100755;
constexpr uint32_t mode_link = 0120000;

/// A failure of libgit2 call `what` (return code `rc`), with the library's
/// message and a code from it: resource_exhausted for a full disk,
/// permission_denied for permissions and read-only file systems,
/// data_corrupt for damaged objects, else internal.
status git_failure(const std::string& what, int rc);
/// The code for an errno value (ENOSPC, EDQUOT, EFBIG -> resource_exhausted;
/// EACCES, EPERM, EROFS -> permission_denied; else internal).
status_code code_of_errno(int err);

struct disk_entry {
  uint32_t mode = mode_file;
  uint64_t size = 0;
  /// What the stat cache compares (nanoseconds, inode).
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t ino = 0;
};

/// The blob ids of files as they were when last snapshotted, keyed by
/// project-relative path: a file whose mode, size, mtime, ctime and inode
/// are unchanged is not read again (git's index does the same). Entries
/// whose mtime is within 100 ms of the snapshot are not cached ("racily
/// clean": a write in the same tick would go unseen).
struct stat_cache_entry {
  disk_entry e;
  git_oid id{};
};
using stat_cache = std::map<std::string, stat_cache_entry>;

/// Reads `path` (empty when missing or damaged: a cache is only a cache).
stat_cache read_stat_cache(const std::string& path);
/// Writes `c` to `path` atomically; fails with the errno's code.
status write_stat_cache(const std::string& path, const stat_cache& c);
/// lstat of `path` as a disk_entry; false when it is missing or neither a
/// regular file nor a link.
bool stat_entry(const std::string& path, disk_entry& out);
/// Whether `a` (the cache) still describes `b` (the disk).
bool same_stat(const disk_entry& a, const disk_entry& b);

struct walk_result {
  /// Project-relative path -> entry (regular files and links only).
  std::map<std::string, disk_entry> files;
  /// Left out: over the size limit, unreadable.
  std::vector<std::string> skipped;
  std::vector<std::string> warnings;
  /// More than max_files files: `files` is incomplete.
  bool too_many = false;
};

/// Walks `root` with the shadow repository `repo` (its work tree is set to
/// `root` for the ignore rules). Never follows a link, never enters
/// `.git`. `only` (project-relative, "" = everything) limits the walk to a
/// path and what is under it.
walk_result walk_project(git_repository* repo, const std::string& root,
                         const file_checkpoint_limits& limits,
                         const std::string& only = {});

/// The content of `root/rel`: the file's bytes (opened with O_NOFOLLOW),
/// or a link's target. Errors: the entry changed kind, is larger than
/// `max_bytes`, cannot be read.
result<std::string> read_entry(const std::string& root, const std::string& rel,
                               const disk_entry& e, uint64_t max_bytes);

struct tree_entry {
  git_oid id{};
  uint32_t mode = mode_file;
};

/// Every blob of tree `tree_hex` by project-relative path. Errors:
/// data_corrupt when the tree or an entry is missing or damaged.
result<std::map<std::string, tree_entry>>
flatten_tree(git_repository* repo, const std::string& tree_hex);

/// Whether project-relative `rel` is covered by `paths` ("." = everything,
/// "dir/" = under dir, otherwise the path itself or under it).
bool covered(const std::string& rel, const std::vector<std::string>& paths);

/// `rel` made project-relative from a path given by a user or a tool
/// (absolute under `root`, or relative to `root`), folded lexically; ""
/// when it leaves the project.
std::string relative_to(const std::string& root, const std::string& path);

/// Writes `content` (mode: file, exec or link) at `root/rel` atomically,
/// creating missing parents. Refuses to go through a symlink or a
/// non-directory on the way (a link leading out of the project is never
/// followed). Fails with permission_denied for a symlink on the way,
/// invalid_argument for a non-directory parent, already_exists for a
/// non-empty directory at the path, else the errno's code.
status write_entry(const std::string& root, const std::string& rel,
                   const std::string& content, uint32_t mode);

/// Removes the file or link `root/rel` (never a directory's content; an
/// emptied parent directory is removed too, up to the root). Fails with
/// permission_denied when a parent is not a real directory, else the
/// errno's code; a missing file is not a failure.
status remove_entry(const std::string& root, const std::string& rel);

/// Whether every directory on the way from `root` to `rel` is a real
/// directory (no symlink, nothing missing).
bool parents_are_dirs(const std::string& root, const std::string& rel);

/// Hex of an oid.
std::string hex(const git_oid& id);

/// strerror-like text of an errno value.
std::string errno_text(int err);

/// Writes all of `data` to `fd` (retrying on EINTR): 0, or the errno of
/// the failure (EIO for a write that wrote nothing).
int write_all(int fd, std::string_view data);

/// Milliseconds since the epoch (system clock).
int64_t now_ms();

/// Makes a commit of checkpoint `c`'s tree with `parent` (may be null),
/// authored by "mibyan" at `c.time_ms` with a message naming the
/// checkpoint, and returns its id. Errors: data_corrupt for a bad tree id,
/// git_failure's codes.
result<git_oid> make_commit(git_repository* repo, const file_checkpoint& c,
                            const git_commit* parent);

/// Closes `fd` when it goes out of scope (the store's lock, held while a
/// change reads and writes the records).
struct fd_closer {
  int fd = -1;
  ~fd_closer();
};

/// The blob id `content` would have.
git_oid blob_id(const std::string& content);

} // namespace mibyan::file_checkpoint_detail
