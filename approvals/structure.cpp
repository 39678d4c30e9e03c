#include "approvals/structure.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "approvals/escapes.hpp"
#include "approvals/structure_analyser.hpp"
#include "approvals/structure_words.hpp"

namespace mibyan::approvals {

namespace structure_detail {

void analyser::key(const char* k) {
  if (std::find(out.keys.begin(), out.keys.end(), k) == out.keys.end())
    out.keys.emplace_back(k);
}

void analyser::analyse(std::string_view text, size_t depth) {
  if (text.empty())
    return;
  analysed += text.size();
  if (depth > max_nesting || analysed > max_analysed) {
    out.truncated = true;
    return;
  }
  auto ps = parse_shell(text);
  if (ps.truncated)
    out.truncated = true;
  std::string line, line_alt;
  for (size_t i = 0; i < ps.commands.size(); ++i) {
    auto& c = ps.commands[i];
    std::vector<rword> ws;
    for (auto& w : c.words) {
      auto e = expand(w, depth);
      ws.insert(ws.end(), e.begin(), e.end());
    }
    auto r = command_words(std::move(ws), &c, &ps, depth);
    if (!r.primary.empty()) {
      line += r.primary;
      line_alt += r.alt;
    }
    bool pipe = c.after == "|" || c.after == "|&";
    if (pipe && !r.primary.empty()) {
      line += " | ";
      line_alt += " | ";
    }
    if (!pipe && !line.empty()) {
      primary.push_back(std::move(line));
      alt.push_back(std::move(line_alt));
      line.clear();
      line_alt.clear();
    }
  }
  if (!line.empty()) {
    primary.push_back(std::move(line));
    alt.push_back(std::move(line_alt));
  }
}

std::optional<std::string> analyser::plain_value(const shell_word& w) const {
  std::string v;
  for (auto& p : w.parts) {
    if (p.kind == segment_kind::literal) {
      v += p.text;
    } else if (p.kind == segment_kind::variable && !p.complex) {
      auto it = vars.find(p.text);
      if (it == vars.end())
        return std::nullopt;
      v += it->second;
    } else {
      return std::nullopt;
    }
  }
  return v;
}

std::optional<std::string> analyser::literal_output(const parsed_script& ps,
                                          size_t idx, size_t depth) const {
  if (depth > 16 || idx >= ps.commands.size())
    return std::nullopt;
  auto& c = ps.commands[idx];
  std::vector<std::string> args;
  for (auto& w : c.words) {
    auto v = plain_value(w);
    if (!v)
      return std::nullopt;
    args.push_back(*v);
  }
  size_t k = 0;
  while (k + 1 < args.size()
         && (args[k] == "command" || args[k] == "builtin")
         && args[k + 1].rfind("-", 0) != 0)
    ++k;
  if (k >= args.size())
    return std::nullopt;
  auto name = basename_of(args[k]);
  std::vector<std::string> rest(args.begin() + static_cast<long>(k) + 1,
                                args.end());
  auto stdin_text = [&]() -> std::optional<std::string> {
    for (auto& r : c.redirects) {
      if (r.op == "<<" || r.op == "<<-")
        return r.body;
      if (r.op == "<<<") {
        auto v = plain_value(r.target);
        if (v)
          return *v + "\n";
      }
    }
    if (c.pipe_from >= 0)
      return literal_output(ps, static_cast<size_t>(c.pipe_from),
                            depth + 1);
    return std::nullopt;
  };
  if (name == "echo")
    return echo_output(rest);
  if (name == "printf") {
    if (!rest.empty() && rest[0] == "--")
      rest.erase(rest.begin());
    if (!rest.empty() && rest[0] == "-v")
      return std::nullopt;
    return printf_output(rest);
  }
  if (name == "cat" && rest.empty())
    return stdin_text();
  if (name == "which" && rest.size() == 1)
    return rest[0];
  if (name == "command" && rest.size() == 2 && rest[0] == "-v")
    return rest[1];
  if (name == "base64" || name == "base32") {
    bool decode = false;
    for (auto& a : rest)
      decode = decode || a == "-d" || a == "--decode" || a == "-D";
    if (!decode || name != "base64")
      return std::nullopt;
    auto in = stdin_text();
    if (!in)
      return std::nullopt;
    return base64_decode(*in);
  }
  if (name == "rev" && rest.empty()) {
    auto in = stdin_text();
    if (!in)
      return std::nullopt;
    std::string outp, line;
    for (char ch : *in) {
      if (ch == '\n') {
        outp.append(line.rbegin(), line.rend());
        outp.push_back('\n');
        line.clear();
      } else {
        line.push_back(ch);
      }
    }
    outp.append(line.rbegin(), line.rend());
    return outp;
  }
  return std::nullopt;
}

std::optional<std::string> analyser::substitution_output(const std::string& body) {
  auto ps = parse_shell(body);
  if (ps.truncated || ps.commands.empty())
    return std::nullopt;
  // One pipeline only.
  for (size_t i = 0; i + 1 < ps.commands.size(); ++i)
    if (ps.commands[i].after != "|")
      return std::nullopt;
  auto v = literal_output(ps, ps.commands.size() - 1, 0);
  if (!v)
    return std::nullopt;
  while (!v->empty() && v->back() == '\n')
    v->pop_back();
  return v;
}

std::vector<rword> analyser::expand(const shell_word& w, size_t depth) {
  rword r;
  bool split = false;
  for (auto& p : w.parts) {
    switch (p.kind) {
    case segment_kind::literal:
      r.text += p.text;
      for (char c : p.text) {
        if (glob_char(c)) {
          if (p.quoted)
            r.pattern.push_back('\\');
          else
            r.glob = true;
        }
        r.pattern.push_back(c);
      }
      break;
    case segment_kind::variable: {
      std::optional<std::string> v;
      if (!p.complex) {
        auto it = vars.find(p.text);
        if (it != vars.end())
          v = it->second;
        else if (p.text == "HOME")
          v = "~";
        else if (p.text == "SHELL" || p.text == "BASH")
          v = "bash";
        else if (p.text == "IFS")
          v = " ";
      }
      if (v) {
        r.text += *v;
        r.pattern += *v;
        split = split || !p.quoted;
      } else {
        r.dynamic = true;
        r.text += "$" + (p.complex ? std::string{"{...}"} : p.text);
        r.pattern += "$" + p.text;
      }
      break;
    }
    case segment_kind::command_sub: {
      r.substituted = true;
      analyse(p.text, depth + 1);
      auto v = substitution_output(p.text);
      if (v) {
        r.text += *v;
        r.pattern += *v;
        split = split || !p.quoted;
      } else {
        r.dynamic = true;
        r.text += "$(...)";
        r.pattern += "$(...)";
      }
      break;
    }
    case segment_kind::process_sub:
      r.substituted = r.procsub = r.dynamic = true;
      analyse(p.text, depth + 1);
      r.text += "/dev/fd/63";
      r.pattern += "/dev/fd/63";
      break;
    }
  }
  r.glob = r.glob && has_glob(r.pattern);
  if (!split || r.dynamic)
    return {r};
  // Word splitting of unquoted expansions (on whitespace).
  std::vector<rword> words;
  size_t i = 0;
  const auto& t = r.text;
  while (i < t.size()) {
    while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i])))
      ++i;
    size_t b = i;
    while (i < t.size() && !std::isspace(static_cast<unsigned char>(t[i])))
      ++i;
    if (i > b) {
      rword x = r;
      x.text = x.pattern = t.substr(b, i - b);
      x.glob = has_glob(x.text);
      words.push_back(std::move(x));
    }
  }
  return words;
}

