// The `search_files` tool (docs/tools.md, "search_files"), backed by
// ripgrep.
//
// Result shapes:
// - target "content", output_mode "content": {"total_count", "matches":
//   [{"path","line","content"}], "truncated"}. With context > 0 each match
//   also has "before" and "after": arrays of {"line","content"} (a context
//   line between two close matches appears in both). `matches` is present
//   whatever the count.
// - output_mode "files_only": {"total_count", "files": [path],
//   "truncated"}: files containing a match.
// - output_mode "count": {"total_count" (files), "total_matches" (matching
//   lines in all files), "counts": {path: n}, "truncated"}.
// - target "files": {"total_count", "files": [path], "truncated"}: file
//   names matching the glob `pattern` (no `matches` list; a pattern without
//   glob characters matches names containing it). `file_glob` narrows the
//   names further (both must match).
// Paging (offset/limit) applies to matches, or to files in the other modes.
// When more results exist: "truncated": true and a "hint" with the next
// offset. Counting stops after `count_cap` further matches; "total_count" is
// then a lower bound and "limit_reason" says so.
//
// Policies: .gitignore/.ignore/.rgignore are honoured everywhere (also
// outside git repositories); hidden files and directories are skipped
// unless `path` names one; binary files are skipped. Paths are relative to
// the session cwd when the search path lies under it, else absolute.
// order: "discovery" (ripgrep's single-threaded walk order: deterministic,
// so paging is stable), "path" (sorted), "mtime" (newest first).
// Files read_file refuses (tools/path_policy.hpp: Mibyan's secrets, hard
// links to them, credential stores, process environments) are never shown,
// and neither are matches on lines the secret redactor would change: such
// hits are left out and counted nowhere (total_count, total_matches and
// the per-file counts), so the counts tell nothing about a secret. For
// that, every content mode reads ripgrep's JSON output (the matching
// lines), also "count" and "files_only".
// ripgrep runs with the kernel's allow-listed environment
// (base/env_filter.hpp), never the host's.
// ignore_case: Unicode simple case folding (ripgrep's --ignore-case for
// content; for file names the collector folds, since ripgrep's glob
// folding is ASCII-only), so "école" finds "ÉCOLE".
#include "tools/core_tools.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>

#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/options.hpp"
#include "base/credential_paths.hpp"
#include "base/env_filter.hpp"
#include "base/redact.hpp"
#include "base/subprocess.hpp"
#include "kernels/process_launcher.hpp"
#include "tools/case_fold.hpp"
#include "tools/file_io.hpp"
#include "tools/path_policy.hpp"
#include "tools/redact_result.hpp"
#include "tools/rg_output.hpp"

namespace mibyan {

namespace {

/// Matches (or files) counted beyond the requested page before ripgrep is
/// stopped; total_count is then a lower bound.
constexpr uint64_t count_cap = 100'000;

/// Wall-clock limit of one search when the context carries no deadline.
constexpr auto default_search_timeout = std::chrono::seconds(60);

/// A ripgrep JSON line longer than this is counted but not parsed.
constexpr size_t max_json_line = 8 * 1024 * 1024;

std::string normalize(const std::string& path) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos <= path.size()) {
    auto next = path.find('/', pos);
    if (next == std::string::npos)
      next = path.size();
    auto part = path.substr(pos, next - pos);
    if (part == "..") {
      if (!parts.empty())
        parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    pos = next + 1;
  }
  std::string result;
  for (auto& p : parts)
    result += "/" + p;
  return result.empty() ? "/" : result;
}

std::string strip_dot_slash(std::string p) {
  while (p.size() > 2 && p[0] == '.' && p[1] == '/')
    p.erase(0, 2);
  return p;
}


std::string clip_line(std::string s, size_t max_chars) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r'))
    s.pop_back();
  if (s.size() > max_chars) {
    s.resize(max_chars);
    s = json::sanitize_utf8(s) + "... [truncated]";
  }
  return s;
}

