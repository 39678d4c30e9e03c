#define BOOST_TEST_MODULE writer_durability
#include <boost/test/unit_test.hpp>

// Group commit under SIGKILL: a child process runs the session writer actor
// with 50 concurrent conversations. Each conversation appends an assistant
// message that requests a tool, waits for the writer's acknowledgement,
// reports the id through a pipe (standing for "the tool may run now"),
// then appends the tool result and reports that id too. The parent kills
// the child at a random moment, reopens the store and checks that every
// acknowledged message is there, in order per session, and that the store
// is consistent (docs/storage.md, "Group commit").

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caf/all.hpp"

#include "actors/session_writer.hpp"
#include "mibyan/actors.hpp"
#include "runtime/runtime.hpp"
#include "storage/lmdb/lmdb_inspect.hpp"
#include "storage/session_store.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

namespace {

constexpr int conversations = 50;

chat_message msg(std::string role, std::string content) {
  chat_message m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

// Appends through the writer and waits for the acknowledgement; 0 on error.
uint64_t append(caf::scoped_actor& self, const session_writer_actor& w,
                const std::string& sid, chat_message m) {
  uint64_t id = 0;
  self->request(w, caf::infinite, append_atom_v,
                message_append{sid, std::move(m), ""})
    .receive([&](uint64_t x) { id = x; }, [&](caf::error&) { id = 0; });
  return id;
}

// The child: never returns. Each record on the pipe is 16 bytes:
// conversation number and message id, written after the acknowledgement.
[[noreturn]] void child(const std::string& home, int fd, int round) {
  options opts;
  opts.home = home + "/home" + std::to_string(round);
  opts.code_execution.prestart_kernels = 0;
  std::string err;
  auto made = create_runtime(opts);
  if (!made)
    ::_exit(2);
  auto rt = std::move(*made);
  session_store_options so;
  so.dir = home + "/store";
  auto opened = session_store::open(so);
  if (!opened)
    ::_exit(3);
  std::shared_ptr<session_store> store = std::move(*opened);
  auto writer = spawn_session_writer(actor_system_of(*rt), store);
  std::mutex pipe_mtx;
  std::vector<std::thread> threads;
  for (int c = 0; c < conversations; ++c) {
    threads.emplace_back([&, c] {
      caf::scoped_actor self{actor_system_of(*rt)};
      std::string sid;
      self->request(writer, caf::infinite, create_atom_v,
                    session_meta{"r" + std::to_string(round) + "c"
                                   + std::to_string(c),
                                 "test", "m", "p", "/tmp", "", ""})
        .receive([&](std::string& x) { sid = x; },
                 [&](caf::error&) { ::_exit(4); });
      auto report = [&](uint64_t id) {
        uint64_t rec[2] = {static_cast<uint64_t>(c), id};
        std::lock_guard<std::mutex> g{pipe_mtx};
        if (::write(fd, rec, sizeof rec) != sizeof rec)
          ::_exit(5);
      };
      for (int i = 0;; ++i) {
        auto call = msg("assistant", "step " + std::to_string(i)
                                       + " of conversation "
                                       + std::to_string(c));
        call.tool_calls.push_back(
          tool_call{"c" + std::to_string(i), "terminal", "{}"});
        uint64_t id = append(self, writer, sid, call);
        if (id == 0)
          ::_exit(6);
        report(id);  // the tool would run now
        auto res = msg("tool", "result " + std::to_string(i));
        res.tool_call_id = "c" + std::to_string(i);
        res.tool_name = "terminal";
        if ((id = append(self, writer, sid, res)) == 0)
          ::_exit(7);
        report(id);
      }
    });
  }
  for (auto& t : threads)
    t.join();
  ::_exit(8);
}

void read_records(int fd, std::map<uint64_t, std::vector<uint64_t>>& out,
                  size_t want, std::string& partial, size_t& got) {
  char buf[4096];
  while (got < want) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 60000) <= 0)
      return;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0)
      return;
    partial.append(buf, static_cast<size_t>(n));
    while (partial.size() >= 16) {
      uint64_t rec[2];
      std::memcpy(rec, partial.data(), 16);
      out[rec[0]].push_back(rec[1]);
      partial.erase(0, 16);
      ++got;
    }
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(sigkill_with_50_conversations_loses_no_acknowledged_step) {
  test::temp_dir tmp;
  std::mt19937 rng{20261201};
  for (int round = 0; round < 3; ++round) {
    int fds[2];
    BOOST_REQUIRE(::pipe(fds) == 0);
    pid_t pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      child(tmp.path(), fds[1], round);
    }
    ::close(fds[1]);
    std::map<uint64_t, std::vector<uint64_t>> acked;  // conversation -> ids
    std::string partial;
    size_t got = 0;
    read_records(fds[0], acked, 200 + rng() % 400, partial, got);
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 100));
    BOOST_REQUIRE(::kill(pid, SIGKILL) == 0);
    int status = 0;
    BOOST_REQUIRE(::waitpid(pid, &status, 0) == pid);
    read_records(fds[0], acked, SIZE_MAX, partial, got);
    ::close(fds[0]);
    BOOST_TEST_MESSAGE("round " << round << ": " << got
                                << " acknowledged steps before SIGKILL");
    BOOST_TEST(WIFSIGNALED(status));
    BOOST_REQUIRE(got >= 200u);
    session_store_options o;
    o.dir = tmp / "store";
    auto r = session_store::open(o);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
    auto& store = **r;
    for (auto& [c, ids] : acked) {
      auto sid = "r" + std::to_string(round) + "c" + std::to_string(c);
      auto msgs = store.load_messages(sid);
      BOOST_REQUIRE_MESSAGE(msgs.ok(), msgs.error);
      // The session holds every acknowledged id, in acknowledgement order,
      // and at most one more step (in flight when the child died).
      std::vector<uint64_t> present;
      for (auto& m : *msgs)
        present.push_back(m.id);
      BOOST_REQUIRE(present.size() >= ids.size());
      BOOST_TEST(present.size() <= ids.size() + 1);
      for (size_t i = 0; i < ids.size(); ++i)
        BOOST_TEST(present[i] == ids[i], "conversation " << c << " step " << i);
      for (size_t i = 0; i < msgs->size(); ++i)
        BOOST_TEST((*msgs)[i].message.role == (i % 2 ? "tool" : "assistant"));
    }
    auto v = store.verify(true);
    BOOST_TEST(v.ok(), v.error);
  }
}

