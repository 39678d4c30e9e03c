#include "base/private_file.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errno_status.hpp"

namespace mibyan {

status make_private_dirs(const std::string& dir) {
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    auto partial = dir.substr(0, pos);
    if (partial.empty() || partial == "/")
      continue;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST)
      return errno_status(errno, "cannot create " + partial);
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return status::failure(status_code::invalid_argument,
                           dir + " is not a directory");
  return {};
}

status write_private_file(const std::string& path, std::string_view data,
                          bool exclusive) {
  int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC
              | (exclusive ? O_EXCL : O_TRUNC);
  int fd = ::open(path.c_str(), flags, 0600);
  if (fd < 0)
    return errno_status(errno, "cannot open " + path);
  ::fchmod(fd, 0600); // an existing file keeps its old mode otherwise
  auto fail = [&](int err) {
    ::close(fd);
    ::unlink(path.c_str());
    return errno_status(err, "cannot write " + path);
  };
  size_t done = 0;
  while (done < data.size()) {
    auto n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return fail(n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    auto err = errno;
    ::unlink(path.c_str());
    return errno_status(err, "cannot write " + path);
  }
  return {};
}

} // namespace mibyan
