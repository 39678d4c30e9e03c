// File: config/secret_literals.hpp
//
// The values of secret configuration keys, collected when config.yaml is
// parsed so that the runtime's redactor replaces them wherever they occur
// (docs/configuration.md, "Secrets in config.yaml"): server.key,
// cluster.key, and every key anywhere in the file whose last word is key,
// token, secret, password, passwd, passphrase, apikey, credential(s),
// auth, authorization, cookie or dsn (mcp_servers env and headers
// included). Values that are paths, variable references or placeholders
// are left out, and so are keys naming a file, path, directory,
// certificate or variable (tls_key, *_file, *_env, ...).
//
// Pure; thread-safe. yaml-cpp may throw; callers are inside the loader's
// try block.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace YAML {
class Node;
}

namespace mibyan {

/// Whether a configuration key called `name` holds a secret value.
bool is_secret_config_key(std::string_view name);

/// Appends ("section.key", value) for every secret value in `root` (the
/// parsed config.yaml) to `out`.
void collect_secret_literals(const YAML::Node& root,
                             std::vector<std::pair<std::string,
                                                   std::string>>& out);

} // namespace mibyan
