#include "storage/file_checkpoint_git.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mibyan::file_checkpoint_detail {

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

int write_all(int fd, std::string_view data) {
  size_t put = 0;
  while (put < data.size()) {
    auto n = ::write(fd, data.data() + put, data.size() - put);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n < 0 ? errno : EIO;
    put += static_cast<size_t>(n);
  }
  return 0;
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

fd_closer::~fd_closer() {
  if (fd >= 0)
    ::close(fd);
}

namespace {

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

} // namespace

status_code code_of_errno(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return status_code::resource_exhausted;
    case EACCES:
    case EPERM:
    case EROFS:
      return status_code::permission_denied;
    default:
      return status_code::internal;
  }
}

namespace {

// A failed system call: the errno's code and text.
status os_failure(int err) {
  return status::failure(code_of_errno(err), errno_text(err));
}

} // namespace

status git_failure(const std::string& what, int rc) {
  int saved = errno; // libgit2 leaves some OS failures without a message
  const git_error* e = git2().git_error_last();
  bool has_message = e != nullptr && e->message != nullptr && *e->message;
  if (!has_message && saved != 0)
    return status::failure(code_of_errno(saved),
                           what + ": " + errno_text(saved));
  std::string msg = has_message ? e->message : "error " + std::to_string(rc);
  auto code = status_code::internal;
  if (e != nullptr && e->klass == GIT_ERROR_OS
      && code_of_errno(saved) != status_code::internal)
    code = code_of_errno(saved);
  if (code != status_code::internal)
    ;
  else if (contains(msg, "No space left") || contains(msg, "Disk quota")
      || contains(msg, "File too large"))
    code = status_code::resource_exhausted;
  else if (contains(msg, "Permission denied") || contains(msg, "Read-only")
           || contains(msg, "Operation not permitted"))
    code = status_code::permission_denied;
  else if (e && (e->klass == GIT_ERROR_ODB || e->klass == GIT_ERROR_ZLIB
                 || e->klass == GIT_ERROR_OBJECT
                 || e->klass == GIT_ERROR_REFERENCE)
           && rc != GIT_ENOTFOUND)
    code = status_code::data_corrupt;
  else if (rc == GIT_ENOTFOUND)
    code = status_code::data_corrupt;
  return status::failure(code, what + ": " + msg);
}

std::string hex(const git_oid& id) {
  char buf[GIT_OID_HEXSZ + 1];
  git2().git_oid_tostr(buf, sizeof buf, &id);
  return buf;
}

git_oid blob_id(const std::string& content) {
  git_oid id{};
  git2().git_odb_hash(&id, content.data(), content.size(), GIT_OBJECT_BLOB);
  return id;
}

