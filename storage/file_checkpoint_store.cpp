#include "storage/file_checkpoint_store.hpp"

// Opening, snapshots, records and pruning; diff and restore are in
// storage/file_checkpoint_restore.cpp.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <set>
#include <system_error>
#include <thread>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/json.hpp"
#include "base/private_file.hpp"
#include "storage/file_checkpoint_git.hpp"

namespace mibyan {

using namespace file_checkpoint_detail;

namespace {

constexpr int meta_version = 1;
// How long a change waits for another process holding the lock.
constexpr auto lock_wait = std::chrono::seconds(30);

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

json::value strings(const std::vector<std::string>& xs) {
  json::value a = json::value::make_array();
  for (auto& x : xs)
    a.push_back(x);
  return a;
}

std::vector<std::string> strings_of(const json::value* v) {
  std::vector<std::string> out;
  if (v != nullptr && v->is_array())
    for (auto& x : v->as_array())
      if (x.is_string())
        out.push_back(x.as_string());
  return out;
}

json::value to_json(const file_checkpoint& c) {
  json::value o;
  o["number"] = c.number;
  o["tree"] = c.tree;
  o["commit"] = c.commit;
  o["time_ms"] = c.time_ms;
  o["session_id"] = c.session_id;
  o["turn"] = c.turn;
  o["tool"] = c.tool;
  o["reason"] = c.reason;
  o["agent_files"] = strings(c.agent_files);
  o["skipped"] = strings(c.skipped);
  o["files"] = c.files;
  o["rolled_back"] = c.rolled_back;
  return o;
}

file_checkpoint from_json(const json::value& o, const std::string& project) {
  file_checkpoint c;
  c.project = project;
  c.number = o.get_int("number", 0);
  c.tree = o.get_string("tree");
  c.commit = o.get_string("commit");
  c.time_ms = o.get_int("time_ms", 0);
  c.session_id = o.get_string("session_id");
  c.turn = o.get_int("turn", 0);
  c.tool = o.get_string("tool");
  c.reason = o.get_string("reason");
  c.agent_files = strings_of(o.find("agent_files"));
  c.skipped = strings_of(o.find("skipped"));
  c.files = o.get_int("files", 0);
  c.rolled_back = o.get_bool("rolled_back", false);
  return c;
}

std::string read_text(const std::string& path, int& err) {
  err = 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    err = errno;
    return {};
  }
  std::string out;
  char buf[65536];
  while (true) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      err = errno;
      break;
    }
    if (n == 0)
      break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (size_t{64} << 20)) {
      err = EFBIG;
      break;
    }
  }
  ::close(fd);
  return out;
}

struct repo_ptr {
  git_repository* r = nullptr;
  ~repo_ptr() {
    if (r)
      git_repository_free(r);
  }
};

// A signature for checkpoint commits (never the user's identity).
git_signature* signature(int64_t ms) {
  git_signature* sig = nullptr;
  if (git_signature_new(&sig, "mibyan", "mibyan@localhost", ms / 1000, 0) != 0)
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

// Makes a commit of `tree_hex` with `parent` (may be null) and returns its
// id.
result<git_oid> make_commit(git_repository* repo, const file_checkpoint& c,
                            const git_commit* parent) {
  using R = result<git_oid>;
  git_oid tree_id;
  if (git_oid_fromstr(&tree_id, c.tree.c_str()) != 0)
    return R::failure(status_code::data_corrupt, "bad tree id " + c.tree);
  git_tree* tree = nullptr;
  if (int rc = git_tree_lookup(&tree, repo, &tree_id); rc != 0)
    return R{git_failure("reading tree " + c.tree, rc)};
  auto* sig = signature(c.time_ms);
  if (sig == nullptr) {
    git_tree_free(tree);
    return R{git_failure("making a signature", -1)};
  }
  git_oid out;
  const git_commit* parents[1] = {parent};
  auto msg = commit_message(c);
  int rc = git_commit_create(&out, repo, nullptr, sig, sig, nullptr,
                             msg.c_str(), tree, parent ? 1 : 0, parents);
  git_signature_free(sig);
  git_tree_free(tree);
  if (rc != 0)
    return R{git_failure("writing the checkpoint commit", rc)};
  return out;
}

} // namespace

