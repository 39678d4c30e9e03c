#include "tests/support/pid_namespace.hpp"

#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <dirent.h>
#include <unistd.h>

namespace mibyan::test {

namespace {

std::string read_link(const std::string& path) {
  char buf[PATH_MAX];
  auto n = ::readlink(path.c_str(), buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string{};
}

std::string slurp_small(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool alive(int pid) {
  if (::kill(pid, 0) != 0)
    return false;
  auto stat = slurp_small("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return close == std::string::npos || stat.size() < close + 3
         || (stat[close + 2] != 'Z' && stat[close + 2] != 'X');
}

template <class F>
void each_pid(F f) {
  DIR* d = ::opendir("/proc");
  if (d == nullptr)
    return;
  while (auto* e = ::readdir(d))
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
      if (!f(std::atoi(e->d_name)))
        break;
  ::closedir(d);
}

} // namespace

std::string own_pid_ns() {
  return read_link("/proc/self/ns/pid");
}

bool pid_ns_has_processes(const std::string& ns) {
  bool found = false;
  each_pid([&](int pid) {
    if (read_link("/proc/" + std::to_string(pid) + "/ns/pid") == ns
        && alive(pid))
      found = true;
    return !found;
  });
  return found;
}

bool wait_gone(const std::string& ns, int pid,
               std::chrono::milliseconds limit) {
  bool own = ns.empty() || ns == own_pid_ns();
  auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    bool gone = own ? !alive(pid) : !pid_ns_has_processes(ns);
    if (gone)
      return true;
    if (std::chrono::steady_clock::now() >= until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int host_pid(const std::string& ns, int pid) {
  if (ns.empty() || ns == own_pid_ns())
    return pid;
  int result = -1;
  each_pid([&](int p) {
    if (read_link("/proc/" + std::to_string(p) + "/ns/pid") != ns)
      return true;
    auto status = slurp_small("/proc/" + std::to_string(p) + "/status");
    auto at = status.find("\nNSpid:");
    if (at == std::string::npos)
      return true;
    auto end = status.find('\n', at + 1);
    std::istringstream in(status.substr(at + 7, end - at - 7));
    int v = 0, last = -1;
    while (in >> v)
      last = v;
    if (last == pid)
      result = p;
    return result < 0;
  });
  return result;
}

} // namespace mibyan::test
