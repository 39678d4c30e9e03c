// The file checkpoint store (storage/file_checkpoint_store.hpp), part:
// opening, the project of a path, the store's lock and snapshots. The
// per-project records are in storage/file_checkpoint_records.cpp, pruning
// in storage/file_checkpoint_prune.cpp, diff and restore in
// storage/file_checkpoint_restore.cpp.
#include "storage/file_checkpoint_store.hpp"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/private_file.hpp"
#include "storage/file_checkpoint_git.hpp"

namespace mibyan {

using namespace file_checkpoint_detail;

namespace {

// How long a change waits for another process holding the lock.
constexpr auto lock_wait = std::chrono::seconds(30);

} // namespace

file_checkpoint_store::~file_checkpoint_store() {
  if (repo_)
    git2().git_repository_free(repo_);
}

std::string file_checkpoint_store::default_dir(const std::string& home) {
  return home + "/checkpoints";
}

result<std::unique_ptr<file_checkpoint_store>>
file_checkpoint_store::open(const std::string& dir,
                            file_checkpoint_limits limits) {
  using R = result<std::unique_ptr<file_checkpoint_store>>;
  if (auto lib = libgit2_lib(); !lib)
    return R::failure(lib.code, "cannot open the checkpoint store " + dir
                                  + ": " + lib.error);
  if (auto made = make_private_dirs(dir + "/projects"); !made.ok())
    return R::failure(code_of_errno(errno),
                      "cannot create the checkpoint store " + dir + ": "
                        + made.error);
  std::unique_ptr<file_checkpoint_store> s{new file_checkpoint_store};
  s->dir_ = dir;
  s->limits_ = limits;
  auto git_dir = dir + "/store.git";
  struct stat st;
  if (::stat(git_dir.c_str(), &st) != 0) {
    int fd = -1;
    if (auto ls = s->lock(fd); !ls)
      return R{ls};
    int rc = 0;
    if (::stat(git_dir.c_str(), &st) != 0)
      rc = git2().git_repository_init(&s->repo_, git_dir.c_str(), 1);
    else
      rc = git2().git_repository_open_bare(&s->repo_, git_dir.c_str());
    ::close(fd);
    if (rc != 0)
      return R{git_failure("creating the checkpoint store " + git_dir, rc)};
  } else if (int rc = git2().git_repository_open_bare(&s->repo_, git_dir.c_str());
             rc != 0) {
    auto f = git_failure("opening the checkpoint store " + git_dir, rc);
    return R::failure(status_code::data_corrupt,
                      f.error + ". The store is damaged: move " + dir
                        + " away (a new one is created on the next "
                          "checkpoint) or delete it.");
  }
  // Objects are found by hash only: no need to verify them on write, and
  // a damaged object is reported when it is read.
  git2().git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 0);
  return R{std::move(s)};
}

