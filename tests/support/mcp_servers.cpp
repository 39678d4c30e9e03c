#include "tests/support/mcp_servers.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "base/subprocess.hpp"
#include "tests/support/missing_peer.hpp"
#include "tests/support/paths.hpp"

extern char** environ;

namespace mibyan::test {

std::string mcp_package_entry(const std::string& package) {
  return test_source_dir() + "/node/node_modules/@modelcontextprotocol/"
         + package + "/dist/index.js";
}

mcp_npm_presence::mcp_npm_presence() {
  std::string missing;
  if (find_executable("node").empty())
    missing = "node is not on PATH";
  for (auto p : {"server-everything", "server-filesystem"})
    if (missing.empty() && !std::filesystem::exists(mcp_package_entry(p)))
      missing = "@modelcontextprotocol/" + std::string{p}
                + " is not installed in tests/node/node_modules";
  if (missing.empty())
    return;
  exit_missing_peer(missing
                    + "; run scripts/install-test-deps.sh (docs/testing.md)");
}

mcp_server_options everything_stdio(const std::string& name) {
  mcp_server_options s;
  s.name = name;
  s.transport = "stdio";
  s.command = "node";
  s.args = {mcp_package_entry("server-everything"), "stdio"};
  s.connect_timeout = 60;
  s.timeout = 60;
  return s;
}

mcp_server_options filesystem_stdio(const std::string& root,
                                    const std::string& name) {
  mcp_server_options s;
  s.name = name;
  s.transport = "stdio";
  s.command = "node";
  s.args = {mcp_package_entry("server-filesystem"), root};
  // server-filesystem serves the client's roots instead of its arguments
  // when the client offers roots: the same directory.
  s.root_dirs = {root};
  s.connect_timeout = 60;
  s.timeout = 60;
  return s;
}

mcp_server_options misbehaving_stdio(const std::string& mode,
                                     const std::string& name) {
  mcp_server_options s;
  s.name = name;
  s.transport = "stdio";
  s.command = "python3";
  s.args = {test_source_dir() + "/support/mcp_misbehaving_server.py", mode};
  s.connect_timeout = 20;
  s.timeout = 20;
  return s;
}

namespace {

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

bool accepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

} // namespace

namespace {

// Spawns `args` in a process group of its own with PORT=<port> and waits
// until the port accepts (up to 60 s); the pid or -1.
int spawn_listening(const std::vector<std::string>& args, int port) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::string{*e}.rfind("PORT=", 0) != 0)
      env.emplace_back(*e);
  env.push_back("PORT=" + std::to_string(port));
  auto copy = args;
  std::vector<char*> argv, envp;
  for (auto& a : copy)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  auto exe = find_executable(args.front());
  if (::posix_spawn(&pid, exe.c_str(), nullptr, &attr, argv.data(),
                    envp.data())
      != 0)
    pid = -1;
  posix_spawnattr_destroy(&attr);
  for (int i = 0; i < 600 && pid > 0; ++i) { // up to 60 s on a busy box
    if (accepts(port))
      return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
  }
  return pid;
}

void kill_group(int pid) {
  if (pid > 0) {
    ::kill(-pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
  }
}

} // namespace

everything_http_server::everything_http_server(const std::string& mode,
                                               int port) {
  if (port == 0)
    port = free_port();
  port_ = port;
  pid_ = spawn_listening({"node", mcp_package_entry("server-everything"), mode},
                         port);
  if (pid_ > 0 && accepts(port))
    url_ = "http://127.0.0.1:" + std::to_string(port)
           + (mode == "sse" ? "/sse" : "/mcp");
}

everything_http_server::~everything_http_server() {
  kill_group(pid_);
}

scripted_http_server::scripted_http_server(std::vector<std::string> options) {
  port_ = free_port();
  std::vector<std::string> args = {
    "python3", test_source_dir() + "/support/mcp_http_script_server.py",
    "--port", std::to_string(port_)};
  for (auto& o : options)
    args.push_back(o);
  pid_ = spawn_listening(args, port_);
  if (pid_ > 0 && accepts(port_))
    url_ = "http://127.0.0.1:" + std::to_string(port_) + "/mcp";
}

scripted_http_server::~scripted_http_server() {
  kill_group(pid_);
}

} // namespace mibyan::test
