// File: tools/file_checkpointer.hpp
//
// When the file tools take checkpoints (docs/checkpoints.md): once per
// project per turn, before the first write_file / patch there and before a
// terminal command classed as destructive (approvals/destructive.hpp), and
// which files the agent wrote after each checkpoint. The snapshots
// themselves are storage/file_checkpoint_store.hpp.
//
// One instance per runtime, reached through agent_tool_state::checkpoints
// (tools/agent/agent_tool_state.hpp). The conversation tells it when a
// session's turn starts (begin_turn); calls outside a turn (`mibyan tool`,
// an embedding's call_tool) take a checkpoint before every such call.
//
// Also the per-session notes a rollback leaves for the conversation: a
// rollback in a running process posts the marker it stored
// (post_note), and the conversation adds it to its history at the start of
// the next turn (take_notes), so the next request says the files were
// rolled back.
//
// Thread safety: every member may be called from any thread. begin_turn,
// post_note, take_notes and forget are quick and never block (a
// conversation calls them on its scheduler thread). before_write,
// before_command and after_write block on disk I/O: tools call them on
// their blocking-pool thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/json.hpp"
#include "base/status.hpp"
#include "tools/tool.hpp"

namespace mibyan {

class file_checkpoint_store;       // storage/file_checkpoint_store.hpp
struct options;

namespace approvals {
struct destructive_command;        // approvals/destructive.hpp
}

/// The start of the user message a rollback stores in its session (the
/// marker that the turn before it was undone; docs/checkpoints.md). Such
/// messages do not count as turns.
constexpr const char* rollback_marker_prefix = "[Mibyan rollback]";

/// What a tool does with the outcome of a checkpoint.
struct checkpoint_guard {
  /// The tool must not write: checkpoints.on_failure is "block" and the
  /// snapshot failed (the message is in `warning`).
  bool blocked = false;
  /// A failed or partial snapshot, for the tool result's
  /// "_checkpoint_warning" ("" = none).
  std::string warning;
};

class file_checkpointer {
public:
  /// `home` is $MIBYAN_HOME; the store opens on first use.
  explicit file_checkpointer(std::string home);
  ~file_checkpointer();

  /// Session `session` starts turn `turn` (1-based).
  void begin_turn(const std::string& session, int64_t turn);

  void post_note(const std::string& session, std::string text);
  std::vector<std::string> take_notes(const std::string& session);
  /// Drops the session's turn state and notes.
  void forget(const std::string& session);

  /// Before write_file / patch change `paths` (absolute).
  checkpoint_guard before_write(const tool_context& ctx,
                                const std::vector<std::string>& paths,
                                const std::string& tool);
  /// Before terminal runs `command` in `workdir`; does nothing unless the
  /// command is destructive.
  checkpoint_guard before_command(const tool_context& ctx,
                                  const std::string& workdir,
                                  const std::string& command);
  /// After write_file / patch wrote (or deleted) `paths`.
  void after_write(const tool_context& ctx,
                   const std::vector<std::string>& paths);

  /// The store (opened on first use with the limits of `cfg`), or the
  /// error that kept it from opening.
  result<std::shared_ptr<file_checkpoint_store>> store(const options& cfg);

private:
  struct turn_info {
    int64_t turn = 0;
    /// project -> checkpoint number taken in this turn
    std::map<std::string, int64_t> taken;
  };
  checkpoint_guard take(const tool_context& ctx, const std::string& project,
                        const std::string& tool, const std::string& reason,
                        const std::vector<std::string>& agent_files);

  std::string home_;
  std::mutex mtx_;                 // guards turns_, notes_, store_
  std::mutex snap_mtx_;            // one snapshot decision at a time
  std::map<std::string, turn_info> turns_;
  std::map<std::string, std::vector<std::string>> notes_;
  std::shared_ptr<file_checkpoint_store> store_;
};

/// The runtime's checkpointer when checkpoints are enabled for the call
/// (`checkpoints.enabled`), else null.
file_checkpointer* checkpointer_for(const tool_context& ctx);

/// Adds `g.warning` to a tool result as "_checkpoint_warning".
void add_checkpoint_warning(json::value& result, const checkpoint_guard& g);

} // namespace mibyan
