#include "tools/file_io.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/options.hpp"
#include "base/state_dir.hpp"
#include "base/errno_status.hpp"
#include "base/strings.hpp"

namespace fs = std::filesystem;

namespace mibyan {

namespace {

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

std::string extension_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  auto dot = path.find_last_of('.');
  if (dot == std::string::npos
      || (slash != std::string::npos && dot < slash))
    return {};
  return strings::lower(std::string_view{path}.substr(dot));
}

// The process umask, read without changing it (calling umask() to query it
// would race with other threads creating files).
mode_t process_umask() {
  static const mode_t mask = [] {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("Umask:", 0) == 0)
        return static_cast<mode_t>(
          std::strtoul(line.c_str() + 6, nullptr, 8) & 0777);
    return static_cast<mode_t>(022);
  }();
  return mask;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1,
                         prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string stem_of(const std::string& name) {
  auto dot = name.find('.', 1);
  return dot == std::string::npos ? name : name.substr(0, dot);
}

bool write_all(int fd, std::string_view data, int& err) {
  while (!data.empty()) {
    auto n = ::write(fd, data.data(), std::min<size_t>(data.size(), 1 << 20));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      err = errno;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Creates the missing directories on the way to `dir`; counts them.
std::string make_parents(const fs::path& dir, int& created) {
  fs::path prefix;
  for (auto& part : dir) {
    prefix /= part;
    if (part == "/")
      continue;
    struct stat st;
    if (::stat(prefix.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        return "Cannot create the file: '" + prefix.string()
               + "' exists and is not a directory";
      continue;
    }
    if (errno != ENOENT)
      return "Cannot access '" + prefix.string() + "': " + errno_text(errno);
    if (::mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST)
      return "Cannot create directory '" + prefix.string()
             + "': " + errno_text(errno);
    ++created;
  }
  return {};
}

} // namespace

status check_path_text(std::string_view path) {
  auto bad = [](std::string msg) {
    return status::failure(status_code::invalid_argument, std::move(msg));
  };
  if (path.empty())
    return bad("path is empty; give a file path");
  if (path.size() > max_path_chars)
    return bad("path is too long (" + std::to_string(path.size())
               + " characters; at most " + std::to_string(max_path_chars)
               + ")");
  if (path.find('\0') != std::string_view::npos)
    return bad("path contains a NUL byte");
  return {};
}

std::string resolve_path(std::string_view path, std::string_view cwd) {
  std::string text{path};
  if (text == "~" || text.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    text = std::string{home ? home : ""} + text.substr(1);
  }
  fs::path p{text};
  if (p.is_relative()) {
    fs::path base{std::string{cwd}};
    if (base.empty()) {
      std::error_code ec;
      base = fs::current_path(ec);
      if (ec)
        base = "/";
    }
    p = base / p;
  }
  auto out = p.lexically_normal().string();
  while (out.size() > 1 && out.back() == '/')
    out.pop_back();
  return out;
}

std::string mibyan_home_of(const tool_context& ctx) {
  if (!ctx.home.empty())
    return resolve_path(ctx.home, "/");
  if (ctx.cfg != nullptr && !ctx.cfg->home.empty())
    return resolve_path(ctx.cfg->home, "/");
  if (const char* env = std::getenv("MIBYAN_HOME"); env && *env)
    return resolve_path(env, "/");
  return resolve_path(default_state_dir(), "/");
}

result<std::string> read_whole_file(const std::string& path,
                                    size_t max_bytes) {
  using R = result<std::string>;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    return R::failure(errno_code(err),
                      "Cannot open " + path + ": " + errno_text(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return R::failure(status_code::invalid_argument,
                      "Not a regular file: " + path);
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return R::failure(status_code::resource_exhausted,
                      "File is too large (" + std::to_string(st.st_size)
                        + " bytes; at most " + std::to_string(max_bytes)
                        + "): " + path);
  }
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      int err = errno;
      ::close(fd);
      return R::failure(errno_code(err),
                        "Cannot read " + path + ": " + errno_text(err));
    }
    if (n == 0)
      break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      return R::failure(status_code::resource_exhausted,
                        "File is too large (more than "
                          + std::to_string(max_bytes) + " bytes): " + path);
    }
  }
  ::close(fd);
  return out;
}

bool looks_binary(std::string_view head) {
  if (head.empty())
    return false;
  if (head.find('\0') != std::string_view::npos)
    return true;
  size_t odd = 0;
  size_t i = 0;
  while (i < head.size()) {
    auto c = static_cast<unsigned char>(head[i]);
    if (c < 0x80) {
      if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f'
          && c != '\v' && c != '\b' && c != 0x1b)
        ++odd;
      ++i;
      continue;
    }
    size_t len = c >= 0xf0 && c <= 0xf4 ? 4
                 : c >= 0xe0            ? 3
                 : c >= 0xc2 && c < 0xe0 ? 2
                                         : 0;
    if (len == 0) {
      ++odd;
      ++i;
      continue;
    }
    if (i + len > head.size())
      break; // a sequence cut by the end of the sample
    bool ok = true;
    for (size_t k = 1; k < len; ++k)
      ok = ok && (static_cast<unsigned char>(head[i + k]) & 0xc0) == 0x80;
    if (!ok) {
      ++odd;
      ++i;
      continue;
    }
    i += len;
  }
  return odd * 10 > head.size() * 3;
}

