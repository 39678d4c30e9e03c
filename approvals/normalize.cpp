#include "approvals/normalize.hpp"

#include <algorithm>
#include <cstdint>
#include <regex>

#include "approvals/structure.hpp"
#include "base/strings.hpp"

namespace mibyan::approvals {

namespace {

// -- step 1: ANSI escapes and NUL ---------------------------------------------

std::string strip_ansi_and_nul(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '\0')
      continue;
    if (c != '\x1b') {
      out.push_back(c);
      continue;
    }
    if (i + 1 >= in.size())
      break;
    char k = in[i + 1];
    if (k == '[') { // CSI: parameters, then one final byte 0x40-0x7e
      size_t j = i + 2;
      while (j < in.size() && !(in[j] >= 0x40 && in[j] <= 0x7e))
        ++j;
      i = j;
    } else if (k == ']') { // OSC: up to BEL or ESC backslash
      size_t j = i + 2;
      while (j < in.size() && in[j] != '\a'
             && !(in[j] == '\x1b' && j + 1 < in.size() && in[j + 1] == '\\'))
        ++j;
      i = (j < in.size() && in[j] == '\x1b') ? j + 1 : j;
    } else {
      i += 1; // two-byte escape
    }
  }
  return out;
}

// -- step 2: compatibility folding --------------------------------------------

// Appends the ASCII text NFKC gives `cp` (nothing to drop it) and returns
// true; false when the character is kept as it is.
bool fold_codepoint(uint32_t cp, std::string& out) {
  if (cp >= 0xff01 && cp <= 0xff5e) { // full-width ASCII
    out.push_back(static_cast<char>(cp - 0xfee0));
    return true;
  }
  if (cp == 0x3000 || cp == 0x00a0 || (cp >= 0x2000 && cp <= 0x200a)
      || cp == 0x202f || cp == 0x205f || cp == 0x1680) {
    out.push_back(' ');
    return true;
  }
  // Zero-width characters and the soft hyphen: invisible, dropped (not
  // NFKC, but they would split a word like "r<ZWSP>m" otherwise).
  if ((cp >= 0x200b && cp <= 0x200d) || cp == 0x2060 || cp == 0xfeff
      || cp == 0x00ad) {
    return true;
  }
  if (cp >= 0x1d400 && cp < 0x1d6a4) { // mathematical letters
    uint32_t idx = (cp - 0x1d400) % 52;
    out.push_back(static_cast<char>(idx < 26 ? 'A' + idx : 'a' + idx - 26));
    return true;
  }
  if (cp >= 0x1d7ce && cp <= 0x1d7ff) { // mathematical digits
    out.push_back(static_cast<char>('0' + (cp - 0x1d7ce) % 10));
    return true;
  }
  if (cp >= 0x24b6 && cp <= 0x24cf) { // circled capitals
    out.push_back(static_cast<char>('A' + (cp - 0x24b6)));
    return true;
  }
  if (cp >= 0x24d0 && cp <= 0x24e9) { // circled small letters
    out.push_back(static_cast<char>('a' + (cp - 0x24d0)));
    return true;
  }
  if (cp >= 0x2080 && cp <= 0x2089) { // subscript digits
    out.push_back(static_cast<char>('0' + (cp - 0x2080)));
    return true;
  }
  if (cp >= 0x2074 && cp <= 0x2079) { // superscript digits 4-9
    out.push_back(static_cast<char>('0' + (cp - 0x2070)));
    return true;
  }
  switch (cp) {
  case 0x2070: out += "0"; return true;
  case 0x00b9: out += "1"; return true;
  case 0x00b2: out += "2"; return true;
  case 0x00b3: out += "3"; return true;
  case 0xfb00: out += "ff"; return true;
  case 0xfb01: out += "fi"; return true;
  case 0xfb02: out += "fl"; return true;
  case 0xfb03: out += "ffi"; return true;
  case 0xfb04: out += "ffl"; return true;
  case 0xfb05:
  case 0xfb06: out += "st"; return true;
  case 0x2024: out += "."; return true;
  case 0x2025: out += ".."; return true;
  case 0x2026: out += "..."; return true;
  case 0xfe54: out += ";"; return true;
  case 0xfe60: out += "&"; return true;
  case 0xfe63: out += "-"; return true;
  case 0xfe68: out += "\\"; return true;
  default: return false;
  }
}

