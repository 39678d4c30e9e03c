// The scheduler lease (runtime/cron_lease.hpp).
#include "runtime/cron_lease.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace mibyan {

namespace {

std::string lock_path(const std::string& store_dir) {
  return store_dir + "/cron.lock";
}

} // namespace

result<std::unique_ptr<cron_lease>>
cron_lease::try_acquire(const std::string& store_dir,
                        const std::string& holder) {
  auto path = lock_path(store_dir);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return status::failure(errno == EACCES ? status_code::permission_denied
                                           : status_code::unavailable,
                           "cannot open " + path + ": "
                             + std::strerror(errno));
  // flock locks belong to the open file description: a second open in
  // this process conflicts as another process would.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      auto who = holder_of(store_dir);
      return status::failure(status_code::unavailable,
                             "the scheduler of this store runs elsewhere"
                               + (who.empty() ? std::string{}
                                              : " (" + who + ")"));
    }
    return status::failure(status_code::unavailable,
                           "cannot lock " + path + ": " + std::strerror(err));
  }
  // The description is advisory; a failed write does not cost the lease.
  if (::ftruncate(fd, 0) == 0) {
    auto text = holder + "\n";
    auto n = ::pwrite(fd, text.data(), text.size(), 0);
    (void)n;
  }
  return std::unique_ptr<cron_lease>(new cron_lease(fd));
}

std::string cron_lease::holder_of(const std::string& store_dir) {
  int fd = ::open(lock_path(store_dir).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return {};
  char buf[256];
  auto n = ::pread(fd, buf, sizeof buf, 0);
  ::close(fd);
  if (n <= 0)
    return {};
  std::string s(buf, static_cast<size_t>(n));
  auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

cron_lease::~cron_lease() {
  if (fd_ >= 0) {
    // Cleared first, so a reader never names a holder that is gone.
    if (::ftruncate(fd_, 0) != 0) {
    }
    ::close(fd_);
  }
}

} // namespace mibyan