bool parents_are_dirs(const std::string& root, const std::string& rel) {
  std::string cur = root;
  size_t pos = 0;
  while (true) {
    auto slash = rel.find('/', pos);
    if (slash == std::string::npos)
      return true;
    cur += "/" + rel.substr(pos, slash - pos);
    struct stat st;
    if (::lstat(cur.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return false;
    pos = slash + 1;
  }
}

namespace {

// The whole tree through libgit2's status walk (untracked files against
// the shadow repository's empty index), which keeps the ignore rules of
// each directory while it walks instead of loading them per path. Nested
// repositories come back as "dir/" and go onto `stack` for the plain walk.
// False when libgit2 could not list the tree (an unreadable directory):
// the caller walks it itself and says what it could not read.
template <class Visit>
bool list_untracked(git_repository* repo, const std::string& root,
                    const file_checkpoint_limits& limits, walk_result& out,
                    Visit& visit_file, std::vector<std::string>& stack) {
  git_status_options so = GIT_STATUS_OPTIONS_INIT;
  so.show = GIT_STATUS_SHOW_WORKDIR_ONLY;
  so.flags = GIT_STATUS_OPT_INCLUDE_UNTRACKED
             | GIT_STATUS_OPT_RECURSE_UNTRACKED_DIRS
             | GIT_STATUS_OPT_EXCLUDE_SUBMODULES;
  git_status_list* list = nullptr;
  if (git2().git_status_list_new(&list, repo, &so) != 0)
    return false;
  size_t n = git2().git_status_list_entrycount(list);
  for (size_t i = 0; i < n && !out.too_many; ++i) {
    const git_status_entry* e = git2().git_status_byindex(list, i);
    if (e == nullptr || e->index_to_workdir == nullptr
        || e->index_to_workdir->new_file.path == nullptr)
      continue;
    std::string rel = e->index_to_workdir->new_file.path;
    if (!rel.empty() && rel.back() == '/') {
      rel.pop_back();
      stack.push_back(rel); // a nested repository: walked apart
      continue;
    }
    auto base = rel.substr(rel.rfind('/') == std::string::npos
                             ? 0
                             : rel.rfind('/') + 1);
    if (base == ".git" || rel.rfind(".git/", 0) == 0
        || rel.find("/.git/") != std::string::npos
        || !parents_are_dirs(root, rel))
      continue;
    struct stat st;
    if (::lstat((root + "/" + rel).c_str(), &st) != 0)
      continue;
    visit_file(rel, st);
    if (out.files.size() > limits.max_files)
      out.too_many = true;
  }
  git2().git_status_list_free(list);
  return true;
}

// Whether `repo`'s work tree already is `root`. libgit2 1.5's
// git_repository_set_workdir leaks its resolved path when asked for the
// work tree it already has, so the caller skips that call.
bool workdir_is(git_repository* repo, const std::string& root) {
  const char* current = git2().git_repository_workdir(repo);
  if (current == nullptr)
    return false;
  char* real = ::realpath(root.c_str(), nullptr);
  if (real == nullptr)
    return false;
  std::string want = real;
  ::free(real);
  if (want.empty() || want.back() != '/')
    want += '/';
  return want == current;
}

} // namespace

walk_result walk_project(git_repository* repo, const std::string& root,
                         const file_checkpoint_limits& limits,
                         const std::string& only) {
  walk_result out;
  if (!workdir_is(repo, root)
      && git2().git_repository_set_workdir(repo, root.c_str(), 0) != 0)
    out.warnings.push_back("the .gitignore rules could not be loaded: "
                           + git_failure("set_workdir", -1).error);
  auto ignored = [&](const std::string& rel, bool dir) {
    int ig = 0;
    auto p = dir ? rel + "/" : rel;
    if (git2().git_ignore_path_is_ignored(&ig, repo, p.c_str()) != 0)
      return false;
    return ig == 1;
  };
  size_t oversize = 0;
  auto stamp = [](const struct stat& st, uint32_t mode) {
    disk_entry e;
    e.mode = mode;
    e.size = static_cast<uint64_t>(st.st_size);
    e.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
    e.ctime_ns = int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
    e.ino = static_cast<uint64_t>(st.st_ino);
    return e;
  };
  auto visit_file = [&](const std::string& rel, const struct stat& st) {
    if (S_ISLNK(st.st_mode)) {
      out.files[rel] = stamp(st, mode_link);
    } else if (S_ISREG(st.st_mode)) {
      if (static_cast<uint64_t>(st.st_size) > limits.max_file_bytes) {
        out.skipped.push_back(rel);
        ++oversize;
        return;
      }
      out.files[rel] = stamp(st, (st.st_mode & 0111) ? mode_exec : mode_file);
    }
    // fifos, sockets, devices: never part of a snapshot
  };
  std::vector<std::string> stack;
  if (!only.empty() && only != ".") {
    struct stat st;
    auto full = root + "/" + only;
    if (!parents_are_dirs(root, only) || ::lstat(full.c_str(), &st) != 0)
      return out; // nothing there, or only through a link
    if (!S_ISDIR(st.st_mode)) {
      if (!ignored(only, false))
        visit_file(only, st);
      return out;
    }
    if (ignored(only, true))
      return out;
    stack.push_back(only);
  } else if (!list_untracked(repo, root, limits, out, visit_file, stack)) {
    stack.push_back("");
  }
  while (!stack.empty() && !out.too_many) {
    auto rel_dir = std::move(stack.back());
    stack.pop_back();
    auto full_dir = rel_dir.empty() ? root : root + "/" + rel_dir;
    DIR* d = ::opendir(full_dir.c_str());
    if (d == nullptr) {
      out.warnings.push_back("cannot read directory "
                             + (rel_dir.empty() ? std::string{"."} : rel_dir)
                             + ": " + errno_text(errno));
      out.skipped.push_back(rel_dir.empty() ? "." : rel_dir + "/");
      continue;
    }
    std::vector<std::string> subdirs;
    while (auto* ent = ::readdir(d)) {
      std::string name = ent->d_name;
      if (name == "." || name == ".." || name == ".git")
        continue;
      auto rel = rel_dir.empty() ? name : rel_dir + "/" + name;
      struct stat st;
      if (::fstatat(dirfd(d), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        continue;
      if (S_ISDIR(st.st_mode)) {
        if (!ignored(rel, true))
          subdirs.push_back(rel);
        continue;
      }
      if (ignored(rel, false))
        continue;
      visit_file(rel, st);
      if (out.files.size() > limits.max_files) {
        out.too_many = true;
        break;
      }
    }
    ::closedir(d);
    for (auto i = subdirs.rbegin(); i != subdirs.rend(); ++i)
      stack.push_back(std::move(*i));
  }
  if (oversize > 0)
    out.warnings.push_back(std::to_string(oversize) + " file(s) over "
                           + std::to_string(limits.max_file_bytes >> 20)
                           + " MiB left out of the checkpoint");
  return out;
}

stat_cache read_stat_cache(const std::string& path) {
  stat_cache c;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return c;
  std::string text;
  char buf[65536];
  while (true) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  // One line per file: oid mode size mtime ctime ino path
  size_t pos = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    if (nl == std::string::npos)
      break;
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    char oid[GIT_OID_HEXSZ + 1] = {};
    unsigned mode = 0;
    unsigned long long size = 0, ino = 0;
    long long mt = 0, ct = 0;
    int used = 0;
    if (std::sscanf(line.c_str(), "%40s %o %llu %lld %lld %llu %n", oid, &mode,
                    &size, &mt, &ct, &ino, &used)
          != 6
        || used <= 0 || static_cast<size_t>(used) >= line.size())
      return {}; // damaged: start afresh
    stat_cache_entry ce;
    if (git2().git_oid_fromstr(&ce.id, oid) != 0)
      return {};
    ce.e.mode = mode;
    ce.e.size = size;
    ce.e.mtime_ns = mt;
    ce.e.ctime_ns = ct;
    ce.e.ino = ino;
    c[line.substr(static_cast<size_t>(used))] = ce;
  }
  return c;
}

status write_stat_cache(const std::string& path, const stat_cache& c) {
  std::string text;
  char buf[160];
  for (auto& [rel, ce] : c) {
    if (rel.find('\n') != std::string::npos)
      continue;
    std::snprintf(buf, sizeof buf, "%s %o %llu %lld %lld %llu ",
                  hex(ce.id).c_str(), ce.e.mode,
                  static_cast<unsigned long long>(ce.e.size),
                  static_cast<long long>(ce.e.mtime_ns),
                  static_cast<long long>(ce.e.ctime_ns),
                  static_cast<unsigned long long>(ce.e.ino));
    text += buf;
    text += rel;
    text += '\n';
  }
  auto tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return os_failure(errno);
  if (int err = write_all(fd, text); err != 0) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return os_failure(err);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    auto err = os_failure(errno);
    ::unlink(tmp.c_str());
    return err;
  }
  return {};
}

bool stat_entry(const std::string& path, disk_entry& out) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0)
    return false;
  if (S_ISLNK(st.st_mode))
    out.mode = mode_link;
  else if (S_ISREG(st.st_mode))
    out.mode = (st.st_mode & 0111) ? mode_exec : mode_file;
  else
    return false;
  out.size = static_cast<uint64_t>(st.st_size);
  out.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  out.ctime_ns = int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
  out.ino = static_cast<uint64_t>(st.st_ino);
  return true;
}

