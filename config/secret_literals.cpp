#include "config/secret_literals.hpp"

#include <yaml-cpp/yaml.h>

#include "base/redact_names.hpp"
#include "base/strings.hpp"

namespace mibyan {

namespace {

using namespace std::string_view_literals;

// The last word of a key: split at _ . - and camelCase humps, lower-cased.
std::string last_word(std::string_view name) {
  size_t b = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c == '_' || c == '.' || c == '-' || c == ' ')
      b = i + 1;
    else if (redact_detail::is_upper(c) && i > 0
             && redact_detail::is_lower(name[i - 1]))
      b = i;
  }
  return strings::lower(name.substr(b));
}

// A value that names something instead of holding a secret.
bool not_a_secret_value(std::string_view v) {
  if (v.empty() || v.front() == '/' || v.rfind("~/", 0) == 0
      || v.rfind("./", 0) == 0 || v.rfind("../", 0) == 0)
    return true;
  return redact_detail::is_placeholder_value(v);
}

// The credential in an Authorization-style value ("Bearer x" -> "x").
std::string_view credential_part(std::string_view v) {
  auto sp = v.find(' ');
  if (sp == std::string_view::npos)
    return v;
  auto scheme = strings::lower(v.substr(0, sp));
  if (scheme == "bearer" || scheme == "basic" || scheme == "token") {
    v.remove_prefix(sp + 1);
    while (!v.empty() && v.front() == ' ')
      v.remove_prefix(1);
  }
  return v;
}

void walk(const YAML::Node& node, const std::string& path, bool secret,
          std::vector<std::pair<std::string, std::string>>& out) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      if (!kv.first.IsScalar())
        continue;
      auto key = kv.first.Scalar();
      walk(kv.second, path.empty() ? key : path + "." + key,
           is_secret_config_key(key), out);
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node)
      walk(item, path, secret, out);
  } else if (node.IsScalar() && secret) {
    auto v = credential_part(node.Scalar());
    if (!not_a_secret_value(v))
      out.emplace_back(path, std::string{v});
  }
}

} // namespace

bool is_secret_config_key(std::string_view name) {
  if (name.empty() || name.size() > 64)
    return false;
  auto l = strings::lower(name);
  for (auto s : {"_file"sv, "_path"sv, "_dir"sv, "_cert"sv, "_sock"sv,
                 "_socket"sv, "_env"sv, "_var"sv, "_variable"sv, "_name"sv})
    if (strings::ends_with(l, s))
      return false;
  if (l.rfind("tls_", 0) == 0 || l.rfind("tls-", 0) == 0
      || l.find("public") != std::string::npos)
    return false;
  auto w = last_word(name);
  for (auto s : {"key"sv, "token"sv, "secret"sv, "password"sv, "passwd"sv,
                 "passphrase"sv, "apikey"sv, "credential"sv, "credentials"sv,
                 "auth"sv, "authorization"sv, "cookie"sv, "dsn"sv})
    if (w == s)
      return true;
  // apiKey-style words glued together (accesstoken, clientsecret).
  for (auto s : {"apikey"sv, "token"sv, "secret"sv, "password"sv})
    if (w.size() > s.size() && strings::ends_with(w, s))
      return true;
  return false;
}

void collect_secret_literals(
  const YAML::Node& root,
  std::vector<std::pair<std::string, std::string>>& out) {
  walk(root, "", false, out);
}

} // namespace mibyan