file_checkpoint_store::~file_checkpoint_store() {
  if (repo_)
    git_repository_free(repo_);
}

std::string file_checkpoint_store::default_dir(const std::string& home) {
  return home + "/checkpoints";
}

result<std::unique_ptr<file_checkpoint_store>>
file_checkpoint_store::open(const std::string& dir,
                            file_checkpoint_limits limits) {
  using R = result<std::unique_ptr<file_checkpoint_store>>;
  static const int init_once = git_libgit2_init();
  (void)init_once;
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
      rc = git_repository_init(&s->repo_, git_dir.c_str(), 1);
    else
      rc = git_repository_open_bare(&s->repo_, git_dir.c_str());
    ::close(fd);
    if (rc != 0)
      return R{git_failure("creating the checkpoint store " + git_dir, rc)};
  } else if (int rc = git_repository_open_bare(&s->repo_, git_dir.c_str());
             rc != 0) {
    auto f = git_failure("opening the checkpoint store " + git_dir, rc);
    return R::failure(status_code::data_corrupt,
                      f.error + ". The store is damaged: move " + dir
                        + " away (a new one is created on the next "
                          "checkpoint) or delete it.");
  }
  // Objects are found by hash only: no need to verify them on write, and
  // a damaged object is reported when it is read.
  git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 0);
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

std::string file_checkpoint_store::key_of(const std::string& project) const {
  return hex(blob_id(project)).substr(0, 20);
}

result<file_checkpoint_store::meta>
file_checkpoint_store::read_meta(const std::string& project) const {
  using R = result<meta>;
  meta m;
  m.project = project;
  m.key = key_of(project);
  auto path = dir_ + "/projects/" + m.key + ".json";
  int err = 0;
  auto text = read_text(path, err);
  if (err == ENOENT)
    return m;
  if (err != 0)
    return R::failure(code_of_errno(err), "cannot read " + path + ": "
                                            + errno_text(err));
  auto parsed = json::parse(text);
  if (!parsed || !parsed.v->is_object())
    return R::failure(status_code::data_corrupt,
                      "the checkpoint records " + path + " are damaged ("
                        + (parsed ? std::string{"not an object"} : parsed.error)
                        + "); move the file away to start the project's "
                          "checkpoints afresh");
  auto& o = *parsed.v;
  if (o.get_int("version", 0) > meta_version)
    return R::failure(status_code::data_corrupt,
                      path + " was written by a newer Mibyan");
  if (o.get_string("project") != project)
    return R::failure(status_code::data_corrupt,
                      path + " belongs to another project ("
                        + o.get_string("project") + ")");
  m.next = std::max<int64_t>(o.get_int("next", 1), 1);
  if (auto* cs = o.find("checkpoints"); cs && cs->is_array())
    for (auto& c : cs->as_array())
      if (c.is_object())
        m.checkpoints.push_back(from_json(c, project));
  return m;
}

