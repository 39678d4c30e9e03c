#include "storage/file_checkpoint_store.hpp"

// The file checkpoint store, part: diff and restore (opening and
// snapshots are in storage/file_checkpoint_store.cpp).
#include <algorithm>
#include <set>

#include <sys/stat.h>
#include <unistd.h>

#include "storage/file_checkpoint_git.hpp"

namespace mibyan {

using namespace file_checkpoint_detail;

namespace {

// What is on disk at `rel` now: nothing, or its kind and content.
struct disk_state {
  bool exists = false;
  bool readable = true;
  uint32_t mode = mode_file;
  std::string content;
};

disk_state disk_at(const std::string& root, const std::string& rel,
                   uint64_t max_bytes) {
  disk_state d;
  struct stat st;
  if (!parents_are_dirs(root, rel)) {
    // Only reachable through a link (or not at all): never read through it.
    d.exists = ::lstat((root + "/" + rel).c_str(), &st) == 0;
    d.readable = false;
    return d;
  }
  if (::lstat((root + "/" + rel).c_str(), &st) != 0)
    return d;
  d.exists = true;
  if (S_ISLNK(st.st_mode))
    d.mode = mode_link;
  else if (S_ISREG(st.st_mode))
    d.mode = (st.st_mode & 0111) ? mode_exec : mode_file;
  else {
    d.readable = false; // a directory or a special file
    return d;
  }
  auto got = read_entry(root, rel, disk_entry{d.mode,
                                              static_cast<uint64_t>(st.st_size)},
                        max_bytes);
  if (!got) {
    d.readable = false;
    return d;
  }
  d.content = std::move(*got);
  return d;
}

bool same(const disk_state& d, const tree_entry& t) {
  if (!d.exists || !d.readable)
    return false;
  bool link_t = t.mode == mode_link;
  bool link_d = d.mode == mode_link;
  if (link_t != link_d)
    return false;
  auto id = blob_id(d.content);
  return git2().git_oid_equal(&id, &t.id) != 0;
}

// Whether `rel` is as in the snapshot by the stat cache alone (no read):
// the cache saw this very file (same stat) with the snapshot's blob.
bool unchanged_by_stat(const std::string& root, const std::string& rel,
                       const tree_entry& t, const stat_cache& cache) {
  auto c = cache.find(rel);
  if (c == cache.end() || git2().git_oid_equal(&c->second.id, &t.id) == 0
      || !parents_are_dirs(root, rel))
    return false;
  disk_entry now;
  return stat_entry(root + "/" + rel, now) && same_stat(c->second.e, now)
         && now.mode == t.mode;
}

result<std::string> blob_text(git_repository* repo, const tree_entry& t,
                              const std::string& rel) {
  git_blob* blob = nullptr;
  if (int rc = git2().git_blob_lookup(&blob, repo, &t.id); rc != 0) {
    auto st = git_failure("reading " + rel + " from the checkpoint", rc);
    return result<std::string>::failure(status_code::data_corrupt, st.error);
  }
  std::string out{static_cast<const char*>(git2().git_blob_rawcontent(blob)),
                  static_cast<size_t>(git2().git_blob_rawsize(blob))};
  git2().git_blob_free(blob);
  return out;
}

} // namespace

result<std::string> file_checkpoint_store::diff(const std::string& project,
                                                int64_t number,
                                                const std::string& file) const {
  using R = result<std::string>;
  std::lock_guard<std::mutex> guard{mtx_};
  auto m = read_meta(project);
  if (!m)
    return R{m.get_status()};
  auto c = std::find_if(m->checkpoints.begin(), m->checkpoints.end(),
                        [&](auto& x) { return x.number == number; });
  if (c == m->checkpoints.end())
    return R::failure(status_code::not_found,
                      "no checkpoint " + std::to_string(number) + " in "
                        + project + " (mibyan checkpoints list)");
  std::string only;
  if (!file.empty()) {
    only = relative_to(project, file);
    if (only.empty())
      return R::failure(status_code::invalid_argument,
                        file + " is outside the project " + project);
  }
  auto tree = flatten_tree(repo_, c->tree);
  if (!tree)
    return R{tree.get_status()};
  auto walk = walk_project(repo_, project, limits_, only);
  std::set<std::string> paths;
  for (auto& [rel, t] : *tree)
    if (only.empty() || covered(rel, {only}))
      paths.insert(rel);
  for (auto& [rel, e] : walk.files)
    paths.insert(rel);
  std::string out;
  git_diff_options opts = GIT_DIFF_OPTIONS_INIT;
  auto cache = read_stat_cache(dir_ + "/projects/" + m->key + ".stat");
  for (auto& rel : paths) {
    auto t = tree->find(rel);
    if (t != tree->end() && unchanged_by_stat(project, rel, t->second, cache))
      continue;
    auto d = disk_at(project, rel, limits_.max_file_bytes);
    if (t != tree->end() && same(d, t->second))
      continue;
    if (t == tree->end() && covered(rel, c->skipped))
      continue; // left out of the snapshot: nothing to compare with
    std::string old_text;
    if (t != tree->end()) {
      auto b = blob_text(repo_, t->second, rel);
      if (!b)
        return R{b.get_status()};
      old_text = std::move(*b);
    }
    if (d.exists && !d.readable) {
      out += "# " + rel + ": cannot be read now\n";
      continue;
    }
    auto a = "a/" + rel;
    auto bname = "b/" + rel;
    git_patch* patch = nullptr;
    int rc = git2().git_patch_from_buffers(
      &patch, t != tree->end() ? old_text.data() : nullptr, old_text.size(),
      a.c_str(), d.exists ? d.content.data() : nullptr, d.content.size(),
      bname.c_str(), &opts);
    if (rc != 0)
      return R{git_failure("diffing " + rel, rc)};
    git_buf buf = GIT_BUF_INIT;
    if (git2().git_patch_to_buf(&buf, patch) == 0) {
      out.append(buf.ptr, buf.size);
      git2().git_buf_dispose(&buf);
    }
    git2().git_patch_free(patch);
  }
  return out;
}

result<restore_report>
file_checkpoint_store::restore(const std::string& project, int64_t number,
                               const restore_options& opts) {
  using R = result<restore_report>;
  restore_report rep;
  {
    auto l = list(project);
    if (!l)
      return R{l.get_status()};
    bool found = std::any_of(l->begin(), l->end(),
                             [&](auto& x) { return x.number == number; });
    if (!found)
      return R::failure(status_code::not_found,
                        "no checkpoint " + std::to_string(number) + " in "
                          + project + " (mibyan checkpoints list)");
  }
  std::string only;
  if (!opts.file.empty()) {
    only = relative_to(project, opts.file);
    if (only.empty() || only == ".")
      return R::failure(status_code::invalid_argument,
                        opts.file + " is not a path inside the project "
                          + project);
  }
  // A safety checkpoint of the state being replaced, so that the restore
  // itself can be undone.
  if (opts.safety_snapshot) {
    snapshot_request sr;
    sr.project = project;
    sr.session_id = opts.session_id;
    sr.tool = "restore";
    sr.reason = "before restoring checkpoint " + std::to_string(number);
    auto safety = snapshot(sr);
    if (safety)
      rep.safety_number = safety->checkpoint.number;
    else
      rep.warnings.push_back("no safety checkpoint was taken before the "
                             "restore: " + safety.error);
  }
  std::lock_guard<std::mutex> guard{mtx_};
  int fd = -1;
  if (auto ls = lock(fd); !ls)
    return R{ls};
  fd_closer close_lock{fd};
  auto m = read_meta(project);
  if (!m)
    return R{m.get_status()};
  auto c = std::find_if(m->checkpoints.begin(), m->checkpoints.end(),
                        [&](auto& x) { return x.number == number; });
  if (c == m->checkpoints.end())
    return R::failure(status_code::not_found,
                      "checkpoint " + std::to_string(number)
                        + " was pruned meanwhile");
  auto tree = flatten_tree(repo_, c->tree);
  if (!tree)
    return R{tree.get_status()};
  // The agent's paths: written after this checkpoint, in any later one
  // (safety checkpoints of restores name none).
  std::vector<std::string> agent;
  for (auto& x : m->checkpoints)
    if (x.number >= number && x.number != rep.safety_number) {
      for (auto& f : x.agent_files)
        agent.push_back(f);
      if (!x.agent_files.empty() || x.number == number)
        rep.covered.push_back(x.number);
    }
  std::vector<std::string> scope;
  if (!only.empty())
    scope = {only};
  else if (opts.all)
    scope = {"."};
  else
    scope = agent;
  // Candidates: the snapshot's paths in scope and what is on disk there.
  std::set<std::string> paths;
  for (auto& [rel, t] : *tree)
    if (covered(rel, scope))
      paths.insert(rel);
  for (auto& s : scope) {
    auto sub = s == "." ? std::string{} : s;
    if (!sub.empty() && sub.back() == '/')
      sub.pop_back();
    auto walk = walk_project(repo_, project, limits_, sub);
    for (auto& [rel, e] : walk.files)
      paths.insert(rel);
    for (auto& w : walk.warnings)
      rep.warnings.push_back(w);
  }
  // Deletions first (a directory made where a file or link was goes
  // before the file or link comes back), then the writes.
  for (auto& rel : paths) {
    if (tree->count(rel))
      continue;
    struct stat st;
    if (::lstat((project + "/" + rel).c_str(), &st) != 0)
      continue;
    if (covered(rel, c->skipped)) {
      rep.kept.push_back(rel); // never in the snapshot: not ours to drop
      continue;
    }
    if (auto removed = remove_entry(project, rel); !removed.ok())
      rep.failed.push_back(rel + ": " + removed.error);
    else
      rep.deleted.push_back(rel);
  }
  auto cache = read_stat_cache(dir_ + "/projects/" + m->key + ".stat");
  for (auto& rel : paths) {
    auto t = tree->find(rel);
    if (t == tree->end()
        || unchanged_by_stat(project, rel, t->second, cache))
      continue;
    auto d = disk_at(project, rel, limits_.max_file_bytes);
    if (same(d, t->second))
      continue;
    auto content = blob_text(repo_, t->second, rel);
    if (!content) {
      rep.failed.push_back(rel + ": " + content.error);
      continue;
    }
    if (auto written = write_entry(project, rel, *content, t->second.mode);
        !written.ok())
      rep.failed.push_back(rel + ": " + written.error);
    else
      rep.restored.push_back(rel);
  }
  // What differs but was left alone.
  if (only.empty() && !opts.all)
    for (auto& [rel, t] : *tree) {
      if (paths.count(rel) || unchanged_by_stat(project, rel, t, cache))
        continue;
      auto d = disk_at(project, rel, limits_.max_file_bytes);
      if (!same(d, t))
        rep.kept.push_back(rel);
    }
  // The restored checkpoints' changes are undone.
  for (auto& x : m->checkpoints)
    if (std::find(rep.covered.begin(), rep.covered.end(), x.number)
        != rep.covered.end())
      x.rolled_back = true;
  if (auto ws = write_meta(*m); !ws)
    rep.warnings.push_back("the checkpoints could not be marked as rolled "
                           "back: " + ws.error);
  return rep;
}

} // namespace mibyan
