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
// Thread-safe; never throws; blocks on file I/O and on the lock (call from
// the blocking pool, not from a scheduler thread).
#pragma once

#include <string>
#include <vector>

#include "base/json.hpp"
#include "base/status.hpp"

namespace mibyan {

struct options;

/// The entry separator.
constexpr const char* memory_separator = "\n§\n";

/// `home/memories/MEMORY.md` for "memory", `home/memories/USER.md` for
/// "user"; "" for another target.
std::string memory_file(const std::string& home, const std::string& target);

/// The character limit of `target` in `cfg`.
size_t memory_limit(const options& cfg, const std::string& target);

/// The entries of the file at `path` (empty when missing).
std::vector<std::string> read_memory_entries(const std::string& path);

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
/// the final budget) under the file lock. Returns the tool result object
/// (docs/tools.md, "memory": success or error shapes).
json::value apply_memory_ops(const std::string& home, const options& cfg,
                             const std::string& target,
                             const std::vector<memory_op>& ops);

/// The frozen snapshot for the system prompt: one block per enabled,
/// non-empty file (docs/tools.md has the layout), "" when there is none.
/// Reads the files once; the caller keeps the text for the session.
std::string memory_prompt_snapshot(const std::string& home,
                                   const options& cfg);

/// Refuses (permission_denied, with the message shown to the model) `text`
/// that looks like prompt injection or an exfiltration attempt; ok when it
/// is acceptable.
status check_memory_content(const std::string& text);

} // namespace mibyan