// Matches `path` against a shell glob the way ripgrep does for globs
// without a slash: against the file name only.
bool glob_matches(const std::string& glob, const std::string& path) {
  if (glob.find('/') != std::string::npos)
    return ::fnmatch(glob.c_str(), path.c_str(), FNM_PATHNAME) == 0;
  auto slash = path.rfind('/');
  auto name = slash == std::string::npos ? path : path.substr(slash + 1);
  return ::fnmatch(glob.c_str(), name.c_str(), 0) == 0;
}

bool has_glob_chars(const std::string& s) {
  return s.find_first_of("*?[{") != std::string::npos;
}


struct search_request {
  std::string pattern;
  bool files_target = false;
  std::string output_mode;
  std::string root_arg;  // path argument given to rg (relative to cwd)
  std::string file_glob;
  std::string order;
  uint64_t offset = 0;
  uint64_t limit = 50;
  int64_t context = 0;
  size_t max_line_chars = 2000;
  bool ignore_case = false;
  std::string cwd;          // absolute; rg's paths are relative to it
  std::string mibyan_home;  // for read_refusal
  const redactor* redact = nullptr;  // lines it changes are left out
};

// The glob a files-target `pattern` stands for.
std::string name_glob(const std::string& pattern) {
  return has_glob_chars(pattern) ? pattern : "*" + pattern + "*";
}

std::vector<std::string> rg_command(const std::string& rg,
                                    const search_request& req) {
  std::vector<std::string> argv{rg, "--no-config", "--no-require-git",
                                "--color", "never"};
  if (req.order == "path") {
    argv.insert(argv.end(), {"--sort", "path"});
  } else if (req.order == "mtime") {
    argv.insert(argv.end(), {"--sortr", "modified"});
  } else {
    argv.push_back("--threads=1");
  }
  if (req.ignore_case && !req.files_target)
    argv.push_back("--ignore-case");
  if (req.files_target) {
    argv.insert(argv.end(), {"--files", "--null"});
    // Case-insensitive name matching is done by the collector.
    if (!req.ignore_case)
      argv.insert(argv.end(), {"--glob", name_glob(req.pattern)});
  } else {
    // Every content mode reads the matching lines, so that matches on
    // lines the redactor changes are counted nowhere.
    argv.push_back("--json");
    if (req.output_mode == "content" && req.context > 0)
      argv.push_back("--context=" + std::to_string(req.context));
  }
  // ripgrep ORs several --glob whitelists; for target "files" file_glob
  // must narrow `pattern`, so the collector applies it instead.
  if (!req.file_glob.empty() && !req.files_target)
    argv.insert(argv.end(), {"--glob", req.file_glob});
  if (!req.files_target)
    argv.insert(argv.end(), {"--regexp", req.pattern});
  argv.insert(argv.end(), {"--", req.root_arg});
  return argv;
}

// Collects one page of results from ripgrep's output while counting the
// rest, and decides when to stop reading.
class collector {
public:
  explicit collector(const search_request& req)
    : req_(req),
      guarded_(req.mibyan_home),
      splitter_(req.files_target ? '\0' : '\n', max_json_line) {
    if (req.files_target && req.ignore_case)
      folded_glob_ = fold_case(name_glob(req.pattern));
  }

  bool content_mode() const {
    return !req_.files_target && req_.output_mode == "content";
  }

  /// Feeds stdout data; returns false once enough was seen.
  bool feed(std::string_view data) {
    splitter_.feed(data, [this](std::string_view rec, bool overflow) {
      on_record(rec, overflow);
    });
    return !capped_;
  }

  void finish() {
    if (!capped_)
      splitter_.finish([this](std::string_view rec, bool overflow) {
        on_record(rec, overflow);
      });
  }

  uint64_t total() const { return total_; }
  uint64_t total_matches() const { return total_matches_; }
  bool capped() const { return capped_; }
  json::value& items() { return items_; }
  json::value& counts() { return counts_; }

private:
  bool in_page(uint64_t index) const {
    return index >= req_.offset && index - req_.offset < req_.limit;
  }

  // Whether read_file would refuse `path` (as ripgrep printed it): a
  // process environment, or a protected file (one stat per file: they are
  // known by inode).
  bool refused(const std::string& path) const {
    if (path.empty())
      return false;
    auto abs = resolve_path(path, req_.cwd);
    if (is_proc_environ(abs))
      return true;
    struct stat st;
    return !guarded_.empty() && ::stat(abs.c_str(), &st) == 0
           && guarded_.contains(static_cast<uint64_t>(st.st_dev),
                                static_cast<uint64_t>(st.st_ino));
  }

