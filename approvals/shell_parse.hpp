// File: approvals/shell_parse.hpp
//
// A bounded lexer for POSIX/bash command text, for the approval analysis
// (docs/approvals.md, "Structure"). It splits a script into simple
// commands (words, redirections, here-documents) at the operators
// ; && || | |& & and newlines, and keeps inside each word which parts are
// literal, quoted, variables, command substitutions ($(...), backticks)
// or process substitutions (<(...), >(...)). It does not run, expand or
// evaluate anything; substitution bodies are kept as text for the caller
// to parse in turn.
//
// Hostile input is bounded: at most `max_input` bytes are read, nesting
// deeper than `max_depth` and more than `max_words` words or
// `max_commands` commands stop the lexer; `truncated` then says that the
// result covers only part of the text. The lexer is iterative (no
// recursion), linear in the input up to the nesting cap.
//
// Pure; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mibyan::approvals {

struct shell_limits {
  size_t max_input = 256 * 1024;
  size_t max_depth = 32;
  size_t max_words = 16384;
  size_t max_commands = 4096;
};

enum class segment_kind {
  literal,      ///< text: the characters, quotes removed
  variable,     ///< text: the name ($X, ${X}); complex = ${X:-y} and such
  command_sub,  ///< text: the body of $(...) or `...`
  process_sub,  ///< text: the body of <(...) or >(...)
};

struct word_segment {
  segment_kind kind = segment_kind::literal;
  std::string text;
  /// Inside quotes (or backslash-escaped): no globbing, no word splitting.
  bool quoted = false;
  /// A variable expansion with an operator (${X:-y}, ${#X}, $((...)),
  /// $1, $@, ...): never resolved to a literal.
  bool complex = false;
};

struct shell_word {
  std::vector<word_segment> parts;

  /// True when every part is literal.
  bool literal() const;
  /// The literal parts concatenated (expansions left out).
  std::string value() const;
};

struct redirection {
  std::string op;      ///< > >> >| < << <<- <<< <> >& <& &> &>>
  shell_word target;   ///< the file, fd or here-document delimiter
  std::string body;    ///< here-document body (<< and <<-)
};

struct simple_command {
  std::vector<shell_word> words;
  std::vector<redirection> redirects;
  /// The operator that ends it: ";", "&&", "||", "|", "|&", "&", or ""
  /// (end of text). A newline is reported as ";".
  std::string after;
  /// Index of the command whose output feeds this one (-1 = none).
  int pipe_from = -1;
};

struct parsed_script {
  std::vector<simple_command> commands;
  /// A cap was hit: the commands cover only part of the text.
  bool truncated = false;
};

parsed_script parse_shell(std::string_view script,
                          const shell_limits& limits = {});

/// Finds the end of a construct opened just before `start`: `close` is
/// ')' for $( / <( / (, '`' for a backtick, '}' for ${. Quote- and
/// nesting-aware. Returns the index of the closing character, or
/// std::string_view::npos when it is missing or nesting exceeds
/// `max_depth` (`too_deep` then set).
size_t find_closing(std::string_view s, size_t start, char close,
                    size_t max_depth, bool& too_deep);

} // namespace mibyan::approvals
