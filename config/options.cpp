#include "config/options.hpp"

#include <cstdlib>

#include "base/credential_vault.hpp"

namespace mibyan {

std::string options::secret(const std::string& name) const {
  if (auto v = credential_value(name); !v.empty())
    return v; // the environment, or the sealed copy (credential_vault)
  if (auto i = env_file.find(name); i != env_file.end())
    return i->second;
  return {};
}

} // namespace mibyan
