#include "storage/postgres/pg_connection.hpp"

#include <cstring>


#include "base/json.hpp"
#include "storage/postgres/pq_library.hpp"

namespace mibyan::pg {

namespace {

uint64_t be(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// libpq's message on one line, without the trailing newline.
std::string one_line(const char* msg) {
  std::string s = msg ? msg : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  for (auto& c : s)
    if (c == '\n')
      c = ' ';
  return json::sanitize_utf8(s);
}

} // namespace

// -- rows ---------------------------------------------------------------------

rows::rows(PGresult* r) : r_(r) {}
rows::rows(rows&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
rows& rows::operator=(rows&& o) noexcept {
  if (this != &o) {
    if (r_ != nullptr)
      pq().PQclear(r_);
    r_ = o.r_;
    o.r_ = nullptr;
  }
  return *this;
}
rows::~rows() {
  if (r_ != nullptr)
    pq().PQclear(r_);
}

int rows::size() const { return r_ ? pq().PQntuples(r_) : 0; }

int64_t rows::affected() const {
  const char* n = r_ ? pq().PQcmdTuples(r_) : "";
  return n && *n ? std::atoll(n) : 0;
}

bool rows::null(int row, int col) const {
  return pq().PQgetisnull(r_, row, col) != 0;
}

std::string_view rows::bytes(int row, int col) const {
  return {pq().PQgetvalue(r_, row, col),
          static_cast<size_t>(pq().PQgetlength(r_, row, col))};
}

int64_t rows::i64(int row, int col) const {
  if (null(row, col))
    return 0;
  int n = pq().PQgetlength(r_, row, col);
  uint64_t v = be(pq().PQgetvalue(r_, row, col), n);
  if (n == 4)
    return static_cast<int32_t>(v);
  if (n == 2)
    return static_cast<int16_t>(v);
  return static_cast<int64_t>(v);
}

double rows::f64(int row, int col) const {
  if (null(row, col))
    return 0;
  int n = pq().PQgetlength(r_, row, col);
  uint64_t v = be(pq().PQgetvalue(r_, row, col), n);
  if (n == 4) {
    auto u = static_cast<uint32_t>(v);
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  double d;
  std::memcpy(&d, &v, 8);
  return d;
}

bool rows::boolean(int row, int col) const {
  return !null(row, col) && pq().PQgetlength(r_, row, col) == 1
         && pq().PQgetvalue(r_, row, col)[0] != 0;
}

// -- error codes --------------------------------------------------------------

status_code pg_error_code(std::string_view s, bool connection_lost) {
  if (connection_lost || s.empty())
    return connection_lost ? status_code::unavailable : status_code::internal;
  auto cls = s.substr(0, 2);
  if (s == "53100" || s == "53200")
    return status_code::resource_exhausted;
  if (cls == "08" || cls == "53" || cls == "40" || s == "57P01"
      || s == "57P02" || s == "57P03")
    return status_code::unavailable;
  if (s == "23505")
    return status_code::already_exists;
  if (s == "23503")
    return status_code::not_found;
  if (cls == "22" || s == "23514" || s == "23502")
    return status_code::invalid_argument;
  if (cls == "28" || s == "42501")
    return status_code::permission_denied;
  if (s == "XX001" || s == "XX002")
    return status_code::data_corrupt;
  if (s == "57014")
    return status_code::cancelled;
  if (cls == "54")
    return status_code::resource_exhausted;
  return status_code::internal;
}

bool pg_retry_txn(std::string_view s) { return s == "40001" || s == "40P01"; }

// -- connection ---------------------------------------------------------------

bool url_has_password(const std::string& url) {
  if (!pq_lib())
    return false;  // connecting reports the missing library
  char* err = nullptr;
  PQconninfoOption* opts = pq().PQconninfoParse(url.c_str(), &err);
  if (err != nullptr)
    pq().PQfreemem(err);
  if (opts == nullptr)
    return false;
  bool has = false;
  for (auto* o = opts; o->keyword != nullptr; ++o)
    if (std::strcmp(o->keyword, "password") == 0 && o->val != nullptr
        && *o->val != '\0')
      has = true;
  pq().PQconninfoFree(opts);
  return has;
}

result<std::unique_ptr<connection>>
connection::open(const connect_options& o) {
  using res = result<std::unique_ptr<connection>>;
  if (auto lib = pq_lib(); !lib)
    return res::failure(lib.code, "cannot connect to PostgreSQL: " + lib.error);
  // The URL's own settings override the defaults before it; the password
  // (from the environment) comes after it and so wins.
  // TCP keepalives and tcp_user_timeout: a server or network that stops
  // answering mid-call ends the call (as a lost connection) within about
  // 30 s instead of blocking it for the kernel's default of many minutes.
  std::string timeout = std::to_string(o.connect_timeout_s);
  std::vector<const char*> keys = {
    "connect_timeout",  "keepalives_idle",  "keepalives_interval",
    "keepalives_count", "tcp_user_timeout", "fallback_application_name",
    "dbname"};
  std::vector<const char*> vals = {timeout.c_str(), "10", "5", "3", "30000",
                                   "mibyan", o.url.c_str()};
  if (!o.password.empty()) {
    keys.push_back("password");
    vals.push_back(o.password.c_str());
  }
  keys.push_back(nullptr);
  vals.push_back(nullptr);
  // Check the syntax first: libpq reports a malformed URL like an
  // unreachable server.
  char* perr = nullptr;
  PQconninfoOption* parsed = pq().PQconninfoParse(o.url.c_str(), &perr);
  if (parsed == nullptr) {
    std::string why = one_line(perr ? perr : "cannot parse it");
    if (perr)
      pq().PQfreemem(perr);
    return res::failure(status_code::config_invalid,
                        "the PostgreSQL URL is malformed: " + why);
  }
  pq().PQconninfoFree(parsed);
  std::unique_ptr<connection> c{new connection};
  c->c_ = pq().PQconnectdbParams(keys.data(), vals.data(), 1);
  if (c->c_ == nullptr)
    return res::failure(status_code::internal,
                        "connect to PostgreSQL: out of memory");
  auto host = [&] {
    std::string h = pq().PQhost(c->c_) ? pq().PQhost(c->c_) : "?";
    std::string p = pq().PQport(c->c_) ? pq().PQport(c->c_) : "";
    std::string d = pq().PQdb(c->c_) ? pq().PQdb(c->c_) : "";
    return h + (p.empty() ? "" : ":" + p) + "/" + d;
  };
  c->where_ = host();
  if (pq().PQstatus(c->c_) != CONNECTION_OK) {
    std::string why = one_line(pq().PQerrorMessage(c->c_));
    auto code = status_code::unavailable;
    if (why.find("password authentication failed") != std::string::npos
        || why.find("no password supplied") != std::string::npos
        || why.find("authentication failed") != std::string::npos
        || why.find("permission denied") != std::string::npos)
      code = status_code::permission_denied;
    else if (why.find("does not exist") != std::string::npos)
      code = status_code::not_found;
    return res::failure(code, "cannot connect to PostgreSQL at "
                                + c->where_ + ": " + why);
  }
  return res{std::move(c)};
}

connection::~connection() {
  if (c_ != nullptr)
    pq().PQfinish(c_);
}

bool connection::broken() const {
  return c_ == nullptr || pq().PQstatus(c_) != CONNECTION_OK;
}

int connection::server_version() const { return pq().PQserverVersion(c_); }

status connection::failure(PGresult* r, const char* what) {
  sqlstate_.clear();
  const char* st = r ? pq().PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  if (st != nullptr)
    sqlstate_ = st;
  bool lost = broken();
  std::string why = one_line(r && pq().PQresultErrorMessage(r)
                                 && *pq().PQresultErrorMessage(r)
                               ? pq().PQresultErrorMessage(r)
                               : pq().PQerrorMessage(c_));
  if (r != nullptr)
    pq().PQclear(r);
  auto code = pg_error_code(sqlstate_, lost);
  std::string msg = std::string{what} + ": ";
  if (code == status_code::unavailable)
    msg += "store unavailable: ";
  msg += lost ? "lost the connection to PostgreSQL at " + where_ + ": " + why
              : why;
  return status::failure(code, msg);
}

result<rows> connection::exec(const std::string& sql,
                              const std::vector<param>& ps,
                              const char* what) {
  sqlstate_.clear();
  auto it = prepared_.find(sql);
  if (it == prepared_.end()) {
    std::string name = "s" + std::to_string(prepared_.size() + 1);
    PGresult* r = pq().PQprepare(c_, name.c_str(), sql.c_str(), 0, nullptr);
    if (r == nullptr || pq().PQresultStatus(r) != PGRES_COMMAND_OK)
      return result<rows>{failure(r, what)};
    pq().PQclear(r);
    it = prepared_.emplace(sql, std::move(name)).first;
  }
  std::vector<const char*> values(ps.size());
  std::vector<int> lengths(ps.size());
  std::vector<int> formats(ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    values[i] = ps[i].null ? nullptr : ps[i].value.data();
    lengths[i] = static_cast<int>(ps[i].value.size());
    formats[i] = ps[i].binary ? 1 : 0;
  }
  PGresult* r = pq().PQexecPrepared(c_, it->second.c_str(),
                               static_cast<int>(ps.size()), values.data(),
                               lengths.data(), formats.data(), 1);
  auto st = r ? pq().PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
    return result<rows>{failure(r, what)};
  return result<rows>{rows{r}};
}

status connection::run(const std::string& sql, const char* what) {
  sqlstate_.clear();
  PGresult* r = pq().PQexec(c_, sql.c_str());
  auto st = r ? pq().PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
    return failure(r, what);
  pq().PQclear(r);
  return {};
}

} // namespace mibyan::pg
