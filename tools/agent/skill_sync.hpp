// File: tools/agent/skill_sync.hpp
//
// Skills shared by every gateway over one store (docs/storage.md,
// "Per-user state"): with a user_state_store the local skills root
// `$MIBYAN_HOME/skills` is a working copy of the store's skill documents
// (one per file, named by its path under the root, e.g.
// "devops/deploy/SKILL.md"), so the skill tools and loaders keep reading
// and writing files.
//
// A sync is a three-way merge of the local files, the store and
// `skills/.store-manifest` (what the last sync left: each file's version
// in the store and the SHA-256 of its bytes):
//   - a file changed (created, edited, removed) only locally is written to
//     the store, compare-and-set against the version it was based on (a
//     hand-made skill on the first gateway is imported this way);
//   - a file changed only in the store (another gateway) is written
//     locally (or removed);
//   - changed on both sides: the store wins and the file is reported in
//     `overridden` (skill_manage turns that into an error: the change was
//     not kept).
// Files over user_state_store::max_doc_bytes, dot files at the top of the
// root and anything that is not a regular file are left alone (logged).
//
// Callers hold the skills lock (`skills/.skill_manage.lock`,
// tools/file_lock.hpp) for sync_skills_locked; sync_skills takes it. Blocks
// on file and store I/O: call from the blocking pool. Never throws.
#pragma once

#include <string>
#include <vector>

#include "base/status.hpp"

namespace mibyan {

class user_state_store;

/// The lock file every change of the local skills tree takes.
std::string skills_lock_path(const std::string& home);

/// One sync (see above). Returns the files changed on both sides whose
/// local change the store's version replaced. Errors: the store cannot be
/// read or written (nothing of the failed step is half-applied: the store
/// batch is all or nothing and local files are replaced atomically), the
/// local tree cannot be written.
result<std::vector<std::string>>
sync_skills_locked(const std::string& home, user_state_store& store);

/// Takes the skills lock, then sync_skills_locked.
result<std::vector<std::string>> sync_skills(const std::string& home,
                                             user_state_store& store);

} // namespace mibyan
