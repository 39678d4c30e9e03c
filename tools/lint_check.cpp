#include "tools/lint_check.hpp"

#include <cctype>
#include <exception>

#include <yaml-cpp/yaml.h>

namespace mibyan {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  if (s.size() < suffix.size())
    return false;
  for (size_t i = 0; i < suffix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(
          s[s.size() - suffix.size() + i]))
        != suffix[i])
      return false;
  return true;
}

} // namespace

bool has_syntax_check(const std::string& path) {
  return ends_with(path, ".json") || ends_with(path, ".yaml")
         || ends_with(path, ".yml");
}

std::optional<std::string> syntax_error(const std::string& path,
                                        std::string_view content) {
  if (ends_with(path, ".json")) {
    auto parsed = json::parse(content);
    if (!parsed)
      return "JSON syntax error: " + parsed.error;
    return std::nullopt;
  }
  if (ends_with(path, ".yaml") || ends_with(path, ".yml")) {
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