  // Whether the redactor changes this matching line (its hit is then
  // neither shown nor counted).
  bool redacted(const std::string& line) const {
    std::string scratch;
    return req_.redact != nullptr && req_.redact->redact_to(line, scratch);
  }

  void on_record(std::string_view rec, bool overflow) {
    if (capped_)
      return;
    if (req_.files_target)
      on_path_record(rec);
    else if (content_mode())
      on_json_line(rec, overflow);
    else
      on_file_count_line(rec, overflow);
    if (total_ >= req_.offset + req_.limit + count_cap)
      capped_ = true;
  }

  // Target "files": records are NUL-separated paths.
  void on_path_record(std::string_view rec) {
    if (rec.empty())
      return;
    auto path = strip_dot_slash(std::string{rec});
    if (!req_.file_glob.empty() && !glob_matches(req_.file_glob, path))
      return;
    if (req_.ignore_case && !glob_matches(folded_glob_, fold_case(path)))
      return;
    if (in_page(total_))
      items_.push_back(json::sanitize_utf8(path));
    ++total_;
  }

  // "count" and "files_only": ripgrep's JSON lines, counted per file (the
  // "end" record of a file closes its count).
  void on_file_count_line(std::string_view rec, bool overflow) {
    constexpr std::string_view match_prefix = "{\"type\":\"match\"";
    constexpr std::string_view begin_prefix = "{\"type\":\"begin\"";
    constexpr std::string_view end_prefix = "{\"type\":\"end\"";
    if (rec.substr(0, begin_prefix.size()) == begin_prefix) {
      file_path_.clear();
      file_hits_ = 0;
      if (auto parsed = json::parse(rec))
        if (auto data = parsed.v->find("data"))
          file_path_ = rg_string(data->find("path"));
      file_refused_ = refused(file_path_);
      return;
    }
    if (rec.substr(0, match_prefix.size()) == match_prefix) {
      if (file_refused_ || overflow)
        return;
      auto parsed = json::parse(rec);
      if (!parsed)
        return;
      auto data = parsed.v->find("data");
      if (data == nullptr || redacted(rg_string(data->find("lines"))))
        return;
      ++file_hits_;
      return;
    }
    if (rec.substr(0, end_prefix.size()) != end_prefix || file_hits_ == 0)
      return;
    auto path = json::sanitize_utf8(strip_dot_slash(file_path_));
    if (req_.output_mode == "count") {
      total_matches_ += file_hits_;
      if (in_page(total_))
        counts_[path] = file_hits_;
    } else if (in_page(total_)) {
      items_.push_back(path);
    }
    ++total_;
    file_hits_ = 0;
  }

private:
  struct context_line {
    std::string path;
    int64_t line;
    std::string content;
  };

