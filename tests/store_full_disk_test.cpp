// A full disk (issue 14, item 11): a message that cannot be stored stops
// the turn, and `mibyan sessions delete` still works. The store directory
// is a small tmpfs mounted for the test (CI runs as root); without the
// right to mount, the cases say so and are skipped.
#define BOOST_TEST_MODULE store_full_disk
#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "agent/turn_result.hpp"
#include "base/json.hpp"
#include "runtime/runtime.hpp"
#include "storage/session_store.hpp"
#include "storage/lmdb/space_reserve.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A tmpfs of `mb` MiB mounted at `dir` for the object's lifetime.
struct small_fs {
  std::string dir;
  bool mounted = false;
  std::string why;

  small_fs(const std::string& at, int mb) : dir(at) {
    ::mkdir(dir.c_str(), 0700);
    auto opts = "size=" + std::to_string(mb) + "m,mode=0700";
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, opts.c_str()) == 0)
      mounted = true;
    else
      why = std::strerror(errno);
  }
  ~small_fs() {
    if (mounted)
      ::umount2(dir.c_str(), MNT_DETACH);
  }

  uint64_t free_bytes() const {
    struct statvfs vs;
    if (::statvfs(dir.c_str(), &vs) != 0)
      return 0;
    return static_cast<uint64_t>(vs.f_bavail) * vs.f_frsize;
  }

  // Fills the file system with a filler file until `leave` bytes are free
  // (0: until write fails with ENOSPC).
  void fill(uint64_t leave = 0) {
    int fd = ::open((dir + "/filler").c_str(),
                    O_WRONLY | O_CREAT | O_APPEND, 0600);
    BOOST_REQUIRE(fd >= 0);
    std::string block(4096, 'f');
    while (free_bytes() > leave) {
      if (::write(fd, block.data(), block.size()) <= 0)
        break;
    }
    ::fsync(fd);
    ::close(fd);
  }
};

#define REQUIRE_MOUNTED(fs)                                                   \
  if (!(fs).mounted) {                                                        \
    BOOST_TEST_MESSAGE("SKIPPED: cannot mount a small tmpfs here ("           \
                       << (fs).why << "); full-disk behaviour not tested");   \
    std::cerr << "SKIPPED: cannot mount a tmpfs: " << (fs).why << "\n";       \
    return;                                                                   \
  }

std::string completion(const std::string& content, const std::string& call_id,
                       const std::string& command) {
  json::value msg;
  msg["role"] = "assistant";
  if (call_id.empty()) {
    msg["content"] = content;
  } else {
    msg["content"] = json::value{};
    json::value tc;
    tc["id"] = call_id;
    tc["type"] = "function";
    tc["function"]["name"] = "terminal";
    json::value args;
    args["command"] = command;
    tc["function"]["arguments"] = args.dump();
    msg["tool_calls"] = json::value::make_array();
    msg["tool_calls"].push_back(std::move(tc));
  }
  json::value choice;
  choice["index"] = 0;
  choice["message"] = std::move(msg);
  choice["finish_reason"] = call_id.empty() ? "stop" : "tool_calls";
  json::value body;
  body["id"] = "x";
  body["object"] = "chat.completion";
  body["model"] = "m";
  body["choices"] = json::value::make_array();
  body["choices"].push_back(std::move(choice));
  return body.dump();
}

} // namespace

BOOST_AUTO_TEST_CASE(a_failed_persist_stops_the_turn) {
  test::temp_dir home;
  test::http_server server;
  small_fs fs{session_store::default_dir(home.path()), 24};
  REQUIRE_MOUNTED(fs);
  options opts;
  opts.home = home.path();
  opts.agent.api_max_retries = 1;
  std::string err;
  auto made = create_runtime(opts);
  BOOST_REQUIRE_MESSAGE(made, made.error);
  auto rt = std::move(*made);
  // The store is open; leave about 1 MiB free.
  fs.fill(1 << 20);
  // 40 rounds of ~45 KB tool output: far more than fits.
  json::value s;
  s["path"] = "/v1/chat/completions";
  s["status"] = 200;
  s["body"] = completion("", "call_1",
                         "head -c 45000 /dev/urandom | base64 -w 100");
  s["times"] = 40;
  server.script(s.dump());
  s["body"] = completion("all done", "", "");
  s["times"] = 1;
  server.script(s.dump());
  turn_call c;
  c.prompt = "fill the disk";
  c.provider.provider = "custom";
  c.provider.base_url = server.url("/v1");
  c.provider.model = "m";
  c.provider.api_key = "sk-test-0123456789";
  c.stream = false;
  c.max_iterations = 60;
  auto out = rt->run_turn(c);
  BOOST_REQUIRE_MESSAGE(out.started, out.error);
  auto res = json::parse(turn_result_json(out).dump());
  BOOST_REQUIRE(res);
  auto& r = *res.v;
  BOOST_CHECK(r["failed"].as_bool());
  BOOST_CHECK(!r["completed"].as_bool());
  auto error = r["error"].is_string() ? r["error"].as_string() : "";
  BOOST_CHECK_MESSAGE(contains(error, "cannot store"), error);
  // The turn stopped at the first failed write instead of going on.
  auto reqs = json::parse(server.requests());
  BOOST_REQUIRE(reqs);
  BOOST_CHECK_LT(reqs.v->size(), 40u);
  rt.reset();
}