status file_checkpoint_store::write_meta(const meta& m) const {
  json::value o;
  o["version"] = meta_version;
  o["project"] = m.project;
  o["next"] = m.next;
  json::value cs = json::value::make_array();
  for (auto& c : m.checkpoints)
    cs.push_back(to_json(c));
  o["checkpoints"] = std::move(cs);
  auto path = dir_ + "/projects/" + m.key + ".json";
  auto tmp = path + ".tmp";
  auto text = o.pretty();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return status::failure(code_of_errno(errno),
                           "cannot write " + tmp + ": " + errno_text(errno));
  size_t put = 0;
  while (put < text.size()) {
    auto n = ::write(fd, text.data() + put, text.size() - put);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      ::unlink(tmp.c_str());
      return status::failure(code_of_errno(err), "cannot write " + tmp + ": "
                                                   + errno_text(err));
    }
    put += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return status::failure(code_of_errno(err),
                           "cannot write " + tmp + ": " + errno_text(err));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return status::failure(code_of_errno(err),
                           "cannot write " + path + ": " + errno_text(err));
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
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_lock{fd};
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
  if (int rc = git_index_new(&index); rc != 0)
    return R{git_failure("making an index", rc)};
  struct index_free {
    git_index* i;
    ~index_free() { git_index_free(i); }
  } free_index{index};
  int64_t taken = 0;
  // Files unchanged since the last snapshot are not read again.
  auto cache_path = dir_ + "/projects/" + m->key + ".stat";
  auto cache = read_stat_cache(cache_path);
  stat_cache next_cache;
  git_odb* odb = nullptr;
  if (int rc = git_repository_odb(&odb, repo_); rc != 0)
    return R{git_failure("opening the object database", rc)};
  struct odb_free {
    git_odb* o;
    ~odb_free() { git_odb_free(o); }
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
        && git_odb_exists_ext(odb, &cached->second.id,
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
      if (git_odb_hash(&ie.id, content->data(), content->size(),
                       GIT_OBJECT_BLOB)
            != 0
          || !git_odb_exists_ext(odb, &ie.id, GIT_ODB_LOOKUP_NO_REFRESH))
        if (int rc = git_odb_write(&ie.id, odb, content->data(),
                                   content->size(), GIT_OBJECT_BLOB);
            rc != 0)
          return R{git_failure("writing " + rel
                                 + " into the checkpoint store",
                               rc)};
    }
    if (e.mtime_ns < racy_ns && e.ctime_ns < racy_ns)
      next_cache[rel] = stat_cache_entry{e, ie.id};
    if (int rc = git_index_add(index, &ie); rc != 0) {
      // A name git refuses (e.g. one that reads as .git on another file
      // system): left out, said so.
      out.warnings.push_back(git_failure("left out " + rel, rc).error);
      walk.skipped.push_back(rel);
      continue;
    }
    ++taken;
  }
  git_oid tree_id;
  if (int rc = git_index_write_tree_to(&tree_id, index, repo_); rc != 0)
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
  if (git_reference_name_to_id(&parent_id, repo_, ref_name.c_str()) == 0
      && git_commit_lookup(&parent, repo_, &parent_id) != 0) {
    out.warnings.push_back("the previous checkpoint commit of this project "
                           "is unreadable; starting a new chain");
    parent = nullptr;
  }
  auto commit = make_commit(repo_, c, parent);
  if (parent)
    git_commit_free(parent);
  if (!commit)
    return R{commit.get_status()};
  c.commit = hex(*commit);
  git_reference* ref = nullptr;
  if (int rc = git_reference_create(&ref, repo_, ref_name.c_str(), &*commit,
                                    1, "checkpoint");
      rc != 0)
    return R{git_failure("updating " + ref_name, rc)};
  git_reference_free(ref);
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

status file_checkpoint_store::prune_project(meta& m,
                                            std::vector<std::string>& warnings,
                                            size_t slack) {
  auto now = now_ms();
  std::vector<file_checkpoint> kept;
  size_t n = m.checkpoints.size();
  for (size_t i = 0; i < n; ++i) {
    auto& c = m.checkpoints[i];
    bool newest = i + 1 == n;
    bool too_many = n - i > limits_.keep;
    bool too_old = limits_.max_age_ms > 0 && now - c.time_ms > limits_.max_age_ms;
    if (!newest && (too_many || too_old))
      continue;
    kept.push_back(c);
  }
  // Pruning re-chains the kept commits and sweeps the objects: after a
  // snapshot it waits until more than `slack` checkpoints are due.
  if (m.checkpoints.size() - kept.size() <= slack)
    return {};
  // Rebuild the chain from the kept checkpoints (same trees, new commits).
  git_commit* parent = nullptr;
  for (auto& c : kept) {
    auto id = make_commit(repo_, c, parent);
    if (parent)
      git_commit_free(parent);
    parent = nullptr;
    if (!id)
      return id.get_status();
    c.commit = hex(*id);
    if (int rc = git_commit_lookup(&parent, repo_, &*id); rc != 0)
      return git_failure("reading a rebuilt commit", rc);
  }
  auto ref_name = "refs/mibyan/" + m.key;
  if (parent) {
    git_reference* ref = nullptr;
    int rc = git_reference_create(&ref, repo_, ref_name.c_str(),
                                  git_commit_id(parent), 1, "prune");
    git_commit_free(parent);
    if (rc != 0)
      return git_failure("updating " + ref_name, rc);
    git_reference_free(ref);
  }
  m.checkpoints = std::move(kept);
  if (auto gc = collect_garbage(); !gc)
    warnings.push_back("removing pruned objects failed: " + gc.error);
  return {};
}

status file_checkpoint_store::collect_garbage() {
  // Everything reachable from the refs/mibyan/ refs.
  std::set<std::string> live;
  git_reference_iterator* it = nullptr;
  if (int rc = git_reference_iterator_glob_new(&it, repo_, "refs/mibyan/*");
      rc != 0)
    return git_failure("listing refs", rc);
  git_reference* ref = nullptr;
  std::vector<git_oid> heads;
  while (git_reference_next(&ref, it) == 0) {
    if (auto* id = git_reference_target(ref))
      heads.push_back(*id);
    git_reference_free(ref);
  }
  git_reference_iterator_free(it);
  for (auto& head : heads) {
    git_oid cur = head;
    for (int guard = 0; guard < 1'000'000; ++guard) {
      auto h = hex(cur);
      if (!live.insert(h).second)
        break;
      git_commit* commit = nullptr;
      if (int rc = git_commit_lookup(&commit, repo_, &cur); rc != 0)
        return git_failure("reading commit " + h, rc);
      git_tree* tree = nullptr;
      if (int rc = git_commit_tree(&tree, commit); rc != 0) {
        git_commit_free(commit);
        return git_failure("reading the tree of " + h, rc);
      }
      // A tree seen before (checkpoints share most of theirs) is not
      // walked again: the cost follows the distinct objects.
      if (live.insert(hex(*git_tree_id(tree))).second)
        git_tree_walk(
          tree, GIT_TREEWALK_PRE,
          [](const char*, const git_tree_entry* e, void* payload) -> int {
            bool fresh = static_cast<std::set<std::string>*>(payload)
                           ->insert(hex(*git_tree_entry_id(e)))
                           .second;
            return !fresh && git_tree_entry_type(e) == GIT_OBJECT_TREE ? 1
                                                                       : 0;
          },
          &live);
      git_tree_free(tree);
      bool more = git_commit_parentcount(commit) > 0;
      if (more)
        cur = *git_commit_parent_id(commit, 0);
      git_commit_free(commit);
      if (!more)
        break;
    }
  }
  // Loose objects that are not live are removed.
  auto objects = dir_ + "/store.git/objects";
  DIR* d = ::opendir(objects.c_str());
  if (d == nullptr)
    return status::failure(code_of_errno(errno),
                           "cannot read " + objects + ": " + errno_text(errno));
  std::vector<std::string> fans;
  while (auto* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.size() == 2 && std::isxdigit(static_cast<unsigned char>(n[0]))
        && std::isxdigit(static_cast<unsigned char>(n[1])))
      fans.push_back(n);
  }
  ::closedir(d);
  for (auto& fan : fans) {
    auto sub = objects + "/" + fan;
    DIR* sd = ::opendir(sub.c_str());
    if (sd == nullptr)
      continue;
    std::vector<std::string> dead;
    while (auto* e = ::readdir(sd)) {
      std::string n = e->d_name;
      if (n.size() != GIT_OID_HEXSZ - 2)
        continue;
      if (!live.count(fan + n))
        dead.push_back(sub + "/" + n);
    }
    ::closedir(sd);
    for (auto& p : dead)
      ::unlink(p.c_str());
    ::rmdir(sub.c_str()); // only when it became empty
  }
  return {};
}