std::string fold_compat(std::string_view in) {
  // Fast path: pure ASCII needs nothing.
  bool ascii = std::all_of(in.begin(), in.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x80;
  });
  if (ascii)
    return std::string{in};
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size();) {
    auto b = static_cast<unsigned char>(in[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3
                                 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > in.size()) {
      out.push_back(in[i++]); // not UTF-8: kept
      continue;
    }
    uint32_t cp = len == 1 ? b : b & (0x7f >> len);
    bool ok = true;
    for (size_t k = 1; k < len; ++k) {
      auto cb = static_cast<unsigned char>(in[i + k]);
      ok = ok && (cb & 0xc0) == 0x80;
      cp = (cp << 6) | (cb & 0x3f);
    }
    if (!ok) {
      out.push_back(in[i++]);
      continue;
    }
    if (!fold_codepoint(cp, out))
      out.append(in.substr(i, len));
    i += len;
  }
  return out;
}

// -- steps 3-7 ------------------------------------------------------------------

std::string join_continuations(std::string s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '\n') {
      ++i;
      continue;
    }
    if (s[i] == '\\' && i + 2 < s.size() && s[i + 1] == '\r'
        && s[i + 2] == '\n') {
      i += 2;
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

bool path_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_'
         || c == '-';
}

void fold_path(std::string& s, const std::string& path,
               const std::string& replacement) {
  if (path.empty() || path == "/")
    return;
  std::string p = path;
  while (p.size() > 1 && p.back() == '/')
    p.pop_back();
  size_t pos = 0;
  while ((pos = s.find(p, pos)) != std::string::npos) {
    size_t end = pos + p.size();
    if (end < s.size() && path_char(s[end])) {
      pos = end;
      continue;
    }
    s.replace(pos, p.size(), replacement);
    pos += replacement.size();
  }
}

std::string unescape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      out.push_back(s[++i]);
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

std::string remove_empty_quotes(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if ((s[i] == '\'' || s[i] == '"') && i + 1 < s.size()
        && s[i + 1] == s[i]) {
      ++i;
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

bool word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

std::string replace_ifs(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 6, "${IFS}") == 0) {
      out.push_back(' ');
      i += 5;
      continue;
    }
    if (s.compare(i, 4, "$IFS") == 0
        && (i + 4 >= s.size() || !word_char(s[i + 4]))) {
      out.push_back(' ');
      i += 3;
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

// -- variants -------------------------------------------------------------------

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

bool is_operator(char c) {
  return c == ';' || c == '&' || c == '|' || c == '<' || c == '>' || c == '('
         || c == ')' || c == '`';
}

bool keyword_at(const std::string& s, size_t i, const char* kw) {
  size_t n = std::char_traits<char>::length(kw);
  if (s.compare(i, n, kw) != 0)
    return false;
  return i + n < s.size() && is_space(s[i + n]);
}

// Inserts a newline after every command start outside single quotes
// (`$(`, backtick) and outside any quotes (`;`, `&`, `|`, `(`, `{`,
// `then`, `do`, `else`, `elif`, `if`, `while`, `until`, `!`).
std::string split_command_starts(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 16);
  bool sq = false, dq = false, word_start = true;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (sq) {
      out.push_back(c);
      sq = c != '\'';
      continue;
    }
    if (c == '\'' && !dq) {
      sq = true;
      out.push_back(c);
      word_start = false;
      continue;
    }
    if (c == '"') {
      dq = !dq;
      out.push_back(c);
      word_start = false;
      continue;
    }
    if (c == '$' && i + 1 < s.size() && s[i + 1] == '(') {
      out += "$(\n";
      ++i;
      word_start = true;
      continue;
    }
    if (c == '`') {
      out += "`\n";
      word_start = true;
      continue;
    }
    if (dq) {
      out.push_back(c);
      continue;
    }
    if (c == ';' || c == '&' || c == '|' || c == '(') {
      out.push_back(c);
      out.push_back('\n');
      word_start = true;
      continue;
    }
    if (word_start) {
      bool kw = false;
      for (auto k : {"then", "do", "else", "elif", "if", "while", "until",
                     "{", "!"}) {
        if (keyword_at(s, i, k)) {
          out += k;
          out.push_back('\n');
          i += std::char_traits<char>::length(k) - 1;
          kw = true;
          break;
        }
      }
      if (kw)
        continue;
    }
    out.push_back(c);
    word_start = is_space(c);
  }
  return out;
}

