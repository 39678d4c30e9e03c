// File: tools/line_index.hpp
//
// A sparse line index of a text file, and a small cache of them, so that
// reading lines [N, N + k) of a large file costs about the bytes of those
// lines instead of the bytes before them.
//
// An index holds the byte offset of every few lines (a checkpoint at least
// every `line_stride` lines and every `byte_stride` bytes) plus the total
// line count. It is built in one streaming pass over fixed-size blocks,
// counting newlines with memchr; the file is never held in memory whole and
// the index itself stays under `max_checkpoints` entries (strides double
// when a file has more lines than that).
//
// Lines are counted like the read_file tool shows them: every '\n' ends a
// line, and bytes after the last '\n' form one more line. An empty file has
// 0 lines; "a\nb" and "a\nb\n" both have 2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <sys/stat.h>

namespace mibyan {

/// What identifies one version of a file: a cached index is used only while
/// every field still matches `fstat` of the open file.
struct file_version {
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;

  /// Returns the version described by `st`.
  static file_version of(const struct stat& st);

  bool operator==(const file_version& o) const {
    return device == o.device && inode == o.inode && size == o.size
           && mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns;
  }
  bool operator!=(const file_version& o) const { return !(*this == o); }
};

/// A 64-bit hash of a byte stream fed in pieces of any size (the same bytes
/// give the same value however they are split). Not cryptographic: it tells
/// an unchanged file from a changed one (tools/read_tracker.hpp).
class content_hasher {
public:
  void update(const char* data, size_t n);
  uint64_t value() const;

private:
  void mix(uint64_t word);

  uint64_t h_ = 0x9e3779b97f4a7c15ull;
  uint64_t total_ = 0;
  unsigned char pending_[8] = {};
  size_t fill_ = 0;
};

/// A line that starts at a known byte offset.
struct line_checkpoint {
  int64_t line = 1;   // 1-indexed line number
  int64_t offset = 0; // byte offset of its first byte
};

/// A sparse line index of the first `size` bytes of a file. Immutable once
/// built; safe to share between threads.
struct line_index {
  /// Checkpoints in increasing line order; the first is always {1, 0}.
  std::vector<line_checkpoint> checkpoints;
  /// Number of lines in the indexed bytes.
  int64_t total_lines = 0;
  /// Number of bytes indexed.
  int64_t size = 0;
  /// CLOCK_REALTIME (ns) just before the pass over the file started.
  int64_t built_at_ns = 0;
  /// content_hasher's value of the indexed bytes, when the file had at
  /// most line_index_limits::hash_max_bytes.
  std::optional<uint64_t> content_hash;

  /// Returns the last checkpoint at or before `line` (line >= 1).
  line_checkpoint nearest(int64_t line) const;
};

/// Tuning of `build_line_index`; the defaults suit read_file.
struct line_index_limits {
  int64_t line_stride = 1024;
  int64_t byte_stride = 1 << 20;
  size_t max_checkpoints = 8192;
  size_t block_bytes = 256 * 1024;
  /// Files of at most this many bytes also get their content hash.
  int64_t hash_max_bytes = 0;
};

/// Builds the index of the first `size` bytes of the open file `fd` (read
/// with pread; the file position is not used). Returns nullptr and sets
/// `err` to an errno value when a read fails, or to ECANCELED when
/// `should_stop` (called before each block; may be empty) returned true.
/// A file shorter than `size` is indexed up to its end (`size` then says
/// how much was indexed).
std::shared_ptr<const line_index>
build_line_index(int fd, int64_t size, const std::function<bool()>& should_stop,
                 int& err, const line_index_limits& limits = {});

/// A bounded LRU cache of line indexes keyed by file identity (device and
/// inode, so every path or link to a file shares one entry) and validated
/// against the file's size, mtime and ctime. Thread-safe.
///
/// An index whose file was modified too shortly before the index was built
/// is not stored ("racy": a later same-size write within the same timestamp
/// tick could leave the version unchanged). The window is 50 ms for
/// sub-second timestamps and 2 s when the file system stores whole seconds.
class line_index_cache {
public:
  explicit line_index_cache(size_t capacity = 64);

  /// Returns the index stored for `v`'s file when its version still equals
  /// `v`; otherwise drops any stale entry for the file and returns nullptr.
  std::shared_ptr<const line_index> find(const file_version& v);

  /// Stores `idx` for `v` (replacing the file's previous entry, evicting the
  /// least recently used one when full) unless it is racy or does not cover
  /// exactly `v.size` bytes. Returns whether it was stored.
  bool insert(const file_version& v, std::shared_ptr<const line_index> idx);

  /// Number of stored entries.
  size_t size() const;

private:
  using file_id = std::pair<uint64_t, uint64_t>; // device, inode

  struct entry {
    file_version version;
    std::shared_ptr<const line_index> index;
    std::list<file_id>::iterator lru_pos;
  };

  size_t capacity_;
  mutable std::mutex mtx_;
  std::list<file_id> lru_; // most recently used first
  std::map<file_id, entry> entries_;
};

} // namespace mibyan