bool same_stat(const disk_entry& a, const disk_entry& b) {
  return a.mode == b.mode && a.size == b.size && a.mtime_ns == b.mtime_ns
         && a.ctime_ns == b.ctime_ns && a.ino == b.ino;
}

result<std::string> read_entry(const std::string& root, const std::string& rel,
                               const disk_entry& e, uint64_t max_bytes) {
  auto path = root + "/" + rel;
  if (e.mode == mode_link) {
    std::string buf(4096, '\0');
    auto n = ::readlink(path.c_str(), buf.data(), buf.size());
    if (n < 0)
      return result<std::string>::failure(code_of_errno(errno),
                                          rel + ": " + errno_text(errno));
    buf.resize(static_cast<size_t>(n));
    return buf;
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return result<std::string>::failure(code_of_errno(errno),
                                        rel + ": " + errno_text(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return result<std::string>::failure(status_code::invalid_argument,
                                        rel + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return result<std::string>::failure(status_code::resource_exhausted,
                                        rel + ": larger than the limit");
  }
  std::string data;
  data.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < data.size()) {
    auto n = ::read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  ::close(fd);
  return data;
}

result<std::map<std::string, tree_entry>>
flatten_tree(git_repository* repo, const std::string& tree_hex) {
  using R = result<std::map<std::string, tree_entry>>;
  git_oid id;
  if (git2().git_oid_fromstr(&id, tree_hex.c_str()) != 0)
    return R::failure(status_code::data_corrupt,
                      "bad tree id in the checkpoint record: " + tree_hex);
  git_tree* tree = nullptr;
  if (int rc = git2().git_tree_lookup(&tree, repo, &id); rc != 0) {
    auto st = git_failure("reading snapshot tree " + tree_hex, rc);
    return R::failure(status_code::data_corrupt, st.error);
  }
  struct ctx_t {
    std::map<std::string, tree_entry> out;
  } ctx;
  int rc = git2().git_tree_walk(
    tree, GIT_TREEWALK_PRE,
    [](const char* root, const git_tree_entry* e, void* payload) -> int {
      if (git2().git_tree_entry_type(e) != GIT_OBJECT_BLOB)
        return 0;
      auto& c = *static_cast<ctx_t*>(payload);
      tree_entry t;
      t.id = *git2().git_tree_entry_id(e);
      t.mode = static_cast<uint32_t>(git2().git_tree_entry_filemode(e));
      c.out[std::string{root} + git2().git_tree_entry_name(e)] = t;
      return 0;
    },
    &ctx);
  git2().git_tree_free(tree);
  if (rc != 0) {
    auto st = git_failure("walking snapshot tree " + tree_hex, rc);
    return R::failure(status_code::data_corrupt, st.error);
  }
  return std::move(ctx.out);
}

bool covered(const std::string& rel, const std::vector<std::string>& paths) {
  for (auto& p : paths) {
    if (p == "." || p.empty())
      return true;
    auto base = p.back() == '/' ? p.substr(0, p.size() - 1) : p;
    if (rel == base)
      return true;
    if (rel.size() > base.size() && rel.compare(0, base.size(), base) == 0
        && rel[base.size()] == '/')
      return true;
  }
  return false;
}

std::string relative_to(const std::string& root, const std::string& path) {
  std::string full = path.empty() || path.front() != '/' ? root + "/" + path
                                                         : path;
  // Lexical folding.
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= full.size()) {
    auto j = full.find('/', i);
    if (j == std::string::npos)
      j = full.size();
    auto part = full.substr(i, j - i);
    if (part == "..") {
      if (!parts.empty())
        parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    i = j + 1;
  }
  std::string folded;
  for (auto& p : parts)
    folded += "/" + p;
  if (folded.empty())
    folded = "/";
  if (folded == root)
    return ".";
  auto prefix = root == "/" ? std::string{"/"} : root + "/";
  if (folded.compare(0, prefix.size(), prefix) != 0)
    return {};
  return folded.substr(prefix.size());
}

namespace {

// Makes sure every directory from root down to the parent of `rel` is a
// real directory (created when missing).
status prepare_parents(const std::string& root, const std::string& rel) {
  size_t pos = 0;
  std::string cur = root;
  while (true) {
    auto slash = rel.find('/', pos);
    if (slash == std::string::npos)
      return {};
    cur += "/" + rel.substr(pos, slash - pos);
    struct stat st;
    if (::lstat(cur.c_str(), &st) == 0) {
      if (S_ISLNK(st.st_mode))
        return status::failure(status_code::permission_denied,
                               "refusing to write through the symlink "
                                 + rel.substr(0, slash));
      if (!S_ISDIR(st.st_mode))
        return status::failure(status_code::invalid_argument,
                               rel.substr(0, slash) + " is not a directory");
    } else if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
      int err = errno;
      return status::failure(code_of_errno(err),
                             "cannot create " + rel.substr(0, slash) + ": "
                               + errno_text(err));
    }
    pos = slash + 1;
  }
}

} // namespace

status write_entry(const std::string& root, const std::string& rel,
                   const std::string& content, uint32_t mode) {
  if (auto ready = prepare_parents(root, rel); !ready.ok())
    return ready;
  auto path = root + "/" + rel;
  struct stat st;
  bool exists = ::lstat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) {
    if (::rmdir(path.c_str()) != 0)
      return status::failure(status_code::already_exists,
                             "a directory that is not empty is in the way");
    exists = false;
  }
  auto slash = path.rfind('/');
  auto tmp = path.substr(0, slash + 1) + ".mibyan-restore-"
             + std::to_string(::getpid()) + "-" + path.substr(slash + 1);
  ::unlink(tmp.c_str());
  if (mode == mode_link) {
    if (::symlink(content.c_str(), tmp.c_str()) != 0)
      return os_failure(errno);
  } else {
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW
                                   | O_CLOEXEC,
                    mode == mode_exec ? 0755 : 0644);
    if (fd < 0)
      return os_failure(errno);
    if (int err = write_all(fd, content); err != 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      return os_failure(err);
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
      auto err = os_failure(errno);
      ::unlink(tmp.c_str());
      return err;
    }
    // Keep the mode the file had when only the content changes.
    if (exists && S_ISREG(st.st_mode)
        && ((st.st_mode & 0111) != 0) == (mode == mode_exec))
      ::chmod(tmp.c_str(), st.st_mode & 07777);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    auto err = os_failure(errno);
    ::unlink(tmp.c_str());
    return err;
  }
  return {};
}

