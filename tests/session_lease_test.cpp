// Session leases with fencing tokens (storage/session_lease.hpp) on every
// store backend (tests/support/store_backends.hpp: LMDB, and PostgreSQL on
// a throw-away server): acquire, renew, expiry, release, a lost holder's
// leases ended, and a write carrying a stale token refused inside the
// store's commit_group transaction - within one process (injected clock)
// and between two processes sharing one store.
#define BOOST_TEST_MODULE session_lease
#include <boost/test/unit_test.hpp>

#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "storage/session_lease.hpp"
#include "storage/session_store.hpp"
#include "tests/support/store_backends.hpp"

using namespace mibyan;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

store_write append_write(const std::string& sid, const std::string& text,
                         uint64_t fence) {
  store_write w;
  w.what = store_write::kind::append;
  w.append.session_id = sid;
  w.append.message.role = "user";
  w.append.message.content = text;
  w.fence = fence;
  return w;
}

// Commits one fenced append; returns its own status.
status fenced_append(session_store& store, const std::string& sid,
                     const std::string& text, uint64_t fence) {
  std::vector<store_write> ws{append_write(sid, text, fence)};
  auto st = store.commit_group(ws);
  if (!st)
    return st;
  return ws[0].status;
}

struct fixture : test::store_fixture {
  int64_t clock = 1'700'000'000'000;
  std::shared_ptr<session_lease_store> leases;

  void opened() override {
    open_with(base);
    auto l = open_session_leases(*store, [this] { return clock; });
    BOOST_REQUIRE_MESSAGE(l, l.error);
    leases = *l;
    new_session ns;
    ns.id = "s1";
    BOOST_REQUIRE(store->create_session(ns));
  }
};

// Opens nothing before the case forks (an open LMDB environment or
// PostgreSQL connection must not cross a fork).
struct unopened : test::store_fixture {
  void opened() override {}
};

} // namespace

MIBYAN_STORE_TEST_CASE(acquire_renew_expire_and_fence, fixture) {
  auto name = std::string{"session:s1"};
  auto a = leases->acquire(name, "gwA", 1000);
  BOOST_REQUIRE_MESSAGE(a, a.error);
  BOOST_CHECK(a->granted);
  BOOST_CHECK(a->new_token);
  BOOST_CHECK(!a->took_over);
  auto t1 = a->token;
  BOOST_CHECK_GT(t1, 0u);
  // Another holder is refused while it is live, and told who holds it.
  auto b = leases->acquire(name, "gwB", 1000);
  BOOST_REQUIRE(b);
  BOOST_CHECK(!b->granted);
  BOOST_CHECK_EQUAL(b->current.holder, "gwA");
  BOOST_CHECK_EQUAL(b->current.token, t1);
  // Renewal keeps the token and moves the expiry.
  clock += 900;
  auto r = leases->acquire(name, "gwA", 1000);
  BOOST_REQUIRE(r && r->granted);
  BOOST_CHECK_EQUAL(r->token, t1);
  BOOST_CHECK(!r->new_token);
  BOOST_CHECK_EQUAL(r->expires_at_ms, clock + 1000);
  clock += 900; // still live thanks to the renewal
  BOOST_CHECK(!leases->acquire(name, "gwB", 1000)->granted);
  // Lapsed: B takes it over with a newer token.
  clock += 200;
  b = leases->acquire(name, "gwB", 1000);
  BOOST_REQUIRE(b && b->granted);
  BOOST_CHECK(b->took_over);
  BOOST_CHECK(b->new_token);
  BOOST_CHECK_EQUAL(b->current.holder, "gwA");
  auto t2 = b->token;
  BOOST_CHECK_GT(t2, t1);
  // A's writes with the old token are refused, nothing written; B's pass.
  auto before = store->load_messages("s1");
  BOOST_REQUIRE(before);
  auto stale = fenced_append(*store, "s1", "late write of A", t1);
  BOOST_CHECK(stale.code == status_code::permission_denied);
  BOOST_CHECK_MESSAGE(contains(stale.error, "fenced: "), stale.error);
  BOOST_CHECK_MESSAGE(contains(stale.error, "gwB"), stale.error);
  BOOST_CHECK(!leases->check(name, t1));
  auto fresh = fenced_append(*store, "s1", "write of B", t2);
  BOOST_CHECK_MESSAGE(fresh.ok(), fresh.error);
  BOOST_CHECK(leases->check(name, t2));
  auto after = store->load_messages("s1");
  BOOST_REQUIRE(after);
  BOOST_REQUIRE_EQUAL(after->size(), before->size() + 1);
  BOOST_CHECK_EQUAL(after->back().message.content, "write of B");
  // An unfenced write (single-node use) is not checked.
  BOOST_CHECK(fenced_append(*store, "s1", "unfenced", 0).ok());
  // Release keeps the token; the same holder gets it back unchanged...
  BOOST_CHECK(leases->release(name, "gwB", t2));
  auto g = leases->get(name);
  BOOST_REQUIRE(g);
  BOOST_CHECK(g->released);
  BOOST_CHECK(!g->live(clock));
  auto again = leases->acquire(name, "gwB", 1000);
  BOOST_REQUIRE(again && again->granted);
  BOOST_CHECK_EQUAL(again->token, t2);
  BOOST_CHECK(!again->new_token);
  BOOST_CHECK(leases->release(name, "gwB", t2));
  // ...another holder after a release draws a new one, not a takeover.
  auto c = leases->acquire(name, "gwC", 1000);
  BOOST_REQUIRE(c && c->granted);
  BOOST_CHECK_GT(c->token, t2);
  BOOST_CHECK(!c->took_over);
  // Releasing with a wrong token or holder changes nothing.
  BOOST_CHECK(leases->release(name, "gwB", t2));
  BOOST_CHECK(leases->release(name, "gwC", t2));
  BOOST_CHECK(leases->get(name)->live(clock));
}

