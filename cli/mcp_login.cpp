// `mibyan mcp login NAME` / `mibyan mcp logout NAME` (cli/mcp_login.hpp).
//
// The redirect listener is a plain blocking socket on 127.0.0.1: this is a
// one-shot command, nothing else runs meanwhile. It accepts connections
// until the authorization response arrives or --timeout passes; each
// connection gets 10 s to send its request line and at most 16 KiB.
#include "cli/mcp_login.hpp"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/options.hpp"
#include "tools/mcp/mcp_oauth_client.hpp"

extern char** environ;

namespace mibyan::cli {

namespace {

using clock_type = std::chrono::steady_clock;

const mcp_server_options* find_server(const options& opts,
                                      const std::string& name) {
  for (auto& s : opts.mcp_servers)
    if (s.name == name)
      return &s;
  return nullptr;
}

// A listening socket on 127.0.0.1:port (0 = any); -1 and errno on failure.
int listen_loopback(int port, int& bound) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0
      || ::listen(fd, 8) != 0) {
    int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  bound = ntohs(a.sin_port);
  return fd;
}

// Reads the request head of one connection (bounded in time and size).
std::string read_head(int fd) {
  std::string head;
  auto until = clock_type::now() + std::chrono::seconds{10};
  char buf[2048];
  while (head.find("\r\n\r\n") == std::string::npos
         && head.find("\n\n") == std::string::npos && head.size() < 16384) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  until - clock_type::now())
                  .count();
    if (left <= 0)
      break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0)
      break;
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0)
      break;
    head.append(buf, static_cast<size_t>(n));
  }
  return head;
}

void respond(int fd, int status, const std::string& text) {
  std::string reason = status == 200 ? "OK" : status == 404 ? "Not Found"
                                                             : "Bad Request";
  std::string body = "<!doctype html><meta charset=utf-8><title>Mibyan</title>"
                     "<p>" + text + "</p>";
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason
                    + "\r\nContent-Type: text/html; charset=utf-8\r\n"
                      "Cache-Control: no-store\r\nConnection: close\r\n"
                      "Content-Length: "
                    + std::to_string(body.size()) + "\r\n\r\n" + body;
  size_t done = 0;
  while (done < out.size()) {
    auto n = ::send(fd, out.data() + done, out.size() - done, MSG_NOSIGNAL);
    if (n <= 0)
      break;
    done += static_cast<size_t>(n);
  }
}

// xdg-open when it is on PATH and a display is there; never required.
void try_browser(const std::string& url) {
  if (std::getenv("DISPLAY") == nullptr
      && std::getenv("WAYLAND_DISPLAY") == nullptr)
    return;
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "";
  bool found = false;
  size_t i = 0;
  while (i <= p.size() && !found) {
    auto colon = p.find(':', i);
    if (colon == std::string::npos)
      colon = p.size();
    auto dir = p.substr(i, colon - i);
    found = !dir.empty() && ::access((dir + "/xdg-open").c_str(), X_OK) == 0;
    i = colon + 1;
  }
  if (!found)
    return;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::string prog = "xdg-open";
  char* argv[] = {prog.data(), const_cast<char*>(url.c_str()), nullptr};
  pid_t pid;
  if (posix_spawnp(&pid, "xdg-open", &fa, nullptr, argv, environ) == 0) {
    // xdg-open returns quickly; reap it without waiting for long.
    for (int k = 0; k < 50; ++k) {
      int st;
      if (::waitpid(pid, &st, WNOHANG) != 0)
        break;
      ::usleep(20000);
    }
  }
  posix_spawn_file_actions_destroy(&fa);
}

bool parse_int(const std::string& s, long lo, long hi, long& out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || errno != 0 || *end != '\0' || v < lo || v > hi)
    return false;
  out = v;
  return true;
}

} // namespace

