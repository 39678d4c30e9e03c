#include "approvals/shell_parse.hpp"

#include <cctype>
#include <utility>

#include "approvals/escapes.hpp"

namespace mibyan::approvals {

bool shell_word::literal() const {
  for (auto& p : parts)
    if (p.kind != segment_kind::literal)
      return false;
  return true;
}

std::string shell_word::value() const {
  std::string out;
  for (auto& p : parts)
    if (p.kind == segment_kind::literal)
      out += p.text;
  return out;
}

size_t find_closing(std::string_view s, size_t start, char close,
                    size_t max_depth, bool& too_deep) {
  std::string stack(1, close);
  for (size_t i = start; i < s.size(); ++i) {
    char c = s[i];
    char top = stack.back();
    if (top == '\'') {
      if (c == '\'')
        stack.pop_back();
      continue;
    }
    if (c == '\\') {
      ++i;
      continue;
    }
    char next = i + 1 < s.size() ? s[i + 1] : '\0';
    if (top == '"') {
      if (c == '"') {
        stack.pop_back();
      } else if (c == '$' && (next == '(' || next == '{')) {
        stack.push_back(next == '(' ? ')' : '}');
        ++i;
      } else if (c == '`') {
        stack.push_back('`');
      }
    } else if (c == top) {
      stack.pop_back();
    } else if (c == '\'' && top != '`') {
      stack.push_back('\'');
    } else if (c == '"') {
      stack.push_back('"');
    } else if (c == '`') {
      stack.push_back('`');
    } else if (c == '$' && (next == '(' || next == '{')) {
      stack.push_back(next == '(' ? ')' : '}');
      ++i;
    } else if (c == '(' && top == ')') {
      stack.push_back(')');
    }
    if (stack.empty())
      return i;
    if (stack.size() > max_depth) {
      too_deep = true;
      return std::string_view::npos;
    }
  }
  return std::string_view::npos;
}

namespace {

bool name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

class lexer {
public:
  lexer(std::string_view in, const shell_limits& limits)
      : in_{in}, limits_{limits} {
    if (in_.size() > limits_.max_input) {
      in_ = in_.substr(0, limits_.max_input);
      out_.truncated = true;
    }
  }

  parsed_script run() {
    size_t i = 0;
    const size_t n = in_.size();
    while (i < n && !stop_) {
      char c = in_[i];
      char next = i + 1 < n ? in_[i + 1] : '\0';
      if (c == '\\') {
        if (next == '\n') {
          i += 2;
        } else if (i + 1 < n) {
          add_literal(next, true);
          i += 2;
        } else {
          ++i;
        }
      } else if (c == '\'') {
        auto j = in_.find('\'', i + 1);
        if (j == std::string_view::npos)
          j = n;
        add_literal(std::string{in_.substr(i + 1, j - i - 1)}, true);
        i = j + 1;
      } else if (c == '"') {
        in_word_ = true;
        i = double_quoted(i + 1);
      } else if (c == '$') {
        i = dollar(i, false);
      } else if (c == '`') {
        i = backtick(i, false);
      } else if ((c == '<' || c == '>') && next == '(') {
        i = substitution(i + 2, segment_kind::process_sub, false);
      } else if (c == '#' && !in_word_) {
        while (i < n && in_[i] != '\n')
          ++i;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        finish_word();
        ++i;
      } else if (c == '\n') {
        end_command(";");
        i = heredoc_bodies(i + 1);
      } else if (c == ';') {
        end_command(";");
        i += next == ';' || next == '&' ? 2 : 1;
      } else if (c == '&' && next == '&') {
        end_command("&&");
        i += 2;
      } else if (c == '&' && next == '>') {
        finish_word();
        bool append = i + 2 < n && in_[i + 2] == '>';
        start_redirect(append ? "&>>" : "&>");
        i += append ? 3 : 2;
      } else if (c == '&') {
        end_command("&");
        ++i;
      } else if (c == '|') {
        const char* op = next == '|' ? "||" : next == '&' ? "|&" : "|";
        end_command(op);
        i += next == '|' || next == '&' ? 2 : 1;
      } else if (c == '(' || c == ')') {
        end_command(";");
        ++i;
      } else if (c == '<' || c == '>') {
        i = redirect(i);
      } else {
        add_literal(c, false);
        ++i;
      }
    }
    end_command("");
    if (stop_)
      out_.truncated = true;
    return std::move(out_);
  }

private:
  std::string_view in_;
  const shell_limits& limits_;
  parsed_script out_;
  simple_command cur_;
  shell_word word_;
  bool in_word_ = false;
  int pending_redirect_ = -1;
  int next_pipe_from_ = -1;
  size_t words_ = 0;
  bool stop_ = false;
  // Here-documents waiting for their body: (command index, redirect index).
  std::vector<std::pair<size_t, size_t>> heredocs_;

