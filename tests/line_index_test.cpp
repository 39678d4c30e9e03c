// The line index of read_file (tools/line_index.hpp): line counts and
// checkpoints as read_file shows lines, partial and stopped builds, read
// errors, and the cache (versions, racy indexes, LRU eviction, threads).
#define BOOST_TEST_MODULE line_index
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/line_texts.hpp"
#include "tests/support/temp_dir.hpp"
#include "tools/line_index.hpp"

using namespace mibyan;
using mibyan::test::lines_file;
using mibyan::test::split_lines;
using mibyan::test::varied_text;
namespace fs = std::filesystem;

namespace {

// Opens a file for reading; closes it on destruction.
struct open_file {
  int fd;
  explicit open_file(const std::string& path)
    : fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
  }
  ~open_file() {
    if (fd >= 0)
      ::close(fd);
  }
};

// Returns "" when `idx` correctly indexes `text`, else what is wrong.
std::string index_problem(const line_index& idx, const std::string& text) {
  auto lines = static_cast<int64_t>(split_lines(text).size());
  if (idx.total_lines != lines)
    return "total_lines " + std::to_string(idx.total_lines) + ", want "
           + std::to_string(lines);
  if (idx.size != static_cast<int64_t>(text.size()))
    return "size " + std::to_string(idx.size);
  if (idx.checkpoints.empty() || idx.checkpoints[0].line != 1
      || idx.checkpoints[0].offset != 0)
    return "first checkpoint is not {1, 0}";
  for (size_t i = 1; i < idx.checkpoints.size(); ++i) {
    auto cp = idx.checkpoints[i];
    if (cp.line <= idx.checkpoints[i - 1].line
        || cp.offset <= idx.checkpoints[i - 1].offset)
      return "checkpoints not increasing at " + std::to_string(i);
    if (cp.offset >= static_cast<int64_t>(text.size()) || cp.line > lines)
      return "checkpoint past the end at " + std::to_string(i);
    if (text[static_cast<size_t>(cp.offset - 1)] != '\n')
      return "checkpoint " + std::to_string(i) + " not at a line start";
    auto before = std::count(text.begin(), text.begin() + cp.offset, '\n');
    if (before != cp.line - 1)
      return "checkpoint " + std::to_string(i) + " names line "
             + std::to_string(cp.line) + ", is line "
             + std::to_string(before + 1);
  }
  for (int64_t l = 1; l <= lines; l += 1 + l / 7) {
    auto cp = idx.nearest(l);
    auto next = std::upper_bound(
      idx.checkpoints.begin(), idx.checkpoints.end(), l,
      [](int64_t x, const line_checkpoint& c) { return x < c.line; });
    if (cp.line > l || (next != idx.checkpoints.begin()
                        && (next - 1)->line != cp.line))
      return "nearest(" + std::to_string(l) + ") is not the closest";
  }
  return {};
}

std::shared_ptr<const line_index> index_text(const std::string& path,
                                             const std::string& text,
                                             const line_index_limits& lim) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  open_file f{path};
  int err = -1;
  auto idx = build_line_index(f.fd, static_cast<int64_t>(text.size()), {},
                              err, lim);
  if (idx == nullptr || err != 0)
    return nullptr;
  return idx;
}

std::shared_ptr<line_index> fake_index(int64_t size, int64_t built_at_ns) {
  auto idx = std::make_shared<line_index>();
  idx->checkpoints.push_back(line_checkpoint{1, 0});
  idx->size = size;
  idx->built_at_ns = built_at_ns;
  return idx;
}

file_version version(uint64_t inode, int64_t size, int64_t mtime_ns) {
  file_version v;
  v.device = 7;
  v.inode = inode;
  v.size = size;
  v.mtime_ns = mtime_ns;
  v.ctime_ns = mtime_ns;
  return v;
}

constexpr int64_t sec = 1000000000;

} // namespace

BOOST_AUTO_TEST_SUITE(line_index_unit)

BOOST_AUTO_TEST_CASE(counts_lines_like_read_file_shows_them) {
  mibyan::test::temp_dir dir;
  auto path = dir / "t.txt";
  std::pair<const char*, int64_t> cases[] = {
    {"", 0},     {"a", 1},      {"a\n", 1},         {"a\nb", 2},
    {"\n", 1},   {"\n\n", 2},   {"a\r\nb\r\n", 2},  {"a\r\nb\r", 2},
    {"x\n\ny", 3},
  };
  for (auto& [text, lines] : cases) {
    auto idx = index_text(path, text, {});
    BOOST_REQUIRE(idx != nullptr);
    BOOST_TEST(idx->total_lines == lines, "text '" << text << "'");
    BOOST_TEST(index_problem(*idx, text) == "");
    BOOST_TEST(idx->checkpoints.size() == 1u);
  }
}

