#include "tools/agent/skill_sync.hpp"

#include <filesystem>
#include <map>
#include <set>

#include "base/crypto.hpp"
#include "base/json.hpp"
#include "base/log.hpp"
#include "base/private_file.hpp"
#include "storage/user_state_store.hpp"
#include "tools/agent/skills.hpp"
#include "tools/file_io.hpp"
#include "tools/file_lock.hpp"

namespace fs = std::filesystem;

namespace mibyan {

namespace {

constexpr const char* manifest_name = ".store-manifest";

struct base_state {
  uint64_t version = 0;
  std::string sha;
};

std::map<std::string, base_state> read_manifest(const std::string& root) {
  std::map<std::string, base_state> out;
  auto text = read_whole_file(root + "/" + manifest_name, size_t{64} << 20);
  if (!text)
    return out;
  auto parsed = json::parse(*text);
  if (!parsed || !parsed.v->is_object())
    return out; // a damaged manifest: every file counts as changed
  for (auto& [name, v] : parsed.v->as_object()) {
    if (!v.is_object())
      continue;
    base_state b;
    b.version = static_cast<uint64_t>(v.get_int("version", 0));
    b.sha = v.get_string("sha256");
    if (b.version > 0)
      out[name] = b;
  }
  return out;
}

status write_manifest(const std::string& root,
                      const std::map<std::string, base_state>& m) {
  json::value v = json::value::make_object();
  for (auto& [name, b] : m) {
    json::value e;
    e["version"] = static_cast<int64_t>(b.version);
    e["sha256"] = b.sha;
    v[name] = std::move(e);
  }
  auto w = atomic_write(root + "/" + manifest_name, v.dump());
  return w.ok() ? status{} : w.get_status();
}

// Regular files under `root` (relative names), without the top-level dot
// files (the lock, the manifest).
std::map<std::string, std::string> local_files(const std::string& root) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    return out;
  fs::recursive_directory_iterator it{root, ec}, end;
  for (; !ec && it != end; it.increment(ec)) {
    auto rel = it->path().lexically_relative(root).generic_string();
    if (it.depth() == 0 && !rel.empty() && rel[0] == '.') {
      if (it->is_directory(ec))
        it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec) || it->is_symlink(ec))
      continue;
    auto size = it->file_size(ec);
    if (ec || size > user_state_store::max_doc_bytes) {
      MIBYAN_LOG(warning, "skills", "not shared (over "
                 << user_state_store::max_doc_bytes << " bytes): " << rel);
      ec.clear();
      continue;
    }
    auto text = read_whole_file(it->path().string(),
                                user_state_store::max_doc_bytes);
    if (!text)
      continue;
    out[rel] = std::move(*text);
  }
  return out;
}

void remove_empty_parents(const std::string& root, fs::path p) {
  std::error_code ec;
  for (p = p.parent_path(); p.string().size() > root.size();
       p = p.parent_path())
    if (!fs::remove(p, ec)) // fails (and stops) on a non-empty directory
      break;
}

} // namespace

std::string skills_lock_path(const std::string& home) {
  return local_skills_root(home) + "/.skill_manage.lock";
}