BOOST_AUTO_TEST_CASE(sessions_delete_works_on_a_full_disk) {
  test::temp_dir home;
  small_fs fs{session_store::default_dir(home.path()), 24};
  REQUIRE_MOUNTED(fs);
  std::string rejected;
  {
    session_store_options so;
    so.dir = fs.dir;
    auto store = session_store::open(so);
    BOOST_REQUIRE_MESSAGE(store, store.error);
    new_session a;
    a.id = "big";
    BOOST_REQUIRE((*store)->create_session(a));
    // Grow the store until the disk is full.
    std::string text;
    for (int i = 0; i < 20000; ++i)
      text += "word" + std::to_string(i) + " ";
    for (int i = 0; i < 2000; ++i) {
      chat_message m{"user", std::to_string(i) + " " + text, {}, "", "", "",
                     "", 0};
      auto st = (*store)->append_message("big", m);
      if (!st) {
        rejected = st.error;
        break;
      }
    }
    BOOST_REQUIRE_MESSAGE(!rejected.empty(), "the disk never filled up");
    BOOST_TEST_MESSAGE("append failed as expected: " << rejected);
  }
  fs.fill(); // whatever is left
  BOOST_CHECK_LT(fs.free_bytes(), 64u * 1024);
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  auto r = test::run_mibyan({"sessions", "delete", "big"}, po);
  BOOST_CHECK_MESSAGE(r.exit_code == 0, r.err);
  auto l = test::run_mibyan({"sessions", "list", "--json"}, po);
  BOOST_CHECK_EQUAL(l.exit_code, 0);
  BOOST_CHECK(!contains(l.out, "\"big\""));
}