BOOST_AUTO_TEST_CASE(checkpoints_name_line_starts) {
  mibyan::test::temp_dir dir;
  auto path = dir / "t.txt";
  auto text = varied_text(5000, "\r\n", 2500) + "no newline";
  // Small blocks and strides: lines cross block boundaries, both strides
  // trigger and the checkpoint list is thinned several times.
  line_index_limits lim;
  lim.line_stride = 3;
  lim.byte_stride = 200;
  lim.max_checkpoints = 16;
  lim.block_bytes = 4096;
  auto idx = index_text(path, text, lim);
  BOOST_REQUIRE(idx != nullptr);
  BOOST_TEST(index_problem(*idx, text) == "");
  BOOST_TEST(idx->checkpoints.size() <= 16u);
  BOOST_TEST(idx->checkpoints.size() >= 8u);
  // Default limits: a checkpoint at least every 1024 lines.
  text = varied_text(30000);
  idx = index_text(path, text, {});
  BOOST_REQUIRE(idx != nullptr);
  BOOST_TEST(index_problem(*idx, text) == "");
  for (size_t i = 1; i < idx->checkpoints.size(); ++i)
    BOOST_TEST(idx->checkpoints[i].line - idx->checkpoints[i - 1].line
               <= 1024);
  auto last = idx->checkpoints.back();
  BOOST_TEST(idx->total_lines - last.line < 1024);
  // Very many tiny lines stay within max_checkpoints.
  text = std::string(3000000, '\n');
  idx = index_text(path, text, {});
  BOOST_REQUIRE(idx != nullptr);
  BOOST_TEST(idx->total_lines == 3000000);
  BOOST_TEST(idx->checkpoints.size() <= 8192u);
  BOOST_TEST(idx->checkpoints.size() > 1000u);
  BOOST_TEST(index_problem(*idx, text) == "");
}

BOOST_AUTO_TEST_CASE(indexes_only_the_bytes_asked_for_or_present) {
  mibyan::test::temp_dir dir;
  auto path = dir / "t.txt";
  std::ofstream(path, std::ios::binary) << "one\ntwo\nthree\nfour";
  open_file f{path};
  int err = -1;
  auto idx = build_line_index(f.fd, 8, {}, err);
  BOOST_REQUIRE(idx != nullptr);
  BOOST_TEST(err == 0);
  BOOST_TEST(idx->size == 8);
  BOOST_TEST(idx->total_lines == 2);
  idx = build_line_index(f.fd, 1000, {}, err);
  BOOST_REQUIRE(idx != nullptr);
  BOOST_TEST(idx->size == 18);
  BOOST_TEST(idx->total_lines == 4);
}

BOOST_AUTO_TEST_CASE(stops_when_asked_and_reports_read_errors) {
  mibyan::test::temp_dir dir;
  auto path = dir / "t.txt";
  std::ofstream(path, std::ios::binary) << lines_file(100000);
  open_file f{path};
  int calls = 0;
  int err = 0;
  line_index_limits lim;
  lim.block_bytes = 4096;
  auto idx = build_line_index(
    f.fd, static_cast<int64_t>(fs::file_size(path)),
    [&] { return ++calls > 3; }, err, lim);
  BOOST_TEST(idx == nullptr);
  BOOST_TEST(err == ECANCELED);
  BOOST_TEST(calls == 4);
  idx = build_line_index(-1, 100, {}, err);
  BOOST_TEST(idx == nullptr);
  BOOST_TEST(err == EBADF);
  // A directory cannot be read.
  open_file d{dir.path()};
  idx = build_line_index(d.fd, 100, {}, err);
  BOOST_TEST(idx == nullptr);
  BOOST_TEST(err == EISDIR);
}

