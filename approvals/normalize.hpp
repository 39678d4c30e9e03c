// File: approvals/normalize.hpp
//
// Canonical forms of a shell command for the approval patterns
// (docs/approvals.md, "Normalisation"). Pure functions, no state, no CAF;
// safe on any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mibyan::approvals {

/// Paths folded back to their short spelling by step 4.
struct home_paths {
  /// The resolved `$HOME` ("" or "/" = not folded).
  std::string home;
  /// `$MIBYAN_HOME` ("" = not folded).
  std::string mibyan_home;
  /// `$HOME` as spelled in the environment when it differs from the
  /// resolved path (a symlink); folded too ("" = none).
  std::string home_unresolved;
};

/// Steps 1-7 of the normalisation (everything but lowercasing): ANSI
/// escapes and NUL removed, compatibility folding of characters that have
/// an ASCII form (NFKC for full-width forms, math letters, ligatures,
/// circled letters, Unicode spaces; zero-width characters dropped),
/// backslash-newline joined, home paths folded to `~` / `~/.mibyan`,
/// `\x` unescaped, empty quote pairs removed, `${IFS}` / `$IFS` -> space.
std::string normalize_preserving_case(std::string_view command,
                                      const home_paths& paths);

/// The detection variants of one command. `cased` holds the case-preserved
/// forms (for case-sensitive patterns); `lower` holds the same forms
/// lowercased (the canonical string first). Duplicates are removed.
struct command_variants {
  std::vector<std::string> cased;
  std::vector<std::string> lower;
  /// Dangerous keys found by the structural analysis
  /// (approvals/structure.hpp), matched like pattern keys.
  std::vector<std::string> structural;
};

/// Builds every variant: the canonical string; the command-start split
/// (a newline after each quote-aware command start, subshells and groups
/// included); the per-word de-obfuscation (`"r"m`, `'r'm` -> `rm`,
/// `$(echo rm)` -> `rm`); the wrapper-stripped form (leading `sudo`,
/// `env`, assignments, `nohup`, `timeout N`, ... and `/bin/rm` -> `rm`,
/// `$HOME` -> `~`); the bodies of `sh -c '...'` / `eval '...'`; and the
/// resolved forms of approvals/structure.hpp (built from steps 1-4 only,
/// so that escapes reach the shell lexer intact), whose keys go to
/// `structural`.
command_variants make_variants(std::string_view command,
                               const home_paths& paths);

/// True when `command` contains a shell operator (`;`, `&`, `|`,
/// backtick, `$(`, `>`, `<`, newline), quoted or not.
bool has_shell_operators(std::string_view command);

/// Removes `#` comments (a `#` at the start of a word outside quotes up to
/// the end of its line). For the guardian prompt.
std::string strip_comments(std::string_view command);

} // namespace mibyan::approvals