// Replaces `$(echo X)`, `$(printf X)`, `` `echo X` `` (X one simple word,
// optionally quoted) by X.
std::string substitute_echo(const std::string& s) {
  if (s.find("echo") == std::string::npos
      && s.find("printf") == std::string::npos)
    return s;
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    bool dollar = s.compare(i, 2, "$(") == 0;
    bool tick = s[i] == '`';
    if (dollar || tick) {
      size_t j = i + (dollar ? 2 : 1);
      while (j < s.size() && is_space(s[j]))
        ++j;
      size_t cmd = j;
      if (s.compare(j, 4, "echo") == 0)
        j += 4;
      else if (s.compare(j, 6, "printf") == 0)
        j += 6;
      if (j > cmd && j < s.size() && is_space(s[j])) {
        while (j < s.size() && is_space(s[j]))
          ++j;
        std::string word;
        while (j < s.size() && !is_space(s[j]) && s[j] != ')' && s[j] != '`'
               && s[j] != ';' && s[j] != '|' && s[j] != '&') {
          if (s[j] != '\'' && s[j] != '"')
            word.push_back(s[j]);
          ++j;
        }
        while (j < s.size() && is_space(s[j]))
          ++j;
        char close = dollar ? ')' : '`';
        if (!word.empty() && j < s.size() && s[j] == close) {
          out += word;
          i = j + 1;
          continue;
        }
      }
    }
    out.push_back(s[i]);
    ++i;
  }
  return out;
}

// Removes the quote characters of every word whose quoted parts hold no
// whitespace and no operator: `"r"m` -> `rm`; `"rm -rf /"` stays.
std::string unquote_simple_words(const std::string& s) {
  if (s.find('\'') == std::string::npos && s.find('"') == std::string::npos)
    return s;
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (is_space(s[i]) || is_operator(s[i])) {
      out.push_back(s[i++]);
      continue;
    }
    // One word: up to unquoted whitespace or operator.
    size_t start = i;
    bool simple = true, quoted = false;
    char q = 0;
    for (; i < s.size(); ++i) {
      char c = s[i];
      if (q) {
        if (c == q)
          q = 0;
        else if (is_space(c) || is_operator(c))
          simple = false;
        continue;
      }
      if (c == '\'' || c == '"') {
        q = c;
        quoted = true;
        continue;
      }
      if (is_space(c) || is_operator(c))
        break;
    }
    std::string_view word{s.data() + start, i - start};
    if (!quoted || !simple || q != 0) {
      out.append(word);
      continue;
    }
    for (char c : word)
      if (c != '\'' && c != '"')
        out.push_back(c);
  }
  return out;
}

std::vector<std::string_view> words_of(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i]))
      ++i;
    size_t b = i;
    while (i < line.size() && !is_space(line[i]))
      ++i;
    if (i > b)
      out.push_back(line.substr(b, i - b));
  }
  return out;
}

