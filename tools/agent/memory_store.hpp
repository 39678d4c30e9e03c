// File: tools/agent/memory_store.hpp
//
// The memory files (docs/tools.md, "memory"): `MEMORY.md` (agent notes) and
// `USER.md` (user profile) under `$MIBYAN_HOME/memories/`, each a list of
// entries joined by "\n§\n", limited in characters (Unicode code points)
// over the joined text.
//
// Concurrency: every change runs read-modify-write under an exclusive
// flock(2) on `memories/.<FILE>.lock`, and the new text replaces the file
// atomically (temp file + rename). Two processes (or threads) writing at
// once therefore serialise and neither loses the other's entry; readers
// see the old or the new file, never a mix.
//
// Shared store: when the functions get a user_state_store (with
// `storage.backend: postgres`, docs/storage.md "Per-user state"), the
// files are not used: each target is the memory document "MEMORY.md" /
// "USER.md" of the store, changed by read-modify-compare-and-set (retried
// when another gateway wrote in between), so every gateway sees the same
// memory and no update is lost.
//
// Thread-safe; never throws; blocks on file I/O and on the lock (call from
// the blocking pool, not from a scheduler thread).
#pragma once

#include <string>
#include <vector>

#include "base/json.hpp"
#include "base/status.hpp"

namespace mibyan {

struct options;
class user_state_store;

/// The entry separator.
constexpr const char* memory_separator = "\n§\n";

/// `home/memories/MEMORY.md` for "memory", `home/memories/USER.md` for
/// "user"; "" for another target.
std::string memory_file(const std::string& home, const std::string& target);

/// The character limit of `target` in `cfg`.
size_t memory_limit(const options& cfg, const std::string& target);

/// The entries of the file at `path` (empty when missing).
std::vector<std::string> read_memory_entries(const std::string& path);
/// The entries of a memory text (split at the separator, trimmed, empty
/// ones dropped).
std::vector<std::string> split_memory_entries(const std::string& text);
/// "MEMORY.md" for "memory", "USER.md" for "user": the document names in
/// the shared store ("" for another target).
std::string memory_doc_name(const std::string& target);

/// Number of Unicode code points of UTF-8 `text`.
size_t utf8_length(const std::string& text);

/// The joined text of `entries`.
std::string join_memory(const std::vector<std::string>& entries);

/// One change: action add | replace | remove.
struct memory_op {
  std::string action;
  std::string content;
  std::string old_text;
};

/// Applies `ops` to `target` atomically (all or nothing, checked against
/// the final budget): under the file lock, or, with `shared`, as a
/// compare-and-set of the target's document (an unreachable store is an
/// error result saying so, with nothing written). Returns the tool result
/// object (docs/tools.md, "memory": success or error shapes).
json::value apply_memory_ops(const std::string& home, const options& cfg,
                             const std::string& target,
                             const std::vector<memory_op>& ops,
                             user_state_store* shared = nullptr);

/// The frozen snapshot for the system prompt: one block per enabled,
/// non-empty file (or document of `shared`; docs/tools.md has the layout),
/// "" when there is none. Reads once; the caller keeps the text for the
/// session. A shared store that cannot be read gives no block (logged).
std::string memory_prompt_snapshot(const std::string& home,
                                   const options& cfg,
                                   const user_state_store* shared = nullptr);

/// Copies the memory files of `home` into `shared` where it has no
/// document of that target yet (the first gateway on a shared store brings
/// its memory along). Returns how many were imported.
result<size_t> import_memory_files(const std::string& home,
                                   user_state_store& shared);

/// Refuses (permission_denied, with the message shown to the model) `text`
/// that looks like prompt injection or an exfiltration attempt; ok when it
/// is acceptable.
status check_memory_content(const std::string& text);

} // namespace mibyan
