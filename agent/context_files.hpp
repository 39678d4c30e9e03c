// File: agent/context_files.hpp
//
// Project context files and the personal identity file for a new session's
// system prompt (docs/agent_loop.md, "Project context files").
//
// From the session's working directory, each of these is searched from the
// directory up to the project root (the nearest ancestor holding `.git`;
// without one, the working directory alone), the nearest match winning:
//   1. `.mibyan.md`, else `MIBYAN.md` (checked in that order per directory)
//   2. `AGENTS.md`
//   3. `CLAUDE.md`
//   4. `.cursorrules`
//   5. `.cursor/rules/*.mdc` (every such file of the nearest directory that
//      has any, by name, at most `max_rule_files`)
// All that are found are combined in that order. `$MIBYAN_HOME/SOUL.md`,
// when present, opens the system prompt.
//
// Each file is checked before it is used: a symbolic link whose target lies
// outside the project root, anything but a regular file, a file over
// `max_file_bytes`, an unreadable one and a binary one (a NUL byte or
// invalid UTF-8) are skipped with a warning. The text kept is at most
// `max_chars` code points (head and tail, with a marker in the middle). It
// is scanned for injection (cron/prompt_scan.hpp); a flagged file is
// loaded behind a visible warning block, or left out (with a warning) when
// `refuse_flagged`.
//
// CAF-free. Blocks on file I/O: call from the blocking pool or another
// non-scheduler thread. Never throws; any problem is a warning and the
// file is skipped.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace mibyan {

struct context_load_options {
  /// The session's working directory ("" = no project files).
  std::string cwd;
  /// $MIBYAN_HOME ("" = no SOUL.md).
  std::string home;
  /// Characters (code points) kept per file.
  size_t max_chars = 20000;
  /// Files larger than this are skipped unread.
  size_t max_file_bytes = size_t{2} << 20;
  /// Leave flagged files out instead of loading them behind a warning.
  bool refuse_flagged = false;
  /// Most `.cursor/rules/*.mdc` files loaded.
  size_t max_rule_files = 16;
};

/// One file that was loaded.
struct context_file {
  /// The path as found (absolute).
  std::string path;
  /// The path relative to the working directory ("../AGENTS.md"), or
  /// "$MIBYAN_HOME/SOUL.md".
  std::string label;
  /// The text placed in the prompt (capped), without the warning block.
  std::string text;
  /// Code points of the whole file, and whether the middle was cut.
  size_t chars = 0;
  bool truncated = false;
  /// Reasons of the injection scan (empty = clean).
  std::vector<std::string> findings;
};

struct loaded_context {
  /// $MIBYAN_HOME/SOUL.md (`path` empty when absent).
  context_file soul;
  /// The project files, in prompt order.
  std::vector<context_file> files;
  /// One line per file skipped or refused, and per flagged file
  /// ("AGENTS.md: skipped: it is a symbolic link to /etc/passwd, outside
  /// the project").
  std::vector<std::string> warnings;
  /// The project root the search stopped at.
  std::string root;

  /// The block that follows the base prompt: a "# Project context"
  /// heading and one section per file (a flagged file's section starts with
  /// its warning block); "" when no file was loaded.
  std::string project_block() const;
  /// The SOUL.md text that opens the prompt ("" when absent); a flagged
  /// SOUL.md carries its warning block too.
  std::string soul_block() const;
};

/// Finds, checks and reads the files (see the file comment).
loaded_context load_context_files(const context_load_options& opts);

/// `text` cut to at most `max_chars` code points: the head (70%) and the
/// tail (the rest) with "[... N characters of LABEL cut here ...]" between
/// them, always on character boundaries. Unchanged when short enough.
std::string cap_context_text(const std::string& text, size_t max_chars,
                             const std::string& label, bool* truncated);

} // namespace mibyan
