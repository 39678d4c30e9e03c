#include "approvals/destructive.hpp"

#include <algorithm>

#include "approvals/shell_parse.hpp"

namespace mibyan::approvals {

namespace {

constexpr size_t max_depth = 8;

bool one_of(const std::string& w, std::initializer_list<std::string_view> xs) {
  return std::any_of(xs.begin(), xs.end(),
                     [&](std::string_view x) { return w == x; });
}

std::string base_name(const std::string& w) {
  auto slash = w.rfind('/');
  return slash == std::string::npos ? w : w.substr(slash + 1);
}

bool is_assignment(const shell_word& w) {
  if (w.parts.empty() || w.parts[0].kind != segment_kind::literal
      || w.parts[0].quoted)
    return false;
  auto& t = w.parts[0].text;
  auto eq = t.find('=');
  if (eq == std::string::npos || eq == 0)
    return false;
  for (size_t i = 0; i < eq; ++i) {
    char c = t[i];
    bool ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
              || (i > 0 && c >= '0' && c <= '9') || (c == '+' && i + 1 == eq);
    if (!ok)
      return false;
  }
  return true;
}

class classifier {
public:
  destructive_command out;

  void script(std::string_view text, size_t depth) {
    // What cannot be analysed is taken as destructive of anything: a
    // checkpoint too many costs less than one missing.
    if (depth > max_depth) {
      reason("too deeply nested to analyse");
      out.whole_tree = true;
      return;
    }
    auto ps = parse_shell(text);
    if (ps.truncated) {
      reason("too large to analyse");
      out.whole_tree = true;
    }
    for (auto& c : ps.commands)
      command(c, depth);
  }

  void reason(const std::string& r) {
    out.destructive = true;
    if (std::find(out.reasons.begin(), out.reasons.end(), r)
        == out.reasons.end())
      out.reasons.push_back(r);
  }

  void target(const shell_word& w) {
    if (!w.literal()) {
      out.whole_tree = true;
      return;
    }
    auto v = w.value();
    if (v.empty())
      return;
    if (std::find(out.targets.begin(), out.targets.end(), v)
        == out.targets.end())
      out.targets.push_back(v);
  }

private:
  // Nested scripts inside a word: command and process substitutions.
  void nested(const shell_word& w, size_t depth) {
    for (auto& p : w.parts)
      if (p.kind == segment_kind::command_sub
          || p.kind == segment_kind::process_sub)
        script(p.text, depth + 1);
  }

  void command(const simple_command& c, size_t depth) {
    for (auto& w : c.words)
      nested(w, depth);
    for (auto& r : c.redirects) {
      nested(r.target, depth);
      bool truncating = r.op == ">" || r.op == ">|" || r.op == "&>";
      if (r.op == ">&") {
        auto v = r.target.value();
        truncating = r.target.literal() && !v.empty() && v != "-"
                     && v.find_first_not_of("0123456789") != std::string::npos;
      }
      if (!truncating)
        continue;
      if (r.target.literal() && r.target.value() == "/dev/null")
        continue;
      reason("> redirection");
      target(r.target);
    }
    // Words after assignments, reserved words and wrappers.
    size_t k = 0;
    auto& ws = c.words;
    auto text = [&](size_t i) { return ws[i].value(); };
    for (size_t rounds = 0; k < ws.size() && rounds < 64; ++rounds) {
      if (is_assignment(ws[k])) {
        ++k;
        continue;
      }
      auto w = base_name(text(k));
      if (one_of(w, {"!", "{", "}", "(", ")", "if", "then", "else", "elif",
                     "do", "while", "until", "time", "nohup", "setsid",
                     "command", "builtin", "exec", "unbuffer", "nice",
                     "ionice", "stdbuf", "xargs", "sudo", "doas", "env"})) {
        ++k;
        // Options of the wrapper (and a value for those that take one).
        while (k < ws.size()) {
          auto t = text(k);
          if (t.size() > 1 && t[0] == '-') {
            bool takes = false;
            if (w == "sudo" || w == "doas")
              takes = one_of(t, {"-u", "-g", "-C", "-h", "-p", "--user",
                                 "--chdir"});
            else if (w == "xargs")
              takes = one_of(t, {"-n", "-I", "-L", "-P", "-E", "-d", "-s"});
            else if (w == "nice")
              takes = t == "-n";
            else if (w == "ionice")
              takes = one_of(t, {"-c", "-n", "-p"});
            else if (w == "env")
              takes = one_of(t, {"-u", "-C", "--unset", "--chdir"});
            k += takes ? 2 : 1;
          } else if (w == "env" && is_assignment(ws[k])) {
            ++k;
          } else {
            break;
          }
        }
        continue;
      }
      if (w == "timeout") {
        ++k;
        while (k < ws.size() && text(k).size() > 1 && text(k)[0] == '-')
          ++k;
        if (k < ws.size())
          ++k; // the duration
        continue;
      }
      break;
    }
    if (k >= ws.size())
      return;
    if (!ws[k].literal()) {
      // The program itself is computed: nothing is known of it.
      for (auto& p : ws[k].parts)
        if (p.kind != segment_kind::literal)
          return;
    }
    auto prog = base_name(text(k));
    std::vector<const shell_word*> args;
    for (size_t i = k + 1; i < ws.size(); ++i)
      args.push_back(&ws[i]);
    program(prog, args, depth);
  }

  // The non-option arguments (everything after "--" counts as one).
  static std::vector<const shell_word*>
  operands(const std::vector<const shell_word*>& args) {
    std::vector<const shell_word*> out;
    bool end = false;
    for (auto* a : args) {
      auto v = a->value();
      if (!end && v == "--") {
        end = true;
        continue;
      }
      if (!end && a->literal() && v.size() > 1 && v[0] == '-')
        continue;
      out.push_back(a);
    }
    return out;
  }