  void on_json_line(std::string_view rec, bool overflow) {
    constexpr std::string_view match_prefix = "{\"type\":\"match\"";
    constexpr std::string_view context_prefix = "{\"type\":\"context\"";
    constexpr std::string_view begin_prefix = "{\"type\":\"begin\"";
    if (rec.substr(0, begin_prefix.size()) == begin_prefix) {
      // One per file, before its matches: decide whether to hide them.
      file_refused_ = false;
      if (auto parsed = json::parse(rec))
        if (auto data = parsed.v->find("data"))
          file_refused_ = refused(rg_string(data->find("path")));
      return;
    }
    if (file_refused_)
      return;
    bool is_match = rec.substr(0, match_prefix.size()) == match_prefix;
    bool is_context = rec.substr(0, context_prefix.size())
                      == context_prefix;
    if (!is_match && !is_context)
      return;
    if (is_match) {
      if (overflow) {
        // Too long to parse, so it cannot be checked for secrets: shown
        // as a placeholder, never with its text.
        auto index = total_++;
        ++total_matches_;
        last_kept_ = nullptr;
        if (in_page(index)) {
          json::value m;
          m["path"] = "";
          m["line"] = 0;
          m["content"] = "[line too long to show]";
          items_.push_back(std::move(m));
        }
        return;
      }
      auto parsed = json::parse(rec);
      if (!parsed)
        return;
      auto data = parsed.v->find("data");
      if (data == nullptr || redacted(rg_string(data->find("lines"))))
        return;
      auto index = total_++;
      ++total_matches_;
      if (!in_page(index)) {
        last_kept_ = nullptr;
        return;
      }
      json::value m;
      auto path = strip_dot_slash(rg_string(data->find("path")));
      auto line = data->get_int("line_number", 0);
      m["path"] = path;
      m["line"] = line;
      m["content"] = clip_line(rg_string(data->find("lines")),
                               req_.max_line_chars);
      if (req_.context > 0) {
        json::value before = json::value::make_array();
        for (auto& c : recent_)
          if (c.path == path && c.line < line
              && c.line >= line - req_.context) {
            json::value x;
            x["line"] = c.line;
            x["content"] = c.content;
            before.push_back(std::move(x));
          }
        m["before"] = std::move(before);
        m["after"] = json::value::make_array();
      }
      items_.push_back(std::move(m));
      last_kept_ = &items_.as_array().back();
      last_kept_path_ = path;
      last_kept_line_ = line;
      return;
    }
    // A context line matters only while the page is not complete (or for
    // the after-context of the page's last match).
    if (req_.context <= 0 || overflow
        || (total_ > req_.offset + req_.limit && last_kept_ == nullptr))
      return;
    auto parsed = json::parse(rec);
    if (!parsed)
      return;
    auto data = parsed.v->find("data");
    if (data == nullptr)
      return;
    context_line c{strip_dot_slash(rg_string(data->find("path"))),
                   data->get_int("line_number", 0),
                   clip_line(rg_string(data->find("lines")),
                             req_.max_line_chars)};
    if (last_kept_ != nullptr && c.path == last_kept_path_
        && c.line > last_kept_line_
        && c.line <= last_kept_line_ + req_.context) {
      json::value x;
      x["line"] = c.line;
      x["content"] = c.content;
      (*last_kept_)["after"].push_back(std::move(x));
    }
    recent_.push_back(std::move(c));
    while (recent_.size() > static_cast<size_t>(req_.context))
      recent_.pop_front();
  }

  const search_request& req_;
  const protected_inodes guarded_;
  record_splitter splitter_;
  uint64_t total_ = 0;
  uint64_t total_matches_ = 0;
  bool capped_ = false;
  bool file_refused_ = false;
  std::string file_path_;
  uint64_t file_hits_ = 0;
  std::string folded_glob_;
  json::value items_ = json::value::make_array();
  json::value counts_ = json::value::make_object();
  std::deque<context_line> recent_;
  json::value* last_kept_ = nullptr;
  std::string last_kept_path_;
  int64_t last_kept_line_ = 0;
};

std::string first_lines(const std::string& text, size_t max_chars) {
  auto s = text.substr(0, max_chars);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return json::sanitize_utf8(s);
}

class search_files_tool final : public tool {
public:
  const char* name() const override {
    return "search_files";
  }

  const char* toolset() const override {
    return "file";
  }

  script_policy script() const override {
    return {true, {}, "{'matches': [{'path', 'line', 'content'}], 'total_count', ...}"};
  }

  bool parallel_safe() const override {
    return true;
  }

  std::string description() const override {
    return "Search file contents with a regular expression (target="
           "\"content\", ripgrep syntax) or find files by name with a glob "
           "(target=\"files\", e.g. \"*.py\"; a plain word matches names "
           "containing it). Use this instead of grep, find or ls in the "
           "terminal. Content results: {\"total_count\", \"matches\": "
           "[{\"path\",\"line\",\"content\"}], \"truncated\"}; context=N "
           "adds \"before\"/\"after\" lines; output_mode \"files_only\" "
           "lists matching files, \"count\" gives per-file counts. Page "
           "with offset/limit (default 50). Respects .gitignore; skips "
           "hidden and binary files unless `path` points at them; hits in "
           "credential files and on lines holding secrets are left out "
           "(and not counted). Narrow big searches with `path` and "
           "`file_glob` (e.g. \"*.cpp\").";
  }

