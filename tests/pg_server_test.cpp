// The throw-away PostgreSQL harness itself (tests/support/pg_server.hpp):
// it starts as an unprivileged user, serves the unix socket without and TCP
// with a password, survives a stop and restart, and leaves nothing behind.
#define BOOST_TEST_MODULE pg_server
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/pg_server.hpp"
#include "tests/support/process.hpp"

using namespace mibyan;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The postmaster's pid from its pid file (0 when there is none).
int postmaster_pid(const test::pg_server& pg) {
  std::ifstream in(pg.dir() + "/data/postmaster.pid");
  int pid = 0;
  in >> pid;
  return pid;
}

} // namespace

BOOST_AUTO_TEST_CASE(serves_a_fresh_database_over_the_socket) {
  auto& pg = test::shared_pg_server();
  BOOST_TEST(pg.running());
  BOOST_TEST(pg.port() > 0);
  auto db = pg.fresh_database();
  pg.psql(db, "CREATE TABLE t (x int); INSERT INTO t VALUES (41), (1)");
  BOOST_TEST(pg.psql(db, "SELECT sum(x) FROM t") == "42\n");
  // A second fresh database is empty.
  auto other = pg.fresh_database();
  BOOST_TEST(other != db);
  BOOST_CHECK_THROW(pg.psql(other, "SELECT * FROM t"), std::runtime_error);
  BOOST_TEST(pg.url(db).find("host=" + pg.dir()) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(runs_as_an_unprivileged_user) {
  auto& pg = test::shared_pg_server();
  int pid = postmaster_pid(pg);
  BOOST_REQUIRE(pid > 0);
  struct stat st{};
  BOOST_REQUIRE(::stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0);
  BOOST_TEST(st.st_uid != 0u);
  if (::geteuid() != 0)
    BOOST_TEST(st.st_uid == ::geteuid());
}

BOOST_AUTO_TEST_CASE(tcp_needs_the_password_from_the_environment) {
  auto& pg = test::shared_pg_server();
  auto db = pg.fresh_database();
  const std::string psql = "/usr/lib/postgresql/15/bin/psql";
  std::vector<std::string> argv = {psql, "-X", "-A", "-t", "-w", "-d",
                                   pg.tcp_url(db), "-c", "SELECT 7"};
  test::process_options without;
  without.unset = {"PGPASSWORD"};
  auto r = test::run_process(argv, without);
  BOOST_TEST(r.exit_code != 0);
  BOOST_TEST(contains(r.err, "password"), r.err);
  test::process_options with;
  with.env["PGPASSWORD"] = test::pg_server::password();
  r = test::run_process(argv, with);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "7\n");
  with.env["PGPASSWORD"] = "wrong";
  r = test::run_process(argv, with);
  BOOST_TEST(r.exit_code != 0);
  BOOST_TEST(contains(r.err, "password authentication failed"), r.err);
}

BOOST_AUTO_TEST_CASE(stop_and_restart_keep_the_data) {
  std::string why;
  auto pg = test::pg_server::start(why);
  BOOST_REQUIRE_MESSAGE(pg, why);
  auto db = pg->fresh_database();
  pg->psql(db, "CREATE TABLE t (x text); INSERT INTO t VALUES ('kept')");
  pg->stop();
  BOOST_TEST(!pg->running());
  BOOST_CHECK_THROW(pg->psql(db, "SELECT 1"), std::runtime_error);
  BOOST_REQUIRE_MESSAGE(pg->restart(why), why);
  BOOST_TEST(pg->psql(db, "SELECT x FROM t") == "kept\n");
}

BOOST_AUTO_TEST_CASE(drop_connections_ends_other_sessions) {
  auto& pg = test::shared_pg_server();
  auto db = pg.fresh_database();
  // A psql that sleeps holds a connection until it is terminated.
  test::process_options po;
  po.timeout_seconds = 60;
  int child = 0;
  po.on_started = [&](int pid) { child = pid; };
  std::string err;
  int code = 0;
  std::thread sleeper([&] {
    auto r = test::run_process({"/usr/lib/postgresql/15/bin/psql", "-X",
                                "-d", pg.url(db), "-c",
                                "SELECT pg_sleep(50)"},
                               po);
    err = r.err;
    code = r.exit_code;
  });
  // Wait (with a deadline) until the sleeper is connected, then end it.
  int ended = 0;
  for (int i = 0; i < 1000 && ended == 0; ++i) {
    ended = pg.drop_connections(db);
    if (ended == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  sleeper.join();
  BOOST_TEST(ended == 1);
  BOOST_TEST(code != 0);
  BOOST_TEST(contains(err, "terminat"), err);
}

BOOST_AUTO_TEST_CASE(destruction_stops_the_server_and_removes_its_dir) {
  std::string why;
  auto pg = test::pg_server::start(why);
  BOOST_REQUIRE_MESSAGE(pg, why);
  int pid = postmaster_pid(*pg);
  auto dir = pg->dir();
  BOOST_REQUIRE(pid > 0);
  BOOST_TEST(std::filesystem::exists(dir));
  pg.reset();
  BOOST_TEST(!std::filesystem::exists(dir));
  // Reaped by the destructor: the pid is gone (or reused by someone else).
  BOOST_TEST((::kill(pid, 0) != 0 || !std::filesystem::exists(
                                       "/proc/" + std::to_string(pid)
                                       + "/cwd/postmaster.pid")));
}

BOOST_AUTO_TEST_CASE(missing_binaries_are_reported) {
  ::setenv("MIBYAN_PG_BIN", "/nonexistent/pg/bin", 1);
  std::string why;
  auto pg = test::pg_server::start(why);
  ::unsetenv("MIBYAN_PG_BIN");
  BOOST_TEST(!pg);
  BOOST_TEST(contains(why, "/nonexistent/pg/bin/initdb missing"), why);
}