result<std::vector<std::string>>
sync_skills_locked(const std::string& home, user_state_store& store) {
  using res = result<std::vector<std::string>>;
  auto root = local_skills_root(home);
  if (auto made = make_private_dirs(root); !made.ok())
    return res{made};
  std::vector<std::string> overridden;
  constexpr int max_rounds = 8;
  for (int round = 0; round < max_rounds; ++round) {
    auto listed = store.list(user_state_kind::skill, false);
    if (!listed)
      return res::failure(listed.code, "skills: " + listed.error);
    std::map<std::string, uint64_t> remote;
    for (auto& d : *listed)
      remote[d.name] = d.version;
    auto manifest = read_manifest(root);
    auto local = local_files(root);
    std::set<std::string> names;
    for (auto& [n, v] : remote)
      names.insert(n);
    for (auto& [n, b] : manifest)
      names.insert(n);
    for (auto& [n, t] : local)
      names.insert(n);
    std::vector<user_doc_write> pushes;
    std::vector<std::string> pulls;
    for (auto& n : names) {
      auto m = manifest.find(n);
      auto l = local.find(n);
      auto r = remote.find(n);
      std::string base_sha = m == manifest.end() ? "" : m->second.sha;
      uint64_t base_ver = m == manifest.end() ? 0 : m->second.version;
      std::string local_sha = l == local.end() ? "" : sha256_hex(l->second);
      uint64_t remote_ver = r == remote.end() ? 0 : r->second;
      bool local_changed = local_sha != base_sha;
      bool remote_changed = remote_ver != base_ver;
      if (remote_changed) {
        if (local_changed) {
          // Both sides changed. The same bytes on both: nothing to do
          // but to record the base.
          if (l != local.end() && r != remote.end()) {
            auto doc = store.get(user_state_kind::skill, n);
            if (doc && sha256_hex(doc->bytes) == local_sha) {
              manifest[n] = base_state{doc->version, local_sha};
              continue;
            }
          }
          if (l == local.end() && r == remote.end()) {
            manifest.erase(n);
            continue;
          }
          overridden.push_back(n);
        }
        pulls.push_back(n);
        continue;
      }
      if (!local_changed)
        continue;
      if (check_user_doc_name(n, "skills").code != status_code::ok) {
        MIBYAN_LOG(warning, "skills", "not shared (bad name): " << n);
        continue;
      }
      user_doc_write w;
      w.name = n;
      w.expected = base_ver;
      if (l == local.end())
        w.erase = true;
      else
        w.bytes = l->second;
      pushes.push_back(std::move(w));
    }
    // Local changes first, all or nothing; a conflict (another gateway
    // wrote one of them since the list) starts the round again.
    if (!pushes.empty()) {
      bool conflict = false;
      for (size_t at = 0; at < pushes.size() && !conflict;
           at += user_state_store::max_batch) {
        std::vector<user_doc_write> part(
          pushes.begin() + static_cast<std::ptrdiff_t>(at),
          pushes.begin()
            + static_cast<std::ptrdiff_t>(
              std::min(pushes.size(), at + user_state_store::max_batch)));
        auto w = store.write(user_state_kind::skill, part);
        if (!w) {
          if (w.code == status_code::already_exists) {
            conflict = true;
            break;
          }
          return res::failure(w.code, "skills: " + w.error);
        }
        for (size_t i = 0; i < part.size(); ++i) {
          if (part[i].erase)
            manifest.erase(part[i].name);
          else
            manifest[part[i].name] =
              base_state{(*w)[i], sha256_hex(part[i].bytes)};
        }
      }
      if (auto st = write_manifest(root, manifest); !st)
        return res{st};
      if (conflict)
        continue;
    }
    // Then what changed in the store.
    for (auto& n : pulls) {
      auto path = root + "/" + n;
      auto doc = store.get(user_state_kind::skill, n);
      if (!doc && doc.code == status_code::not_found) {
        std::error_code ec;
        fs::remove(path, ec);
        remove_empty_parents(root, path);
        manifest.erase(n);
        continue;
      }
      if (!doc)
        return res::failure(doc.code, "skills: " + doc.error);
      // Names come from the store: never let one leave the root or
      // replace the lock or the manifest.
      if (n[0] == '.') {
        MIBYAN_LOG(warning, "skills", "not written (a dot file): " << n);
        continue;
      }
      auto inside = skill_file_path(root, n, false);
      if (!inside) {
        MIBYAN_LOG(warning, "skills", "not written (" << inside.error
                   << "): " << n);
        continue;
      }
      auto w = atomic_write(*inside, doc->bytes);
      if (!w.ok())
        return res{w.get_status()};
      manifest[n] = base_state{doc->version, sha256_hex(doc->bytes)};
    }
    if (auto st = write_manifest(root, manifest); !st)
      return res{st};
    return res{std::move(overridden)};
  }
  return res::failure(status_code::unavailable,
                      "skills: the shared skills kept changing during a "
                      "sync; retry");
}

result<std::vector<std::string>> sync_skills(const std::string& home,
                                             user_state_store& store) {
  auto root = local_skills_root(home);
  if (auto made = make_private_dirs(root); !made.ok())
    return result<std::vector<std::string>>{made};
  file_lock lock{skills_lock_path(home), "the skills directory"};
  if (!lock.error().empty())
    return result<std::vector<std::string>>::failure(status_code::unavailable,
                                                      lock.error());
  return sync_skills_locked(home, store);
}

} // namespace mibyan