MIBYAN_STORE_TEST_CASE(expire_holder_ends_only_its_live_leases, fixture) {
  BOOST_REQUIRE(leases->acquire("session:a", "gwA", 60000)->granted);
  BOOST_REQUIRE(leases->acquire("session:b", "gwA", 60000)->granted);
  BOOST_REQUIRE(leases->acquire("session:c", "gwB", 60000)->granted);
  auto n = leases->expire_holder("gwA");
  BOOST_REQUIRE_MESSAGE(n, n.error);
  BOOST_CHECK_EQUAL(*n, 2u);
  auto took = leases->acquire("session:a", "gwB", 60000);
  BOOST_REQUIRE(took && took->granted);
  BOOST_CHECK(took->took_over);
  BOOST_CHECK(!leases->acquire("session:c", "gwA", 60000)->granted);
  BOOST_CHECK_EQUAL(*leases->expire_holder("gwA"), 0u);
}

MIBYAN_STORE_TEST_CASE(bad_input_is_refused, fixture) {
  BOOST_CHECK(leases->acquire("", "gwA", 1000).code
              == status_code::invalid_argument);
  BOOST_CHECK(leases->acquire(std::string{"\0x", 2}, "gwA", 1000).code
              == status_code::invalid_argument);
  BOOST_CHECK(leases->acquire("n", "", 1000).code
              == status_code::invalid_argument);
  BOOST_CHECK(leases->acquire("n", "gwA", 0).code
              == status_code::invalid_argument);
  BOOST_CHECK(leases->acquire(std::string(600, 'x'), "gwA", 1000).code
              == status_code::invalid_argument);
  BOOST_CHECK(leases->get("never").code == status_code::not_found);
  BOOST_CHECK(leases->check("never", 1)); // nothing to fence against
  BOOST_CHECK(leases->release("never", "gwA", 1));
}

// Two processes on one store (directory or database): a child holds the
// lease; the parent sees it, declares the child lost, takes over, and the
// child's write with its old token is refused in the child's own
// transaction.
MIBYAN_STORE_TEST_CASE(two_processes_share_leases_and_fence, unopened) {
  int to_child[2], to_parent[2];
  BOOST_REQUIRE(::pipe(to_child) == 0 && ::pipe(to_parent) == 0);
  pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    // The child: exit code 0 when every step behaved.
    auto say = [&](const std::string& s) {
      auto line = s + "\n";
      (void) !::write(to_parent[1], line.data(), line.size());
    };
    auto s = open_session_store(base);
    if (!s)
      ::_exit(10);
    auto l = open_session_leases(**s);
    if (!l)
      ::_exit(11);
    new_session ns;
    ns.id = "shared";
    if (!(*s)->create_session(ns))
      ::_exit(12);
    auto a = (*l)->acquire("session:shared", "child", 600000);
    if (!a || !a->granted)
      ::_exit(13);
    say(std::to_string(a->token));
    char go;
    if (::read(to_child[0], &go, 1) != 1)
      ::_exit(14);
    std::vector<store_write> ws{append_write("shared", "late", a->token)};
    (void) (*s)->commit_group(ws);
    if (ws[0].status.code != status_code::permission_denied
        || !contains(ws[0].status.error, "fenced: "))
      ::_exit(15);
    auto again = (*l)->acquire("session:shared", "child", 600000);
    if (!again || again->granted || again->current.holder != "parent")
      ::_exit(16);
    say("done");
    ::_exit(0);
  }
  ::close(to_child[0]);
  ::close(to_parent[1]);
  auto read_line = [&] {
    std::string line;
    char c;
    while (::read(to_parent[0], &c, 1) == 1 && c != '\n')
      line += c;
    return line;
  };
  auto child_token = read_line();
  BOOST_REQUIRE_MESSAGE(!child_token.empty(), "the child did not start");
  auto s = open_session_store(base);
  BOOST_REQUIRE_MESSAGE(s, s.error);
  auto l = open_session_leases(**s);
  BOOST_REQUIRE_MESSAGE(l, l.error);
  auto mine = (*l)->acquire("session:shared", "parent", 600000);
  BOOST_REQUIRE(mine);
  BOOST_CHECK(!mine->granted);
  BOOST_CHECK_EQUAL(mine->current.holder, "child");
  BOOST_CHECK_EQUAL(std::to_string(mine->current.token), child_token);
  BOOST_CHECK_EQUAL(*(*l)->expire_holder("child"), 1u);
  mine = (*l)->acquire("session:shared", "parent", 600000);
  BOOST_REQUIRE(mine && mine->granted);
  BOOST_CHECK(mine->took_over);
  BOOST_CHECK_GT(mine->token, std::stoull(child_token));
  BOOST_REQUIRE(::write(to_child[1], "g", 1) == 1);
  BOOST_CHECK_EQUAL(read_line(), "done");
  int wstatus = 0;
  BOOST_REQUIRE(::waitpid(pid, &wstatus, 0) == pid);
  BOOST_CHECK(WIFEXITED(wstatus));
  BOOST_CHECK_EQUAL(WEXITSTATUS(wstatus), 0);
  // The parent's own write with its token passes; the child wrote nothing.
  BOOST_CHECK(fenced_append(**s, "shared", "mine", mine->token).ok());
  auto msgs = (*s)->load_messages("shared");
  BOOST_REQUIRE(msgs);
  BOOST_REQUIRE_EQUAL(msgs->size(), 1u);
  BOOST_CHECK_EQUAL(msgs->front().message.content, "mine");
}
