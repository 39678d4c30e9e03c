// Several processes on one $MIBYAN_HOME (issue 31, item 11): eight real
// `mibyan` processes (writers running a turn against a scripted provider
// on loopback, `sessions list` and `sessions search` readers) are released
// at the same instant on a store that does not exist yet, fifty times, and
// on a store of an old schema version that they must migrate, ten times.
// Every process must exit 0, and the store must be complete after: every
// writer's session with both messages, indexed, at the current schema
// version (docs/storage.md, "Several processes").
#define BOOST_TEST_MODULE store_concurrency
#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/json.hpp"
#include "storage/lmdb/lmdb_inspect.hpp"
#include "storage/session_store.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/temp_dir.hpp"

extern char** environ;

using namespace mibyan;

namespace {

constexpr int rounds = 50;
constexpr int per_process_timeout_s = 60;

enum class role { writer, list, search };

struct child {
  role kind = role::writer;
  std::string session;  // writers
  std::string out_path, err_path;
  pid_t pid = -1;
  bool done = false;
  int exit_code = -1;  // -N: killed by signal N
};

// The environment of every child: the test's, with $MIBYAN_HOME set and
// provider keys and the log level removed.
std::vector<std::string> child_env(const std::string& home) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    auto name = kv.substr(0, kv.find('='));
    if (name == "MIBYAN_HOME" || name == "MIBYAN_LOG_LEVEL"
        || name.find("API_KEY") != std::string::npos)
      continue;
    env.push_back(kv);
  }
  env.push_back("MIBYAN_HOME=" + home);
  return env;
}

