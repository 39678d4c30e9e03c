#define BOOST_TEST_MODULE store_durability
#include <boost/test/unit_test.hpp>

// A child process appends to the store in a loop and reports each
// committed message id through a pipe; the parent kills it with SIGKILL at
// a random moment, reopens the store and checks that every reported
// message is there and that the store is consistent.

#include <chrono>
#include <csignal>
#include <cstring>
#include <random>
#include <set>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "storage/session_store.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

namespace {

chat_message msg(std::string role, std::string content) {
  chat_message m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

// The child: never returns. Writes each committed id (8 bytes, atomic on
// a pipe) after the commit returned.
[[noreturn]] void child_loop(const std::string& dir, int fd, int round) {
  session_store_options o;
  o.dir = dir;
  auto r = session_store::open(o);
  if (!r)
    ::_exit(2);
  auto& store = **r;
  std::mt19937 rng{static_cast<unsigned>(round * 7919 + 1)};
  std::string sid = "round" + std::to_string(round) + "_0";
  new_session ns;
  ns.id = sid;
  if (!store.create_session(ns))
    ::_exit(3);
  for (uint64_t i = 0;; ++i) {
    if (i % 40 == 39) {  // start a new session now and then
      sid = "round" + std::to_string(round) + "_" + std::to_string(i);
      ns.id = sid;
      if (!store.create_session(ns))
        ::_exit(4);
    }
    std::string text = "durable message " + std::to_string(i) + " of round "
                       + std::to_string(round) + " word"
                       + std::to_string(rng() % 50);
    uint64_t committed = 0;
    if (i % 5 == 4) {  // a batch: assistant call plus its tool result
      chat_message call = msg("assistant", text);
      call.tool_calls.push_back(tool_call{"c" + std::to_string(i), "terminal",
                                          "{\"command\":\"ls\"}"});
      chat_message res = msg("tool", "result " + text);
      res.tool_call_id = "c" + std::to_string(i);
      res.tool_name = "terminal";
      auto b = store.append_batch({{sid, call, "k" + std::to_string(i)},
                                   {sid, res, ""}});
      if (!b)
        ::_exit(5);
      committed = (*b)[1].id;
    } else {
      auto a = store.append_message(sid, msg("user", text),
                                    "k" + std::to_string(i));
      if (!a)
        ::_exit(6);
      committed = a->id;
    }
    char buf[8];
    std::memcpy(buf, &committed, 8);
    if (::write(fd, buf, 8) != 8)
      ::_exit(7);
  }
}

// Reads 8-byte records until `want` arrived or EOF; returns the ids.
void read_ids(int fd, std::vector<uint64_t>& ids, size_t want,
              std::string& partial) {
  char buf[4096];
  while (ids.size() < want) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0)
      return;
    partial.append(buf, static_cast<size_t>(n));
    while (partial.size() >= 8) {
      uint64_t id;
      std::memcpy(&id, partial.data(), 8);
      ids.push_back(id);
      partial.erase(0, 8);
    }
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(sigkill_never_loses_a_committed_message) {
  test::temp_dir tmp;
  std::string dir = tmp / "sessions";
  std::mt19937 rng{20240601};
  std::set<uint64_t> reported;
  for (int round = 0; round < 6; ++round) {
    int fds[2];
    BOOST_REQUIRE(::pipe(fds) == 0);
    pid_t pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      child_loop(dir, fds[1], round);
    }
    ::close(fds[1]);
    std::vector<uint64_t> ids;
    std::string partial;
    // Let it commit a few, then kill it at a random moment.
    read_ids(fds[0], ids, 3 + rng() % 20, partial);
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 150));
    BOOST_REQUIRE(::kill(pid, SIGKILL) == 0);
    int status = 0;
    BOOST_REQUIRE(::waitpid(pid, &status, 0) == pid);
    read_ids(fds[0], ids, SIZE_MAX, partial);
    ::close(fds[0]);
    BOOST_TEST_MESSAGE("round " << round << ": " << ids.size()
                                << " commits reported before SIGKILL");
    BOOST_TEST(WIFSIGNALED(status));
    BOOST_TEST(WTERMSIG(status) == SIGKILL);
    BOOST_REQUIRE(ids.size() >= 3u);
    reported.insert(ids.begin(), ids.end());
    // Reopen: everything reported is there, and the store adds up.
    session_store_options o;
    o.dir = dir;
    auto r = session_store::open(o);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
    auto& store = **r;
    std::set<uint64_t> present;
    int64_t counted = 0;
    auto sessions = store.list_sessions(100000, 0);
    BOOST_REQUIRE(sessions.ok());
    for (auto& s : *sessions) {
      auto msgs = store.load_messages(s.id);
      BOOST_REQUIRE(msgs.ok());
      BOOST_TEST(s.message_count == static_cast<int64_t>(msgs->size()));
      counted += s.message_count;
      for (auto& m : *msgs)
        present.insert(m.id);
    }
    for (auto id : reported)
      BOOST_TEST(present.count(id) == 1u, "message " << id << " lost");
    BOOST_TEST(present.size() >= reported.size());
    BOOST_TEST(counted == static_cast<int64_t>(present.size()));
    auto v = store.verify(true);
    BOOST_TEST(v.ok(), v.error);
    // The store stays writable and searchable after the crash.
    search_request q;
    q.query = "durable";
    q.limit = 5;
    auto hits = store.search(q);
    BOOST_REQUIRE(hits.ok());
    BOOST_TEST(hits->total >= reported.size() / 2);
    auto more = store.append_message((*sessions)[0].id,
                                     msg("user", "after the crash"));
    BOOST_TEST(more.ok(), more.error);
    BOOST_TEST(more->id > *reported.rbegin());
  }
}
