// File: tools/agent/skills.hpp
//
// Skills on disk (docs/tools.md, "Skills"): a skill is a directory holding
// SKILL.md (YAML frontmatter between `---` lines, then a Markdown body) and
// optional supporting files under references/, templates/, scripts/ and
// assets/. Skills live in `$MIBYAN_HOME/skills/[<category>/]<name>/` and in
// the read-only `skills.external_dirs`; the first root holding a name wins.
//
// Thread-safe (no shared state); never throws; blocks on file I/O.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.hpp"

namespace mibyan {

struct options;

/// One skill as found on disk.
struct skill_info {
  std::string name;
  std::string description;
  /// The directory between the root and the skill's own ("" for none).
  std::string category;
  std::vector<std::string> tags;
  std::vector<std::string> related_skills;
  /// Variables passed through to terminal / execute_code while the skill
  /// is active (docs/tools.md, "Skills").
  std::vector<std::string> required_env;
  /// The skill's directory and SKILL.md, absolute.
  std::string dir;
  std::string skill_md;
  /// The root it was found under, and whether that is an external dir.
  std::string root;
  bool external = false;
};

/// Limits of skill_manage.
constexpr size_t max_skill_md_chars = 100000;
constexpr size_t max_skill_description_chars = 1024;
constexpr size_t max_skill_file_bytes = 1024 * 1024;
constexpr size_t max_skill_name_chars = 64;

/// The subdirectories supporting files may live in.
const std::vector<std::string>& skill_file_dirs();

/// `$MIBYAN_HOME/skills`.
std::string local_skills_root(const std::string& home);

/// local_skills_root then `skills.external_dirs` (~ expanded).
std::vector<std::string> skill_roots(const std::string& home,
                                     const options& cfg);

/// Parses SKILL.md text into a skill_info with name, description, tags,
/// related_skills and required_env set (the rest empty). Fails with
/// invalid_argument and a validation message: frontmatter must start the
/// file with `---`, be a YAML mapping with `name` and `description` (at
/// most 1,024 characters), and be followed by a non-empty body; the whole
/// text is at most 100,000 characters.
result<skill_info> parse_skill_md(const std::string& text);

/// Every skill under `roots` (SKILL.md at depth 1 or 2), sorted by name;
/// a name seen in an earlier root hides later ones. Unparseable skills are
/// skipped.
std::vector<skill_info> scan_skills(const std::vector<std::string>& roots);

/// The skill called `name`, if any.
std::optional<skill_info> find_skill(const std::vector<std::string>& roots,
                                     const std::string& name);

/// Succeeds when `name` is a valid skill name (^[a-z0-9][a-z0-9._-]*$, at
/// most 64 characters), else invalid_argument with why not.
status check_skill_name(const std::string& name);

/// Resolves `rel` inside skill directory `dir`: `rel` must be relative,
/// must not leave `dir` (no "..", no symlink pointing out), and, when
/// `supporting_only`, must lie under one of skill_file_dirs(). Returns the
/// absolute path, or invalid_argument with why not.
result<std::string> skill_file_path(const std::string& dir,
                                    const std::string& rel,
                                    bool supporting_only);

/// The supporting files of skill directory `dir`, relative, sorted.
std::vector<std::string> skill_linked_files(const std::string& dir);

} // namespace mibyan
