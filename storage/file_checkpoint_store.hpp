// File: storage/file_checkpoint_store.hpp
//
// File checkpoints (docs/checkpoints.md): snapshots of a project's files
// taken before the agent changes them, kept in a shadow git store written
// with libgit2, and restored on request.
//
// Layout under `dir` (production: `$MIBYAN_HOME/checkpoints/`):
//   store.git/          a bare git repository: blobs, trees and one commit
//                       per checkpoint; one ref per project,
//                       refs/mibyan/<key>, at its newest checkpoint (the
//                       commits of a project form one chain)
//   projects/<key>.json the project's checkpoint records (number, time,
//                       session, turn, tool, tree, the files the agent
//                       wrote after it, what the snapshot left out)
//   projects/<key>.stat the stat cache of the last snapshot (file stat ->
//                       blob id), so unchanged files are not read again
//   lock                flock(2) taken by every change, across processes
// <key> = the first 20 hex digits of the git hash of the project path.
//
// A project is the git root above a path (the directory holding `.git`),
// else the given fallback directory. A snapshot walks the project tree
// without following symlinks (a link is stored as a link), never enters or
// reads any `.git`, leaves out what the project's .gitignore files ignore
// and files over `max_file_bytes`, and refuses a tree of more than
// `max_files` files whole. The user's own repository is never opened or
// written: the ignore rules are evaluated by the shadow repository with
// the project as its work tree.
//
// Thread safety: one instance may be used from any thread; calls are
// serialised by a mutex (a libgit2 repository is not thread-safe). Several
// processes may share a directory: changes hold the lock file.
// Blocking (disk I/O): call on a blocking-pool thread, never a scheduler
// thread. Nothing throws; failures come back as status values whose codes
// say what happened: resource_exhausted (disk full, limits), permission_
// denied (a read-only store or project), data_corrupt (a damaged store or
// record file), not_found (no such checkpoint).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.hpp"

struct git_repository;

namespace mibyan {

struct file_checkpoint_limits {
  /// Files larger than this are left out of a snapshot.
  uint64_t max_file_bytes = uint64_t{10} << 20;
  /// A tree with more files is not snapshotted.
  size_t max_files = 50000;
  /// Checkpoints kept per project; older ones are pruned after a snapshot
  /// once more than keep / 10 are due (prune() prunes at once).
  size_t keep = 50;
  /// Checkpoints older than this are pruned (0 = no age limit).
  int64_t max_age_ms = int64_t{7} * 86'400'000;
};

/// One checkpoint's record.
struct file_checkpoint {
  /// 1, 2, ... per project, never reused.
  int64_t number = 0;
  /// The project root (absolute).
  std::string project;
  /// Hex ids of the snapshot's tree and its commit.
  std::string tree;
  std::string commit;
  int64_t time_ms = 0;
  std::string session_id;
  /// The session's turn the checkpoint was taken in (0 = outside a turn).
  int64_t turn = 0;
  /// The tool about to change files: write_file, patch, terminal, or
  /// "restore" for the safety snapshot a restore takes first.
  std::string tool;
  /// What made it (the destructive command's reasons, "" for the file
  /// tools).
  std::string reason;
  /// Project-relative paths the agent wrote after this checkpoint and
  /// before the next one of the same turn; a directory ends with '/', "."
  /// stands for the whole tree (a command whose targets are unknown).
  std::vector<std::string> agent_files;
  /// Project-relative paths the snapshot left out (too large, unreadable).
  std::vector<std::string> skipped;
  /// Files (and links) in the snapshot.
  int64_t files = 0;
  /// Set by undo_marker(): the checkpoint's changes were rolled back.
  bool rolled_back = false;
};

/// What a snapshot is for.
struct snapshot_request {
  /// The project root (absolute, an existing directory).
  std::string project;
  std::string session_id;
  int64_t turn = 0;
  std::string tool;
  std::string reason;
  /// Paths (project-relative) already known to be the agent's.
  std::vector<std::string> agent_files;
};

struct snapshot_outcome {
  file_checkpoint checkpoint;
  /// Things a user should know (files left out, a prune that failed).
  std::vector<std::string> warnings;
};

struct restore_options {
  /// Restore every file of the snapshot (and delete files made after it),
  /// not only the agent's.
  bool all = false;
  /// Restore only this path (project-relative or absolute; a directory
  /// restores what is under it). Empty = no restriction.
  std::string file;
  /// Take a safety checkpoint of the current state first (tool "restore").
  bool safety_snapshot = true;
  std::string session_id;
};

struct restore_report {
  /// Project-relative paths written back to the checkpoint's content.
  std::vector<std::string> restored;
  /// Paths created after the checkpoint that were deleted.
  std::vector<std::string> deleted;
  /// Paths that differ from the checkpoint but were left as they are: not
  /// written by the agent (without `all`) or left out of the snapshot.
  std::vector<std::string> kept;
  /// "path: why" for each path that could not be restored.
  std::vector<std::string> failed;
  /// The checkpoints whose agent files were restored (number order).
  std::vector<int64_t> covered;
  /// The safety checkpoint's number (0 = none taken).
  int64_t safety_number = 0;
  std::vector<std::string> warnings;
};

class file_checkpoint_store {
public:
  ~file_checkpoint_store();
  file_checkpoint_store(const file_checkpoint_store&) = delete;
  file_checkpoint_store& operator=(const file_checkpoint_store&) = delete;

