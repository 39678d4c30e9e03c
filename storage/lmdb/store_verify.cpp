#include "storage/lmdb/store_verify.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mibyan {

namespace {

// Layout of an LMDB meta page (lmdb.h's MDB_page header then MDB_meta, on
// a 64-bit build): the page header is 16 bytes; in the meta, the magic is
// at 0, the version at 4, the free DB's md_pad (the page size) at 24,
// mm_last_pg at 120 and mm_txnid at 128.
constexpr uint32_t lmdb_magic = 0xBEEFC0DE;
constexpr uint32_t lmdb_data_version = 1;
constexpr size_t off_magic = 16;
constexpr size_t off_version = 20;
constexpr size_t off_psize = 40;
constexpr size_t off_last_pg = 136;
constexpr size_t off_txnid = 144;
constexpr size_t meta_bytes = 152;

template <class T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

struct meta {
  bool ok = false;
  uint32_t psize = 0;
  uint64_t last_pg = 0;
  uint64_t txnid = 0;
};

meta read_meta(const unsigned char* p) {
  meta m;
  if (load<uint32_t>(p + off_magic) != lmdb_magic
      || load<uint32_t>(p + off_version) != lmdb_data_version)
    return m;
  m.psize = load<uint32_t>(p + off_psize);
  m.last_pg = load<uint64_t>(p + off_last_pg);
  m.txnid = load<uint64_t>(p + off_txnid);
  m.ok = m.psize >= 512 && m.psize <= 65536 && (m.psize & (m.psize - 1)) == 0;
  return m;
}

bool read_at(int fd, unsigned char* buf, size_t n, off_t at) {
  size_t done = 0;
  while (done < n) {
    auto r = ::pread(fd, buf + done, n - done, at + static_cast<off_t>(done));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    done += static_cast<size_t>(r);
  }
  return true;
}

std::string file_kind(mode_t m) {
  if (S_ISFIFO(m))
    return "a FIFO";
  if (S_ISLNK(m))
    return "a symbolic link";
  if (S_ISDIR(m))
    return "a directory";
  if (S_ISCHR(m) || S_ISBLK(m))
    return "a device";
  if (S_ISSOCK(m))
    return "a socket";
  return "not a regular file";
}

} // namespace

std::string verify_lmdb_files(const std::string& dir) {
  auto lock = dir + "/lock.mdb";
  struct stat st;
  if (::lstat(lock.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return lock + " is " + file_kind(st.st_mode)
           + "; the session store is damaged (move it away to start a new "
             "one)";
  auto data = dir + "/data.mdb";
  if (::lstat(data.c_str(), &st) != 0)
    return {}; // missing: LMDB creates it (or reports it when read-only)
  auto damaged = [&](const std::string& what) {
    return data + " " + what
           + "; the session store is damaged (restore it from a backup or "
             "move it away to start a new one)";
  };
  if (!S_ISREG(st.st_mode))
    return damaged("is " + file_kind(st.st_mode));
  int fd = ::open(data.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return "cannot open " + data + ": " + std::strerror(errno);
  if (::fstat(fd, &st) != 0 || st.st_size == 0) {
    ::close(fd);
    return {};
  }
  // The meta pages are read before the length: another process may be
  // committing, and LMDB writes a transaction's pages before the meta page
  // that counts them, so the length read afterwards covers what was read.
  unsigned char first[meta_bytes];
  meta m0, m1;
  bool short_file = !read_at(fd, first, meta_bytes, 0);
  if (!short_file)
    m0 = read_meta(first);
  if (!m0.ok) {
    ::close(fd);
    return damaged(short_file ? "is too short to be an LMDB file"
                              : "is not an LMDB data file (no valid "
                                "meta page: zeroed or overwritten)");
  }
  unsigned char second[meta_bytes];
  if (read_at(fd, second, meta_bytes, static_cast<off_t>(m0.psize)))
    m1 = read_meta(second);
  struct stat now;
  bool sized = ::fstat(fd, &now) == 0;
  ::close(fd);
  if (!m1.ok || m1.psize != m0.psize)
    return damaged("has a damaged second meta page (truncated or "
                   "overwritten)");
  auto size = static_cast<uint64_t>(sized ? now.st_size : st.st_size);
  const auto& newest = m1.txnid > m0.txnid ? m1 : m0;
  auto needed = (newest.last_pg + 1) * uint64_t{newest.psize};
  if (size < needed)
    return damaged("is truncated: " + std::to_string(size) + " bytes, but "
                   "its pages need " + std::to_string(needed));
  return {};
}

} // namespace mibyan
