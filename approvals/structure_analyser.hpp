// File: approvals/structure_analyser.hpp
//
// The analyser behind approvals/structure.hpp: state and steps of one
// analysis (internal to approvals/). One analyser reads one command and
// every text nested in it; it is used by one thread and then dropped.
//   structure.cpp           words, literal evaluation, scripts, results
//   structure_commands.cpp  wrappers, interpreters, utilities, downloads
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "approvals/normalize.hpp"
#include "approvals/shell_parse.hpp"
#include "approvals/structure.hpp"

namespace mibyan::approvals::structure_detail {

constexpr const char* key_dynamic = "dynamic command word";
constexpr const char* key_pipe = "pipe to shell";
constexpr const char* key_heredoc = "heredoc into interpreter";
constexpr const char* key_procsub = "process substitution";
constexpr const char* key_eval = "eval of dynamic text";
constexpr const char* key_download = "run a downloaded file";
constexpr const char* key_utility = "command run by a utility";
constexpr const char* key_truncated = "command too large or deep to analyse";

/// Nesting of analysed texts (substitutions, sh -c, eval, here-documents).
constexpr size_t max_nesting = 8;
/// Bytes analysed in total for one command.
constexpr size_t max_analysed = 2 * 1024 * 1024;

// One word after expansion.
struct rword {
  std::string text;     // the value (dynamic parts as $NAME / $(...))
  std::string pattern;  // the value with quoted glob characters escaped
  bool glob = false;    // an unquoted glob character
  bool dynamic = false; // an expansion that could not be resolved
  bool substituted = false; // a command or process substitution
  bool procsub = false;
};

struct analyser {
  const home_paths& paths;
  structure_result& out;
  /// Variables assigned literal values so far.
  std::map<std::string, std::string> vars;
  /// The working directory after a literal `cd` (unset = unknown).
  std::optional<std::string> cwd;
  /// Base names of files written by curl / wget so far.
  std::set<std::string> downloaded;
  /// Files written with literal text so far (base name -> text).
  std::map<std::string, std::string> written;
  /// Rendered lines: as resolved, and with globs on protected paths
  /// replaced by those paths.
  std::vector<std::string> primary, alt;
  bool any_alt = false;
  size_t analysed = 0;

  struct rendered {
    std::string primary, alt;
  };

  analyser(const home_paths& p, structure_result& o) : paths{p}, out{o} {}

  /// Records a structural key once.
  void key(const char* k);

  // -- structure.cpp

  /// Parses `text` and handles each simple command (rendered lines,
  /// keys); nested text one level deeper. Stops at the caps.
  void analyse(std::string_view text, size_t depth);
  /// The value of `w` when it needs no command to run (literal parts and
  /// known variables).
  std::optional<std::string> plain_value(const shell_word& w) const;
  /// What command `idx` of `ps` prints, when that follows from literal
  /// text: echo, printf, cat of a here-document, base64 -d, rev, which.
  std::optional<std::string> literal_output(const parsed_script& ps,
                                            size_t idx, size_t depth) const;
  /// The output of a substitution body when it is literal.
  std::optional<std::string> substitution_output(const std::string& body);
  /// Expands one word: variables, substitutions (their bodies analysed),
  /// word splitting of unquoted expansions.
  std::vector<rword> expand(const shell_word& w, size_t depth);
  /// A relative path joined to a known working directory, then folded.
  std::string with_cwd(const std::string& s) const;
  /// The protected paths a glob can expand to.
  std::vector<std::string> glob_matches(const std::string& pattern) const;
  rendered render(const std::string& name, const std::vector<rword>& args,
                  const std::vector<std::pair<std::string, rword>>& redirs);

  // -- structure_commands.cpp

  /// Handles one simple command given as expanded words; returns its
  /// rendering (empty = nothing runs).
  rendered command_words(std::vector<rword> ws, const simple_command* c,
                         const parsed_script* ps, size_t depth);
  /// Strips the wrappers at ws[k...]; sets `via_xargs`. Returns the index
  /// of the program word (ws.size() when none).
  size_t strip_wrappers(std::vector<rword>& ws, size_t k, bool& via_xargs);
  /// The file curl or wget writes ("" = standard output / unknown).
  std::string download_target(const std::string& name,
                              const std::vector<rword>& args) const;
  bool is_downloaded(const std::string& path) const;
  /// Analyses the text of `path` when it was written with literal text.
  void run_written(const std::string& path, size_t depth);
  /// A shell or language interpreter: does it read its program from stdin
  /// (pipe, here-document), a process substitution, a downloaded file or
  /// a -c body?
  void interpreter(const std::string& name, const std::vector<rword>& args,
                   const simple_command& c, const parsed_script& ps,
                   size_t depth);
  /// awk programs that run commands (system(), pipes, getline).
  void awk_program(const std::vector<rword>& args, size_t depth);
};

} // namespace mibyan::approvals::structure_detail