status file_checkpoint_store::add_agent_files(
  const std::string& project, int64_t number,
  const std::vector<std::string>& files) {
  std::lock_guard<std::mutex> guard{mtx_};
  int fd = -1;
  if (auto ls = lock(fd); !ls)
    return ls;
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_lock{fd};
  auto m = read_meta(project);
  if (!m)
    return m.get_status();
  for (auto& c : m->checkpoints) {
    if (c.number != number)
      continue;
    bool changed = false;
    for (auto& f : files)
      if (std::find(c.agent_files.begin(), c.agent_files.end(), f)
          == c.agent_files.end()) {
        c.agent_files.push_back(f);
        changed = true;
      }
    return changed ? write_meta(*m) : status{};
  }
  return status::failure(status_code::not_found,
                         "no checkpoint " + std::to_string(number) + " in "
                           + project);
}

status file_checkpoint_store::mark_rolled_back(
  const std::string& project, const std::vector<int64_t>& numbers) {
  std::lock_guard<std::mutex> guard{mtx_};
  int fd = -1;
  if (auto ls = lock(fd); !ls)
    return ls;
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_lock{fd};
  auto m = read_meta(project);
  if (!m)
    return m.get_status();
  for (auto& c : m->checkpoints)
    if (std::find(numbers.begin(), numbers.end(), c.number) != numbers.end())
      c.rolled_back = true;
  return write_meta(*m);
}

