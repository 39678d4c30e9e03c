// File: approvals/destructive.hpp
//
// Classifies a shell command as destructive to files, for the file
// checkpoints taken before such a command runs (docs/checkpoints.md). It
// sits beside the approval analysis and uses the same lexer
// (approvals/shell_parse.hpp); it decides nothing about approval.
//
// Destructive: `rm`, `rmdir`, `unlink`, `shred`, `truncate`, `mv`,
// `sed -i` (and `--in-place`, `-i.bak`, `-ni`), `perl -i`, output
// redirection that truncates (`>`, `>|`, `&>`, `>& file`; not `>>`, not
// /dev/null or a file descriptor), `git checkout -- PATH...`,
// `git checkout .`, `git restore`, `git reset --hard`, `git clean -f`,
// `git stash` (it rewrites the working tree). Wrappers are looked through
// (sudo, env, nice, nohup, time, timeout, command, exec, xargs, stdbuf),
// and so are `sh -c` / `bash -c` bodies, command substitutions and
// subshells (nesting depth 8). A command nested deeper, or too large for
// the lexer, counts as destructive with `whole_tree` (unknown effects).
//
// Targets: the literal path words the command names (relative to the
// command's working directory, globs unexpanded). `whole_tree` is set when
// the command affects paths it does not name literally (a variable, a
// command substitution, git reset --hard, a truncated analysis).
//
// Pure; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mibyan::approvals {

struct destructive_command {
  bool destructive = false;
  /// Why, one short phrase per finding ("rm", "sed -i", "> redirection",
  /// "git reset --hard"), in order of discovery, no duplicates.
  std::vector<std::string> reasons;
  /// Literal paths named as targets, in order, no duplicates.
  std::vector<std::string> targets;
  /// The affected paths are not all known (see the file comment).
  bool whole_tree = false;
};

destructive_command classify_destructive(std::string_view command);

} // namespace mibyan::approvals