  json::value schema() const override {
    json::value props;
    auto prop = [&](const char* name, const char* type, const char* desc) {
      props[name] = schema_property(type, desc);
    };
    prop("pattern", "string",
         "Regex for content search, or glob for target=\"files\".");
    prop("target", "string",
         "\"content\" (search inside files, default) or \"files\" (find "
         "files by name).");
    prop("path", "string",
         "Directory or file to search (default: the working directory).");
    prop("file_glob", "string",
         "Only search files whose names match this glob, e.g. \"*.py\".");
    prop("limit", "integer", "Maximum results to return (default 50).");
    props["limit"]["minimum"] = 1;
    props["limit"]["maximum"] = 10000;
    prop("offset", "integer", "Results to skip, for paging (default 0).");
    props["offset"]["minimum"] = 0;
    prop("output_mode", "string",
         "\"content\" (matching lines, default), \"files_only\" (paths of "
         "matching files) or \"count\" (matches per file).");
    props["output_mode"]["enum"] = json::array{"content", "files_only",
                                               "count"};
    prop("context", "integer",
         "Lines of context before and after each match (default 0).");
    props["context"]["minimum"] = 0;
    props["context"]["maximum"] = 20;
    prop("order", "string",
         "\"discovery\" (traversal order, default), \"path\" (sorted) or "
         "\"mtime\" (newest first).");
    props["order"]["enum"] = json::array{"discovery", "path", "mtime"};
    prop("ignore_case", "boolean",
         "Match regardless of letter case, for any script (\"école\" finds "
         "\"ÉCOLE\"); applies to content and file names (default false).");
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    s["required"] = json::array{json::value{"pattern"}};
    return s;
  }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    search_request req;
    req.pattern = args.get_string("pattern");
    if (req.pattern.empty())
      return error_result("pattern must not be empty");
    if (req.pattern.find('\0') != std::string::npos)
      return error_result("pattern must not contain NUL bytes");
    if (req.pattern.size() > 10000)
      return error_result("pattern is too long (max 10000 characters)");
    auto target = args.get_string("target", "content");
    if (target == "content" || target == "grep") {
      req.files_target = false;
    } else if (target == "files" || target == "find") {
      req.files_target = true;
    } else {
      return error_result("Invalid argument 'target': must be \"content\" "
                          "or \"files\", got \"" + target.substr(0, 100)
                          + "\"");
    }
    req.output_mode = args.get_string("output_mode", "content");
    req.order = args.get_string("order", "discovery");
    req.file_glob = args.get_string("file_glob");
    if (req.file_glob.find('\0') != std::string::npos)
      return error_result("file_glob must not contain NUL bytes");
    req.offset = static_cast<uint64_t>(
      std::max<int64_t>(args.get_int("offset", 0), 0));
    req.limit = static_cast<uint64_t>(
      std::max<int64_t>(args.get_int("limit", 50), 1));
    req.context = args.get_int("context", 0);
    req.ignore_case = args.get_bool("ignore_case", false);
    req.max_line_chars
      = static_cast<size_t>(ctx.cfg->tool_output.max_line_chars);
    // -- resolve the path ---------------------------------------------------
    std::string cwd = ctx.cwd;
    if (cwd.empty()) {
      char buf[4096];
      cwd = ::getcwd(buf, sizeof(buf)) ? buf : "/";
    }
    auto path = args.get_string("path", ".");
    if (path.empty())
      return error_result("path must not be empty (omit it to search the "
                          "working directory)");
    if (path.find('\0') != std::string::npos)
      return error_result("path must not contain NUL bytes");
    if (path == "~" || path.rfind("~/", 0) == 0) {
      const char* home = std::getenv("HOME");
      path = std::string{home ? home : ""} + path.substr(1);
    }
    auto abs = normalize(path.front() == '/' ? path : cwd + "/" + path);
    struct stat st;
    if (::stat(abs.c_str(), &st) != 0)
      return error_result("Path not found: " + path);
    auto ncwd = normalize(cwd);
    req.cwd = ncwd;
    req.mibyan_home = mibyan_home_of(ctx);
    req.redact = &context_redactor(ctx);
    if (auto why = read_refusal(abs, req.mibyan_home))
      return error_result(*why);
    if (abs == ncwd)
      req.root_arg = ".";
    else if (ncwd == "/" || abs.rfind(ncwd + "/", 0) == 0)
      req.root_arg = abs.substr(ncwd == "/" ? 1 : ncwd.size() + 1);
    else
      req.root_arg = abs;
    if (req.root_arg.empty())
      req.root_arg = ".";
    // -- run ripgrep --------------------------------------------------------
    auto rg = find_executable("rg");
    if (rg.empty())
      return error_result("ripgrep (rg) is not installed or not on PATH; "
                          "search_files needs it. Install the Debian package "
                          "'ripgrep' (apt-get install ripgrep).");
    collector col{req};
    subprocess_options opts;
    opts.argv = rg_command(rg, req);
    opts.cwd = ncwd;
    // Not the host's environment: ripgrep needs none of its secrets.
    opts.env = allowlist_environment(current_environment(), {});
    opts.merge_stderr = false;
    opts.max_output_bytes = 16 * 1024; // stdout is consumed by the callback
    opts.cancel = ctx.cancelled;
    auto now = std::chrono::steady_clock::now();
    opts.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      ctx.deadline > now + std::chrono::milliseconds(200)
        ? ctx.deadline - now - std::chrono::milliseconds(100)
        : std::chrono::milliseconds(default_search_timeout));
    opts.kill_grace = std::chrono::milliseconds(200);
    opts.kill_group_on_exit = true;
    opts.on_output = [&](output_stream which, std::string_view data) {
      if (which != output_stream::out)
        return true;
      return col.feed(data);
    };
    auto res = launcher_or_real(ctx.launcher).run(opts);
    if (!res.spawn_error.empty())
      return error_result("Failed to run ripgrep: " + res.spawn_error);
    if (res.cancelled)
      return error_result("search cancelled");
    auto err_text = res.err();
    if (res.exit_code == 2 && !res.stopped) {
      if (err_text.find("regex parse error") != std::string::npos
          || err_text.find("error parsing regex") != std::string::npos)
        return error_result("Invalid regex pattern: "
                            + first_lines(err_text, 2000)
                            + " (escape special characters such as ( [ { "
                              "with a backslash for a literal match)");
      if (err_text.find("error parsing glob") != std::string::npos)
        return error_result("Invalid glob: " + first_lines(err_text, 2000));
      bool per_file = err_text.find("(os error") != std::string::npos;
      if (!per_file && col.total() == 0)
        return error_result("ripgrep failed: "
                            + first_lines(err_text, 2000));
    }
    if (!res.stopped && !res.timed_out)
      col.finish();
    return render(req, col, res, err_text);
  }

