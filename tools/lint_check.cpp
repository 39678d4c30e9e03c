#include "tools/lint_check.hpp"

#include <cctype>
#include <exception>

#include <yaml-cpp/yaml.h>

#include "base/strings.hpp"

namespace mibyan {

namespace {

// Whether the path's extension is `suffix` (lower case), ignoring case.
bool has_extension(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size()
         && strings::iequals(std::string_view{s}.substr(s.size()
                                                        - suffix.size()),
                             suffix);
}

} // namespace

bool has_syntax_check(const std::string& path) {
  return has_extension(path, ".json") || has_extension(path, ".yaml")
         || has_extension(path, ".yml");
}

std::optional<std::string> syntax_error(const std::string& path,
                                        std::string_view content) {
  if (has_extension(path, ".json")) {
    auto parsed = json::parse(content);
    if (!parsed)
      return "JSON syntax error: " + parsed.error;
    return std::nullopt;
  }
  if (has_extension(path, ".yaml") || has_extension(path, ".yml")) {
    try {
      YAML::LoadAll(std::string{content});
    } catch (const YAML::Exception& e) {
      return std::string{"YAML syntax error: "} + e.what();
    } catch (const std::exception& e) {
      return std::string{"YAML syntax error: "} + e.what();
    }
  }
  return std::nullopt;
}

json::value lint_delta(const std::string& path,
                       const std::optional<std::string>& before,
                       std::string_view after) {
  auto err = syntax_error(path, after);
  if (!err)
    return nullptr;
  if (before && syntax_error(path, *before))
    return nullptr;
  json::value out;
  out["status"] = "error";
  out["output"] = *err;
  return out;
}

} // namespace mibyan