// Forks every child; each waits on `barrier` (a pipe's read end) until
// the parent closes the write end, then execs, so all start at once.
void spawn_all(std::vector<child>& kids,
               const std::vector<std::vector<std::string>>& argvs,
               const std::vector<std::string>& env) {
  int barrier[2];
  BOOST_REQUIRE(::pipe(barrier) == 0);
  // Everything the children need is built before forking.
  std::vector<char*> envp;
  for (auto& kv : env)
    envp.push_back(const_cast<char*>(kv.c_str()));
  envp.push_back(nullptr);
  std::vector<std::vector<char*>> argps;
  for (auto& a : argvs) {
    std::vector<char*> p;
    for (auto& s : a)
      p.push_back(const_cast<char*>(s.c_str()));
    p.push_back(nullptr);
    argps.push_back(std::move(p));
  }
  for (size_t i = 0; i < kids.size(); ++i) {
    pid_t pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(barrier[1]);
      int out = ::open(kids[i].out_path.c_str(),
                       O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      int err = ::open(kids[i].err_path.c_str(),
                       O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      int null_in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (out < 0 || err < 0 || null_in < 0)
        ::_exit(126);
      ::dup2(null_in, 0);
      ::dup2(out, 1);
      ::dup2(err, 2);
      ::setpgid(0, 0);
      char c;
      while (::read(barrier[0], &c, 1) < 0 && errno == EINTR) {
      }
      ::close(barrier[0]);
      ::execve(argps[i][0], argps[i].data(), envp.data());
      ::_exit(127);
    }
    kids[i].pid = pid;
  }
  ::close(barrier[0]);
  ::close(barrier[1]);  // go
}

// Waits for every child; kills (the process group of) any that outlives
// the deadline.
void wait_all(std::vector<child>& kids) {
  auto deadline = std::chrono::steady_clock::now()
                  + std::chrono::seconds(per_process_timeout_s);
  bool killed = false;
  for (;;) {
    size_t left = 0;
    for (auto& k : kids) {
      if (k.done || k.pid <= 0)
        continue;
      int status = 0;
      pid_t got = ::waitpid(k.pid, &status, WNOHANG);
      if (got == k.pid) {
        k.done = true;
        k.exit_code = WIFEXITED(status) ? WEXITSTATUS(status)
                                        : -WTERMSIG(status);
      } else if (got < 0) {
        k.done = true;  // not our child any more: should not happen
      } else {
        ++left;
      }
    }
    if (left == 0)
      return;
    if (!killed && std::chrono::steady_clock::now() > deadline) {
      for (auto& k : kids)
        if (!k.done) {
          ::kill(-k.pid, SIGKILL);
          ::kill(k.pid, SIGKILL);
        }
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
}

const char* name_of(role r) {
  switch (r) {
    case role::writer: return "run";
    case role::list: return "sessions list";
    default: return "sessions search";
  }
}

// Turns the store in `dir` into what schema version 1 left on disk: the
// index in `fts_terms`, none in the block format.
void make_version_one(const std::string& dir, int sessions) {
  session_store_options so;
  so.dir = dir;
  auto opened = session_store::open(so);
  BOOST_REQUIRE_MESSAGE(opened, opened.error);
  auto& store = **opened;
  for (int i = 0; i < sessions; ++i) {
    new_session ns;
    ns.id = "old-" + std::to_string(i);
    BOOST_REQUIRE(store.create_session(ns));
    chat_message m;
    m.role = "user";
    m.content = "an old lighthouse note " + std::to_string(i);
    BOOST_REQUIRE(store.append_message(ns.id, m));
  }
  using lmdb_inspect::change;
  auto st = lmdb_inspect::write(
    store, {{change::kind::drop, "fts_blocks", "", ""},
            {change::kind::drop, "fts_df", "", ""},
            {change::kind::put, "fts_terms", std::string{"old\0\0", 5}, "x"},
            {change::kind::put, "meta", "schema_version", "1"}});
  BOOST_REQUIRE_MESSAGE(st, st.error);
}

struct tally {
  int processes = 0;
  int failures = 0;
  int rounds = 0;
  int incomplete = 0;
};

// One round: releases `pattern`'s processes at once on `home` and checks
// them and the store. `old_sessions` were there before (one message each
// with the word "lighthouse").
void run_round(int round, const std::vector<role>& pattern,
               const std::string& home, int old_sessions,
               const test::http_server& server, const test::temp_dir& logs,
               tally& t) {
  auto env = child_env(home);
  server.reset();
  const size_t n = pattern.size();
  std::vector<child> kids(n);
  std::vector<std::vector<std::string>> argvs;
  int writers = 0;
  for (size_t i = 0; i < n; ++i) {
    auto& k = kids[i];
    k.kind = pattern[(i + static_cast<size_t>(round)) % n];
    k.out_path = logs / ("p" + std::to_string(i) + ".out");
    k.err_path = logs / ("p" + std::to_string(i) + ".err");
    std::vector<std::string> a{test::mibyan_binary()};
    if (k.kind == role::writer) {
      ++writers;
      k.session = "r" + std::to_string(round) + "-w" + std::to_string(i);
      a.insert(a.end(), {"run", "--provider", "custom", "--base-url",
                         server.url("/v1"), "--model", "m", "--session",
                         k.session, "lighthouse question " + k.session});
    } else if (k.kind == role::list) {
      a.insert(a.end(), {"sessions", "list", "--json"});
    } else {
      a.insert(a.end(), {"sessions", "search", "lighthouse", "--json"});
    }
    argvs.push_back(std::move(a));
  }
  server.script_chat(test::completion("the lamp answer"), writers);

  spawn_all(kids, argvs, env);
  wait_all(kids);

  t.processes += static_cast<int>(n);
  ++t.rounds;
  for (auto& k : kids) {
    if (k.exit_code == 0) {
      if (k.kind != role::writer) {
        // Readers print JSON even when the store is not there yet.
        auto parsed = json::parse(test::slurp(k.out_path));
        BOOST_CHECK_MESSAGE(parsed, "round " << round << ": "
                              << name_of(k.kind) << " printed no JSON: "
                              << test::slurp(k.out_path));
      }
      continue;
    }
    ++t.failures;
    BOOST_ERROR("round " << round << ": `mibyan " << name_of(k.kind)
                << "` exited " << k.exit_code << ": "
                << test::slurp(k.err_path));
  }

  // The store is complete: every writer's session, both messages,
  // indexed and searchable, at the current schema version.
  session_store_options so;
  so.dir = session_store::default_dir(home);
  so.read_only = true;
  auto opened = session_store::open(so);
  if (!opened) {
    ++t.incomplete;
    BOOST_ERROR("round " << round << ": the store cannot be opened: "
                << opened.error);
    return;
  }
  auto& store = **opened;
  const auto want = static_cast<size_t>(writers + old_sessions);
  bool complete = store.schema_version()
                  == lmdb_inspect::schema_version_current;
  BOOST_CHECK_EQUAL(store.schema_version(),
                    lmdb_inspect::schema_version_current);
  auto list = store.list_sessions(1000, 0);
  BOOST_REQUIRE_MESSAGE(list, list.error);
  complete = complete && list->size() == want;
  BOOST_CHECK_EQUAL(list->size(), want);
  for (auto& k : kids) {
    if (k.kind != role::writer)
      continue;
    auto msgs = store.load_messages(k.session);
    bool ok = msgs && msgs->size() == 2u;
    complete = complete && ok;
    BOOST_CHECK_MESSAGE(ok, "round " << round << ": session " << k.session
                              << ": " << (msgs ? std::to_string(msgs->size())
                                                 + " messages"
                                               : msgs.error));
  }
  search_request q;
  q.query = "lighthouse";
  auto hits = store.search(q);
  complete = complete && hits && hits->total == want;
  BOOST_CHECK_MESSAGE(hits && hits->total == want,
                      "round " << round << ": search: "
                        << (hits ? std::to_string(hits->total) + " hits"
                                 : hits.error));
  auto v = store.verify(true);
  complete = complete && v.ok();
  BOOST_CHECK_MESSAGE(v.ok(), "round " << round << ": verify: " << v.error);
  if (!complete)
    ++t.incomplete;
}

void report(const tally& t) {
  std::cerr << t.failures << " of " << t.processes << " processes failed; "
            << t.incomplete << " of " << t.rounds << " stores incomplete\n";
  BOOST_TEST_MESSAGE(t.failures << " of " << t.processes
                     << " processes failed; " << t.incomplete << " of "
                     << t.rounds << " stores incomplete");
  BOOST_CHECK_EQUAL(t.failures, 0);
  BOOST_CHECK_EQUAL(t.incomplete, 0);
}

} // namespace

// Writers, `sessions list` and `sessions search` on a home without a
// store. The roles rotate every round, so that each kind of process is
// sometimes the one that wins the race to create the store.
BOOST_AUTO_TEST_CASE(eight_processes_on_a_fresh_store_fifty_times) {
  test::http_server server;
  test::temp_dir logs;
  const std::vector<role> pattern{role::writer, role::list,   role::writer,
                                  role::search, role::writer, role::list,
                                  role::writer, role::search};
  tally t;
  for (int round = 0; round < rounds; ++round) {
    test::temp_dir home;
    run_round(round, pattern, home.path(), 0, server, logs, t);
  }
  report(t);
}

// Writers (and `sessions list`, which reads an old store as it is) on a
// store of schema version 1: one process rebuilds the index, the others
// wait for it and find the work done (storage/lmdb/schema_lock.hpp).
BOOST_AUTO_TEST_CASE(eight_processes_on_an_old_store_migrate_it_once) {
  test::http_server server;
  test::temp_dir logs;
  const std::vector<role> pattern{role::writer, role::writer, role::list,
                                  role::writer, role::writer, role::writer,
                                  role::writer, role::list};
  tally t;
  for (int round = 0; round < 10; ++round) {
    test::temp_dir home;
    make_version_one(session_store::default_dir(home.path()), 3);
    run_round(round, pattern, home.path(), 3, server, logs, t);
  }
  report(t);
}