  void add_literal(char c, bool quoted) {
    in_word_ = true;
    auto& parts = word_.parts;
    if (!parts.empty() && parts.back().kind == segment_kind::literal
        && parts.back().quoted == quoted) {
      parts.back().text.push_back(c);
      return;
    }
    add_literal(std::string(1, c), quoted);
  }

  void add_literal(const std::string& text, bool quoted) {
    in_word_ = true;
    auto& parts = word_.parts;
    if (!parts.empty() && parts.back().kind == segment_kind::literal
        && parts.back().quoted == quoted) {
      parts.back().text += text;
      return;
    }
    word_segment seg;
    seg.text = text;
    seg.quoted = quoted;
    parts.push_back(std::move(seg));
  }

  void add_segment(segment_kind kind, std::string text, bool quoted,
                   bool complex = false) {
    in_word_ = true;
    word_segment seg;
    seg.kind = kind;
    seg.text = std::move(text);
    seg.quoted = quoted;
    seg.complex = complex;
    word_.parts.push_back(std::move(seg));
  }

  void finish_word() {
    if (!in_word_)
      return;
    if (++words_ > limits_.max_words) {
      stop_ = true;
      return;
    }
    if (pending_redirect_ >= 0) {
      auto idx = static_cast<size_t>(pending_redirect_);
      auto& r = cur_.redirects[idx];
      r.target = std::move(word_);
      if (r.op == "<<" || r.op == "<<-")
        heredocs_.emplace_back(out_.commands.size(), idx);
      pending_redirect_ = -1;
    } else {
      cur_.words.push_back(std::move(word_));
    }
    word_ = {};
    in_word_ = false;
  }

  void end_command(const char* op) {
    finish_word();
    pending_redirect_ = -1;
    std::string o{op};
    bool pipe = o == "|" || o == "|&";
    if (cur_.words.empty() && cur_.redirects.empty()) {
      if (!pipe)
        next_pipe_from_ = -1;
      return;
    }
    if (out_.commands.size() >= limits_.max_commands) {
      stop_ = true;
      return;
    }
    cur_.after = o;
    cur_.pipe_from = next_pipe_from_;
    out_.commands.push_back(std::move(cur_));
    cur_ = {};
    next_pipe_from_ = pipe ? static_cast<int>(out_.commands.size() - 1) : -1;
  }

  void start_redirect(const std::string& op) {
    redirection r;
    r.op = op;
    cur_.redirects.push_back(std::move(r));
    pending_redirect_ = static_cast<int>(cur_.redirects.size() - 1);
  }

  size_t redirect(size_t i) {
    // A word of digits written right before the operator is its fd.
    if (in_word_ && word_.parts.size() == 1
        && word_.parts[0].kind == segment_kind::literal
        && !word_.parts[0].quoted
        && word_.parts[0].text.find_first_not_of("0123456789")
             == std::string::npos) {
      word_ = {};
      in_word_ = false;
    } else {
      finish_word();
    }
    static const char* ops[] = {"<<<", "<<-", ">>", ">|", ">&", "<<",
                                "<>",  "<&",  ">",  "<"};
    for (auto op : ops) {
      std::string_view o{op};
      if (in_.substr(i, o.size()) == o) {
        start_redirect(std::string{o});
        return i + o.size();
      }
    }
    return i + 1;
  }

  size_t double_quoted(size_t i) {
    const size_t n = in_.size();
    while (i < n && !stop_) {
      char c = in_[i];
      if (c == '"')
        return i + 1;
      if (c == '\\' && i + 1 < n) {
        char nx = in_[i + 1];
        if (nx == '$' || nx == '`' || nx == '"' || nx == '\\') {
          add_literal(nx, true);
          i += 2;
        } else if (nx == '\n') {
          i += 2;
        } else {
          add_literal('\\', true);
          ++i;
        }
        continue;
      }
      if (c == '$') {
        i = dollar(i, true);
        continue;
      }
      if (c == '`') {
        i = backtick(i, true);
        continue;
      }
      add_literal(c, true);
      ++i;
    }
    return n;
  }