// Requests that arrive while a commit is running share the next one: 200
// appends sent at once take far fewer than 200 transactions, and every one
// is stored, in order.
BOOST_AUTO_TEST_CASE(queued_appends_share_commits) {
  test::temp_dir tmp;
  options opts;
  opts.home = tmp / "home";
  opts.code_execution.prestart_kernels = 0;
  std::string err;
  auto made2 = create_runtime(opts);
  BOOST_REQUIRE_MESSAGE(made2, made2.error);
  auto rt = std::move(*made2);
  session_store_options so;
  so.dir = tmp / "store";
  auto opened = session_store::open(so);
  BOOST_REQUIRE_MESSAGE(opened, opened.error);
  std::shared_ptr<session_store> store = std::move(*opened);
  auto writer = spawn_session_writer(actor_system_of(*rt), store);
  caf::scoped_actor self{actor_system_of(*rt)};
  std::string sid;
  self->request(writer, caf::infinite, create_atom_v,
                session_meta{"s1", "test", "m", "p", "/tmp", "", ""})
    .receive([&](std::string& x) { sid = x; },
             [&](caf::error& e) { BOOST_FAIL(caf::to_string(e)); });
  auto before = lmdb_inspect::environment(*store);
  BOOST_REQUIRE_MESSAGE(before, before.error);
  for (int i = 0; i < 199; ++i)
    self->send(writer, append_atom_v,
               message_append{sid, msg("user", "m" + std::to_string(i)), ""});
  // A bad append in the middle fails alone.
  bool failed = false;
  self->request(writer, caf::infinite, append_atom_v,
                message_append{"missing", msg("user", "x"), ""})
    .receive([&](uint64_t) {}, [&](caf::error&) { failed = true; });
  BOOST_TEST(failed);
  uint64_t last = 0;
  self->request(writer, caf::infinite, append_atom_v,
                message_append{sid, msg("user", "m199"), ""})
    .receive([&](uint64_t x) { last = x; },
             [&](caf::error& e) { BOOST_FAIL(caf::to_string(e)); });
  BOOST_TEST(last > 0u);
  auto after = lmdb_inspect::environment(*store);
  BOOST_REQUIRE_MESSAGE(after, after.error);
  auto commits = after->last_txn - before->last_txn;
  BOOST_TEST_MESSAGE(commits << " commits for 201 requests");
  BOOST_TEST(commits < 100u);
  auto msgs = store->load_messages(sid);
  BOOST_REQUIRE(msgs.ok());
  BOOST_REQUIRE(msgs->size() == 200u);
  for (int i = 0; i < 200; ++i)
    BOOST_TEST((*msgs)[i].message.content == "m" + std::to_string(i));
  caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
}