std::string analyser::with_cwd(const std::string& s) const {
  if (s.empty() || s[0] == '/' || s[0] == '~')
    return fold_path(s, paths.home);
  if (!cwd || s[0] == '-' || s.find('=') != std::string::npos
      || s.find("://") != std::string::npos)
    return s;
  return fold_path(*cwd + "/" + s, paths.home);
}

std::vector<std::string> analyser::glob_matches(const std::string& pattern) const {
  std::vector<std::string> out;
  auto p = with_cwd(pattern);
  for (auto& path : protected_paths())
    if (::fnmatch(p.c_str(), path.c_str(), FNM_PATHNAME) == 0)
      out.push_back(path);
  return out;
}

analyser::rendered analyser::render(const std::string& name, const std::vector<rword>& args,
                const std::vector<std::pair<std::string, rword>>& redirs) {
  rendered r;
  r.primary = r.alt = render_word(name);
  auto add = [&](const rword& w, const char* prefix) {
    std::string folded = w.dynamic ? w.text : with_cwd(w.text);
    r.primary += prefix + render_word(folded);
    if (w.glob && !w.dynamic) {
      auto m = glob_matches(w.pattern);
      if (!m.empty()) {
        any_alt = true;
        r.alt += prefix;
        for (size_t i = 0; i < m.size(); ++i)
          r.alt += (i ? " " : "") + render_word(m[i]);
        return;
      }
    }
    r.alt += prefix + render_word(folded);
  };
  for (auto& a : args)
    add(a, " ");
  for (auto& [op, w] : redirs) {
    std::string o = op == "&>" || op == ">|" ? ">" : op == "&>>" ? ">>" : op;
    add(w, (" " + o + " ").c_str());
  }
  return r;
}

} // namespace structure_detail

namespace {

std::string join_lines(const std::vector<std::string>& xs) {
  std::string out;
  for (auto& x : xs) {
    if (!out.empty())
      out += " ;\n"; // `;` too: the patterns' argument runs stop there
    out += x;
  }
  return out;
}

} // namespace