int mcp_login(const options& opts, const std::vector<std::string>& args) {
  std::string name;
  long port = -1, timeout = 300;
  bool browser = true;
  for (size_t i = 0; i < args.size(); ++i) {
    auto& a = args[i];
    if (a == "--no-browser") {
      browser = false;
    } else if (a == "--port" && i + 1 < args.size()) {
      if (!parse_int(args[++i], 0, 65535, port)) {
        std::cerr << "mibyan mcp login: --port needs 0..65535\n";
        return 2;
      }
    } else if (a == "--timeout" && i + 1 < args.size()) {
      if (!parse_int(args[++i], 1, 86400, timeout)) {
        std::cerr << "mibyan mcp login: --timeout needs 1..86400 seconds\n";
        return 2;
      }
    } else if (name.empty() && !a.empty() && a[0] != '-') {
      name = a;
    } else {
      std::cerr << "usage: mibyan mcp login NAME [--port N] [--timeout S] "
                   "[--no-browser]\n";
      return 2;
    }
  }
  if (name.empty()) {
    std::cerr << "usage: mibyan mcp login NAME [--port N] [--timeout S] "
                 "[--no-browser]\n";
    return 2;
  }
  auto conf = find_server(opts, name);
  if (conf == nullptr) {
    std::cerr << "mibyan mcp login: no server '" << name
              << "' under mcp_servers\n";
    return 2;
  }
  if (conf->transport == "stdio") {
    std::cerr << "mibyan mcp login: '" << name
              << "' is a stdio server; OAuth applies to HTTP servers only "
                 "(a stdio server takes its credentials from env)\n";
    return 2;
  }
  if (!mcp_oauth_applies(*conf)) {
    std::cerr << "mibyan mcp login: '" << name
              << "' has OAuth turned off (oauth.enabled: false) or a "
                 "configured Authorization header\n";
    return 2;
  }
  auto oauth = mcp_oauth_for(*conf, opts);
  auto probed = oauth->probe();
  if (!probed) {
    std::cerr << "mibyan mcp login: cannot reach " << name << ": "
              << probed.error << "\n";
    return 1;
  }
  if (probed->status / 100 == 2 && !probed->challenge.present) {
    std::cout << "MCP server " << name
              << " answered without authorization; no login is needed.\n";
    return 0;
  }
  auto found = oauth->discover(probed->challenge);
  if (!found) {
    std::cerr << "mibyan mcp login: " << found.error << "\n";
    return 1;
  }
  int bound = 0;
  int lfd = listen_loopback(port >= 0 ? static_cast<int>(port)
                                      : oauth->redirect_port(),
                            bound);
  if (lfd < 0) {
    std::cerr << "mibyan mcp login: cannot listen on 127.0.0.1 for the "
                 "redirect: "
              << std::strerror(errno) << "\n";
    return 1;
  }
  auto redirect = "http://127.0.0.1:" + std::to_string(bound) + "/callback";
  auto pending = oauth->begin(*found, redirect);
  if (!pending) {
    ::close(lfd);
    std::cerr << "mibyan mcp login: " << pending.error << "\n";
    return 1;
  }
  std::cout << "Authorization server: " << found->issuer << "\n"
            << "Scope: " << (pending->scope.empty() ? "(none)" : pending->scope)
            << "\n"
            << "Open this URL in a browser to authorize Mibyan:\n\n  "
            << pending->url << "\n\n"
            << "Waiting for the redirect to " << redirect << " ..."
            << std::endl;
  if (browser)
    try_browser(pending->url);
  auto deadline = clock_type::now() + std::chrono::seconds{timeout};
  int rc = -1;
  while (rc < 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - clock_type::now())
                  .count();
    if (left <= 0) {
      std::cerr << "mibyan mcp login: no authorization response within "
                << timeout << " s\n";
      rc = 1;
      break;
    }
    pollfd p{lfd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<long>(left, 1000))) <= 0)
      continue;
    int cfd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (cfd < 0)
      continue;
    auto head = read_head(cfd);
    // "GET /callback?code=...&state=... HTTP/1.1"
    auto sp1 = head.find(' ');
    auto sp2 = sp1 == std::string::npos ? sp1 : head.find(' ', sp1 + 1);
    std::string target = sp2 == std::string::npos
                           ? std::string{}
                           : head.substr(sp1 + 1, sp2 - sp1 - 1);
    auto q = target.find('?');
    auto path = target.substr(0, q);
    if (head.compare(0, 4, "GET ") != 0 || path != "/callback") {
      respond(cfd, 404, "Not found.");
      ::close(cfd);
      continue;
    }
    auto query = parse_query(q == std::string::npos ? std::string_view{}
                                                    : std::string_view{target}
                                                        .substr(q + 1));
    if (query.count("code") == 0 && query.count("error") == 0) {
      respond(cfd, 400, "This is not an authorization response.");
      ::close(cfd);
      continue;
    }
    auto st = oauth->finish(*pending, query);
    if (st) {
      respond(cfd, 200, "Mibyan is authorized. You can close this tab.");
      std::cout << "Logged in to MCP server " << name << "; tokens stored in "
                << oauth->token_path() << " (mode 0600).\n";
      rc = 0;
    } else {
      respond(cfd, 400, "The authorization failed; see the terminal.");
      std::cerr << "mibyan mcp login: " << st.error << "\n";
      rc = 1;
    }
    ::close(cfd);
  }
  ::close(lfd);
  return rc;
}

int mcp_logout(const options& opts, const std::vector<std::string>& args) {
  if (args.size() != 1) {
    std::cerr << "usage: mibyan mcp logout NAME\n";
    return 2;
  }
  auto conf = find_server(opts, args[0]);
  if (conf == nullptr) {
    std::cerr << "mibyan mcp logout: no server '" << args[0]
              << "' under mcp_servers\n";
    return 2;
  }
  auto oauth = mcp_oauth_for(*conf, opts);
  if (oauth->logout())
    std::cout << "Removed the stored tokens of MCP server " << args[0] << ".\n";
  else
    std::cout << "MCP server " << args[0] << " had no stored tokens.\n";
  return 0;
}

} // namespace mibyan::cli
