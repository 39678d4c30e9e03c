#include "tests/support/proc_counts.hpp"

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <vector>

namespace mibyan::test {

namespace {

long count_dir(const std::string& path) {
  long n = 0;
  if (DIR* d = ::opendir(path.c_str())) {
    while (auto* e = ::readdir(d))
      if (e->d_name[0] != '.')
        ++n;
    ::closedir(d);
  }
  return n;
}

} // namespace

long open_fds() { return count_dir("/proc/self/fd") - 1; } // minus opendir's

long thread_count() { return count_dir("/proc/self/task"); }

std::string list_fds() {
  std::string out;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (auto* e = ::readdir(d)) {
      if (e->d_name[0] == '.')
        continue;
      char target[256] = {0};
      std::string p = std::string{"/proc/self/fd/"} + e->d_name;
      if (::readlink(p.c_str(), target, sizeof target - 1) > 0)
        out += std::string{" "} + e->d_name + "=" + target;
    }
    ::closedir(d);
  }
  return out;
}

children_info children() {
  children_info out;
  std::vector<std::string> pids;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (auto* e = ::readdir(d)) {
      if (e->d_name[0] == '.')
        continue;
      std::ifstream in{std::string{"/proc/self/task/"} + e->d_name
                       + "/children"};
      std::string pid;
      while (in >> pid)
        pids.push_back(pid);
    }
    ::closedir(d);
  }
  for (auto& pid : pids) {
    std::ifstream st{"/proc/" + pid + "/stat"};
    std::string text;
    std::getline(st, text);
    auto close = text.rfind(')');
    char state = close != std::string::npos && close + 2 < text.size()
                   ? text[close + 2]
                   : '?';
    if (state == 'Z')
      ++out.zombies;
    else
      ++out.live;
  }
  return out;
}

} // namespace mibyan::test
