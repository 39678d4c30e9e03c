// The read_file tool: a window of a text file as numbered lines.
//
// Paging costs about the size of the page, not of the file: the first read
// of a file builds a sparse line index (tools/line_index.hpp: the byte
// offset of every 1,024th line and the line count) in one streaming memchr
// pass; the tool keeps the indexes of up to 64 files of 64 KiB or more,
// validated by device, inode, size, mtime and ctime, so later pages seek to
// the nearest indexed line and read only up to the window's end; a page
// that continues where the previous page of the same file version ended
// starts at that byte (the window says where its next line starts,
// tools/line_window.hpp). A later page of an indexed file skips the sniff
// of the first 8 KiB (the index was built after it passed). Only the
// lines in the window are kept (each cut at tool_output.max_line_chars), so
// a multi-gigabyte log costs memory for 500 lines, not for the file. Files
// smaller than 8 KiB are handled in the single read that sniffs them.
//
// Jupyter notebooks (.ipynb) are shown as their cells' sources, each under
// a "# %% [code] cell N" header, not as raw JSON.
//
// Offset past the end: an error naming the number of lines (a model that
// asks for line 900 of an 800-line file has a wrong picture of the file and
// should hear so). An empty file read from offset 1 gives empty content.
//
// Re-read guard (direct model calls with a session id only): per session the
// tool remembers which (path, offset, limit) windows it returned and the
// file's stamp (mtime, size, inode) at the time. Asking again for an
// unchanged window returns a short "unchanged" stub instead of the content;
// after two stubs for the same window the next request is BLOCKED. Reads of
// the same window in a row get a warning at the 3rd and are BLOCKED at the
// 4th. State is bounded: 256 sessions, 1,024 windows each.

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/options.hpp"
#include "tools/core_tools.hpp"
#include "tools/client_files.hpp"
#include "tools/file_io.hpp"
#include "tools/line_index.hpp"
#include "tools/line_window.hpp"
#include "tools/path_policy.hpp"
#include "tools/read_tracker.hpp"

namespace mibyan {

namespace {

using read_file_detail::line_window;
using read_file_detail::read_lines;

constexpr size_t sniff_bytes = 8192;
constexpr size_t max_guard_sessions = 256;
constexpr size_t max_guard_windows = 1024;
// Files at least this large keep their line index cached between calls.
constexpr size_t min_cached_bytes = 64 * 1024;

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

// What identifies the version of a file that was shown.
struct file_stamp {
  int64_t mtime_ns = 0;
  int64_t size = 0;
  uint64_t inode = 0;
  bool operator==(const file_stamp& o) const {
    return mtime_ns == o.mtime_ns && size == o.size && inode == o.inode;
  }
};

// -- re-read guard ------------------------------------------------------------

class reread_guard {
public:
  enum class verdict { read, stub, blocked };

  struct decision {
    verdict what = verdict::read;
    int consecutive = 1; // identical reads in a row, this one included
  };

  // Registers a request and says what to do with it.
  decision check(const std::string& session, const std::string& key,
                 const file_stamp& stamp) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& s = session_of(session);
    decision d;
    if (s.last_key == key) {
      d.consecutive = ++s.consecutive;
    } else {
      s.last_key = key;
      s.consecutive = 1;
    }
    if (d.consecutive >= 4) {
      d.what = verdict::blocked;
      return d;
    }
    auto i = s.windows.find(key);
    if (i != s.windows.end() && i->second.stamp == stamp) {
      i->second.used = ++clock_;
      if (++i->second.stubs > 2) {
        d.what = verdict::blocked;
        return d;
      }
      d.what = verdict::stub;
    }
    return d;
  }

  // Records that the window was returned with its content.
  void record(const std::string& session, const std::string& key,
              const file_stamp& stamp) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& s = session_of(session);
    if (s.windows.size() >= max_guard_windows && !s.windows.count(key)) {
      auto oldest = std::min_element(
        s.windows.begin(), s.windows.end(),
        [](auto& x, auto& y) { return x.second.used < y.second.used; });
      s.windows.erase(oldest);
    }
    auto& w = s.windows[key];
    w.stamp = stamp;
    w.stubs = 0;
    w.used = ++clock_;
  }

private:
  struct window {
    file_stamp stamp;
    int stubs = 0;
    uint64_t used = 0;
  };