BOOST_AUTO_TEST_CASE(cache_returns_only_the_matching_version) {
  line_index_cache cache{8};
  int64_t t = 1700000000 * sec + 5;
  auto v = version(1, 100, t);
  auto idx = fake_index(100, t + sec);
  BOOST_TEST(cache.insert(v, idx));
  BOOST_TEST(cache.find(v) == idx);
  BOOST_TEST(cache.size() == 1u);
  // Any differing field misses and drops the stale entry.
  auto changed = [&](auto edit) {
    auto w = v;
    edit(w);
    BOOST_TEST(cache.insert(v, idx));
    bool missed = cache.find(w) == nullptr;
    bool dropped = cache.find(v) == nullptr;
    return missed && (dropped || w.inode != v.inode
                      || w.device != v.device);
  };
  BOOST_TEST(changed([](file_version& w) { w.size = 101; }));
  BOOST_TEST(changed([](file_version& w) { w.mtime_ns += 1; }));
  BOOST_TEST(changed([](file_version& w) { w.ctime_ns += 1; }));
  BOOST_TEST(changed([](file_version& w) { w.inode = 2; }));
  BOOST_TEST(changed([](file_version& w) { w.device = 8; }));
  // An index covering other bytes than the version's size is refused.
  BOOST_TEST(!cache.insert(version(3, 99, t), idx));
  BOOST_TEST(!cache.insert(v, nullptr));
  BOOST_TEST(cache.find(version(3, 99, t)) == nullptr);
}

BOOST_AUTO_TEST_CASE(cache_refuses_racy_indexes) {
  line_index_cache cache{8};
  int64_t t = 1700000000 * sec + 5;
  // Sub-second timestamps: 50 ms.
  BOOST_TEST(!cache.insert(version(1, 10, t), fake_index(10, t)));
  BOOST_TEST(!cache.insert(version(1, 10, t), fake_index(10, t + sec / 25)));
  BOOST_TEST(cache.insert(version(1, 10, t), fake_index(10, t + sec / 10)));
  // Built before the change (clock skew): never stored.
  BOOST_TEST(!cache.insert(version(2, 10, t), fake_index(10, t - sec)));
  // Whole-second timestamps: 2 s.
  int64_t whole = 1700000000 * sec;
  BOOST_TEST(!cache.insert(version(3, 10, whole),
                           fake_index(10, whole + sec)));
  BOOST_TEST(cache.insert(version(3, 10, whole),
                          fake_index(10, whole + 3 * sec)));
  // The later of mtime and ctime counts.
  auto v = version(4, 10, t);
  v.ctime_ns = t + 10 * sec;
  BOOST_TEST(!cache.insert(v, fake_index(10, t + sec)));
  BOOST_TEST(cache.size() == 2u);
}

BOOST_AUTO_TEST_CASE(cache_evicts_the_least_recently_used) {
  line_index_cache cache{2};
  int64_t t = 1700000000 * sec + 5;
  auto a = version(1, 10, t), b = version(2, 10, t), c = version(3, 10, t);
  auto ia = fake_index(10, t + sec), ib = fake_index(10, t + sec),
       ic = fake_index(10, t + sec);
  BOOST_TEST(cache.insert(a, ia));
  BOOST_TEST(cache.insert(b, ib));
  BOOST_TEST(cache.find(a) == ia); // a is now the most recent
  BOOST_TEST(cache.insert(c, ic));
  BOOST_TEST(cache.size() == 2u);
  BOOST_TEST(cache.find(b) == nullptr);
  BOOST_TEST(cache.find(a) == ia);
  BOOST_TEST(cache.find(c) == ic);
  // Re-inserting a file replaces its entry instead of adding one.
  auto a2 = version(1, 10, t + 1);
  auto ia2 = fake_index(10, t + sec);
  BOOST_TEST(cache.insert(a2, ia2));
  BOOST_TEST(cache.size() == 2u);
  BOOST_TEST(cache.find(a2) == ia2);
  BOOST_TEST(cache.find(c) == ic);
  line_index_cache none{0};
  BOOST_TEST(!none.insert(a, ia));
  BOOST_TEST(none.find(a) == nullptr);
}

BOOST_AUTO_TEST_CASE(cache_is_thread_safe) {
  line_index_cache cache{16};
  int64_t t = 1700000000 * sec + 5;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 6; ++th)
    threads.emplace_back([&, th] {
      for (int i = 0; i < 20000; ++i) {
        auto inode = static_cast<uint64_t>((i * 7 + th) % 40);
        auto v = version(inode, static_cast<int64_t>(inode) + 1, t);
        if (auto found = cache.find(v)) {
          if (found->size != static_cast<int64_t>(inode) + 1)
            ++wrong;
        } else {
          cache.insert(v, fake_index(v.size, t + sec));
        }
      }
    });
  for (auto& th : threads)
    th.join();
  BOOST_TEST(wrong.load() == 0);
  BOOST_TEST(cache.size() <= 16u);
}

BOOST_AUTO_TEST_SUITE_END()