std::string file_checkpoint_store::project_of(const std::string& path,
                                              const std::string& fallback) {
  // The nearest existing directory.
  std::string dir = path;
  struct stat st;
  while (!dir.empty() && (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
    auto slash = dir.rfind('/');
    dir = slash == 0 ? "/" : slash == std::string::npos ? "" : dir.substr(0, slash);
    if (dir == "/")
      break;
  }
  if (dir.empty())
    dir = "/";
  for (std::string cur = dir;;) {
    if (::lstat((cur + "/.git").c_str(), &st) == 0)
      return cur;
    if (cur == "/" || cur.empty())
      break;
    auto slash = cur.rfind('/');
    cur = slash == 0 ? "/" : cur.substr(0, slash);
  }
  if (!fallback.empty()) {
    auto rel = relative_to(fallback, path);
    if (!rel.empty())
      return fallback;
  }
  return dir;
}

status file_checkpoint_store::lock(int& fd) const {
  auto path = dir_ + "/lock";
  fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return status::failure(code_of_errno(errno),
                           "cannot open the checkpoint lock " + path + ": "
                             + errno_text(errno));
  auto until = std::chrono::steady_clock::now() + lock_wait;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      auto err = errno;
      ::close(fd);
      fd = -1;
      return status::failure(code_of_errno(err),
                             "cannot lock " + path + ": " + errno_text(err));
    }
    if (std::chrono::steady_clock::now() > until) {
      ::close(fd);
      fd = -1;
      return status::failure(status_code::timeout,
                             "another process holds " + path + " for over "
                             "30 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return {};
}

result<snapshot_outcome>
file_checkpoint_store::snapshot(const snapshot_request& req) {
  using R = result<snapshot_outcome>;
  struct stat st;
  if (req.project.empty() || req.project.front() != '/'
      || ::stat(req.project.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return R::failure(status_code::invalid_argument,
                      "not a directory: " + req.project);
  if (req.project == "/")
    return R::failure(status_code::invalid_argument,
                      "the file system root is not snapshotted");
  if (const char* home = std::getenv("HOME");
      home != nullptr && req.project == home
      && ::access((req.project + "/.git").c_str(), F_OK) != 0)
    return R::failure(status_code::invalid_argument,
                      "the home directory " + req.project
                        + " is not snapshotted (too broad): work in a "
                          "project directory");
  if (!relative_to(req.project, dir_).empty())
    return R::failure(status_code::invalid_argument,
                      req.project + " holds the checkpoint store itself");
  std::lock_guard<std::mutex> guard{mtx_};
  int fd = -1;
  if (auto ls = lock(fd); !ls)
    return R{ls};
  fd_closer close_lock{fd};
  auto m = read_meta(req.project);
  if (!m)
    return R{m.get_status()};
  auto walk = walk_project(repo_, req.project, limits_);
  if (walk.too_many)
    return R::failure(status_code::resource_exhausted,
                      req.project + " has more than "
                        + std::to_string(limits_.max_files)
                        + " files (checkpoints.max_files): not snapshotted");
  snapshot_outcome out;
  out.warnings = walk.warnings;
  git_index* index = nullptr;
  if (int rc = git2().git_index_new(&index); rc != 0)
    return R{git_failure("making an index", rc)};
  struct index_free {
    git_index* i;
    ~index_free() { git2().git_index_free(i); }
  } free_index{index};
  int64_t taken = 0;
  // Files unchanged since the last snapshot are not read again.
  auto cache_path = dir_ + "/projects/" + m->key + ".stat";
  auto cache = read_stat_cache(cache_path);
  stat_cache next_cache;
  git_odb* odb = nullptr;
  if (int rc = git2().git_repository_odb(&odb, repo_); rc != 0)
    return R{git_failure("opening the object database", rc)};
  struct odb_free {
    git_odb* o;
    ~odb_free() { git2().git_odb_free(o); }
  } free_odb{odb};
  // A file changed within the file system's timestamp tick of this
  // snapshot could change again unseen: such entries are not cached.
  const int64_t racy_ns = (now_ms() - 100) * 1'000'000;
  for (auto& [rel, e] : walk.files) {
    git_index_entry ie{};
    ie.mode = e.mode;
    ie.path = rel.c_str();
    auto cached = cache.find(rel);
    if (cached != cache.end() && same_stat(cached->second.e, e)
        && git2().git_odb_exists_ext(odb, &cached->second.id,
                              GIT_ODB_LOOKUP_NO_REFRESH)) {
      ie.id = cached->second.id;
      ie.file_size = static_cast<uint32_t>(e.size);
    } else {
      auto content = read_entry(req.project, rel, e, limits_.max_file_bytes);
      if (!content) {
        // Changed or vanished while we walked: left out, said so.
        out.warnings.push_back("left out " + content.error);
        walk.skipped.push_back(rel);
        continue;
      }
      ie.file_size = static_cast<uint32_t>(content->size());
      // Hash first: writing an object the store has costs a file write
      // (libgit2 freshens it), hashing and a lookup do not.
      if (git2().git_odb_hash(&ie.id, content->data(), content->size(),
                       GIT_OBJECT_BLOB)
            != 0
          || !git2().git_odb_exists_ext(odb, &ie.id, GIT_ODB_LOOKUP_NO_REFRESH))
        if (int rc = git2().git_odb_write(&ie.id, odb, content->data(),
                                   content->size(), GIT_OBJECT_BLOB);
            rc != 0)
          return R{git_failure("writing " + rel
                                 + " into the checkpoint store",
                               rc)};
    }
    if (e.mtime_ns < racy_ns && e.ctime_ns < racy_ns)
      next_cache[rel] = stat_cache_entry{e, ie.id};
    if (int rc = git2().git_index_add(index, &ie); rc != 0) {
      // A name git refuses (e.g. one that reads as .git on another file
      // system): left out, said so.
      out.warnings.push_back(git_failure("left out " + rel, rc).error);
      walk.skipped.push_back(rel);
      continue;
    }
    ++taken;
  }
  git_oid tree_id;
  if (int rc = git2().git_index_write_tree_to(&tree_id, index, repo_); rc != 0)
    return R{git_failure("writing the checkpoint tree", rc)};
  file_checkpoint c;
  c.number = m->next;
  c.project = req.project;
  c.tree = hex(tree_id);
  c.time_ms = now_ms();
  c.session_id = req.session_id;
  c.turn = req.turn;
  c.tool = req.tool;
  c.reason = req.reason;
  c.agent_files = req.agent_files;
  c.skipped = walk.skipped;
  c.files = taken;
  // The chain: the project's ref is the parent.
  auto ref_name = "refs/mibyan/" + m->key;
  git_commit* parent = nullptr;
  git_oid parent_id;
  if (git2().git_reference_name_to_id(&parent_id, repo_, ref_name.c_str()) == 0
      && git2().git_commit_lookup(&parent, repo_, &parent_id) != 0) {
    out.warnings.push_back("the previous checkpoint commit of this project "
                           "is unreadable; starting a new chain");
    parent = nullptr;
  }
  auto commit = make_commit(repo_, c, parent);
  if (parent)
    git2().git_commit_free(parent);
  if (!commit)
    return R{commit.get_status()};
  c.commit = hex(*commit);
  git_reference* ref = nullptr;
  if (int rc = git2().git_reference_create(&ref, repo_, ref_name.c_str(), &*commit,
                                    1, "checkpoint");
      rc != 0)
    return R{git_failure("updating " + ref_name, rc)};
  git2().git_reference_free(ref);
  m->next = c.number + 1;
  m->checkpoints.push_back(c);
  if (auto st2 = prune_project(*m, out.warnings, limits_.keep / 10); !st2)
    out.warnings.push_back("pruning old checkpoints failed: " + st2.error);
  if (auto ws = write_meta(*m); !ws)
    return R{ws};
  // Only a cache: a failure costs the next snapshot some reading.
  (void)write_stat_cache(cache_path, next_cache);
  out.checkpoint = std::move(c);
  return out;
}

} // namespace mibyan