  struct session_state {
    std::string last_key;
    int consecutive = 0;
    uint64_t used = 0;
    std::unordered_map<std::string, window> windows;
  };

  session_state& session_of(const std::string& id) {
    auto i = sessions_.find(id);
    if (i == sessions_.end()) {
      if (sessions_.size() >= max_guard_sessions) {
        auto oldest = std::min_element(
          sessions_.begin(), sessions_.end(),
          [](auto& x, auto& y) { return x.second.used < y.second.used; });
        sessions_.erase(oldest);
      }
      i = sessions_.emplace(id, session_state{}).first;
    }
    i->second.used = ++clock_;
    return i->second;
  }

  std::mutex mtx_;
  uint64_t clock_ = 0;
  std::unordered_map<std::string, session_state> sessions_;
};

// -- notebooks ----------------------------------------------------------------

constexpr size_t max_notebook_bytes = 32 * 1024 * 1024;

bool is_notebook(const std::string& path) {
  return path.size() > 6 && path.compare(path.size() - 6, 6, ".ipynb") == 0;
}

// Renders a Jupyter notebook as "# %% [kind] cell N" headers followed by
// each cell's source; nullopt when `text` is not a notebook.
std::optional<std::string> render_notebook(std::string_view text) {
  auto parsed = json::parse(text);
  if (!parsed || !parsed.v->is_object())
    return std::nullopt;
  auto cells = parsed.v->find("cells");
  if (cells == nullptr || !cells->is_array())
    return std::nullopt;
  std::string out;
  size_t n = 0;
  for (auto& cell : cells->as_array()) {
    ++n;
    out += "# %% [" + cell.get_string("cell_type", "unknown") + "] cell "
           + std::to_string(n) + "\n";
    auto src = cell.find("source");
    std::string body;
    if (src != nullptr && src->is_string())
      body = src->as_string();
    else if (src != nullptr && src->is_array())
      for (auto& part : src->as_array())
        if (part.is_string())
          body += part.as_string();
    out += body;
    if (!body.empty() && body.back() != '\n')
      out += '\n';
  }
  return out;
}

// -- the tool -----------------------------------------------------------------

class read_file_tool final : public tool {
public:
  const char* name() const override { return "read_file"; }
  const char* toolset() const override { return "file"; }

  script_policy script() const override {
    return {true, {}, "{'content', 'total_lines', ...}"};
  }
  bool parallel_safe() const override { return true; }

  std::string description() const override {
    return "Read a text file and return its lines numbered as 'N|content'. "
           "Use this instead of cat, head, tail or sed in the terminal. "
           "Reads up to `limit` lines (default 500, max 2000) starting at "
           "line `offset` (1-indexed, default 1); when the result says "
           "truncated, call again with offset=next_offset to continue. "
           "Lines longer than 2000 characters are cut. Binary files and "
           "images are not shown (use a vision tool for images). Do not "
           "re-read a range you already have unless the file changed.";
  }

  json::value schema() const override {
    json::value props;
    props["path"] = path_property();
    props["offset"] = schema_property("integer", "1-indexed line number to start "
                                          "at (default 1).");
    props["offset"]["minimum"] = 1;
    props["limit"] = schema_property("integer", "Maximum number of lines to return "
                                         "(default 500, at most 2000).");
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    s["required"] = json::array{"path"};
    return s;
  }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override;

private:
  // Where the page after the last one read of a file begins, for the files
  // paged most recently: the next page of a sequential read starts there
  // instead of at the nearest indexed line (up to 1,023 lines before it).
  // Tied to the index object, so to one version of the file (a changed
  // file gets a new index); a mark whose index is gone matches nothing.
  struct page_mark {
    std::weak_ptr<const line_index> index;
    int64_t line = 0;
    int64_t offset = 0;
  };