private:
  static json::value render(const search_request& req, collector& col,
                            const subprocess_result& res,
                            const std::string& err_text) {
    json::value result;
    bool partial = res.timed_out || col.capped();
    result["total_count"] = col.total();
    if (req.files_target || req.output_mode == "files_only") {
      result["files"] = std::move(col.items());
    } else if (req.output_mode == "count") {
      result["total_matches"] = col.total_matches();
      result["counts"] = std::move(col.counts());
    } else {
      result["matches"] = std::move(col.items());
    }
    bool more = col.total() > req.offset + req.limit;
    result["truncated"] = more || partial;
    if (col.capped())
      result["limit_reason"] = "counting stopped after "
                               + std::to_string(col.total())
                               + " results; total_count is a lower bound";
    else if (res.timed_out)
      result["limit_reason"] = "the search timed out; results and "
                               "total_count are partial";
    if (more)
      result["hint"] = "More results available: call again with offset="
                       + std::to_string(req.offset + req.limit)
                       + ", or narrow the search with a more specific "
                         "pattern, path or file_glob.";
    if (res.exit_code == 2 && !res.stopped && !err_text.empty())
      result["warning"] = "Some files could not be searched: "
                          + first_lines(err_text, 1000);
    return result;
  }
};

} // namespace

std::unique_ptr<tool> make_search_files_tool() {
  return std::make_unique<search_files_tool>();
}

} // namespace mibyan
