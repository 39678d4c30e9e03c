// Job changes across processes (runtime/cron_changes.hpp).
#include "runtime/cron_changes.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

namespace mibyan {

namespace {

constexpr const char* changed_name = "cron.changed";

} // namespace

status cron_signal_change(const std::string& store_dir) {
  auto path = store_dir + "/" + changed_name;
  // Opening for writing and closing is the event (IN_CLOSE_WRITE); the
  // file stays empty.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return status::failure(status_code::unavailable,
                           "cannot signal a job change (" + path + "): "
                             + std::strerror(errno));
  ::close(fd);
  return {};
}

result<std::unique_ptr<cron_change_watcher>>
cron_change_watcher::start(const std::string& store_dir,
                           std::function<void()> on_change) {
  std::unique_ptr<cron_change_watcher> w{new cron_change_watcher};
  w->dir_ = store_dir;
  w->file_ = changed_name;
  w->on_change_ = std::move(on_change);
  w->inotify_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  w->wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (w->inotify_ < 0 || w->wake_ < 0)
    return status::failure(status_code::resource_exhausted,
                           std::string{"cannot watch job changes: "}
                             + std::strerror(errno));
  // The directory, not the file: a file removed and made again is still
  // seen. LMDB's own writes (IN_MODIFY) are not in the mask.
  w->wd_ = ::inotify_add_watch(w->inotify_, store_dir.c_str(),
                               IN_CLOSE_WRITE | IN_ATTRIB | IN_MOVED_TO
                                 | IN_CREATE);
  if (w->wd_ < 0)
    return status::failure(status_code::unavailable,
                           "cannot watch " + store_dir + ": "
                             + std::strerror(errno));
  auto* raw = w.get();
  w->thread_ = std::thread([raw] { raw->run(); });
  return w;
}

void cron_change_watcher::run() {
  alignas(inotify_event) char buf[4096];
  for (;;) {
    pollfd fds[2] = {{inotify_, POLLIN, 0}, {wake_, POLLIN, 0}};
    auto n = ::poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    if (fds[1].revents != 0)
      return;
    bool ours = false;
    for (;;) {
      auto got = ::read(inotify_, buf, sizeof buf);
      if (got <= 0)
        break;
      for (char* p = buf; p < buf + got;) {
        auto* ev = reinterpret_cast<inotify_event*>(p);
        if (ev->len > 0 && file_ == ev->name)
          ours = true;
        if (ev->mask & IN_IGNORED) // the directory went away
          return;
        p += sizeof(inotify_event) + ev->len;
      }
    }
    if (ours && on_change_)
      on_change_();
  }
}

cron_change_watcher::~cron_change_watcher() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    auto n = ::write(wake_, &one, sizeof one);
    (void)n;
    thread_.join();
  }
  if (inotify_ >= 0)
    ::close(inotify_);
  if (wake_ >= 0)
    ::close(wake_);
}

} // namespace mibyan