bool is_assignment(std::string_view w) {
  auto eq = w.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return false;
  if (!(std::isalpha(static_cast<unsigned char>(w[0])) || w[0] == '_'))
    return false;
  for (size_t k = 1; k < eq; ++k)
    if (!word_char(w[k]))
      return false;
  return true;
}

bool is_number(std::string_view w) {
  if (w.empty())
    return false;
  for (char c : w)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != 's'
        && c != 'm' && c != 'h' && c != 'd')
      return false;
  return std::isdigit(static_cast<unsigned char>(w[0]));
}

// Strips leading wrappers from one command line and reduces a path-named
// program to its base name.
std::string strip_wrappers(std::string_view line) {
  auto words = words_of(line);
  size_t k = 0;
  auto skip_options = [&](std::initializer_list<const char*> with_arg) {
    while (k < words.size() && words[k].size() > 1 && words[k][0] == '-') {
      bool takes = false;
      for (auto a : with_arg)
        takes = takes || words[k] == a;
      k += takes ? 2 : 1;
    }
  };
  for (bool changed = true; changed && k < words.size();) {
    changed = true;
    auto w = words[k];
    if (w == "sudo" || w == "doas") {
      ++k;
      skip_options({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U",
                    "-T", "-c"});
    } else if (w == "env") {
      ++k;
      skip_options({"-u", "-C", "-S"});
    } else if (is_assignment(w)) {
      ++k;
    } else if (w == "nohup" || w == "setsid" || w == "exec" || w == "command"
               || w == "builtin" || w == "time" || w == "busybox") {
      ++k;
      skip_options({});
    } else if (w == "nice" || w == "ionice" || w == "stdbuf"
               || w == "xargs") {
      ++k;
      skip_options({"-n", "-c", "-I", "-P", "-L", "-d", "-E", "-s", "-a",
                    "-i", "-o", "-e"});
    } else if (w == "timeout") {
      ++k;
      skip_options({"-s", "-k", "--signal", "--kill-after"});
      if (k < words.size() && is_number(words[k]))
        ++k;
    } else {
      changed = false;
    }
  }
  if (k >= words.size())
    return {};
  std::string out;
  auto prog = words[k];
  if (auto slash = prog.rfind('/');
      slash != std::string_view::npos && slash + 1 < prog.size())
    prog.remove_prefix(slash + 1);
  out.append(prog);
  // The rest of the line as it was (spacing kept from the first argument).
  auto rest_at = static_cast<size_t>(words[k].data() + words[k].size()
                                     - line.data());
  out.append(line.substr(rest_at));
  return out;
}

std::string fold_home_variables(std::string s) {
  for (auto v : {"${HOME}", "$HOME", "${home}", "$home"}) {
    size_t n = std::char_traits<char>::length(v);
    size_t pos = 0;
    while ((pos = s.find(v, pos)) != std::string::npos) {
      if (v[1] != '{' && pos + n < s.size() && word_char(s[pos + n])) {
        pos += n;
        continue;
      }
      s.replace(pos, n, "~");
      pos += 1;
    }
  }
  return s;
}

std::string strip_all_lines(const std::string& s) {
  std::string out;
  size_t pos = 0;
  while (pos <= s.size()) {
    auto nl = s.find('\n', pos);
    if (nl == std::string::npos)
      nl = s.size();
    out += strip_wrappers(std::string_view{s}.substr(pos, nl - pos));
    out.push_back('\n');
    pos = nl + 1;
  }
  if (!out.empty())
    out.pop_back();
  return fold_home_variables(out);
}

