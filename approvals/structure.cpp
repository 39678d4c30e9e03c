#include "approvals/structure.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "approvals/escapes.hpp"
#include "approvals/shell_parse.hpp"

namespace mibyan::approvals {

namespace {

constexpr const char* key_dynamic = "dynamic command word";
constexpr const char* key_pipe = "pipe to shell";
constexpr const char* key_heredoc = "heredoc into interpreter";
constexpr const char* key_procsub = "process substitution";
constexpr const char* key_eval = "eval of dynamic text";
constexpr const char* key_download = "run a downloaded file";
constexpr const char* key_utility = "command run by a utility";
constexpr const char* key_truncated = "command too large or deep to analyse";

constexpr size_t max_nesting = 8;
constexpr size_t max_analysed = 2 * 1024 * 1024;

// Paths a glob is matched against (after ~ folding). A glob that can
// expand to one of them is written as that path in the second form.
const std::vector<std::string>& protected_paths() {
  static const std::vector<std::string> paths = {
    "/", "/home", "/root", "/etc", "/usr", "/var", "/bin", "/sbin", "/boot",
    "/lib", "/lib32", "/lib64", "/opt", "/srv", "/mnt", "/media", "/dev",
    "/proc", "/sys", "~", "~/.ssh", "~/.ssh/authorized_keys",
    "~/.ssh/id_rsa", "~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/config",
    "~/.bashrc", "~/.zshrc", "~/.profile", "~/.bash_profile", "~/.zprofile",
    "~/.netrc", "~/.pgpass", "~/.npmrc", "~/.pypirc", "~/.mibyan",
    "~/.mibyan/.env", "~/.mibyan/config.yaml", "~/.aws/credentials",
    "/etc/passwd", "/etc/shadow", "/etc/sudoers", "/etc/sudoers.d",
    "/etc/cron.d", "/etc/crontab", "/etc/ld.so.preload", "/etc/hosts",
    "/proc/sysrq-trigger", "/dev/sda", "/dev/vda", "/dev/xvda",
    "/dev/nvme0n1", "/dev/mmcblk0", "/dev/hda",
  };
  return paths;
}

// Programs a glob in command position is matched against.
const std::vector<std::string>& known_programs() {
  static const std::vector<std::string> progs = [] {
    std::vector<std::string> out;
    for (auto dir : {"/bin/", "/usr/bin/", "/sbin/", "/usr/sbin/"})
      for (auto p : {"rm", "chown", "chmod", "chgrp", "dd", "mkfs", "shred",
                     "sh", "bash", "dash", "zsh", "python3", "perl", "curl",
                     "wget", "reboot", "shutdown", "poweroff", "halt", "kill",
                     "killall", "mv", "cp", "tee", "find", "xargs"})
        out.push_back(std::string{dir} + p);
    return out;
  }();
  return progs;
}

bool is_shell(const std::string& n) {
  static const std::set<std::string> shells = {
    "sh", "bash", "dash", "ksh", "zsh", "mksh", "ash", "fish", "csh", "tcsh",
    "yash", "posh", "rbash"};
  return shells.count(n) > 0;
}

bool is_language(const std::string& n) {
  if (n.rfind("python", 0) == 0 || n.rfind("pypy", 0) == 0)
    return true;
  static const std::set<std::string> langs = {
    "perl", "ruby", "node", "nodejs", "php", "lua", "luajit", "rscript",
    "deno", "bun", "tclsh", "wish", "pwsh", "powershell", "osascript",
    "irb", "jshell", "groovy", "julia"};
  std::string lower;
  for (char c : n)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return langs.count(lower) > 0;
}

bool is_awk(const std::string& n) {
  return n == "awk" || n == "gawk" || n == "mawk" || n == "nawk";
}

bool is_reserved(const std::string& w) {
  static const std::set<std::string> words = {
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!",
    "{", "}", "time", "[[", "]]", "esac", "coproc"};
  return words.count(w) > 0;
}

std::string basename_of(const std::string& p) {
  auto slash = p.rfind('/');
  if (slash == std::string::npos || slash + 1 >= p.size())
    return p;
  return p.substr(slash + 1);
}

bool assignment_name(const std::string& w, std::string& name,
                     std::string& value) {
  auto eq = w.find('=');
  if (eq == std::string::npos || eq == 0)
    return false;
  size_t end = eq;
  if (w[eq - 1] == '+')
    --end; // X+=y
  if (end == 0 || !(std::isalpha(static_cast<unsigned char>(w[0])) || w[0] == '_'))
    return false;
  for (size_t k = 1; k < end; ++k)
    if (!(std::isalnum(static_cast<unsigned char>(w[k])) || w[k] == '_'))
      return false;
  name = w.substr(0, end);
  value = w.substr(eq + 1);
  return true;
}

std::vector<std::string> split_path(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= s.size()) {
    auto j = s.find('/', i);
    if (j == std::string_view::npos)
      j = s.size();
    out.emplace_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// Lexical folding of an absolute or ~ path: //, /./ and /.. removed.
std::string fold_path(const std::string& p, const std::string& home) {
  std::string root;
  std::string_view rest;
  if (p == "~" || p.rfind("~/", 0) == 0) {
    root = "~";
    rest = std::string_view{p}.substr(1);
  } else if (!p.empty() && p[0] == '/') {
    root = "/";
    rest = p;
  } else {
    return p;
  }
  std::vector<std::string> stack;
  for (auto& part : split_path(rest)) {
    if (part.empty() || part == ".")
      continue;
    if (part == "..") {
      if (!stack.empty()) {
        stack.pop_back();
      } else if (root == "~" && home.size() > 1 && home[0] == '/') {
        root = "/";
        for (auto& h : split_path(home))
          if (!h.empty())
            stack.push_back(h);
        if (!stack.empty())
          stack.pop_back();
      }
      continue;
    }
    stack.push_back(part);
  }
  std::string out = root == "~" ? "~" : "";
  for (auto& s : stack)
    out += "/" + s;
  if (out.empty())
    out = "/";
  return out;
}

bool has_special(const std::string& s) {
  for (char c : s)
    if (c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' || c == '|'
        || c == '<' || c == '>' || c == '(' || c == ')' || c == '`'
        || c == '$' || c == '"' || c == '\'' || c == '\\' || c == '#')
      return true;
  return false;
}

std::string render_word(const std::string& s) {
  if (s.empty())
    return "''";
  if (!has_special(s))
    return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

bool glob_char(char c) {
  return c == '*' || c == '?' || c == '[';
}

// An unescaped *, ? or [...] in a pattern (a lone `[` is the test
// command, not a glob).
bool has_glob(const std::string& p) {
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\') {
      ++i;
    } else if (p[i] == '*' || p[i] == '?') {
      return true;
    } else if (p[i] == '[' && p.find(']', i + 1) != std::string::npos) {
      return true;
    }
  }
  return false;
}

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
  std::map<std::string, std::string> vars;
  std::optional<std::string> cwd;
  std::set<std::string> downloaded;
  std::vector<std::string> primary, alt;
  bool any_alt = false;
  size_t analysed = 0;

