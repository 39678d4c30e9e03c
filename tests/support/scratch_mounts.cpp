#include "tests/support/scratch_mounts.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mibyan::test {

std::string incompressible_bytes(size_t n) {
  std::string out(n, '\0');
  uint64_t x = 88172645463325252ull;
  for (auto& ch : out) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    ch = static_cast<char>(x);
  }
  return out;
}

tmpfs_mount::tmpfs_mount(std::string dir, size_t bytes) : dir_(std::move(dir)) {
  auto opts = "size=" + std::to_string(bytes) + ",mode=0700";
  if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, opts.c_str()) == 0)
    mounted_ = true;
  else
    why_ = std::string{"cannot mount a tmpfs: "} + std::strerror(errno);
}

tmpfs_mount::~tmpfs_mount() {
  if (mounted_)
    ::umount2(dir_.c_str(), MNT_DETACH);
}

readonly_dir::readonly_dir(std::string dir) : dir_(std::move(dir)) {
  if (::geteuid() == 0) {
    if (::mount(dir_.c_str(), dir_.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      why_ = std::string{"cannot bind-mount: "} + std::strerror(errno);
      return;
    }
    bind_ = true;
    if (::mount(nullptr, dir_.c_str(), nullptr,
                MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr)
        != 0) {
      why_ = std::string{"cannot remount read-only: "} + std::strerror(errno);
      return;
    }
    ok_ = true;
    return;
  }
  if (::chmod(dir_.c_str(), 0555) == 0) {
    chmod_ = true;
    ok_ = true;
  } else {
    why_ = std::string{"cannot chmod: "} + std::strerror(errno);
  }
}

readonly_dir::~readonly_dir() {
  if (bind_)
    ::umount2(dir_.c_str(), MNT_DETACH);
  if (chmod_)
    ::chmod(dir_.c_str(), 0755);
}

} // namespace mibyan::test
