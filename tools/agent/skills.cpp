#include "tools/agent/skills.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <yaml-cpp/yaml.h>

#include "config/options.hpp"
#include "tools/file_io.hpp"
#include "tools/agent/memory_store.hpp"

namespace fs = std::filesystem;

namespace mibyan {

namespace {

std::vector<std::string> string_list(const YAML::Node& node) {
  std::vector<std::string> out;
  if (!node)
    return out;
  if (node.IsScalar()) {
    // "a, b" or a single value.
    std::string cur;
    for (char c : node.Scalar() + ",") {
      if (c == ',') {
        auto b = cur.find_first_not_of(" \t");
        if (b != std::string::npos)
          out.push_back(cur.substr(b, cur.find_last_not_of(" \t") - b + 1));
        cur.clear();
      } else {
        cur += c;
      }
    }
    return out;
  }
  if (!node.IsSequence())
    return out;
  for (const auto& item : node) {
    if (item.IsScalar())
      out.push_back(item.Scalar());
    else if (item.IsMap() && item["name"] && item["name"].IsScalar())
      out.push_back(item["name"].Scalar()); // {name: VAR, prompt: ...}
  }
  return out;
}

bool valid_env_name(const std::string& n) {
  if (n.empty() || n.size() > 128 || (n[0] >= '0' && n[0] <= '9'))
    return false;
  for (char c : n)
    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
          || (c >= '0' && c <= '9')))
      return false;
  return true;
}

std::string expand_home(const std::string& p) {
  if (p == "~" || p.rfind("~/", 0) == 0)
    return resolve_path(p, "/");
  return p;
}

} // namespace

const std::vector<std::string>& skill_file_dirs() {
  static const std::vector<std::string> dirs{"references", "templates",
                                             "scripts", "assets"};
  return dirs;
}

std::string local_skills_root(const std::string& home) {
  return home + "/skills";
}

std::vector<std::string> skill_roots(const std::string& home,
                                     const options& cfg) {
  std::vector<std::string> out{local_skills_root(home)};
  for (auto& d : cfg.skills.external_dirs)
    if (!d.empty())
      out.push_back(resolve_path(expand_home(d), home));
  return out;
}

result<skill_info> parse_skill_md(const std::string& text) {
  auto bad = [](std::string msg) {
    return result<skill_info>::failure(status_code::invalid_argument,
                                       std::move(msg));
  };
  if (utf8_length(text) > max_skill_md_chars)
    return bad("SKILL.md is longer than 100,000 characters");
  if (text.rfind("---", 0) != 0)
    return bad("SKILL.md must start with YAML frontmatter: a line '---', "
               "the mapping (name, description, ...), then another '---'");
  auto first_nl = text.find('\n');
  if (first_nl == std::string::npos)
    return bad("SKILL.md frontmatter is not closed by a '---' line");
  size_t end = std::string::npos;
  size_t pos = first_nl + 1;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    auto line = text.substr(pos, nl == std::string::npos ? std::string::npos
                                                         : nl - pos);
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line == "---") {
      end = pos;
      break;
    }
    if (nl == std::string::npos)
      break;
    pos = nl + 1;
  }
  if (end == std::string::npos)
    return bad("SKILL.md frontmatter is not closed by a '---' line");
  auto yaml_text = text.substr(first_nl + 1, end - first_nl - 1);
  auto body_start = text.find('\n', end);
  std::string body = body_start == std::string::npos
                       ? std::string{}
                       : text.substr(body_start + 1);
  YAML::Node doc;
  try {
    doc = YAML::Load(yaml_text);
  } catch (const std::exception& e) {
    return bad(std::string{"SKILL.md frontmatter is not valid YAML: "}
               + e.what());
  }
  if (!doc.IsMap())
    return bad("SKILL.md frontmatter must be a YAML mapping");
  skill_info info;
  try {
    if (!doc["name"] || !doc["name"].IsScalar()
        || doc["name"].Scalar().empty())
      return bad("SKILL.md frontmatter needs a 'name'");
    if (!doc["description"] || !doc["description"].IsScalar()
        || doc["description"].Scalar().empty())
      return bad("SKILL.md frontmatter needs a 'description'");
    info.name = doc["name"].Scalar();
    info.description = doc["description"].Scalar();
    info.tags = string_list(doc["tags"]);
    info.related_skills = string_list(doc["related_skills"]);
    for (auto& n : string_list(doc["required_environment_variables"]))
      if (valid_env_name(n))
        info.required_env.push_back(n);
    // Nested metadata blocks some skills use.
    if (auto meta = doc["metadata"]; meta && meta.IsMap()) {
      if (info.tags.empty())
        info.tags = string_list(meta["tags"]);
      if (info.related_skills.empty())
        info.related_skills = string_list(meta["related_skills"]);
    }
  } catch (const std::exception& e) {
    return bad(std::string{"SKILL.md frontmatter: "} + e.what());
  }
  if (utf8_length(info.description) > max_skill_description_chars)
    return bad("the description is longer than 1,024 characters");
  if (body.find_first_not_of(" \t\r\n") == std::string::npos)
    return bad("SKILL.md needs a body after the frontmatter (the "
               "instructions)");
  return info;
}

