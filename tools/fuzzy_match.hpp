// File: tools/fuzzy_match.hpp
//
// The find-and-replace matcher behind `patch` (and later skill_manage):
// models quote code with small differences (indentation, trailing spaces,
// smart quotes, escaped newlines), so after an exact search the matcher
// tries progressively looser strategies, in this order:
//
//   exact                 byte-for-byte
//   line_trimmed          whole lines, each compared after trimming
//   whitespace_normalized whole lines, runs of blanks collapsed to one space
//   indentation_flexible  whole lines, leading blanks ignored and blank
//                         lines skipped on both sides
//   escape_normalized     old_string with \n \t \" \' \\ unescaped
//   trimmed_boundary      old_string with surrounding whitespace removed
//   unicode_normalized    smart quotes, dashes, odd spaces, ellipsis folded
//   block_anchor          first and last lines equal (trimmed), middle lines
//                         at least 50 % similar; unique candidate only
//   context_aware         every line at least 50 % and on average 80 %
//                         similar; unique candidate only
//
// The first strategy that finds anything decides. Line-based matches
// re-indent new_string by the indentation difference between old_string
// and the matched lines, so a model that got the indentation wrong still
// writes correctly indented code.
//
// Files whose lines all end in CRLF are matched with LF and written back
// with CRLF, so a patch never mixes line endings.
//
// Thread-safe (pure functions); never throws except std::bad_alloc.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mibyan {

/// The outcome of `fuzzy_replace`.
struct fuzzy_outcome {
  /// The edited text; valid when `error` is empty.
  std::string content;
  /// How many places were replaced.
  size_t replacements = 0;
  /// The name of the strategy that matched (see the file comment).
  std::string strategy;
  /// Empty on success, else the message for the model. When nothing
  /// matched, `not_found` is true and the caller words the message (it
  /// knows the path).
  std::string error;
  bool not_found = false;
};

/// Replaces `old_text` by `new_text` in `content`. Without `replace_all`
/// exactly one match is required; several give the error
/// "Found N matches for old_string. Provide more context to make it unique,
/// or use replace_all=True.". Refuses escape drift (new_text gaining \' or
/// \" that neither old_text nor the file has). `old_text` must not be
/// empty (the caller checks).
fuzzy_outcome fuzzy_replace(std::string_view content,
                            std::string_view old_text,
                            std::string_view new_text, bool replace_all);

/// Returns a hint showing the lines of `content` most similar to `old_text`
/// as `N|line` rows (at most `max_lines`), headed by their range and
/// similarity; "" when nothing is at least 30 % similar. Bounded work: very
/// large files are scanned only until a fixed comparison budget is spent.
std::string closest_section(std::string_view content,
                            std::string_view old_text, size_t max_lines = 20);

} // namespace mibyan