std::string image_mime_type(const std::string& path, std::string_view head) {
  static const std::pair<const char*, const char*> by_ext[] = {
    {".png", "image/png"},   {".jpg", "image/jpeg"}, {".jpeg", "image/jpeg"},
    {".gif", "image/gif"},   {".webp", "image/webp"}, {".bmp", "image/bmp"},
    {".ico", "image/x-icon"}, {".tif", "image/tiff"}, {".tiff", "image/tiff"},
    {".heic", "image/heic"}, {".avif", "image/avif"},
  };
  auto ext = extension_of(path);
  for (auto& [e, mime] : by_ext)
    if (ext == e)
      return mime;
  auto starts = [&](std::string_view magic) {
    return head.substr(0, magic.size()) == magic;
  };
  if (starts("\x89PNG\r\n\x1a\n"))
    return "image/png";
  if (starts("\xff\xd8\xff"))
    return "image/jpeg";
  if (starts("GIF87a") || starts("GIF89a"))
    return "image/gif";
  if (starts("RIFF") && head.size() >= 12 && head.substr(8, 4) == "WEBP")
    return "image/webp";
  if (starts(std::string_view{"II*\0", 4})
      || starts(std::string_view{"MM\0*", 4}))
    return "image/tiff";
  return {};
}

std::vector<std::string> similar_files(const std::string& path, size_t max) {
  std::vector<std::string> result;
  fs::path p{path};
  auto dir = p.parent_path();
  auto want = strings::lower(p.filename().string());
  if (want.empty())
    return result;
  auto want_stem = stem_of(want);
  std::error_code ec;
  fs::directory_iterator it{dir, ec};
  if (ec)
    return result;
  std::vector<std::pair<int, std::string>> scored;
  size_t seen = 0;
  for (; it != fs::directory_iterator{} && seen < 10000; it.increment(ec)) {
    if (ec)
      break;
    ++seen;
    auto name = it->path().filename().string();
    auto low = strings::lower(name);
    int score = 0;
    if (low == want)
      score = 100;
    else if (stem_of(low) == want_stem)
      score = 80;
    else if (want.size() >= 3 && low.size() >= 3
             && (low.find(want_stem) != std::string::npos
                 || want.find(stem_of(low)) != std::string::npos))
      score = 60;
    else if (low.size() < 64 && want.size() < 64) {
      auto d = edit_distance(low, want);
      if (d <= std::max<size_t>(2, want.size() / 4))
        score = 50 - static_cast<int>(d);
    }
    if (score > 0)
      scored.emplace_back(score, it->path().string());
  }
  std::sort(scored.begin(), scored.end(), [](auto& x, auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  for (auto& [score, name] : scored) {
    if (result.size() >= max)
      break;
    result.push_back(name);
  }
  return result;
}

result<write_outcome> atomic_write(const std::string& path,
                                   std::string_view content) {
  using R = result<write_outcome>;
  auto bad = [](std::string msg) {
    return R::failure(status_code::invalid_argument, std::move(msg));
  };
  write_outcome out;
  std::string target = path;
  struct stat lst;
  if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    std::error_code ec;
    auto real = fs::weakly_canonical(path, ec);
    if (!ec)
      target = real.string();
  }
  out.written_path = target;
  struct stat st;
  bool exists = ::stat(target.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) {
    return bad("Path is a directory: " + path
               + ". Give the path of a file inside it.");
  }
  if (exists && !S_ISREG(st.st_mode)) {
    return bad("Not a regular file (device, FIFO or socket): " + path);
  }
  if (!exists && errno == ENOTDIR) {
    return bad("Cannot write " + path
               + ": a parent path component is a file, not a directory");
  }
  fs::path tp{target};
  auto dir = tp.parent_path();
  if (auto err = make_parents(dir, out.dirs_created); !err.empty())
    return R::failure(errno_code(errno), err);
  auto name = tp.filename().string();
  if (name.size() > 200)
    name.resize(200);
  std::string tmpl = dir.string() + "/." + name + ".mibyan-tmp-XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) {
    int e = errno;
    return R::failure(errno_code(e), "Cannot create a temporary file in "
                                       + dir.string() + ": " + errno_text(e));
  }
  auto fail = [&](const std::string& what, int err) {
    ::close(fd);
    ::unlink(tmpl.c_str());
    return R::failure(errno_code(err), what + ": " + errno_text(err));
  };
  int err = 0;
  if (!write_all(fd, content, err))
    return fail("Cannot write " + path, err);
  mode_t mode = exists ? (st.st_mode & 07777) : (0666 & ~process_umask());
  if (::fchmod(fd, mode) != 0)
    return fail("Cannot set the mode of " + path, errno);
  if (::fsync(fd) != 0)
    return fail("Cannot flush " + path, errno);
  struct stat written;
  if (::fstat(fd, &written) != 0)
    return fail("Cannot stat " + path, errno);
  out.device = static_cast<uint64_t>(written.st_dev);
  out.inode = static_cast<uint64_t>(written.st_ino);
  out.size = static_cast<int64_t>(written.st_size);
  if (::close(fd) != 0) {
    err = errno;
    ::unlink(tmpl.c_str());
    return R::failure(errno_code(err),
                      "Cannot close " + path + ": " + errno_text(err));
  }
  if (::rename(tmpl.c_str(), target.c_str()) != 0) {
    err = errno;
    ::unlink(tmpl.c_str());
    return R::failure(errno_code(err),
                      "Cannot replace " + path + ": " + errno_text(err));
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return out;
}

} // namespace mibyan
