// File: cli/rollback.hpp
//
// Rolling files back to a checkpoint (docs/checkpoints.md), shared by
// `mibyan checkpoints restore` and chat's `/rollback`: which checkpoints a
// rollback restores, the restore itself, and the marker it stores in the
// session (a user message starting with rollback_marker_prefix, which
// `sessions show` lists and the next request to the model carries).
//
// Blocking (files, the store); called on the command's own thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "storage/file_checkpoint_store.hpp"

namespace mibyan {
class session_store;
class runtime;
struct options;
}

namespace mibyan::cli {

struct rollback_target {
  std::string project;
  int64_t number = 0;
  std::string session_id;
  int64_t turn = 0;
  std::string tool;
};

struct rollback_result {
  std::vector<rollback_target> targets;
  std::vector<restore_report> reports;
  /// The marker text ("" when nothing was restored).
  std::string marker;
};

/// The checkpoints that undo the last turn of `session` that has any not
/// yet rolled back: per project, that turn's first checkpoint. Errors:
/// not_found when the session has none.
result<std::vector<rollback_target>>
last_turn_targets(const file_checkpoint_store& store,
                  const std::string& session);

/// Restores `targets` with `opts` (its `file` and `all`), one report each.
result<rollback_result> run_rollback(file_checkpoint_store& store,
                                     const std::vector<rollback_target>& targets,
                                     const restore_options& opts);

/// The marker for `r`: what was restored, and that the turn is undone.
std::string rollback_marker(const rollback_result& r);

/// Appends the marker as a user message of `session_id` (when the store
/// knows the session). Errors: the store's.
status store_rollback_marker(session_store& store,
                             const std::string& session_id,
                             const std::string& marker);

/// Lines for a person: restored, deleted, kept, failed, warnings.
std::string describe_rollback(const rollback_result& r);

/// The store of `opts` ($MIBYAN_HOME/checkpoints with the checkpoints.*
/// limits).
result<std::unique_ptr<file_checkpoint_store>>
open_checkpoints(const options& opts);

/// chat's `/rollback [N] [--all]` for `session_id` of `rt` (cli/
/// chat_rollback.cpp): restores, prints what it did on stdout (errors on
/// stderr), stores the marker and posts it for the session's next turn.
void chat_rollback(runtime& rt, const options& opts,
                   const std::string& session_id, const std::string& arg);

} // namespace mibyan::cli
