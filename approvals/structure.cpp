#include "approvals/structure.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>

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

bool needs_structure(std::string_view command) {
  for (size_t i = 0; i < command.size(); ++i) {
    char c = command[i];
    switch (c) {
    case '$': case '`': case '\'': case '"': case '\\': case '*': case '?':
    case '[': case '~': case ';': case '&': case '|': case '<': case '>':
    case '(': case ')': case '{': case '}': case '\n': case '\r':
      return true;
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
  return false;
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
