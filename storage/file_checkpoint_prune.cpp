// The file checkpoint store, part: pruning by count and age. A prune
// rebuilds the project's chain of commits from the kept checkpoints (same
// trees) and removes the loose objects no ref reaches any more.
#include "storage/file_checkpoint_store.hpp"

#include <cctype>
#include <cerrno>
#include <set>

#include <dirent.h>
#include <unistd.h>

#include "storage/file_checkpoint_git.hpp"

namespace mibyan {

using namespace file_checkpoint_detail;

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
      git2().git_commit_free(parent);
    parent = nullptr;
    if (!id)
      return id.get_status();
    c.commit = hex(*id);
    if (int rc = git2().git_commit_lookup(&parent, repo_, &*id); rc != 0)
      return git_failure("reading a rebuilt commit", rc);
  }
  auto ref_name = "refs/mibyan/" + m.key;
  if (parent) {
    git_reference* ref = nullptr;
    int rc = git2().git_reference_create(&ref, repo_, ref_name.c_str(),
                                  git2().git_commit_id(parent), 1, "prune");
    git2().git_commit_free(parent);
    if (rc != 0)
      return git_failure("updating " + ref_name, rc);
    git2().git_reference_free(ref);
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
  if (int rc = git2().git_reference_iterator_glob_new(&it, repo_, "refs/mibyan/*");
      rc != 0)
    return git_failure("listing refs", rc);
  git_reference* ref = nullptr;
  std::vector<git_oid> heads;
  while (git2().git_reference_next(&ref, it) == 0) {
    if (auto* id = git2().git_reference_target(ref))
      heads.push_back(*id);
    git2().git_reference_free(ref);
  }
  git2().git_reference_iterator_free(it);
  for (auto& head : heads) {
    git_oid cur = head;
    for (int guard = 0; guard < 1'000'000; ++guard) {
      auto h = hex(cur);
      if (!live.insert(h).second)
        break;
      git_commit* commit = nullptr;
      if (int rc = git2().git_commit_lookup(&commit, repo_, &cur); rc != 0)
        return git_failure("reading commit " + h, rc);
      git_tree* tree = nullptr;
      if (int rc = git2().git_commit_tree(&tree, commit); rc != 0) {
        git2().git_commit_free(commit);
        return git_failure("reading the tree of " + h, rc);
      }
      // A tree seen before (checkpoints share most of theirs) is not
      // walked again: the cost follows the distinct objects.
      if (live.insert(hex(*git2().git_tree_id(tree))).second)
        git2().git_tree_walk(
          tree, GIT_TREEWALK_PRE,
          [](const char*, const git_tree_entry* e, void* payload) -> int {
            bool fresh = static_cast<std::set<std::string>*>(payload)
                           ->insert(hex(*git2().git_tree_entry_id(e)))
                           .second;
            return !fresh && git2().git_tree_entry_type(e) == GIT_OBJECT_TREE ? 1
                                                                       : 0;
          },
          &live);
      git2().git_tree_free(tree);
      bool more = git2().git_commit_parentcount(commit) > 0;
      if (more)
        cur = *git2().git_commit_parent_id(commit, 0);
      git2().git_commit_free(commit);
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
  fd_closer close_lock{fd};
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
