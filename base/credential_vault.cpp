#include "base/credential_vault.hpp"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "base/env_filter.hpp"

extern char** environ;

namespace mibyan {

namespace {

std::mutex vault_mtx;

std::map<std::string, std::string>& vault() {
  static std::map<std::string, std::string> v;
  return v;
}

// The address range of the environment strings the process started with
// (fields env_start and env_end of /proc/self/stat); {0, 0} if unknown.
std::pair<uintptr_t, uintptr_t> initial_env_range() {
  int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return {0, 0};
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0)
    text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  auto paren = text.rfind(')');
  if (paren == std::string::npos)
    return {0, 0};
  // Field 3 (state) follows ") "; env_start and env_end are fields 50, 51.
  std::vector<std::string> fields;
  size_t pos = paren + 2;
  while (pos < text.size()) {
    auto end = text.find(' ', pos);
    if (end == std::string::npos)
      end = text.size();
    fields.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  if (fields.size() < 49)
    return {0, 0};
  return {std::strtoull(fields[47].c_str(), nullptr, 10),
          std::strtoull(fields[48].c_str(), nullptr, 10)};
}

} // namespace

void seal_credentials() {
  std::lock_guard<std::mutex> guard{vault_mtx};
  auto range = initial_env_range();
  std::vector<std::string> names;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr || eq == *e)
      continue;
    std::string name{*e, static_cast<size_t>(eq - *e)};
    if (!is_provider_credential(name))
      continue;
    vault()[name] = eq + 1;
    names.push_back(name);
    // The original string lives in the range /proc/PID/environ shows;
    // unsetenv would only drop the pointer to it.
    auto addr = reinterpret_cast<uintptr_t>(*e);
    if (range.first != 0 && addr >= range.first && addr < range.second) {
      char* value = const_cast<char*>(eq + 1);
      std::memset(value, 'x', std::strlen(value));
    }
  }
  for (auto& n : names)
    ::unsetenv(n.c_str());
}

std::string credential_value(const std::string& name) {
  if (const char* v = std::getenv(name.c_str()); v != nullptr && *v != '\0')
    return v;
  std::lock_guard<std::mutex> guard{vault_mtx};
  auto i = vault().find(name);
  return i == vault().end() ? std::string{} : i->second;
}

} // namespace mibyan