namespace {

enum class kind { other, cd, handled, interpreter };

// How needs_structure() treats a program name (one hash lookup).
kind word_kind(std::string_view name) {
  static const std::unordered_map<std::string_view, kind> names = [] {
    std::unordered_map<std::string_view, kind> m;
    m["cd"] = m["pushd"] = kind::cd;
    for (auto h : {"eval", "watch", "su", "runuser", "curl", "wget", "awk",
                   "gawk", "mawk", "nawk", "find", "xargs", "chrt", "taskset",
                   "unbuffer", "toybox", "env", "exec", "source", "timeout"})
      m[h] = kind::handled;
    for (auto h : {"sh", "bash", "dash", "ksh", "zsh", "mksh", "ash", "fish",
                   "csh", "tcsh", "yash", "posh", "rbash", "perl", "ruby",
                   "node", "nodejs", "php", "lua", "luajit", "rscript",
                   "Rscript", "deno", "bun", "tclsh", "wish", "pwsh",
                   "powershell", "osascript", "irb", "jshell", "groovy",
                   "julia"})
      m[h] = kind::interpreter;
    return m;
  }();
  if (name.substr(0, 6) == "python" || name.substr(0, 4) == "pypy")
    return kind::interpreter;
  auto it = names.find(name);
  return it == names.end() ? kind::other : it->second;
}

} // namespace

bool needs_structure(std::string_view command) {
  auto separator = [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';'
           || c == '&' || c == '|' || c == '>';
  };
  // 1. Characters the shell transforms: quotes, escapes, expansions,
  // globs, here-documents and substitutions, a leading ~, // and /.
  for (size_t i = 0; i < command.size(); ++i) {
    char c = command[i];
    switch (c) {
    case '$': case '`': case '\'': case '"': case '\\': case '*': case '?':
    case '[': case '<': case '(': case ')': case '{': case '}':
      return true;
    case '~':
      if (i == 0 || separator(command[i - 1]))
        return true;
      break;
    case '/':
      if (i + 1 < command.size()
          && (command[i + 1] == '/' || command[i + 1] == '.'))
        return true;
      break;
    default:
      if (static_cast<unsigned char>(c) >= 0x80)
        return true;
      break;
    }
  }
  // 2. Words whose handling the text variants lack: a cd that makes the
  // directory known, eval and the utilities that run commands, downloads,
  // wrappers beyond the variants' list, and a shell or interpreter that
  // reads its program from a pipe or stdin.
  // A redirection followed by more words of its command (the variants
  // would read those words as its target, or lose the program after it).
  bool pipe = false, interpreter = false, stdin_arg = false;
  bool after_redirect = false;
  for (size_t i = 0; i < command.size();) {
    char c = command[i];
    if (c == '>') {
      while (i < command.size()
             && (command[i] == '>' || command[i] == '&' || command[i] == '|'))
        ++i;
      while (i < command.size() && (command[i] == ' ' || command[i] == '\t'))
        ++i;
      while (i < command.size() && !separator(command[i]))
        ++i; // the target
      after_redirect = true;
      continue;
    }
    if (separator(c)) {
      if (c != ' ' && c != '\t')
        after_redirect = false;
      pipe = pipe || c == '|';
      ++i;
      continue;
    }
    size_t b = i;
    while (i < command.size() && !separator(command[i]))
      ++i;
    auto word = command.substr(b, i - b);
    bool fd = i < command.size() && command[i] == '>'
              && word.find_first_not_of("0123456789") == std::string::npos;
    if (after_redirect && !fd)
      return true;
    if (fd)
      continue;
    auto slash = word.rfind('/');
    auto name = slash == std::string_view::npos || slash + 1 == word.size()
                  ? word
                  : word.substr(slash + 1);
    switch (word_kind(name)) {
    case kind::cd: {
      size_t j = i;
      while (j < command.size() && (command[j] == ' ' || command[j] == '\t'))
        ++j;
      if (j >= command.size() || separator(command[j]) || command[j] == '/')
        return true;
      break;
    }
    case kind::handled:
      return true;
    case kind::interpreter:
      if (pipe)
        return true;
      interpreter = true;
      break;
    case kind::other:
      break;
    }
    // `-`, `-s`, /dev/stdin: a program from stdin; -c, -lc...: inline.
    stdin_arg = stdin_arg || word == "-" || word == "-s"
                || word == "/dev/stdin"
                || (word.size() > 1 && word[0] == '-' && word[1] != '-'
                    && word.find('c') != std::string_view::npos);
  }
  return interpreter && stdin_arg;
}

structure_result analyse_structure(std::string_view command,
                                   const home_paths& paths) {
  structure_result out;
  structure_detail::analyser a{paths, out};
  a.analyse(command, 0);
  if (out.truncated)
    a.key(structure_detail::key_truncated);
  if (!a.primary.empty())
    out.forms.push_back(join_lines(a.primary));
  if (a.any_alt)
    out.forms.push_back(join_lines(a.alt));
  return out;
}

std::vector<std::string> structure_keys() {
  using namespace structure_detail;
  return {key_dynamic, key_pipe, key_heredoc, key_procsub, key_eval,
          key_download, key_utility, key_truncated};
}

} // namespace mibyan::approvals