  // The body of $(...), <(...) or >(...) starting at `start`.
  size_t substitution(size_t start, segment_kind kind, bool quoted) {
    bool too_deep = false;
    auto close = find_closing(in_, start, ')', limits_.max_depth, too_deep);
    if (too_deep) {
      stop_ = true;
      return in_.size();
    }
    if (close == std::string_view::npos)
      close = in_.size();
    std::string body{in_.substr(start, close - start)};
    // $((...)): arithmetic, not a command.
    if (kind == segment_kind::command_sub && !body.empty()
        && body.front() == '(' && body.back() == ')')
      add_segment(segment_kind::variable, "((", quoted, true);
    else
      add_segment(kind, std::move(body), quoted);
    return close + 1;
  }

  size_t backtick(size_t i, bool quoted) {
    bool too_deep = false;
    auto close = find_closing(in_, i + 1, '`', limits_.max_depth, too_deep);
    if (too_deep) {
      stop_ = true;
      return in_.size();
    }
    if (close == std::string_view::npos)
      close = in_.size();
    add_segment(segment_kind::command_sub,
                std::string{in_.substr(i + 1, close - i - 1)}, quoted);
    return close + 1;
  }

  size_t dollar(size_t i, bool quoted) {
    const size_t n = in_.size();
    char nx = i + 1 < n ? in_[i + 1] : '\0';
    if (nx == '\'' && !quoted) {
      size_t j = i + 2;
      while (j < n && in_[j] != '\'')
        j += in_[j] == '\\' ? 2 : 1;
      j = std::min(j, n);
      add_literal(decode_ansi_c(in_.substr(i + 2, j - i - 2)), true);
      return j + 1;
    }
    if (nx == '"' && !quoted) {
      in_word_ = true;
      return double_quoted(i + 2);
    }
    if (nx == '(')
      return substitution(i + 2, segment_kind::command_sub, quoted);
    if (nx == '{') {
      bool too_deep = false;
      auto close = find_closing(in_, i + 2, '}', limits_.max_depth, too_deep);
      if (too_deep) {
        stop_ = true;
        return n;
      }
      if (close == std::string_view::npos)
        close = n;
      auto inner = in_.substr(i + 2, close - i - 2);
      size_t k = 0;
      while (k < inner.size() && name_char(inner[k]))
        ++k;
      bool simple = k == inner.size() && k > 0 && name_start(inner[0]);
      add_segment(segment_kind::variable, std::string{inner.substr(0, k)},
                  quoted, !simple);
      return close + 1;
    }
    if (name_start(nx)) {
      size_t j = i + 1;
      while (j < n && name_char(in_[j]))
        ++j;
      add_segment(segment_kind::variable,
                  std::string{in_.substr(i + 1, j - i - 1)}, quoted);
      return j;
    }
    if (std::isdigit(static_cast<unsigned char>(nx))
        || std::string_view{"@*#?$!-"}.find(nx) != std::string_view::npos) {
      if (nx != '\0') {
        add_segment(segment_kind::variable, std::string(1, nx), quoted, true);
        return i + 2;
      }
    }
    add_literal('$', quoted);
    return i + 1;
  }

  // Reads the bodies of the pending here-documents from `p` (the start of
  // the line after the one that opened them); returns where the script
  // goes on.
  size_t heredoc_bodies(size_t p) {
    const size_t n = in_.size();
    for (auto [cmd, red] : heredocs_) {
      if (cmd >= out_.commands.size()
          || red >= out_.commands[cmd].redirects.size())
        continue;
      auto& r = out_.commands[cmd].redirects[red];
      auto delim = r.target.value();
      bool tabs = r.op == "<<-";
      std::string body;
      bool found = false;
      while (p < n) {
        auto nl = in_.find('\n', p);
        if (nl == std::string_view::npos)
          nl = n;
        auto line = in_.substr(p, nl - p);
        if (tabs)
          while (!line.empty() && line.front() == '\t')
            line.remove_prefix(1);
        if (!line.empty() && line.back() == '\r')
          line.remove_suffix(1);
        p = std::min(n, nl + 1);
        if (line == delim) {
          found = true;
          break;
        }
        body.append(line);
        body.push_back('\n');
      }
      (void)found;
      r.body = std::move(body);
    }
    heredocs_.clear();
    return p;
  }
};

} // namespace

parsed_script parse_shell(std::string_view script,
                          const shell_limits& limits) {
  return lexer{script, limits}.run();
}

} // namespace mibyan::approvals
