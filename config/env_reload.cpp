#include "config/env_reload.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "base/errno_status.hpp"
#include "config/loader.hpp"

namespace mibyan {

status reload_env_file(options& o) {
  if (o.home.empty())
    return {};
  auto path = o.home + "/.env";
  if (const char* v = std::getenv("MIBYAN_ENV"); v && *v)
    path = v;
  std::ifstream in{path, std::ios::binary};
  if (!in) {
    if (errno == ENOENT) {
      o.env_file.clear();
      return {};
    }
    return errno_status(errno, "cannot read " + path);
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::map<std::string, std::string> fresh;
  std::vector<std::string> warnings; // reported once, at start-up
  parse_env_file(text.str(), fresh, &warnings);
  o.env_file = std::move(fresh);
  return {};
}

} // namespace mibyan
