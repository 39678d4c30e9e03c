// File: approvals/structure_words.hpp
//
// The vocabulary of the structural analysis (approvals/structure.hpp):
// the protected paths globs are matched against, the programs a glob in
// command position can name, the classes of programs (shells, language
// interpreters, awk), lexical path folding, glob detection and the
// rendering of a word back into shell text. Internal to approvals/.
// Pure; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mibyan::approvals::structure_detail {

/// Paths a glob is matched against (`~` = the home directory).
const std::vector<std::string>& protected_paths();
/// Programs a glob in command position is matched against.
const std::vector<std::string>& known_programs();

bool is_shell(const std::string& name);
bool is_language(const std::string& name);
bool is_awk(const std::string& name);
/// Shell reserved words that can stand before a command (`if`, `{`, `!`).
bool is_reserved(const std::string& word);

std::string basename_of(const std::string& path);
/// `NAME=value` (or `NAME+=value`): true with the parts.
bool assignment_name(const std::string& word, std::string& name,
                     std::string& value);
/// Lexical folding of an absolute or `~` path: `//`, `/./` and `..`
/// removed (`~/..` leaves the home directory `home` when it is known);
/// other words are returned as they are.
std::string fold_path(const std::string& path, const std::string& home);
/// An unescaped `*`, `?` or `[...]` (a lone `[` is the test command).
bool has_glob(const std::string& pattern);
bool glob_char(char c);
/// The word as shell text: single-quoted when it holds whitespace or a
/// shell operator, so that a rendered argument never reads as a
/// separator.
std::string render_word(const std::string& word);

} // namespace mibyan::approvals::structure_detail
