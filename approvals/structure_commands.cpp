#include "approvals/structure_analyser.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <string_view>

#include "approvals/structure_words.hpp"

namespace mibyan::approvals::structure_detail {

namespace {

bool listed(const std::string& w,
            std::initializer_list<std::string_view> xs) {
  for (auto x : xs)
    if (w.size() == x.size() && w == x)
      return true;
  return false;
}

bool is_wrapper(const std::string& w) {
  return listed(w, {"sudo", "doas", "env", "nohup", "setsid", "builtin",
                    "time", "unbuffer", "command", "exec", "nice", "ionice",
                    "stdbuf", "xargs", "timeout", "chrt", "taskset",
                    "busybox", "toybox"});
}

// Commands command_words() follows besides shells and interpreters.
bool has_handler(const std::string& w) {
  return listed(w, {"cd", "pushd", "export", "declare", "typeset", "local",
                    "readonly", "unset", "eval", "source", ".", "awk", "gawk",
                    "mawk", "nawk", "find", "watch", "su", "runuser", "curl",
                    "wget"});
}

} // namespace

analyser::rendered analyser::command_words(std::vector<rword> ws, const simple_command* c,
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
    if (ws[k].text == "[[" || ws[k].text == "for" || ws[k].text == "select"
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
  k = strip_wrappers(ws, k, via_xargs);
  if (k >= ws.size())
    return {};
  // xargs fed literal text: its words are the arguments.
  if (via_xargs && c != nullptr && ps != nullptr && c->pipe_from >= 0) {
    auto in = literal_output(*ps, static_cast<size_t>(c->pipe_from), 0);
    for (size_t i = 0; in && i < in->size();) {
      while (i < in->size() && std::isspace(static_cast<unsigned char>((*in)[i])))
        ++i;
      size_t b = i;
      while (i < in->size() && !std::isspace(static_cast<unsigned char>((*in)[i])))
        ++i;
      if (i > b) {
        rword x;
        x.text = x.pattern = in->substr(b, i - b);
        x.glob = has_glob(x.text);
        ws.push_back(std::move(x));
      }
    }
  }
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
  if (path.find('/') != std::string::npos)
    run_written(path, depth);
  // A file written with literal text (echo, printf, cat <<EOF > f):
  // remembered, so that running it later is read as that text.
  if (c != nullptr && ps != nullptr && !ps->commands.empty()) {
    for (auto& [op, w] : redirs) {
      if ((op != ">" && op != ">>" && op != ">|") || w.dynamic)
        continue;
      auto idx = static_cast<size_t>(c - ps->commands.data());
      auto text = literal_output(*ps, idx, 0);
      if (text) {
        auto& f = written[basename_of(w.text)];
        f = (op == ">>" ? f : std::string{}) + *text;
      }
    }
  }
  const bool shell_or_language = is_shell(name) || is_language(name);
  if (via_xargs && shell_or_language)
    key(key_utility);
  if (!shell_or_language && !has_handler(name)) {
    // Most commands: nothing to follow.
  } else if (name == "cd" || name == "pushd") {
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
    if (!args.empty())
      run_written(args[0].text, depth);
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
  } else if (shell_or_language) {
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

size_t analyser::strip_wrappers(std::vector<rword>& ws, size_t k,
                                bool& via_xargs) {
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
    if (ws[k].dynamic || !is_wrapper(basename_of(ws[k].text)))
      break;
    auto w = basename_of(ws[k].text);
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
  return k;
}

std::string analyser::download_target(const std::string& name,
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

void analyser::run_written(const std::string& path, size_t depth) {
  auto it = written.find(basename_of(path));
  if (it != written.end())
    analyse(it->second, depth + 1);
}

bool analyser::is_downloaded(const std::string& path) const {
  return !path.empty() && downloaded.count(basename_of(path)) > 0;
}

void analyser::interpreter(const std::string& name, const std::vector<rword>& args,
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
    if (shell)
      run_written(s.text, depth);
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

void analyser::awk_program(const std::vector<rword>& args, size_t depth) {
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

} // namespace mibyan::approvals::structure_detail
