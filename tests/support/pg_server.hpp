// File: tests/support/pg_server.hpp
//
// A throw-away PostgreSQL 15 server for tests (docs/testing.md,
// "PostgreSQL"): initdb into a fresh temporary directory, a free port on
// 127.0.0.1 plus a unix socket in that directory, started as an
// unprivileged user when the test runs as root (PostgreSQL refuses root:
// the `mibyan-pg` system user that scripts/install-test-deps.sh creates,
// else `nobody`), stopped and its directory removed when the object goes.
//
// Authentication: the unix socket trusts everyone (url()); TCP asks for a
// password (tcp_url() plus PGPASSWORD=password()), so a test can check
// that secrets come from the environment.
//
// Cleanup when the test does not end normally: the postmaster gets SIGQUIT
// (immediate shutdown) from the kernel when the thread that started it
// dies (PR_SET_PDEATHSIG), so start the server from the test's main thread
// (shared_pg_server() from a test case or a global fixture is fine). Only a
// killed test leaves its temporary directory behind.
//
// Thread safety: none; use from the test's main thread.
#pragma once

#include <memory>
#include <string>

namespace mibyan::test {

struct pg_server_options {
  /// false (tests): fsync, synchronous_commit and full_page_writes off, so
  /// a test does not wait for the disk. true (benchmarks): the defaults,
  /// commits are fsync'd like LMDB's.
  bool durable = false;
  /// Serve TLS too (ssl=on) with a self-signed certificate made by the
  /// openssl command (CN and subjectAltName 127.0.0.1); cert_file() is
  /// then the certificate a client can trust (sslrootcert).
  bool tls = false;
};

class pg_server {
public:
  /// Starts a server. On failure returns null and sets `why` to one line
  /// naming the problem (binaries missing, initdb or the postmaster
  /// failing, with the tail of its log).
  static std::unique_ptr<pg_server> start(std::string& why,
                                          pg_server_options opts = {});
  /// Stops the server (fast shutdown, SIGKILL after 30 s) and removes its
  /// directory.
  ~pg_server();
  pg_server(const pg_server&) = delete;
  pg_server& operator=(const pg_server&) = delete;

  int port() const { return port_; }
  /// The temporary directory; the unix socket lives here.
  const std::string& dir() const { return dir_; }
  /// The server's certificate (with `tls`), "" otherwise.
  std::string cert_file() const {
    return opts_.tls ? dir_ + "/server.crt" : std::string{};
  }
  /// The superuser the server was initialised with ("mibyan").
  static const char* user() { return "mibyan"; }
  /// The superuser's password (TCP connections need it).
  static const char* password() { return "mibyan-test-secret"; }

  /// URL of database `db` over the unix socket (no password needed):
  /// "postgresql://mibyan@/DB?host=DIR&port=PORT".
  std::string url(const std::string& db) const;
  /// URL of database `db` over TCP, without the password:
  /// "postgresql://mibyan@127.0.0.1:PORT/DB" (set PGPASSWORD).
  std::string tcp_url(const std::string& db) const;

  /// Creates a new empty database (named `prefix` + a counter + the pid)
  /// and returns its name. Throws std::runtime_error on failure.
  std::string fresh_database(const std::string& prefix = "t");
  /// Runs `sql` with psql (-X -q -A -t -v ON_ERROR_STOP=1) against `db`
  /// and returns its output. Throws std::runtime_error on failure.
  std::string psql(const std::string& db, const std::string& sql) const;
  /// Terminates every server process connected to `db` (a lost
  /// connection as the client sees it). Returns how many it ended.
  int drop_connections(const std::string& db) const;

  /// Stops the postmaster but keeps the data (the database "goes away").
  void stop();
  /// Starts it again on the same port and data. False (with `why`) on
  /// failure.
  bool restart(std::string& why);
  bool running() const { return pid_ > 0; }

private:
  pg_server() = default;
  bool launch(std::string& why);
  void halt();

  pg_server_options opts_;
  std::string bin_;
  std::string dir_;
  std::string data_;
  std::string log_;
  unsigned uid_ = 0;
  unsigned gid_ = 0;
  bool switch_user_ = false;
  int port_ = 0;
  int pid_ = -1;
  int databases_ = 0;
};

/// The test executable's one server, started on first use and stopped at
/// exit. Where it cannot start, prints "SKIPPED: ..." and exits 77 (or,
/// under MIBYAN_REQUIRE_TEST_DATA=1, "FAILED: ..." and exits 1): see
/// tests/support/missing_peer.hpp.
pg_server& shared_pg_server();

} // namespace mibyan::test