std::vector<skill_info> scan_skills(const std::vector<std::string>& roots) {
  std::map<std::string, skill_info> found;
  for (size_t r = 0; r < roots.size(); ++r) {
    std::error_code ec;
    auto& root = roots[r];
    if (!fs::is_directory(root, ec))
      continue;
    auto consider = [&](const fs::path& dir, const std::string& category) {
      auto md = dir / "SKILL.md";
      std::error_code e2;
      if (!fs::is_regular_file(md, e2))
        return false;
      auto text = read_whole_file(md.string(), 4 * max_skill_md_chars);
      if (!text)
        return true;
      auto parsed = parse_skill_md(*text);
      if (!parsed)
        return true;
      auto& info = *parsed;
      // The directory name is the skill's name on disk.
      info.name = dir.filename().string();
      info.category = category;
      info.dir = dir.string();
      info.skill_md = md.string();
      info.root = root;
      info.external = r > 0;
      found.emplace(info.name, std::move(info));
      return true;
    };
    for (auto it = fs::directory_iterator(root, ec);
         !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (!it->is_directory(ec) || it->path().filename().string()[0] == '.')
        continue;
      if (consider(it->path(), ""))
        continue;
      std::error_code e3;
      for (auto jt = fs::directory_iterator(it->path(), e3);
           !e3 && jt != fs::directory_iterator(); jt.increment(e3))
        if (jt->is_directory(e3) && jt->path().filename().string()[0] != '.')
          consider(jt->path(), it->path().filename().string());
    }
  }
  std::vector<skill_info> out;
  for (auto& [name, info] : found)
    out.push_back(std::move(info));
  return out;
}

std::optional<skill_info> find_skill(const std::vector<std::string>& roots,
                                     const std::string& name) {
  for (auto& s : scan_skills(roots))
    if (s.name == name)
      return s;
  return std::nullopt;
}

status check_skill_name(const std::string& name) {
  auto bad = [](const char* msg) {
    return status::failure(status_code::invalid_argument, msg);
  };
  if (name.empty())
    return bad("name is required");
  if (name.size() > max_skill_name_chars)
    return bad("name is longer than 64 characters");
  auto ok_first = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  };
  if (!ok_first(name[0]))
    return bad("name must match ^[a-z0-9][a-z0-9._-]*$");
  for (char c : name)
    if (!(ok_first(c) || c == '.' || c == '_' || c == '-'))
      return bad("name must match ^[a-z0-9][a-z0-9._-]*$");
  if (name.find("..") != std::string::npos)
    return bad("name must not contain '..'");
  return {};
}

result<std::string> skill_file_path(const std::string& dir,
                                    const std::string& rel,
                                    bool supporting_only) {
  auto fail = [](std::string m) {
    return result<std::string>::failure(status_code::invalid_argument,
                                        std::move(m));
  };
  if (rel.empty())
    return fail("file_path is required");
  if (rel.find('\0') != std::string::npos || rel[0] == '/' || rel[0] == '~')
    return fail("file_path must be relative to the skill directory: " + rel);
  fs::path p{rel};
  for (auto& part : p)
    if (part == "..")
      return fail("file_path must stay inside the skill directory (no '..'): "
                  + rel);
  auto normal = p.lexically_normal();
  if (supporting_only) {
    auto first = normal.begin() == normal.end() ? std::string{}
                                                : normal.begin()->string();
    auto& dirs = skill_file_dirs();
    if (std::find(dirs.begin(), dirs.end(), first) == dirs.end()
        || std::distance(normal.begin(), normal.end()) < 2)
      return fail("supporting files live under references/, templates/, "
                  "scripts/ or assets/ of the skill: " + rel);
  }
  auto full = fs::path{dir} / normal;
  // A symlink (at any component) must not lead out of the skill.
  std::error_code ec;
  auto base = fs::weakly_canonical(dir, ec);
  auto real = fs::weakly_canonical(full, ec);
  if (ec)
    return fail("cannot resolve " + rel + ": " + ec.message());
  auto b = base.string() + "/";
  if (real.string().compare(0, b.size(), b) != 0)
    return fail("file_path leaves the skill directory: " + rel);
  return full.string();
}

std::vector<std::string> skill_linked_files(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& sub : skill_file_dirs()) {
    std::error_code ec;
    auto base = fs::path{dir} / sub;
    if (!fs::is_directory(base, ec))
      continue;
    for (auto it = fs::recursive_directory_iterator(base, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_regular_file(ec))
        out.push_back(fs::relative(it->path(), dir, ec).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace mibyan
