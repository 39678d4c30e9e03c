// File: approvals/structure.hpp
//
// The resolved forms of a shell command (docs/approvals.md, "Structure"):
// what each simple command will run once the shell has done its work.
// Built on approvals/shell_parse.hpp; per simple command it
//  - strips wrappers (sudo, doas, env, nice, ionice, timeout, stdbuf,
//    nohup, setsid, time, command, builtin, exec, busybox, xargs, chrt,
//    taskset, unbuffer) and reduces /bin/rm to rm;
//  - substitutes variables assigned literal values earlier in the same
//    text (X=rm; $X -rf ~ -> rm -rf ~), $'...' quoting, and command
//    substitutions whose output is literal ($(printf '\162\155'),
//    $(echo cm0= | base64 -d), $(which rm));
//  - folds paths (/usr/.. -> /, //, /./), follows literal `cd`
//    (cd / && rm -rf * -> rm -rf /*) and matches globs against the
//    protected paths (/et? -> /etc, ~/.s*/authorized_keys ->
//    ~/.ssh/authorized_keys);
//  - analyses nested text the same way: substitution bodies, sh -c and
//    eval bodies, here-documents and literal text fed to a shell,
//    find -exec commands, awk system() strings.
// It also reports the structural dangerous families (see
// structure_keys()). The forms are matched by the same hardline and
// dangerous patterns as the other variants.
//
// Bounded: the lexer's caps, a nesting depth of 8 and 2 MiB of analysed
// text per command; past them `truncated` is set and the command gets
// the key "command too large or deep to analyse".
//
// Pure; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "approvals/normalize.hpp"

namespace mibyan::approvals {

struct structure_result {
  /// Resolved forms, one simple command per line (a pipeline on one line,
  /// joined by " | "). The second form, when present, has the globs that
  /// match protected paths replaced by those paths.
  std::vector<std::string> forms;
  /// Structural dangerous keys, in order of discovery, no duplicates.
  std::vector<std::string> keys;
  bool truncated = false;
};

/// `command` as given to the approval check; `paths` fold the home paths.
structure_result analyse_structure(std::string_view command,
                                   const home_paths& paths);

/// False when `command` has nothing the structural analysis could change
/// (no quotes, expansions, operators, globs, `..`, `//`, `/.`, `~`, or
/// backslashes): the plain variants then suffice.
bool needs_structure(std::string_view command);

/// Every structural key, for dangerous_keys().
std::vector<std::string> structure_keys();

} // namespace mibyan::approvals