  void program(const std::string& prog,
               const std::vector<const shell_word*>& args, size_t depth) {
    if (one_of(prog, {"sh", "bash", "dash", "zsh", "ksh"})) {
      for (size_t i = 0; i + 1 < args.size(); ++i) {
        auto v = args[i]->value();
        if (v.size() > 1 && v[0] == '-' && v.find('c') != std::string::npos
            && v[1] != '-') {
          if (args[i + 1]->literal())
            script(args[i + 1]->value(), depth + 1);
          else
            out.whole_tree = true;
          return;
        }
      }
      return;
    }
    if (prog == "eval") {
      std::string body;
      for (auto* a : args) {
        if (!a->literal())
          out.whole_tree = true;
        body += (body.empty() ? "" : " ") + a->value();
      }
      script(body, depth + 1);
      return;
    }
    if (one_of(prog, {"rm", "rmdir", "unlink", "shred", "truncate", "mv"})) {
      reason(prog);
      auto ops = operands(args);
      if (prog == "truncate") {
        // truncate -s SIZE FILE: the size is an option's value.
        ops.clear();
        for (size_t i = 0; i < args.size(); ++i) {
          auto v = args[i]->value();
          if (v == "-s" || v == "-r" || v == "--size" || v == "--reference") {
            ++i;
            continue;
          }
          if (v.size() > 1 && v[0] == '-')
            continue;
          ops.push_back(args[i]);
        }
      }
      for (auto* a : ops)
        target(*a);
      return;
    }
    if (prog == "sed" || prog == "perl") {
      bool in_place = false;
      bool script_given = false;
      std::vector<const shell_word*> rest;
      for (size_t i = 0; i < args.size(); ++i) {
        auto v = args[i]->value();
        if (v == "--in-place" || v.rfind("--in-place=", 0) == 0) {
          in_place = true;
          continue;
        }
        if (v == "-e" || v == "-f" || v == "--expression" || v == "--file") {
          script_given = true;
          ++i;
          continue;
        }
        if (v.size() > 1 && v[0] == '-' && v[1] != '-') {
          auto flags = v.substr(1);
          // -i, -i.bak, -ni, -pi, -pie
          auto at = flags.find('i');
          if (at != std::string::npos
              && (prog == "perl" || flags.find_first_of("ef") == std::string::npos
                  || flags.find('i') < flags.find_first_of("ef")))
            in_place = true;
          if (prog == "perl" && flags.find('e') != std::string::npos) {
            script_given = true;
            ++i; // the code
          }
          if (prog == "sed" && (flags.back() == 'e' || flags.back() == 'f')) {
            script_given = true;
            ++i;
          }
          continue;
        }
        rest.push_back(args[i]);
      }
      if (!in_place)
        return;
      reason(prog + " -i");
      size_t first = script_given ? 0 : 1;
      for (size_t i = first; i < rest.size(); ++i)
        target(*rest[i]);
      return;
    }
    if (prog == "git") {
      size_t i = 0;
      while (i < args.size()) {
        auto v = args[i]->value();
        if (v == "-C" || v == "-c" || v == "--git-dir" || v == "--work-tree") {
          if (v != "-c")
            out.whole_tree = true; // another tree than the cwd
          i += 2;
        } else if (v.size() > 1 && v[0] == '-') {
          ++i;
        } else {
          break;
        }
      }
      if (i >= args.size())
        return;
      auto sub = args[i]->value();
      std::vector<const shell_word*> rest(args.begin() + i + 1, args.end());
      auto has = [&](std::initializer_list<std::string_view> xs) {
        for (auto* a : rest)
          if (one_of(a->value(), xs))
            return true;
        return false;
      };
      if (sub == "checkout") {
        bool dashdash = false;
        for (auto* a : rest) {
          if (dashdash) {
            target(*a);
            continue;
          }
          if (a->value() == "--")
            dashdash = true;
        }
        if (dashdash) {
          reason("git checkout --");
        } else if (has({"."})) {
          reason("git checkout .");
          out.whole_tree = true;
        } else if (has({"-f", "--force"})) {
          reason("git checkout --force");
          out.whole_tree = true;
        }
      } else if (sub == "restore") {
        reason("git restore");
        auto ops = operands(rest);
        if (ops.empty())
          out.whole_tree = true;
        for (auto* a : ops) {
          if (a->value() == ".")
            out.whole_tree = true;
          target(*a);
        }
      } else if (sub == "reset" && has({"--hard", "--merge", "--keep"})) {
        reason("git reset --hard");
        out.whole_tree = true;
      } else if (sub == "clean") {
        bool force = false;
        for (auto* a : rest) {
          auto v = a->value();
          if (v == "--force"
              || (v.size() > 1 && v[0] == '-' && v[1] != '-'
                  && v.find('f') != std::string::npos))
            force = true;
        }
        if (force) {
          reason("git clean -f");
          out.whole_tree = true;
        }
      } else if (sub == "stash" && !has({"list", "show"})) {
        reason("git stash");
        out.whole_tree = true;
      }
      return;
    }
    if (prog == "find") {
      for (auto* a : args)
        if (one_of(a->value(), {"-delete"})) {
          reason("find -delete");
          out.whole_tree = true;
        }
      return;
    }
  }
};

} // namespace

destructive_command classify_destructive(std::string_view command) {
  classifier c;
  c.script(command, 0);
  if (!c.out.destructive)
    return {};
  return std::move(c.out);
}

} // namespace mibyan::approvals