  /// Returns `home + "/checkpoints"`.
  static std::string default_dir(const std::string& home);

  /// Opens the store in `dir`, creating it (0700) when missing. Errors:
  /// permission_denied / resource_exhausted when it cannot be created,
  /// data_corrupt when store.git is not a readable repository (the
  /// message says to move the directory away).
  static result<std::unique_ptr<file_checkpoint_store>>
  open(const std::string& dir, file_checkpoint_limits limits = {});

  /// The project of absolute `path` (a file or directory, which need not
  /// exist): the nearest ancestor directory holding `.git`; else
  /// `fallback` when `path` lies inside it; else the nearest existing
  /// directory of `path`.
  static std::string project_of(const std::string& path,
                                const std::string& fallback);

  /// Takes a checkpoint of `req.project` and prunes the project's old
  /// ones. Errors: invalid_argument (not a directory, the root, $HOME
  /// itself unless it is a git root, or a tree holding the store), resource_exhausted (more than max_files files, a full
  /// disk), permission_denied, data_corrupt.
  result<snapshot_outcome> snapshot(const snapshot_request& req);

  /// Adds project-relative `files` to checkpoint `number`'s agent files.
  status add_agent_files(const std::string& project, int64_t number,
                         const std::vector<std::string>& files);

  /// The project's checkpoints, oldest first (empty when none).
  result<std::vector<file_checkpoint>> list(const std::string& project) const;
  /// Every project's checkpoints.
  result<std::vector<file_checkpoint>> list_all() const;

  /// A unified diff from checkpoint `number` to the files on disk now
  /// (only `file` when given). Errors: not_found.
  result<std::string> diff(const std::string& project, int64_t number,
                           const std::string& file = {}) const;

  /// Restores checkpoint `number` (see restore_options). Paths that cannot
  /// be written are listed in `failed`; the call itself fails only when
  /// nothing could be attempted (unknown checkpoint, unreadable store).
  result<restore_report> restore(const std::string& project, int64_t number,
                                 const restore_options& opts);

  /// Marks checkpoints `numbers` of `project` as rolled back.
  status mark_rolled_back(const std::string& project,
                          const std::vector<int64_t>& numbers);

  /// Prunes every project by count and age; returns how many checkpoints
  /// were removed.
  result<size_t> prune();

  const std::string& dir() const { return dir_; }
  const file_checkpoint_limits& limits() const { return limits_; }

private:
  // One project's records (projects/<key>.json).
  struct meta {
    std::string project;
    std::string key;
    int64_t next = 1;
    std::vector<file_checkpoint> checkpoints;
  };
  file_checkpoint_store() = default;
  status lock(int& fd) const;
  result<meta> read_meta(const std::string& project) const;
  status write_meta(const meta& m) const;
  std::string key_of(const std::string& project) const;
  status prune_project(meta& m, std::vector<std::string>& warnings,
                       size_t slack);
  status collect_garbage();

  std::string dir_;
  file_checkpoint_limits limits_;
  git_repository* repo_ = nullptr;
  mutable std::mutex mtx_;
};

} // namespace mibyan
