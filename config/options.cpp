#include "config/options.hpp"

#include <cstdlib>

namespace mibyan {

std::string options::secret(const std::string& name) const {
  if (const char* v = std::getenv(name.c_str()); v != nullptr && *v != '\0')
    return v;
  if (auto i = env_file.find(name); i != env_file.end())
    return i->second;
  return {};
}

} // namespace mibyan
