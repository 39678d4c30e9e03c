#include "tools/line_index.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include <unistd.h>

namespace mibyan {

namespace {

constexpr int64_t ns_per_s = 1000000000;

int64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * ns_per_s + ts.tv_nsec;
}

int64_t to_ns(const timespec& ts) {
  return static_cast<int64_t>(ts.tv_sec) * ns_per_s + ts.tv_nsec;
}

// Keeps every other checkpoint (always the first).
void thin(std::vector<line_checkpoint>& cps) {
  size_t out = 0;
  for (size_t i = 0; i < cps.size(); i += 2)
    cps[out++] = cps[i];
  cps.resize(out);
}

} // namespace

file_version file_version::of(const struct stat& st) {
  file_version v;
  v.device = static_cast<uint64_t>(st.st_dev);
  v.inode = static_cast<uint64_t>(st.st_ino);
  v.size = static_cast<int64_t>(st.st_size);
  v.mtime_ns = to_ns(st.st_mtim);
  v.ctime_ns = to_ns(st.st_ctim);
  return v;
}

line_checkpoint line_index::nearest(int64_t line) const {
  auto i = std::upper_bound(checkpoints.begin(), checkpoints.end(), line,
                            [](int64_t l, const line_checkpoint& c) {
                              return l < c.line;
                            });
  if (i == checkpoints.begin())
    return line_checkpoint{};
  return *(i - 1);
}

void content_hasher::mix(uint64_t word) {
  h_ ^= word * 0x87c37b91114253d5ull;
  h_ = ((h_ << 31) | (h_ >> 33)) * 0x4cf5ad432745937full;
}

void content_hasher::update(const char* data, size_t n) {
  total_ += n;
  if (fill_ > 0) {
    size_t take = std::min(n, sizeof pending_ - fill_);
    std::memcpy(pending_ + fill_, data, take);
    fill_ += take;
    data += take;
    n -= take;
    if (fill_ < sizeof pending_)
      return;
    uint64_t w;
    std::memcpy(&w, pending_, sizeof w);
    mix(w);
    fill_ = 0;
  }
  for (; n >= 8; data += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, data, sizeof w);
    mix(w);
  }
  std::memcpy(pending_, data, n);
  fill_ = n;
}

uint64_t content_hasher::value() const {
  content_hasher last = *this;
  uint64_t w = 0;
  std::memcpy(&w, pending_, fill_);
  last.mix(w ^ (static_cast<uint64_t>(fill_) << 56));
  uint64_t h = last.h_ ^ total_;
  // MurmurHash3's finaliser.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

std::shared_ptr<const line_index>
build_line_index(int fd, int64_t size, const std::function<bool()>& should_stop,
                 int& err, const line_index_limits& limits) {
  err = 0;
  auto idx = std::make_shared<line_index>();
  idx->built_at_ns = realtime_ns();
  auto& cps = idx->checkpoints;
  cps.push_back(line_checkpoint{1, 0});
  int64_t line_stride = std::max<int64_t>(1, limits.line_stride);
  int64_t byte_stride = std::max<int64_t>(1, limits.byte_stride);
  size_t max_cps = std::max<size_t>(2, limits.max_checkpoints);
  size_t block = std::max<size_t>(4096, limits.block_bytes);
  std::unique_ptr<char[]> buf{new char[block]};
  line_checkpoint last_cp = cps.back();
  int64_t newlines = 0;
  int64_t pos = 0;
  char last_byte = '\n';
  std::optional<content_hasher> hasher;
  if (size <= limits.hash_max_bytes)
    hasher.emplace();
  while (pos < size) {
    if (should_stop && should_stop()) {
      err = ECANCELED;
      return nullptr;
    }
    auto want = static_cast<size_t>(
      std::min<int64_t>(static_cast<int64_t>(block), size - pos));
    auto n = ::pread(fd, buf.get(), want, static_cast<off_t>(pos));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      err = errno;
      return nullptr;
    }
    if (n == 0)
      break; // the file shrank since it was measured
    const char* base = buf.get();
    const char* p = base;
    const char* end = base + n;
    if (hasher)
      hasher->update(base, static_cast<size_t>(n));
    for (;;) {
      auto nl = static_cast<const char*>(
        std::memchr(p, '\n', static_cast<size_t>(end - p)));
      if (nl == nullptr)
        break;
      ++newlines;
      int64_t start = pos + (nl - base) + 1;
      if (newlines + 1 - last_cp.line >= line_stride
          || start - last_cp.offset >= byte_stride) {
        last_cp = line_checkpoint{newlines + 1, start};
        cps.push_back(last_cp);
        if (cps.size() > max_cps) {
          thin(cps);
          last_cp = cps.back();
          line_stride *= 2;
          byte_stride *= 2;
        }
      }
      p = nl + 1;
    }
    last_byte = end[-1];
    pos += n;
  }
  // A checkpoint at the very end names a line that does not exist.
  if (cps.size() > 1 && cps.back().offset >= pos)
    cps.pop_back();
  idx->size = pos;
  if (hasher)
    idx->content_hash = hasher->value();
  idx->total_lines = newlines + (pos > 0 && last_byte != '\n' ? 1 : 0);
  return idx;
}

line_index_cache::line_index_cache(size_t capacity) : capacity_(capacity) {
  // nop
}

std::shared_ptr<const line_index>
line_index_cache::find(const file_version& v) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = entries_.find(file_id{v.device, v.inode});
  if (i == entries_.end())
    return nullptr;
  if (i->second.version != v) {
    lru_.erase(i->second.lru_pos);
    entries_.erase(i);
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, i->second.lru_pos);
  return i->second.index;
}

bool line_index_cache::insert(const file_version& v,
                              std::shared_ptr<const line_index> idx) {
  if (idx == nullptr || idx->size != v.size || capacity_ == 0)
    return false;
  bool whole_seconds = v.mtime_ns % ns_per_s == 0
                       && v.ctime_ns % ns_per_s == 0;
  int64_t racy_window = whole_seconds ? 2 * ns_per_s : ns_per_s / 20;
  if (std::max(v.mtime_ns, v.ctime_ns) + racy_window > idx->built_at_ns)
    return false;
  std::lock_guard<std::mutex> guard{mtx_};
  file_id id{v.device, v.inode};
  auto i = entries_.find(id);
  if (i != entries_.end()) {
    i->second.version = v;
    i->second.index = std::move(idx);
    lru_.splice(lru_.begin(), lru_, i->second.lru_pos);
    return true;
  }
  if (entries_.size() >= capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(id);
  entries_.emplace(id, entry{v, std::move(idx), lru_.begin()});
  return true;
}

size_t line_index_cache::size() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return entries_.size();
}

} // namespace mibyan