  analyser(const home_paths& p, structure_result& o) : paths{p}, out{o} {}

  void key(const char* k) {
    if (std::find(out.keys.begin(), out.keys.end(), k) == out.keys.end())
      out.keys.emplace_back(k);
  }

  // -- literal evaluation -----------------------------------------------------

  // The value of `w` when it needs no command to run (literal parts and
  // known variables).
  std::optional<std::string> plain_value(const shell_word& w) const {
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

  // What command `idx` of `ps` prints, when that follows from literal
  // text: echo, printf, cat of a here-document, base64 -d, rev, which.
  std::optional<std::string> literal_output(const parsed_script& ps,
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

  // The output of a substitution body when it is literal.
  std::optional<std::string> substitution_output(const std::string& body) {
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

  // -- words --------------------------------------------------------------------

  std::vector<rword> expand(const shell_word& w, size_t depth) {
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

  std::string with_cwd(const std::string& s) const {
    if (s.empty() || s[0] == '/' || s[0] == '~')
      return fold_path(s, paths.home);
    if (!cwd || s[0] == '-' || s.find('=') != std::string::npos
        || s.find("://") != std::string::npos)
      return s;
    return fold_path(*cwd + "/" + s, paths.home);
  }

  // The protected paths a glob can expand to.
  std::vector<std::string> glob_matches(const std::string& pattern) const {
    std::vector<std::string> out;
    auto p = with_cwd(pattern);
    for (auto& path : protected_paths())
      if (::fnmatch(p.c_str(), path.c_str(), FNM_PATHNAME) == 0)
        out.push_back(path);
    return out;
  }

  // -- one simple command ---------------------------------------------------------

  struct rendered {
    std::string primary, alt;
  };

  rendered render(const std::string& name, const std::vector<rword>& args,
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

  // Strips the wrappers at ws[k...]; sets `via_xargs`. Returns the index
  // of the program word (ws.size() when none).
  size_t strip_wrappers(std::vector<rword>& ws, size_t k, bool& via_xargs,
                        size_t depth) {
    auto skip_options = [&](std::initializer_list<const char*> with_arg) {
      while (k < ws.size() && ws[k].text.size() > 1 && ws[k].text[0] == '-') {
        if (ws[k].text == "--") {
          ++k;
          return;
        }
        bool takes = false;
        for (auto a : with_arg)
          takes = takes || ws[k].text == a;
        k += takes ? 2 : 1;
      }
    };
    for (size_t rounds = 0; k < ws.size() && rounds < 32; ++rounds) {
      auto w = basename_of(ws[k].text);
      if (ws[k].dynamic)
        break;
      if (w == "sudo" || w == "doas") {
        ++k;
        skip_options({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U",
                      "-T", "-c", "--user", "--group", "--host", "--prompt",
                      "--chdir", "--role", "--type", "--close-from"});
      } else if (w == "env") {
        ++k;
        while (k < ws.size()) {
          auto& t = ws[k].text;
          std::string n, v;
          if (t == "-u" || t == "-C" || t == "--unset" || t == "--chdir") {
            k += 2;
          } else if (t == "-S" || t == "--split-string"
                     || t.rfind("--split-string=", 0) == 0
                     || (t.rfind("-S", 0) == 0 && t.size() > 2)) {
            std::string body;
            if (t == "-S" || t == "--split-string") {
              if (k + 1 < ws.size())
                body = ws[k + 1].text;
              k += 2;
            } else {
              body = t.substr(t[1] == 'S' ? 2 : 15);
              ++k;
            }
            std::vector<rword> split;
            size_t i = 0;
            while (i < body.size()) {
              while (i < body.size() && body[i] == ' ')
                ++i;
              size_t b = i;
              while (i < body.size() && body[i] != ' ')
                ++i;
              if (i > b) {
                rword x;
                x.text = x.pattern = body.substr(b, i - b);
                split.push_back(x);
              }
            }
            ws.insert(ws.begin() + static_cast<long>(k), split.begin(),
                      split.end());
          } else if (t.size() > 1 && t[0] == '-') {
            ++k;
          } else if (assignment_name(t, n, v)) {
            ++k;
          } else {
            break;
          }
        }
      } else if (w == "nohup" || w == "setsid" || w == "builtin"
                 || w == "time" || w == "unbuffer") {
        ++k;
        skip_options({});
      } else if (w == "command") {
        if (k + 1 < ws.size()
            && (ws[k + 1].text == "-v" || ws[k + 1].text == "-V"))
          return ws.size(); // a lookup, runs nothing
        ++k;
        skip_options({});
      } else if (w == "exec") {
        ++k;
        skip_options({"-a"});
      } else if (w == "nice" || w == "ionice" || w == "stdbuf") {
        ++k;
        skip_options({"-n", "-c", "-p", "-i", "-o", "-e", "--adjustment"});
      } else if (w == "xargs") {
        via_xargs = true;
        ++k;
        skip_options({"-I", "-P", "-L", "-d", "-E", "-s", "-a", "-n",
                      "--max-args", "--max-procs", "--delimiter",
                      "--arg-file", "--replace"});
      } else if (w == "timeout") {
        ++k;
        skip_options({"-s", "-k", "--signal", "--kill-after"});
        if (k < ws.size())
          ++k; // the duration
      } else if (w == "chrt" || w == "taskset") {
        ++k;
        skip_options({});
        if (k < ws.size())
          ++k; // priority / mask
      } else if (w == "busybox" || w == "toybox") {
        ++k;
      } else {
        break;
      }
    }
    (void)depth;
    return k;
  }

  std::string download_target(const std::string& name,
                               const std::vector<rword>& args) const {
    std::string url;
    for (size_t i = 0; i < args.size(); ++i) {
      auto& t = args[i].text;
      auto next = i + 1 < args.size() ? args[i + 1].text : std::string{};
      if (t.find("://") != std::string::npos && url.empty())
        url = t;
      if (name == "curl") {
        if (t == "-o" || t == "--output")
          return next;
        if (t.rfind("--output=", 0) == 0)
          return t.substr(9);
        // -o combined with other short flags: -so FILE, -Lo FILE, -oFILE.
        if (t.size() > 1 && t[0] == '-' && t[1] != '-') {
          auto o = t.find('o');
          if (o != std::string::npos) {
            if (o + 1 == t.size())
              return next;
            return t.substr(o + 1);
          }
        }
      } else { // wget
        if (t == "-O" || t == "--output-document")
          return next;
        if (t.rfind("--output-document=", 0) == 0)
          return t.substr(18);
        if (t.size() > 2 && t.rfind("-O", 0) == 0)
          return t.substr(2);
      }
    }
    if (!url.empty()) {
      bool remote_name = name == "wget";
      for (auto& a : args)
        remote_name = remote_name || a.text == "-O" || a.text == "--remote-name"
                      || (a.text.size() > 1 && a.text[0] == '-'
                          && a.text[1] != '-'
                          && a.text.find('O') != std::string::npos);
      if (remote_name) {
        auto q = url.find_first_of("?#");
        return basename_of(url.substr(0, q));
      }
    }
    return {};
  }

  bool is_downloaded(const std::string& path) const {
    return !path.empty() && downloaded.count(basename_of(path)) > 0;
  }

  // A shell or language interpreter: does it read its program from stdin
  // (pipe, here-document), from a process substitution or a downloaded
  // file, or from a -c body?
  void interpreter(const std::string& name, const std::vector<rword>& args,
                   const simple_command& c, const parsed_script& ps,
                   size_t depth) {
    bool shell = is_shell(name);
    std::optional<size_t> script;
    bool inline_code = false, module = false, from_stdin = false;
    for (size_t i = 0; i < args.size(); ++i) {
      auto& t = args[i].text;
      if (t == "-" || t == "/dev/stdin") {
        from_stdin = true;
        break;
      }
      if (t == "--") {
        if (i + 1 < args.size())
          script = i + 1;
        break;
      }
      if (t.size() > 1 && (t[0] == '-' || (shell && t[0] == '+'))
          && !args[i].procsub) {
        if (shell && t[0] == '-' && t[1] != '-'
            && t.find('c') != std::string::npos) {
          inline_code = true;
          if (i + 1 < args.size()) {
            if (args[i + 1].dynamic || args[i + 1].substituted)
              key(key_eval);
            if (!args[i + 1].dynamic)
              analyse(args[i + 1].text, depth + 1);
          }
          break;
        }
        if (shell && t == "-s") {
          from_stdin = true;
          break;
        }
        if (!shell
            && (t == "-c" || t == "-e" || t == "-E" || t == "-p"
                || t == "--eval" || t == "--print" || t == "-r"
                || t == "run" || t.rfind("-e", 0) == 0)) {
          inline_code = true;
          break;
        }
        if (!shell && t.rfind("-m", 0) == 0) {
          module = true;
          break;
        }
        if (shell && (t == "-o" || t == "+o" || t == "-O" || t == "+O"))
          ++i;
        if (!shell
            && (t == "-W" || t == "-X" || t == "-I" || t == "-r"
                || t == "--require" || t == "--input-type"))
          ++i;
        continue;
      }
      script = i;
      break;
    }
    if (inline_code || module)
      return;
    if (script) {
      auto& s = args[*script];
      if (s.procsub)
        key(key_procsub);
      else if (is_downloaded(s.text))
        key(key_download);
      else if (s.dynamic && s.substituted)
        key(key_eval);
      return;
    }
    // The program comes from stdin.
    for (auto& r : c.redirects) {
      if (r.op == "<<" || r.op == "<<-" || r.op == "<<<") {
        key(key_heredoc);
        if (shell) {
          if (r.op == "<<<") {
            auto v = plain_value(r.target);
            if (v)
              analyse(*v, depth + 1);
            else
              key(key_eval);
          } else {
            analyse(r.body, depth + 1);
          }
        }
        return;
      }
      if (r.op == "<") {
        auto v = plain_value(r.target);
        if (v && is_downloaded(*v))
          key(key_download);
        for (auto& p : r.target.parts)
          if (p.kind == segment_kind::process_sub)
            key(key_procsub);
        return;
      }
    }
    if (c.pipe_from >= 0) {
      key(key_pipe);
      if (shell) {
        auto text = literal_output(ps, static_cast<size_t>(c.pipe_from), 0);
        if (text)
          analyse(*text, depth + 1);
      }
      return;
    }
    (void)from_stdin;
  }

  void awk_program(const std::vector<rword>& args, size_t depth) {
    for (size_t i = 0; i < args.size(); ++i) {
      auto& t = args[i].text;
      if (t == "-f" || t == "--file")
        return;
      if (t == "-F" || t == "-v" || t == "--assign")
        ++i;
      else if (t.size() > 1 && t[0] == '-')
        continue;
      else {
        // The program text.
        bool runs = t.find("system") != std::string::npos
                    || t.find("getline") != std::string::npos;
        for (size_t p = t.find('|'); !runs && p != std::string::npos;
             p = t.find('|', p + 1)) {
          bool logical = (p + 1 < t.size() && t[p + 1] == '|')
                         || (p > 0 && t[p - 1] == '|');
          if (!logical)
            runs = true;
        }
        if (!runs)
          return;
        key(key_utility);
        // Literal strings of the program: scanned as commands.
        for (size_t q = t.find('"'); q != std::string::npos;) {
          auto e = t.find('"', q + 1);
          if (e == std::string::npos)
            break;
          analyse(t.substr(q + 1, e - q - 1), depth + 1);
          q = t.find('"', e + 1);
        }
        return;
      }
    }
  }

  // Handles one simple command given as expanded words; returns its
  // rendering ("" = nothing runs).
  rendered command_words(std::vector<rword> ws, const simple_command* c,
                         const parsed_script* ps, size_t depth) {
    std::vector<std::pair<std::string, rword>> redirs;
    if (c != nullptr)
      for (auto& r : c->redirects) {
        if (r.op == "<<" || r.op == "<<-")
          continue;
        auto e = expand(r.target, depth);
        if (!e.empty())
          redirs.emplace_back(r.op, e.front());
      }
    size_t k = 0;
    std::vector<std::pair<std::string, rword>> assigns;
    while (k < ws.size()) {
      if (is_reserved(ws[k].text)) {
        ++k;
        continue;
      }
      if (ws[k].text == "for" || ws[k].text == "select"
          || ws[k].text == "case" || ws[k].text == "function")
        return {};
      std::string n, v;
      if (assignment_name(ws[k].text, n, v)) {
        rword val = ws[k];
        val.text = v;
        assigns.emplace_back(n, val);
        ++k;
        continue;
      }
      break;
    }
    if (k >= ws.size()) {
      for (auto& [n, v] : assigns) {
        if (v.dynamic)
          vars.erase(n);
        else
          vars[n] = v.text;
      }
      if (redirs.empty())
        return {};
      return render(":", {}, redirs);
    }
    bool via_xargs = false;
    k = strip_wrappers(ws, k, via_xargs, depth);
    if (k >= ws.size())
      return {};
    rword prog = ws[k];
    std::vector<rword> args(ws.begin() + static_cast<long>(k) + 1, ws.end());
    if (prog.glob && !prog.dynamic) {
      std::string match;
      for (auto& p : known_programs())
        if (::fnmatch(prog.pattern.c_str(), p.c_str(), FNM_PATHNAME) == 0) {
          match = p;
          break;
        }
      if (match.empty())
        prog.dynamic = true;
      else
        prog.text = match;
    }
    if (prog.dynamic) {
      key(key_dynamic);
      if (via_xargs)
        key(key_utility);
      return render(prog.text, args, redirs);
    }
    const std::string path = prog.text;
    const std::string name = basename_of(path);
    if (path.find('/') != std::string::npos && is_downloaded(path))
      key(key_download);
    if (via_xargs && (is_shell(name) || is_language(name)))
      key(key_utility);
    if (name == "cd" || name == "pushd") {
      if (args.empty() || args[0].text == "~")
        cwd = "~";
      else if (args[0].dynamic || args[0].text == "-")
        cwd.reset();
      else if (args[0].text[0] == '/' || args[0].text[0] == '~')
        cwd = fold_path(args[0].text, paths.home);
      else if (cwd)
        cwd = fold_path(*cwd + "/" + args[0].text, paths.home);
    } else if (name == "export" || name == "declare" || name == "typeset"
               || name == "local" || name == "readonly") {
      for (auto& a : args) {
        std::string n, v;
        if (assignment_name(a.text, n, v)) {
          if (a.dynamic)
            vars.erase(n);
          else
            vars[n] = v;
        }
      }
    } else if (name == "unset") {
      for (auto& a : args)
        vars.erase(a.text);
    } else if (name == "eval") {
      // Resolved substitutions are analysed, but eval of any substitution
      // or unknown variable is flagged.
      bool dynamic = false, substituted = false;
      std::string text;
      for (auto& a : args) {
        dynamic = dynamic || a.dynamic;
        substituted = substituted || a.substituted;
        text += (text.empty() ? "" : " ") + a.text;
      }
      if (dynamic || substituted)
        key(key_eval);
      if (!dynamic && !text.empty())
        analyse(text, depth + 1);
    } else if (name == "source" || name == ".") {
      if (!args.empty()) {
        if (args[0].procsub)
          key(key_procsub);
        else if (is_downloaded(args[0].text))
          key(key_download);
        else if (args[0].text == "/dev/stdin" || args[0].text == "-")
          key(key_pipe);
        else if (args[0].dynamic && args[0].substituted)
          key(key_eval);
      }
    } else if (is_shell(name) || is_language(name)) {
      if (c != nullptr && ps != nullptr)
        interpreter(name, args, *c, *ps, depth);
      else
        interpreter(name, args, simple_command{}, parsed_script{}, depth);
    } else if (is_awk(name)) {
      awk_program(args, depth);
    } else if (name == "find") {
      for (size_t i = 0; i < args.size(); ++i) {
        auto& t = args[i].text;
        if (t != "-exec" && t != "-execdir" && t != "-ok" && t != "-okdir")
          continue;
        std::vector<rword> sub;
        size_t j = i + 1;
        for (; j < args.size() && args[j].text != ";" && args[j].text != "+";
             ++j)
          sub.push_back(args[j]);
        if (!sub.empty()) {
          auto sub_name = basename_of(sub[0].text);
          if (sub[0].dynamic || is_shell(sub_name) || is_language(sub_name))
            key(key_utility);
          auto r = command_words(sub, nullptr, nullptr, depth + 1);
          if (!r.primary.empty()) {
            primary.push_back(r.primary);
            alt.push_back(r.alt);
          }
        }
        i = j;
      }
    } else if (name == "watch") {
      size_t i = 0;
      while (i < args.size() && args[i].text.size() > 1
             && args[i].text[0] == '-')
        i += (args[i].text == "-n" || args[i].text == "-d") ? 2 : 1;
      std::string text;
      bool dynamic = false;
      for (; i < args.size(); ++i) {
        text += (text.empty() ? "" : " ") + args[i].text;
        dynamic = dynamic || args[i].dynamic;
      }
      if (dynamic)
        key(key_eval);
      else if (!text.empty())
        analyse(text, depth + 1);
    } else if ((name == "su" || name == "runuser")) {
      for (size_t i = 0; i + 1 < args.size(); ++i)
        if (args[i].text == "-c" || args[i].text == "--command") {
          if (args[i + 1].dynamic)
            key(key_eval);
          else
            analyse(args[i + 1].text, depth + 1);
        }
    }
    if (name == "curl" || name == "wget") {
      auto f = download_target(name, args);
      for (auto& [op, w] : redirs)
        if (op == ">" || op == ">>" || op == ">|" || op == "&>")
          f = w.text;
      if (!f.empty() && f != "-" && f != "/dev/null")
        downloaded.insert(basename_of(f));
    }
    return render(name, args, redirs);
  }

  // -- scripts ---------------------------------------------------------------------

  void analyse(std::string_view text, size_t depth) {
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
};

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
  analyser a{paths, out};
  a.analyse(command, 0);
  if (out.truncated)
    a.key(key_truncated);
  if (!a.primary.empty())
    out.forms.push_back(join_lines(a.primary));
  if (a.any_alt)
    out.forms.push_back(join_lines(a.alt));
  return out;
}

std::vector<std::string> structure_keys() {
  return {key_dynamic, key_pipe, key_heredoc, key_procsub, key_eval,
          key_download, key_utility, key_truncated};
}

} // namespace mibyan::approvals
