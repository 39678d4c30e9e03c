#include "kernels/staging_dirs.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace mibyan {

namespace {

constexpr const char* prefix = "mibyan_kernel_";

// Parses "<digits>" from `s` at `i` up to `stop`; false if none.
bool parse_number(const std::string& s, size_t& i, char stop, uint64_t& out) {
  size_t b = i;
  out = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - b < 20)
    out = out * 10 + static_cast<uint64_t>(s[i++] - '0');
  if (i == b || i >= s.size() || s[i] != stop)
    return false;
  ++i;
  return true;
}

} // namespace

std::string staging_base() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

uint64_t process_start_time(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/stat"};
  std::string stat;
  if (!std::getline(in, stat))
    return 0;
  auto rp = stat.rfind(')'); // the command name may hold spaces and ')'
  if (rp == std::string::npos)
    return 0;
  std::istringstream fields{stat.substr(rp + 1)};
  std::string f;
  // Fields after the name start at 3 (state); the start time is field 22.
  for (int k = 3; k <= 22; ++k)
    if (!(fields >> f))
      return 0;
  return std::strtoull(f.c_str(), nullptr, 10);
}

std::string staging_dir_template() {
  auto pid = ::getpid();
  return staging_base() + "/" + prefix + std::to_string(pid) + "_"
         + std::to_string(process_start_time(pid)) + "_XXXXXX";
}

size_t sweep_stale_staging_dirs(const std::string& base_arg) {
  auto base = base_arg.empty() ? staging_base() : base_arg;
  DIR* d = ::opendir(base.c_str());
  if (d == nullptr)
    return 0;
  std::vector<std::string> stale;
  const std::string pre = prefix;
  while (auto* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.compare(0, pre.size(), pre) != 0)
      continue;
    size_t i = pre.size();
    uint64_t pid = 0, start = 0;
    if (!parse_number(name, i, '_', pid) || !parse_number(name, i, '_', start)
        || i >= name.size() || pid == 0 || pid > 0x7fffffff)
      continue; // another form (an older version's name): not ours to judge
    auto path = base + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)
        || st.st_uid != ::geteuid())
      continue;
    auto now = process_start_time(static_cast<pid_t>(pid));
    if (now != 0 && now == start)
      continue; // the host is alive
    stale.push_back(path);
  }
  ::closedir(d);
  size_t removed = 0;
  for (auto& path : stale) {
    std::error_code ec;
    fs::remove_all(path, ec); // never follows symlinks inside
    removed += !ec;
  }
  return removed;
}

} // namespace mibyan
