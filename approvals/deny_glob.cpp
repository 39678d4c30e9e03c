#include "approvals/deny_glob.hpp"

#include <fnmatch.h>

namespace mibyan::approvals {

bool glob_matches(const std::string& glob, const std::string& text) {
  if (glob.empty())
    return false;
  return ::fnmatch(glob.c_str(), text.c_str(), FNM_CASEFOLD) == 0;
}

std::string first_matching_glob(const std::vector<std::string>& globs,
                                const std::vector<std::string>& texts) {
  for (auto& g : globs)
    for (auto& t : texts)
      if (glob_matches(g, t))
        return g;
  return {};
}

} // namespace mibyan::approvals