  std::optional<int64_t> find_mark(const std::shared_ptr<const line_index>& idx,
                                   int64_t line) const {
    std::lock_guard<std::mutex> lock{marks_mtx_};
    for (auto& m : marks_)
      if (m.line == line && m.index.lock() == idx)
        return m.offset;
    return std::nullopt;
  }

  void put_mark(const std::shared_ptr<const line_index>& idx, int64_t line,
                int64_t offset) const {
    std::lock_guard<std::mutex> lock{marks_mtx_};
    for (auto& m : marks_)
      if (m.index.lock() == idx) { // one mark per file version
        m.line = line;
        m.offset = offset;
        return;
      }
    marks_[marks_next_] = {idx, line, offset};
    marks_next_ = (marks_next_ + 1) % marks_.size();
  }

  mutable reread_guard guard_;
  mutable line_index_cache index_cache_{64};
  mutable std::mutex marks_mtx_;
  mutable std::array<page_mark, 16> marks_;
  mutable size_t marks_next_ = 0;
};

json::value file_error(std::string message, const char* flag = nullptr) {
  json::value out;
  if (flag != nullptr)
    out[flag] = true;
  out["error"] = std::move(message);
  return out;
}

json::value read_file_tool::run(const json::value& args,
                                const tool_context& ctx) const {
  options defaults;
  const options& cfg = ctx.cfg != nullptr ? *ctx.cfg : defaults;
  auto raw = args.get_string("path");
  if (auto usable = check_path_text(raw); !usable.ok())
    return error_result(usable.error);
  int64_t offset = args.get_int("offset", 1);
  if (offset < 1)
    return error_result("offset must be >= 1 (a 1-indexed line number), got "
                        + std::to_string(offset));
  int64_t max_lines = cfg.tool_output.max_lines;
  int64_t limit = std::clamp<int64_t>(args.get_int("limit", 500), 1,
                                      max_lines);
  auto path = resolve_path(raw, ctx.cwd);
  if (auto why = read_refusal(path, mibyan_home_of(ctx)))
    return error_result(*why);

  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      json::value out;
      out["error"] = "File not found: " + path;
      json::value similar = json::value::make_array();
      for (auto& s : similar_files(path, 5))
        similar.push_back(s);
      out["similar_files"] = std::move(similar);
      return out;
    }
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      return error_result("Path is a directory, not a file: " + path
                          + ". Use search_files with target='files' to "
                            "list its contents.");
    return error_result("Cannot open " + path + ": " + errno_text(err));
  }
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_on_exit{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return error_result("Cannot stat " + path + ": " + errno_text(errno));
  if (S_ISDIR(st.st_mode))
    return error_result("Path is a directory, not a file: " + path
                        + ". Use search_files with target='files' to list "
                          "its contents.");
  if (!S_ISREG(st.st_mode))
    return error_result("Not a regular file (device, FIFO or socket): "
                        + path);
  // Reads below block again; O_NONBLOCK only kept open() from hanging.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);

  // A file whose line index is cached passed the sniff below in this very
  // version (the index is built only after it): a later page skips it.
  auto version = file_version::of(st);
  auto files = client_files_of(ctx);
  std::shared_ptr<const line_index> index;
  if (!(files && files->read) && !is_notebook(path)
      && version.size >= static_cast<int64_t>(min_cached_bytes))
    index = index_cache_.find(version);
  std::string head;
  if (index == nullptr) {
    head.assign(sniff_bytes, '\0');
    ssize_t got = 0;
    for (;;) {
      got = ::pread(fd, head.data(), head.size(), 0);
      if (got >= 0 || errno != EINTR)
        break;
    }
    if (got < 0)
      return error_result("Cannot read " + path + ": " + errno_text(errno));
    head.resize(static_cast<size_t>(got));
  }
  // With a cached index, by the name alone (the bytes were checked then).
  if (auto mime = image_mime_type(path, head); !mime.empty()) {
    json::value out;
    out["is_image"] = true;
    out["error"] = "Cannot show an image as text: " + path + " (" + mime
                   + ", " + std::to_string(st.st_size) + " bytes)";
    out["hint"] = "Use a vision tool (vision_analyze) with this path to "
                  "look at the image.";
    return out;
  }
  if (index == nullptr && looks_binary(head))
    return file_error("Binary file, not shown: " + path + " ("
                        + std::to_string(st.st_size)
                        + " bytes). Use the terminal with a suitable tool "
                          "(e.g. xxd, file, strings) to inspect it.",
                      "is_binary");
  // A session with client file access reads the client's text of the file
  // (an editor's unsaved buffer, tools/client_files.hpp); the re-read
  // guard does not apply (the disk stamp says nothing about the buffer).
  std::optional<std::string> client_text;
  if (files && files->read) {
    auto got = files->read(path, ctx.cancelled);
    if (!got)
      return error_result("Cannot read " + path + " through the editor: "
                          + got.error);
    client_text = std::move(*got);
  }

  file_stamp stamp{static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000
                     + st.st_mtim.tv_nsec,
                   static_cast<int64_t>(st.st_size),
                   static_cast<uint64_t>(st.st_ino)};
  bool guarded = !ctx.from_script && !ctx.session_id.empty() && !client_text;
  auto key = path + "\n" + std::to_string(offset) + "\n"
             + std::to_string(limit);
  reread_guard::decision decision;
  if (guarded) {
    decision = guard_.check(ctx.session_id, key, stamp);
    if (decision.what == reread_guard::verdict::blocked)
      return error_result(
        "BLOCKED: you already read " + path + " (offset="
        + std::to_string(offset) + ", limit=" + std::to_string(limit)
        + ") and it has not changed. Stop re-reading it: use the content "
          "you already have, read a different range, or change the file "
          "first.");
    if (decision.what == reread_guard::verdict::stub) {
      json::value out;
      out["status"] = "unchanged";
      out["message"] = "File unchanged since you last read this range ("
                       + path + ", offset=" + std::to_string(offset)
                       + ", limit=" + std::to_string(limit)
                       + "); the content is already in the conversation "
                         "above. Refer to it instead of reading again.";
      out["dedup"] = true;
      out["content_returned"] = false;
      return out;
    }
  }

  auto max_line = static_cast<size_t>(cfg.tool_output.max_line_chars);
  auto budget = static_cast<size_t>(cfg.tool_output.read_char_budget);
  bool timed = ctx.deadline != std::chrono::steady_clock::time_point{};
  auto stop = [&] {
    return ctx.is_cancelled()
           || (timed && std::chrono::steady_clock::now() > ctx.deadline);
  };
  auto cancelled_error = [&] {
    return error_result("read_file was cancelled before finishing " + path);
  };
  std::optional<line_window> window;
  int64_t total = 0;
  int64_t file_size = 0;
  bool extracted = false;
  if (client_text) {
    window.emplace(offset, limit, max_line, budget);
    window->feed(client_text->data(), client_text->size());
    window->finish();
    total = window->total_lines();
    file_size = static_cast<int64_t>(client_text->size());
  } else if (is_notebook(path)
             && static_cast<size_t>(st.st_size) <= max_notebook_bytes) {
    if (auto whole = read_whole_file(path, max_notebook_bytes))
      if (auto rendered = render_notebook(*whole)) {
        window.emplace(offset, limit, max_line, budget);
        window->feed(rendered->data(), rendered->size());
        window->finish();
        total = window->total_lines();
        file_size = static_cast<int64_t>(whole->size());
        extracted = true;
      }
  }
  bool index_cached = index != nullptr; // found in (or stored in) the cache
  // The content hash of the bytes read, for the write-after-read check
  // (tools/read_tracker.hpp): taken here, so it costs no second read.
  std::optional<uint64_t> seen_hash;
  if (index == nullptr && !extracted && !client_text
      && head.size() < sniff_bytes) {
    // The sniffed head is the whole file: one pass over it does it all.
    window.emplace(offset, limit, max_line, budget);
    window->feed(head.data(), head.size());
    window->finish();
    total = window->total_lines();
    file_size = static_cast<int64_t>(head.size());
    content_hasher h;
    h.update(head.data(), head.size());
    seen_hash = h.value();
  } else if (!extracted && !client_text) {
    if (index == nullptr)
      index = index_cache_.find(version);
    if (index == nullptr) {
      int err = 0;
      line_index_limits limits;
      limits.hash_max_bytes = read_tracker_hash_bytes;
      index = build_line_index(fd, version.size, stop, err, limits);
      if (index == nullptr)
        return err == ECANCELED ? cancelled_error()
                                : error_result("Cannot read " + path + ": "
                                               + errno_text(err));
      if (version.size >= static_cast<int64_t>(min_cached_bytes))
        index_cached = index_cache_.insert(version, index);
    } else {
      index_cached = true;
    }
    total = index->total_lines;
    file_size = index->size;
    seen_hash = index->content_hash;
  }

  if (offset > total && !(total == 0 && offset == 1)) {
    json::value out;
    out["error"] = total == 0
                     ? "The file is empty (0 lines): " + path
                     : "offset " + std::to_string(offset)
                         + " is past the end of " + path + " ("
                         + std::to_string(total) + " lines). Use an offset "
                         "between 1 and " + std::to_string(total) + ".";
    out["total_lines"] = total;
    out["file_size"] = file_size;
    return out;
  }
  if (index != nullptr) {
    // Read only the page: from the nearest indexed line up to the window's
    // end, never past the bytes the index (and so `total`) describes.
    auto from = index->nearest(offset);
    if (from.line < offset)
      if (auto at = find_mark(index, offset))
        from = {offset, *at}; // where the previous page ended
    window.emplace(offset, limit, max_line, budget, from.line);
    int err = read_lines(fd, from.offset, index->size, *window, stop);
    if (err == ECANCELED)
      return cancelled_error();
    if (err != 0)
      return error_result("Cannot read " + path + ": " + errno_text(err));
    auto [next_line, next_at] = window->resume_point();
    if (index_cached && next_line != 0)
      put_mark(index, next_line, from.offset + static_cast<int64_t>(next_at));
  }
  json::value out;
  int64_t shown_last = window->shown_last();
  bool by_bytes = window->budget_stop() != 0;
  out["content"] = window->take_content();
  out["total_lines"] = total;
  out["file_size"] = file_size;
  bool truncated = by_bytes || shown_last < total;
  out["truncated"] = truncated;
  if (extracted)
    out["extracted_from"] = "ipynb";
  if (truncated) {
    int64_t next = shown_last + 1;
    out["next_offset"] = next;
    std::string range = "(showing " + std::to_string(offset) + "-"
                        + std::to_string(shown_last) + " of "
                        + std::to_string(total) + " lines)";
    if (by_bytes) {
      out["truncated_by"] = "bytes";
      out["hint"] = "Output reached the "
                    + std::to_string(cfg.tool_output.read_char_budget)
                    + "-character limit. Use offset=" + std::to_string(next)
                    + " to continue reading " + range;
    } else {
      out["hint"] = "Use offset=" + std::to_string(next)
                    + " to continue reading " + range;
    }
  } else if (total == 0) {
    out["hint"] = "The file is empty.";
  }
  if (extracted || client_text)
    note_file_read(ctx, path);
  else if (file_size == static_cast<int64_t>(st.st_size))
    note_file_read(ctx, path, st, seen_hash);
  else
    note_file_read(ctx, path); // it changed while read: as it is now
  if (guarded) {
    guard_.record(ctx.session_id, key, stamp);
    if (decision.consecutive == 3)
      out["_warning"] = "You have read this same range of " + path
                        + " 3 times in a row. Use the content you have; "
                          "a 4th identical read will be blocked.";
  }
  return out;
}

} // namespace

std::unique_ptr<tool> make_read_file_tool() {
  return std::make_unique<read_file_tool>();
}

} // namespace mibyan