// The reserve fits the disk (issue 31, item 18): on a 3 MiB $MIBYAN_HOME
// the old fixed 8 MiB reserve could never be allocated, and a delete on the
// full disk then failed with "commit: No space left on device" whenever
// LMDB's free list was short. On file systems of 3, 8 and 32 MiB, three
// times each: fill the disk through the store with sessions of twelve
// messages written one after another (as runs write them; words drawn
// from a skewed vocabulary, like text), fill what is left with a file,
// then deleting the two oldest sessions, one `mibyan sessions delete`
// after the other, must succeed.
BOOST_AUTO_TEST_CASE(sessions_delete_works_on_full_disks_of_every_size) {
  int failed = 0, runs = 0;
  for (int mb : {3, 8, 32}) {
    for (int run = 0; run < 3; ++run) {
      test::temp_dir base;
      small_fs fs{base / "home", mb};
      REQUIRE_MOUNTED(fs);
      auto dir = session_store::default_dir(fs.dir);
      std::mt19937 rng(static_cast<unsigned>(mb * 10 + run));
      std::uniform_real_distribution<double> unit(0.0, 1.0);
      auto word = [&] {
        double u = unit(rng);
        return "w" + std::to_string(static_cast<int>(20000 * u * u * u));
      };
      std::string rejected;
      int appended = 0, sessions = 0;
      {
        session_store_options so;
        so.dir = dir;
        auto store = session_store::open(so);
        BOOST_REQUIRE_MESSAGE(store, store.error);
        for (int i = 0; i < 100000 && rejected.empty(); ++i) {
          auto sid = "s" + std::to_string(i / 12);
          if (i % 12 == 0) {
            new_session ns;
            ns.id = sid;
            auto c = (*store)->create_session(ns);
            if (!c) {
              rejected = c.error;
              break;
            }
            ++sessions;
          }
          std::string text;
          for (int w = 0; w < 300; ++w)
            text += word() + " ";
          chat_message m{i % 2 ? "assistant" : "user", text, {}, "", "", "",
                         "", 0};
          auto st = (*store)->append_message(sid, m);
          if (!st)
            rejected = st.error;
          else
            ++appended;
        }
      }
      BOOST_REQUIRE_MESSAGE(!rejected.empty(), "the disk never filled up");
      BOOST_REQUIRE_GE(sessions, 3);
      struct stat rs;
      bool has_reserve = ::stat(reserve_path(dir).c_str(), &rs) == 0;
      fs.fill();
      BOOST_TEST_MESSAGE(mb << " MiB, run " << run << ": " << appended
                         << " messages in " << sessions
                         << " sessions, reserve "
                         << (has_reserve ? std::to_string(rs.st_blocks * 512)
                                         : std::string{"none"})
                         << ", " << fs.free_bytes() << " bytes free");
      test::process_options po;
      po.env["MIBYAN_HOME"] = fs.dir;
      for (auto id : {"s0", "s1"}) {
        ++runs;
        auto r = test::run_mibyan({"sessions", "delete", id}, po);
        if (r.exit_code != 0)
          ++failed;
        BOOST_CHECK_MESSAGE(r.exit_code == 0, mb << " MiB, run " << run
                                                 << ", delete " << id
                                                 << ": " << r.err);
      }
      auto l = test::run_mibyan(
        {"sessions", "list", "--json", "--limit", "100000"}, po);
      BOOST_CHECK_EQUAL(l.exit_code, 0);
      BOOST_CHECK(!contains(l.out, "\"s0\""));
      BOOST_CHECK(!contains(l.out, "\"s1\""));
      BOOST_CHECK(contains(l.out, "\"s2\""));
    }
  }
  std::cerr << failed << " of " << runs << " deletes on a full disk failed\n";
}

// The reserve's size and how it is made (storage/lmdb/space_reserve.hpp).
BOOST_AUTO_TEST_CASE(reserve_is_sized_to_the_store_and_the_disk) {
  constexpr uint64_t mib = uint64_t{1} << 20;
  BOOST_TEST(reserve_size(0, 0) == 8 * mib);
  BOOST_TEST(reserve_size(512 * mib, 0) == 32 * mib);      // store / 16
  BOOST_TEST(reserve_size(uint64_t{4} << 30, 0) == 64 * mib);  // capped
  BOOST_TEST(reserve_size(0, 3 * mib) == 768u * 1024);     // disk / 4
  BOOST_TEST(reserve_size(0, 32 * mib) == 8 * mib);
  BOOST_TEST(reserve_size(0, 100 * 1024) == 64u * 1024);   // floor
  BOOST_TEST(reserve_size(1, 3 * mib + 5) % 4096 == 0u);

  test::temp_dir dir;
  auto path = reserve_path(dir.path());
  auto allocated = [&] {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0
             ? static_cast<uint64_t>(st.st_blocks) * 512
             : uint64_t{0};
  };
  // A temporary file left by a dead process (a crash while allocating)
  // is swept.
  auto stale = dir.write("reserve.999999999.tmp", "partial");
  BOOST_REQUIRE(ensure_reserve(dir.path(), 256 * 1024).empty());
  BOOST_TEST(allocated() >= 256u * 1024);
  BOOST_TEST(::access(stale.c_str(), F_OK) != 0);
  // Grown in place: the same file (inode), more blocks.
  struct stat before;
  BOOST_REQUIRE(::stat(path.c_str(), &before) == 0);
  BOOST_REQUIRE(ensure_reserve(dir.path(), 1024 * 1024).empty());
  struct stat after;
  BOOST_REQUIRE(::stat(path.c_str(), &after) == 0);
  BOOST_TEST(after.st_ino == before.st_ino);
  BOOST_TEST(allocated() >= 1024u * 1024);
  // Big enough already: left alone.
  BOOST_REQUIRE(ensure_reserve(dir.path(), 64 * 1024).empty());
  BOOST_TEST(allocated() >= 1024u * 1024);
  // No temporary file stays behind.
  auto own = dir.path() + "/reserve." + std::to_string(::getpid()) + ".tmp";
  BOOST_TEST(::access(own.c_str(), F_OK) != 0);
  release_reserve(dir.path());
  BOOST_TEST(::access(path.c_str(), F_OK) != 0);
}
