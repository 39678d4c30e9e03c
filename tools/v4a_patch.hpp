// File: tools/v4a_patch.hpp
//
// The V4A multi-file patch format accepted by `patch` in mode "patch":
//
//   *** Begin Patch
//   *** Update File: src/app.py
//   @@ def main():
//    context line
//   -removed line
//   +added line
//   *** Add File: docs/new.md
//   +first line
//   *** Delete File: old.txt
//   *** Move File: a.txt -> b.txt
//   *** End Patch
//
// An Update section may carry `*** Move to: <new path>`; a Move section may
// carry hunks like an Update. `@@ <text>` starts a hunk and names a line
// that precedes it (used to pick the right place when the context occurs
// more than once). An empty line inside a hunk is an empty context line.
// This file only parses and applies hunks to text; the patch tool does the
// file system work.
//
// Thread-safe (pure functions); never throws except std::bad_alloc.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mibyan {

/// One hunk of an Update section.
struct v4a_hunk {
  /// The text after "@@" (trimmed, trailing "@@" removed); may be empty.
  std::string hint;
  /// Context and removed lines, in order (what the file has now).
  std::vector<std::string> old_lines;
  /// Context and added lines, in order (what the file gets).
  std::vector<std::string> new_lines;
};

/// One file operation.
struct v4a_section {
  enum class kind { add, update, remove };
  kind what = kind::update;
  /// The file operated on (as written in the patch).
  std::string path;
  /// Update/Move: the new path when the file is renamed; else empty.
  std::string move_to;
  /// Add: the file's content.
  std::string content;
  /// Update: the hunks, in file order.
  std::vector<v4a_hunk> hunks;
};

/// Parses `text` into `out`. Returns "" on success, else a message naming
/// the offending line. Requires "*** Begin Patch" first and
/// "*** End Patch" last (a missing end usually means a truncated call).
std::string parse_v4a(std::string_view text, std::vector<v4a_section>& out);

/// Applies `hunks` in order to `content` (each hunk must match exactly one
/// place, fuzzily as in fuzzy_replace; a hint restricts the search to the
/// text after the first line containing it). Returns "" and sets `out`, or
/// an error naming the failing hunk.
std::string apply_v4a_hunks(std::string_view content,
                            const std::vector<v4a_hunk>& hunks,
                            std::string& out);

} // namespace mibyan
