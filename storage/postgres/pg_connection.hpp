// File: storage/postgres/pg_connection.hpp
//
// One libpq connection (Debian's libpq, the PostgreSQL C client: plain
// return codes, no exceptions to catch at every call; docs/storage.md,
// "PostgreSQL") with the few calls the PostgreSQL store needs: statements
// with parameters (prepared once per connection and reused), results in
// the binary format, and every failure mapped to a `status` code
// (pg_error_code below).
//
// libpq's types stay opaque here: only the .cpp files of this folder
// include <libpq-fe.h>.
//
// Thread safety: a connection is used by one thread at a time (the pool,
// storage/postgres/pg_pool.hpp, hands it out). Nothing throws.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

typedef struct pg_conn PGconn;
typedef struct pg_result PGresult;

namespace mibyan::pg {

/// What to connect to. `url` is a libpq connection URI or key=value
/// string ("postgresql://user@host:5432/db?sslmode=require"); it is passed
/// to libpq unchanged, so TLS (sslmode, sslrootcert...) works as libpq
/// documents it. The password comes from `password` when non-empty (the
/// caller read it from the environment), else libpq's own PGPASSWORD or
/// ~/.pgpass.
struct connect_options {
  std::string url;
  std::string password;
  /// Seconds libpq waits for a connection (the URL's connect_timeout, when
  /// it has one, wins; so do its keepalives_* and tcp_user_timeout, which
  /// default to 10 s / 5 s / 3 probes and 30 s).
  int connect_timeout_s = 5;
};

/// One statement parameter: text (`binary` false) or raw bytes for a bytea
/// parameter (`binary` true); `null` for SQL NULL.
struct param {
  std::string value;
  bool binary = false;
  bool null = false;

  param() : null(true) {}
  param(std::string v) : value(std::move(v)) {}
  param(const char* v) : value(v) {}
  param(int64_t v) : value(std::to_string(v)) {}
  param(uint64_t v) : value(std::to_string(v)) {}
  param(int v) : value(std::to_string(v)) {}
  param(bool v) : value(v ? "t" : "f") {}
  static param bytes(std::string v) {
    param p{std::move(v)};
    p.binary = true;
    return p;
  }
};

/// A result set in the binary format. Accessors take a row and a column
/// and check neither (the statements are ours).
class rows {
public:
  rows() = default;
  explicit rows(PGresult* r);
  rows(rows&& o) noexcept;
  rows& operator=(rows&& o) noexcept;
  rows(const rows&) = delete;
  rows& operator=(const rows&) = delete;
  ~rows();

  int size() const;
  /// Rows changed by an INSERT/UPDATE/DELETE.
  int64_t affected() const;
  bool null(int row, int col) const;
  /// text, varchar, bytea: the raw bytes.
  std::string_view bytes(int row, int col) const;
  std::string str(int row, int col) const {
    return std::string{bytes(row, col)};
  }
  /// int8 (also int4 and int2, widened).
  int64_t i64(int row, int col) const;
  double f64(int row, int col) const;
  bool boolean(int row, int col) const;

private:
  PGresult* r_ = nullptr;
};

/// The status code for a failed statement: SQLSTATE class 08 (connection),
/// 57P01..57P03 (shutdown, cannot connect now), 53 (insufficient
/// resources: a full disk is resource_exhausted), 40 (serialization
/// failure, deadlock: retryable) and a lost connection are `unavailable`
/// (retryable) except 53100/53200 (disk full, out of memory:
/// resource_exhausted); 23505 already_exists, 23503 not_found, 22xxx and
/// 23514 invalid_argument, 28xxx and 42501 permission_denied, XX001/XX002
/// data_corrupt, 57014 cancelled, 54xxx resource_exhausted; anything else
/// internal.
status_code pg_error_code(std::string_view sqlstate, bool connection_lost);

/// True for SQLSTATEs after which the same transaction may simply run
/// again (40001 serialization failure, 40P01 deadlock).
bool pg_retry_txn(std::string_view sqlstate);

/// True when `url` carries a password (the CLI refuses one on its command
/// line: passwords come from the environment). False for a URL libpq
/// cannot parse (connecting reports that).
bool url_has_password(const std::string& url);

class connection {
public:
  /// Connects (blocking). Errors: `unavailable` when the server cannot be
  /// reached or refuses for now, `permission_denied` for a refused login,
  /// `config_invalid` for a URL libpq cannot parse; the message names the
  /// host and libpq's reason (never the password).
  static result<std::unique_ptr<connection>> open(const connect_options& o);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  /// Runs one statement with parameters ($1...), prepared on first use
  /// on this connection. `what` names the operation in errors.
  result<rows> exec(const std::string& sql, const std::vector<param>& ps,
                    const char* what);
  /// Runs SQL text without parameters (may hold several statements:
  /// schema steps, BEGIN, COMMIT).
  status run(const std::string& sql, const char* what);

  /// The SQLSTATE of the last failure ("" for none or a lost connection).
  const std::string& last_sqlstate() const { return sqlstate_; }
  /// The connection is gone (the server closed it or the network failed):
  /// the pool drops it and opens a new one.
  bool broken() const;
  /// "host:port/db" for messages.
  const std::string& where() const { return where_; }
  /// The server's version number (150018 for 15.18).
  int server_version() const;

private:
  connection() = default;
  status failure(PGresult* r, const char* what);

  PGconn* c_ = nullptr;
  std::string where_;
  std::string sqlstate_;
  std::map<std::string, std::string> prepared_;
};

} // namespace mibyan::pg
