// Leases with fencing tokens on PostgreSQL (storage/session_lease.hpp,
// storage/postgres/pg_side_stores.hpp): rows of mibyan_leases, tokens from
// the sequence mibyan_lease_tokens (so they only grow, across every
// gateway). Each acquire/release/expire is one transaction that locks the
// row (SELECT ... FOR UPDATE; a first grant races on the primary key and
// the loser retries). Expiry uses the database server's clock unless a
// clock is injected: gateways on different machines then agree on "now".
#include "storage/session_lease.hpp"

#include "storage/postgres/pg_connection.hpp"
#include "storage/postgres/pg_session_store.hpp"
#include "storage/postgres/pg_side_stores.hpp"

namespace mibyan {

using pg::param;

namespace {

status check_name(const std::string& name, const char* op) {
  if (name.empty() || name[0] == '\0' || name.size() > 512
      || name.find('\0') != std::string::npos)
    return status::failure(status_code::invalid_argument,
                           std::string{op} + ": bad lease name");
  return {};
}

class pg_leases final : public session_lease_store {
public:
  pg_leases(pg_session_store& s, std::function<int64_t()> now)
    : s_(s), now_(std::move(now)) {}

  result<lease_attempt> acquire(const std::string& name,
                                const std::string& holder,
                                int64_t ttl_ms) override {
    if (auto st = check_name(name, "lease acquire"); !st)
      return st;
    if (holder.empty() || ttl_ms <= 0)
      return status::failure(status_code::invalid_argument,
                             "lease acquire: empty holder or ttl <= 0");
    lease_attempt out;
    auto st = s_.write_txn("lease acquire", [&](pg::connection& c) {
      out = lease_attempt{};
      int64_t now = 0;
      if (auto n = clock(c); !n)
        return n.get_status();
      else
        now = *n;
      // The row exists afterwards (a new name starts unheld), so two
      // first grants serialise on its lock.
      auto ins = c.exec("INSERT INTO mibyan_leases (name, holder, token, "
                        "expires_at_ms, released) VALUES ($1, '', 0, 0, "
                        "false) ON CONFLICT (name) DO NOTHING",
                        {param{name}}, "lease acquire");
      if (!ins)
        return ins.get_status();
      auto r = c.exec("SELECT holder, token, expires_at_ms, released FROM "
                      "mibyan_leases WHERE name = $1 FOR UPDATE",
                      {param{name}}, "lease acquire");
      if (!r)
        return r.get_status();
      lease_state row;
      row.name = name;
      row.holder = r->str(0, 0);
      row.token = static_cast<uint64_t>(r->i64(0, 1));
      row.expires_at_ms = r->i64(0, 2);
      row.released = r->boolean(0, 3);
      out.current = row;
      if (row.holder != holder && row.live(now))
        return status{};  // held by another: nothing written
      uint64_t token = row.token;
      if (row.holder != holder) {
        // Changes hands: draw the next token.
        auto t = c.exec("SELECT nextval('mibyan_lease_tokens')", {},
                        "lease acquire");
        if (!t)
          return t.get_status();
        token = std::max<uint64_t>(static_cast<uint64_t>(t->i64(0, 0)),
                                   row.token + 1);
        out.new_token = true;
        out.took_over = !row.holder.empty() && !row.released;
      }
      auto up = c.exec("UPDATE mibyan_leases SET holder = $2, token = $3, "
                       "expires_at_ms = $4, released = false WHERE name = $1",
                       {param{name}, param{holder}, param{token},
                        param{now + ttl_ms}},
                       "lease acquire");
      if (!up)
        return up.get_status();
      out.granted = true;
      out.token = token;
      out.expires_at_ms = now + ttl_ms;
      return status{};
    });
    if (!st)
      return st;
    return out;
  }

  status release(const std::string& name, const std::string& holder,
                 uint64_t token) override {
    if (auto st = check_name(name, "lease release"); !st)
      return st;
    return s_.write_txn("lease release", [&](pg::connection& c) {
      auto r = c.exec("UPDATE mibyan_leases SET released = true, "
                      "expires_at_ms = 0 WHERE name = $1 AND holder = $2 AND "
                      "token = $3 AND NOT released",
                      {param{name}, param{holder}, param{token}},
                      "lease release");
      return r.get_status();
    });
  }

  result<lease_state> get(const std::string& name) const override {
    if (auto st = check_name(name, "lease get"); !st)
      return st;
    lease_state row;
    bool found = false;
    auto st = s_.read("lease get", [&](pg::connection& c) {
      auto r = c.exec("SELECT holder, token, expires_at_ms, released FROM "
                      "mibyan_leases WHERE name = $1",
                      {param{name}}, "lease get");
      if (!r)
        return r.get_status();
      found = r->size() > 0 && r->i64(0, 1) != 0;
      if (found) {
        row.name = name;
        row.holder = r->str(0, 0);
        row.token = static_cast<uint64_t>(r->i64(0, 1));
        row.expires_at_ms = r->i64(0, 2);
        row.released = r->boolean(0, 3);
      }
      return status{};
    });
    if (!st)
      return st;
    if (!found)
      return status::failure(status_code::not_found,
                             "lease '" + name + "' was never held");
    return row;
  }

  result<size_t> expire_holder(const std::string& holder) override {
    size_t n = 0;
    auto st = s_.write_txn("lease expire", [&](pg::connection& c) {
      auto now = clock(c);
      if (!now)
        return now.get_status();
      // Lapsed, not released: the next holder takes it over.
      auto r = c.exec("UPDATE mibyan_leases SET expires_at_ms = 0 WHERE "
                      "holder = $1 AND NOT released AND expires_at_ms > $2",
                      {param{holder}, param{*now}}, "lease expire");
      if (!r)
        return r.get_status();
      n = static_cast<size_t>(r->affected());
      return status{};
    });
    if (!st)
      return st;
    return n;
  }

private:
  result<int64_t> clock(pg::connection& c) const {
    if (now_)
      return now_();
    auto r = c.exec("SELECT (extract(epoch FROM clock_timestamp()) * "
                    "1000)::bigint",
                    {}, "lease clock");
    if (!r)
      return r.get_status();
    return r->i64(0, 0);
  }

  pg_session_store& s_;
  std::function<int64_t()> now_;
};

} // namespace

store_result<std::shared_ptr<session_lease_store>>
open_pg_session_leases(pg_session_store& store,
                       std::function<int64_t()> now_ms) {
  return store_result<std::shared_ptr<session_lease_store>>{
    std::shared_ptr<session_lease_store>{
      std::make_shared<pg_leases>(store, std::move(now_ms))}};
}

} // namespace mibyan
