// File: agent/batch_plan.hpp
//
// Segmentation of one tool batch into parallel and sequential segments
// (docs/agent_loop.md, "Executing a batch"). Calls are taken in model order and split into
// maximal contiguous segments:
//
//   clarify, non-object arguments, and every tool that is neither
//   parallel-safe nor a file tool with a path -> sequential barrier;
//   read_file / search_files (readers) and write_file / patch (writers)
//   -> join the current parallel run unless a path they reserve overlaps
//   (one is a component-wise prefix of the other) a path reserved in the
//   run by a writer, or a writer's path overlaps any reserved path; then
//   the run closes and a new one starts with this call. A file tool
//   without a path (or a V4A patch naming no file) is a barrier;
//   search_files without a path reserves the working directory;
//   other parallel-safe tools -> join the current parallel run.
//
// A parallel run of fewer than 2 calls becomes sequential, and adjacent
// sequential segments merge. Segments run in order; the caller appends
// the results in model order whatever order they finish in.
//
// Thread safety: pure functions (the default path resolver reads $HOME
// and, for an empty cwd, the process working directory).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/chat.hpp"

namespace mibyan {

/// One segment: indexes into the batch, ascending, and how to run them.
struct batch_segment {
  std::vector<size_t> calls;
  bool parallel = false;

  friend bool operator==(const batch_segment& x, const batch_segment& y) {
    return x.calls == y.calls && x.parallel == y.parallel;
  }
};

/// Options of `plan_batch`.
struct batch_plan_options {
  /// Directory that relative paths resolve against (absolute).
  std::string cwd;
  /// Returns whether tool `name` is parallel-safe (read-only). Null means
  /// `default_parallel_safe`. MCP tools of servers that allow parallel
  /// calls are added by the caller's predicate.
  std::function<bool(std::string_view name)> parallel_safe;
  /// Returns the canonical absolute form of `path`. Null means lexical
  /// normalisation against `cwd` (`resolve_path` of tools/file_io.hpp);
  /// the caller may pass a realpath-based resolver.
  std::function<std::string(std::string_view path)> resolve;
};

/// Returns true for the built-in parallel-safe tools: read_file,
/// search_files, session_search, skill_view, skills_list, vision_analyze,
/// web_extract, web_search.
bool default_parallel_safe(std::string_view name);

/// Returns whether two absolute normalised paths overlap: equal, or one
/// is an ancestor directory of the other ("/a" and "/a/b" overlap, "/a/b"
/// and "/a/bc" do not).
bool paths_overlap(std::string_view a, std::string_view b);

/// Returns the file paths a V4A patch text names in its "*** Update File:",
/// "*** Add File:", "*** Delete File:", "*** Move File: a -> b" and
/// "*** Move to:" lines, in order of appearance (raw, not resolved).
std::vector<std::string> v4a_patch_paths(std::string_view patch);

/// Splits `calls` (the runnable calls of one batch, in model order) into
/// segments. Every index appears in exactly one segment, and concatenating
/// the segments gives 0, 1, ..., n-1. An empty batch gives no segment; a
/// single call gives one sequential segment.
std::vector<batch_segment> plan_batch(const std::vector<tool_call>& calls,
                                      const batch_plan_options& opts = {});

} // namespace mibyan
