#include "kernels/direct_writes.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace mibyan {

std::string unix_socket_path(int fd) {
  sockaddr_un addr{};
  socklen_t len = sizeof addr;
  if (fd < 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                  != 0
      || addr.sun_family != AF_UNIX || len <= sizeof(sa_family_t))
    return {};
  auto n = static_cast<size_t>(len) - sizeof(sa_family_t);
  return std::string{addr.sun_path, strnlen(addr.sun_path, n)};
}

int dup_unix_connection(long long candidate, const std::string& local_path) {
  if (candidate < 0 || candidate > 1 << 30 || local_path.empty())
    return -1;
  auto fd = static_cast<int>(candidate);
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
    return -1;
  int type = 0;
  socklen_t len = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0
      || type != SOCK_STREAM)
    return -1;
  if (unix_socket_path(fd) != local_path)
    return -1;
  // Connected, not the listener: it has a peer.
  sockaddr_un peer{};
  socklen_t plen = sizeof peer;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0)
    return -1;
  return ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

size_t send_now(int fd, const char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    auto n = ::send(fd, data + done, size - done,
                    MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    done += static_cast<size_t>(n);
  }
  return done;
}

void close_fd(int fd) {
  if (fd >= 0)
    ::close(fd);
}

} // namespace mibyan
