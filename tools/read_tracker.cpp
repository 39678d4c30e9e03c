#include "tools/read_tracker.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/line_index.hpp"

namespace mibyan {

namespace {

constexpr size_t max_files_per_session = 2048;
constexpr size_t max_sessions = 256;
constexpr int64_t max_hash_bytes = read_tracker_hash_bytes;

struct version {
  int64_t mtime_ns = 0;
  int64_t size = 0;
  uint64_t inode = 0;
  std::optional<uint64_t> hash; // none for large or unreadable files
};

version version_of(const struct stat& st) {
  version v;
  v.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000
               + st.st_mtim.tv_nsec;
  v.size = static_cast<int64_t>(st.st_size);
  v.inode = static_cast<uint64_t>(st.st_ino);
  return v;
}

std::optional<version> stat_version(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return std::nullopt;
  version v;
  v.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000
               + st.st_mtim.tv_nsec;
  v.size = static_cast<int64_t>(st.st_size);
  v.inode = static_cast<uint64_t>(st.st_ino);
  return v;
}

std::optional<uint64_t> content_hash(const std::string& path, int64_t size) {
  if (size > max_hash_bytes)
    return std::nullopt;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return std::nullopt;
  std::string data;
  data.resize(static_cast<size_t>(size) + 1);
  size_t got = 0;
  while (got < data.size()) {
    auto r = ::read(fd, &data[got], data.size() - got);
    if (r <= 0)
      break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  if (got > static_cast<size_t>(size))
    return std::nullopt; // grew while reading: no reliable hash
  data.resize(got);
  content_hasher h;
  h.update(data.data(), data.size());
  return h.value();
}

std::optional<version> current_version(const std::string& path) {
  auto v = stat_version(path);
  if (v)
    v->hash = content_hash(path, v->size);
  return v;
}

struct session_files {
  std::map<std::string, std::pair<version, uint64_t>> files; // -> (v, used)
  uint64_t used = 0;
};

struct tracker {
  std::mutex mtx;
  std::map<std::string, session_files> sessions;
  uint64_t clock = 0;

  session_files& session(const std::string& id) {
    auto it = sessions.find(id);
    if (it == sessions.end()) {
      if (sessions.size() >= max_sessions) {
        auto oldest = std::min_element(
          sessions.begin(), sessions.end(),
          [](auto& a, auto& b) { return a.second.used < b.second.used; });
        sessions.erase(oldest);
      }
      it = sessions.emplace(id, session_files{}).first;
    }
    it->second.used = ++clock;
    return it->second;
  }

  void put(const std::string& sid, const std::string& path, version v) {
    std::lock_guard<std::mutex> g{mtx};
    auto& s = session(sid);
    if (s.files.size() >= max_files_per_session && !s.files.count(path)) {
      auto oldest = std::min_element(
        s.files.begin(), s.files.end(),
        [](auto& a, auto& b) { return a.second.second < b.second.second; });
      s.files.erase(oldest);
    }
    s.files[path] = {std::move(v), ++clock};
  }

  std::optional<version> get(const std::string& sid, const std::string& path) {
    std::lock_guard<std::mutex> g{mtx};
    auto it = sessions.find(sid);
    if (it == sessions.end())
      return std::nullopt;
    auto f = it->second.files.find(path);
    if (f == it->second.files.end())
      return std::nullopt;
    return f->second.first;
  }
};

tracker& the_tracker() {
  static tracker t;
  return t;
}

} // namespace

void note_file_read(const tool_context& ctx, const std::string& path) {
  if (auto v = current_version(path))
    the_tracker().put(ctx.session_id, path, std::move(*v));
}

void note_file_read(const tool_context& ctx, const std::string& path,
                    const struct stat& st, std::optional<uint64_t> hash) {
  if (!S_ISREG(st.st_mode))
    return;
  auto v = version_of(st);
  v.hash = v.size <= max_hash_bytes ? hash : std::nullopt;
  the_tracker().put(ctx.session_id, path, std::move(v));
}

void note_file_written(const tool_context& ctx, const std::string& path) {
  note_file_read(ctx, path);
}

std::string stale_write_warning(const tool_context& ctx,
                                const std::string& path) {
  auto seen = the_tracker().get(ctx.session_id, path);
  if (!seen)
    return {};
  auto now = stat_version(path);
  if (!now)
    return path + " was deleted or replaced by a non-file since you last "
                  "read it; this write recreates it from your version.";
  if (now->mtime_ns == seen->mtime_ns && now->size == seen->size
      && now->inode == seen->inode)
    return {};
  if (seen->hash) {
    auto h = content_hash(path, now->size);
    if (h && *h == *seen->hash)
      return {}; // touched or rewritten with the same content
  }
  return path + " changed on disk since you last read it (another process, "
                "a command or another session modified it). Your edit was "
                "based on the older content and may have overwritten those "
                "changes: read the file again to check the result.";
}

void forget_session_reads(const std::string& session_id) {
  auto& t = the_tracker();
  std::lock_guard<std::mutex> g{t.mtx};
  t.sessions.erase(session_id);
}

} // namespace mibyan