status remove_entry(const std::string& root, const std::string& rel) {
  auto slash = rel.rfind('/');
  if (slash != std::string::npos) {
    // Never remove through a link on the way.
    std::string cur = root;
    size_t pos = 0;
    while (pos < slash) {
      auto s = rel.find('/', pos);
      cur += "/" + rel.substr(pos, s - pos);
      struct stat st;
      if (::lstat(cur.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return status::failure(status_code::permission_denied,
                               "refusing to remove through "
                                 + rel.substr(0, s));
      pos = s + 1;
    }
  }
  auto path = root + "/" + rel;
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return os_failure(errno);
  // Remove parents the removal emptied (rmdir fails on a non-empty one).
  while (slash != std::string::npos) {
    auto dir = rel.substr(0, slash);
    if (::rmdir((root + "/" + dir).c_str()) != 0)
      break;
    slash = dir.rfind('/');
  }
  return {};
}

// -- checkpoint commits ---------------------------------------------------------

namespace {

// A signature for checkpoint commits (never the user's identity).
git_signature* signature(int64_t ms) {
  git_signature* sig = nullptr;
  if (git2().git_signature_new(&sig, "mibyan", "mibyan@localhost", ms / 1000, 0) != 0)
    return nullptr;
  return sig;
}

std::string commit_message(const file_checkpoint& c) {
  std::string m = "checkpoint " + std::to_string(c.number) + "\n\n";
  m += "project: " + c.project + "\n";
  m += "session: " + c.session_id + "\n";
  m += "turn: " + std::to_string(c.turn) + "\n";
  m += "tool: " + c.tool + "\n";
  if (!c.reason.empty())
    m += "reason: " + c.reason + "\n";
  return m;
}

} // namespace

result<git_oid> make_commit(git_repository* repo, const file_checkpoint& c,
                            const git_commit* parent) {
  using R = result<git_oid>;
  git_oid tree_id;
  if (git2().git_oid_fromstr(&tree_id, c.tree.c_str()) != 0)
    return R::failure(status_code::data_corrupt, "bad tree id " + c.tree);
  git_tree* tree = nullptr;
  if (int rc = git2().git_tree_lookup(&tree, repo, &tree_id); rc != 0)
    return R{git_failure("reading tree " + c.tree, rc)};
  auto* sig = signature(c.time_ms);
  if (sig == nullptr) {
    git2().git_tree_free(tree);
    return R{git_failure("making a signature", -1)};
  }
  git_oid out;
  const git_commit* parents[1] = {parent};
  auto msg = commit_message(c);
  int rc = git2().git_commit_create(&out, repo, nullptr, sig, sig, nullptr,
                             msg.c_str(), tree, parent ? 1 : 0, parents);
  git2().git_signature_free(sig);
  git2().git_tree_free(tree);
  if (rc != 0)
    return R{git_failure("writing the checkpoint commit", rc)};
  return out;
}

} // namespace mibyan::file_checkpoint_detail
