#include "config/yaml_checks.hpp"

#include <map>

#include <yaml-cpp/yaml.h>

namespace mibyan {

namespace {

constexpr int max_depth = 64;

std::string line_of(const YAML::Mark& mark) {
  return mark.line < 0 ? std::string{"?"} : std::to_string(mark.line + 1);
}

std::string walk(const YAML::Node& node, const std::string& path,
                 const std::string& origin, int depth) {
  if (depth > max_depth)
    return {};
  if (node.IsMap()) {
    std::map<std::string, YAML::Mark> seen;
    for (const auto& kv : node) {
      // Non-scalar keys cannot name an option; the loader reports them.
      std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
      auto child = path.empty() ? key : path + "." + key;
      if (kv.first.IsScalar()) {
        auto [it, fresh] = seen.emplace(key, kv.first.Mark());
        if (!fresh)
          return origin
                 + (kv.first.Mark().line < 0 ? std::string{}
                                             : ":" + line_of(kv.first.Mark()))
                 + ": " + child + ": duplicate key (first given at line "
                 + line_of(it->second) + ")";
      }
      if (auto e = walk(kv.second, child, origin, depth + 1); !e.empty())
        return e;
    }
  } else if (node.IsSequence()) {
    size_t i = 0;
    for (const auto& item : node) {
      auto child = path + "[" + std::to_string(i++) + "]";
      if (auto e = walk(item, child, origin, depth + 1); !e.empty())
        return e;
    }
  }
  return {};
}

} // namespace

std::string find_duplicate_key(const YAML::Node& root,
                               const std::string& origin) {
  return walk(root, "", origin, 0);
}

} // namespace mibyan