result<std::vector<file_checkpoint>>
file_checkpoint_store::list(const std::string& project) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto m = read_meta(project);
  if (!m)
    return m.get_status();
  return std::move(m->checkpoints);
}

result<std::vector<file_checkpoint>> file_checkpoint_store::list_all() const {
  using R = result<std::vector<file_checkpoint>>;
  std::vector<std::string> projects;
  {
    auto pdir = dir_ + "/projects";
    DIR* d = ::opendir(pdir.c_str());
    if (d == nullptr)
      return R::failure(code_of_errno(errno),
                        "cannot read " + pdir + ": " + errno_text(errno));
    while (auto* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0) {
        int err = 0;
        auto text = read_text(pdir + "/" + n, err);
        auto parsed = json::parse(text);
        if (parsed && parsed.v->is_object())
          projects.push_back(parsed.v->get_string("project"));
      }
    }
    ::closedir(d);
  }
  std::vector<file_checkpoint> out;
  for (auto& p : projects) {
    auto l = list(p);
    if (!l)
      return l;
    for (auto& c : *l)
      out.push_back(std::move(c));
  }
  return out;
}

result<size_t> file_checkpoint_store::prune() {
  using R = result<size_t>;
  auto all = list_all();
  if (!all)
    return R{all.get_status()};
  std::set<std::string> projects;
  for (auto& c : *all)
    projects.insert(c.project);
  std::lock_guard<std::mutex> guard{mtx_};
  int fd = -1;
  if (auto ls = lock(fd); !ls)
    return R{ls};
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_lock{fd};
  size_t removed = 0;
  for (auto& p : projects) {
    auto m = read_meta(p);
    if (!m)
      return R{m.get_status()};
    auto before = m->checkpoints.size();
    std::vector<std::string> warnings;
    if (auto st = prune_project(*m, warnings, 0); !st)
      return R{st};
    if (m->checkpoints.size() != before) {
      removed += before - m->checkpoints.size();
      if (auto ws = write_meta(*m); !ws)
        return R{ws};
    }
  }
  return removed;
}

} // namespace mibyan