// Bodies of `sh -c '...'`, `bash -c "..."` and `eval '...'`.
std::vector<std::string> inline_scripts(const std::string& s) {
  std::vector<std::string> out;
  auto lower = strings::lower(s);
  if (lower.size() > 16384
      || (s.find('\'') == std::string::npos
          && s.find('"') == std::string::npos)
      || (lower.find("sh") == std::string::npos
          && lower.find("eval") == std::string::npos))
    return out;
  static const std::regex re{
    R"re((?:\b(?:ba|da|k|z)?sh\s+(?:-\S+\s+)*-[a-z]*c|\beval)\s+(?:'([^']*)'|"([^"]*)"))re",
    std::regex::ECMAScript | std::regex::optimize};
  for (std::sregex_iterator it{s.begin(), s.end(), re}, end; it != end;
       ++it) {
    const auto& m = *it;
    out.push_back(m[1].matched ? m[1].str() : m[2].str());
  }
  return out;
}

void add_unique(std::vector<std::string>& xs, std::string v) {
  if (v.empty())
    return;
  if (std::find(xs.begin(), xs.end(), v) == xs.end())
    xs.push_back(std::move(v));
}

} // namespace

std::string normalize_preserving_case(std::string_view command,
                                      const home_paths& paths) {
  auto s = strip_ansi_and_nul(command);
  s = fold_compat(s);
  s = join_continuations(std::move(s));
  fold_path(s, paths.mibyan_home, "~/.mibyan");
  fold_path(s, paths.home, "~");
  fold_path(s, paths.home_unresolved, "~");
  s = unescape(s);
  s = remove_empty_quotes(s);
  return replace_ifs(s);
}

command_variants make_variants(std::string_view command,
                               const home_paths& paths) {
  command_variants v;
  auto base = normalize_preserving_case(command, paths);
  auto deobf = unquote_simple_words(substitute_echo(base));
  std::vector<std::string> cased;
  add_unique(cased, base);
  add_unique(cased, split_command_starts(base));
  auto deobf_split = split_command_starts(deobf);
  add_unique(cased, deobf_split);
  add_unique(cased, strip_all_lines(deobf_split));
  for (auto& body : inline_scripts(base)) {
    auto inner = unquote_simple_words(substitute_echo(body));
    auto inner_split = split_command_starts(inner);
    add_unique(cased, body);
    add_unique(cased, strip_all_lines(inner_split));
  }
  if (needs_structure(command)) {
    // Steps 1-4: the lexer reads quotes and escapes itself.
    auto text = strip_ansi_and_nul(command);
    text = fold_compat(text);
    fold_path(text, paths.mibyan_home, "~/.mibyan");
    fold_path(text, paths.home, "~");
    fold_path(text, paths.home_unresolved, "~");
    auto found = analyse_structure(text, paths);
    for (auto& form : found.forms)
      add_unique(cased, std::move(form));
    v.structural = std::move(found.keys);
  }
  for (auto& c : cased)
    add_unique(v.lower, strings::lower(c));
  v.cased = std::move(cased);
  return v;
}

bool has_shell_operators(std::string_view command) {
  for (size_t i = 0; i < command.size(); ++i) {
    char c = command[i];
    if (c == ';' || c == '&' || c == '|' || c == '`' || c == '>' || c == '<'
        || c == '\n' || c == '\r')
      return true;
    if (c == '$' && i + 1 < command.size() && command[i + 1] == '(')
      return true;
  }
  return false;
}

std::string strip_comments(std::string_view command) {
  std::string out;
  out.reserve(command.size());
  char q = 0;
  bool word_start = true;
  for (size_t i = 0; i < command.size(); ++i) {
    char c = command[i];
    if (q) {
      out.push_back(c);
      if (c == q)
        q = 0;
      continue;
    }
    if (c == '#' && word_start) {
      while (i < command.size() && command[i] != '\n')
        ++i;
      if (i < command.size())
        out.push_back('\n');
      word_start = true;
      continue;
    }
    if (c == '\'' || c == '"')
      q = c;
    out.push_back(c);
    word_start = is_space(c) || c == ';' || c == '&' || c == '|';
  }
  return out;
}

} // namespace mibyan::approvals
