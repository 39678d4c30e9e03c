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
#include <string>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/json.hpp"
#include "node/runtime.hpp"
#include "storage/session_store.hpp"
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
  auto rt = runtime::create(opts, &err);
  BOOST_REQUIRE_MESSAGE(rt != nullptr, err);
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
  c.provider = "custom";
  c.base_url = server.url("/v1");
  c.model = "m";
  c.api_key = "sk-test-0123456789";
  c.stream = false;
  c.max_iterations = 60;
  auto out = rt->run_turn(c);
  BOOST_REQUIRE_MESSAGE(out.error.empty(), out.error);
  auto res = json::parse(out.result_json);
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
