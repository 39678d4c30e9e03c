#include "approvals/structure_words.hpp"

#include <cctype>
#include <initializer_list>

namespace mibyan::approvals::structure_detail {

namespace {

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

bool has_special(const std::string& s) {
  for (char c : s)
    if (c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' || c == '|'
        || c == '<' || c == '>' || c == '(' || c == ')' || c == '`'
        || c == '$' || c == '"' || c == '\'' || c == '\\' || c == '#')
      return true;
  return false;
}

// A short linear search: cheaper than a set for a handful of words.
bool one_of(std::string_view w, std::initializer_list<std::string_view> xs) {
  for (auto x : xs)
    if (w.size() == x.size() && w == x)
      return true;
  return false;
}

} // namespace

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
  return one_of(n, {"sh", "bash", "dash", "ksh", "zsh", "mksh", "ash", "fish",
                    "csh", "tcsh", "yash", "posh", "rbash"});
}

bool is_language(const std::string& n) {
  if (n.rfind("python", 0) == 0 || n.rfind("pypy", 0) == 0)
    return true;
  std::string lower;
  for (char c : n)
    lower.push_back(
      static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return one_of(lower, {"perl", "ruby", "node", "nodejs", "php", "lua",
                        "luajit", "rscript", "deno", "bun", "tclsh", "wish",
                        "pwsh", "powershell", "osascript", "irb", "jshell",
                        "groovy", "julia"});
}

bool is_awk(const std::string& n) {
  return one_of(n, {"awk", "gawk", "mawk", "nawk"});
}

bool is_reserved(const std::string& w) {
  return one_of(w, {"if", "then", "else", "elif", "fi", "do", "done", "while",
                    "until", "!", "{", "}", "time", "]]", "esac", "coproc"});
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

} // namespace mibyan::approvals::structure_detail
