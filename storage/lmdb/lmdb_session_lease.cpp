// The LMDB lease store (storage/session_lease.hpp): named database
// "leases" in the session store's environment.
//   "\0next"  -> be64(the last token drawn)
//   name      -> be64(token) be64(expires_at_ms) u8(flags: 1 = released)
//                holder bytes
// Names never start with '\0' (acquire refuses them).
#include "storage/lmdb/lmdb_session_lease.hpp"

#include <chrono>
#include <map>
#include <mutex>
#include <vector>

#include "storage/byte_codec.hpp"
#include "storage/lmdb/lmdb_env.hpp"
#include "storage/lmdb/lmdb_session_store.hpp"

namespace mibyan {

namespace {

const std::string counter_key{"\0next", 5};

// The leases database of each environment that has a lease store in this
// process (set once at set-up; LMDB database handles live as long as the
// environment). Read by the fencing check inside the store's writes.
// An entry lives while a lease store of its environment does (counted).
struct registered {
  MDB_dbi dbi = 0;
  int users = 0;
};
std::mutex registry_mtx;
std::map<MDB_env*, registered>& registry() {
  static std::map<MDB_env*, registered> r;
  return r;
}

bool find_dbi(MDB_env* env, MDB_dbi& out) {
  std::lock_guard<std::mutex> g{registry_mtx};
  auto it = registry().find(env);
  if (it == registry().end())
    return false;
  out = it->second.dbi;
  return true;
}

void register_dbi(MDB_env* env, MDB_dbi dbi) {
  std::lock_guard<std::mutex> g{registry_mtx};
  auto& r = registry()[env];
  r.dbi = dbi;
  ++r.users;
}

void unregister_dbi(MDB_env* env) {
  std::lock_guard<std::mutex> g{registry_mtx};
  auto it = registry().find(env);
  if (it != registry().end() && --it->second.users <= 0)
    registry().erase(it);
}

std::string encode(const lease_state& s) {
  std::string v;
  codec::put_be64(v, s.token);
  codec::put_be64(v, static_cast<uint64_t>(s.expires_at_ms));
  v.push_back(s.released ? 1 : 0);
  v += s.holder;
  return v;
}

bool decode(std::string_view v, lease_state& s) {
  if (v.size() < 17)
    return false;
  s.token = codec::read_be64(v.data());
  s.expires_at_ms = static_cast<int64_t>(codec::read_be64(v.data() + 8));
  s.released = (v[16] & 1) != 0;
  s.holder = std::string{v.substr(17)};
  return true;
}

// Reads row `name` into `s`: 0, MDB_NOTFOUND, or an error (`error` set).
int read_row(MDB_txn* txn, MDB_dbi dbi, const std::string& name,
             lease_state& s, std::string& error) {
  std::string_view v;
  int rc = lmdb_env::get(txn, dbi, name, v);
  if (rc != 0)
    return rc;
  s.name = name;
  if (!decode(v, s)) {
    error = "lease '" + name + "' is damaged";
    return MDB_CORRUPTED;
  }
  return 0;
}

status check_name(const std::string& name, const char* op) {
  if (name.empty() || name[0] == '\0' || name.size() > 512)
    return status::failure(status_code::invalid_argument,
                           std::string{op} + ": bad lease name");
  return {};
}

class lmdb_leases final : public session_lease_store {
public:
  lmdb_leases(lmdb_env& env, MDB_dbi dbi, std::function<int64_t()> now)
    : env_(env), dbi_(dbi), now_(std::move(now)) {
    register_dbi(env_.raw(), dbi_);
  }
  ~lmdb_leases() override { unregister_dbi(env_.raw()); }

  result<lease_attempt> acquire(const std::string& name,
                                const std::string& holder,
                                int64_t ttl_ms) override {
    if (auto st = check_name(name, "lease acquire"); !st)
      return st;
    if (holder.empty() || ttl_ms <= 0)
      return status::failure(status_code::invalid_argument,
                             "lease acquire: empty holder or ttl <= 0");
    lease_attempt out;
    auto st = env_.write(
      [&](MDB_txn* txn, std::string& error) {
        out = lease_attempt{};
        int64_t now = now_();
        lease_state row;
        int rc = read_row(txn, dbi_, name, row, error);
        if (rc != 0 && rc != MDB_NOTFOUND)
          return rc;
        out.current = row;
        if (rc == 0 && row.holder != holder && row.live(now))
          return 0; // held by another: nothing written
        uint64_t token = row.token;
        if (rc == MDB_NOTFOUND || row.holder != holder) {
          // Changes hands: draw the next token.
          std::string_view c;
          uint64_t last = 0;
          int crc = lmdb_env::get(txn, dbi_, counter_key, c);
          if (crc == 0 && c.size() == 8)
            last = codec::read_be64(c.data());
          else if (crc != 0 && crc != MDB_NOTFOUND)
            return crc;
          token = std::max(last, row.token) + 1;
          if ((crc = lmdb_env::put(txn, dbi_, counter_key, codec::be64(token)))
              != 0)
            return crc;
          out.new_token = true;
          out.took_over = rc == 0 && !row.holder.empty() && !row.released;
        }
        lease_state next;
        next.holder = holder;
        next.token = token;
        next.expires_at_ms = now + ttl_ms;
        next.released = false;
        if ((rc = lmdb_env::put(txn, dbi_, name, encode(next))) != 0)
          return rc;
        out.granted = true;
        out.token = token;
        out.expires_at_ms = next.expires_at_ms;
        return 0;
      },
      "lease acquire");
    if (!st)
      return unavailable_if_io(st);
    return out;
  }

  status release(const std::string& name, const std::string& holder,
                 uint64_t token) override {
    if (auto st = check_name(name, "lease release"); !st)
      return st;
    auto st = env_.write(
      [&](MDB_txn* txn, std::string& error) {
        lease_state row;
        int rc = read_row(txn, dbi_, name, row, error);
        if (rc == MDB_NOTFOUND)
          return 0;
        if (rc != 0)
          return rc;
        if (row.holder != holder || row.token != token || row.released)
          return 0;
        row.released = true;
        row.expires_at_ms = 0;
        return lmdb_env::put(txn, dbi_, name, encode(row));
      },
      "lease release");
    return st ? st : unavailable_if_io(st);
  }

  result<lease_state> get(const std::string& name) const override {
    if (auto st = check_name(name, "lease get"); !st)
      return st;
    lease_state row;
    bool found = false;
    auto st = env_.read(
      [&](MDB_txn* txn, std::string& error) {
        int rc = read_row(txn, dbi_, name, row, error);
        found = rc == 0;
        return rc == MDB_NOTFOUND ? 0 : rc;
      },
      "lease get");
    if (!st)
      return unavailable_if_io(st);
    if (!found)
      return status::failure(status_code::not_found,
                             "lease '" + name + "' was never held");
    return row;
  }

  result<size_t> expire_holder(const std::string& holder) override {
    size_t n = 0;
    auto st = env_.write(
      [&](MDB_txn* txn, std::string& error) {
        n = 0;
        int64_t now = now_();
        MDB_cursor* cur = nullptr;
        int rc = mdb_cursor_open(txn, dbi_, &cur);
        if (rc != 0)
          return rc;
        MDB_val k, v;
        std::vector<std::pair<std::string, lease_state>> changed;
        for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
             rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
          auto key = lmdb_env::view(k);
          if (!key.empty() && key[0] == '\0')
            continue;
          lease_state s;
          if (!decode(lmdb_env::view(v), s))
            continue;
          if (s.holder == holder && s.live(now)) {
            s.expires_at_ms = 0; // lapsed, not released: a takeover
            changed.emplace_back(std::string{key}, s);
          }
        }
        mdb_cursor_close(cur);
        if (rc != MDB_NOTFOUND) {
          error = "scan";
          return rc;
        }
        for (auto& [key, s] : changed)
          if ((rc = lmdb_env::put(txn, dbi_, key, encode(s))) != 0)
            return rc;
        n = changed.size();
        return 0;
      },
      "lease expire");
    if (!st)
      return unavailable_if_io(st);
    return n;
  }

private:
  // The store's own failures are returned as they are; only "cannot reach"
  // conditions are unavailable, and LMDB on a local disk has none.
  static status unavailable_if_io(status st) { return st; }

  lmdb_env& env_;
  MDB_dbi dbi_;
  std::function<int64_t()> now_;
};

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

} // namespace

int lmdb_check_fence(MDB_txn* txn, const std::string& session_id,
                     uint64_t token, std::string& error) {
  MDB_dbi dbi = 0;
  if (!find_dbi(mdb_txn_env(txn), dbi))
    return 0;
  lease_state row;
  auto name = session_lease_name(session_id);
  int rc = read_row(txn, dbi, name, row, error);
  if (rc == MDB_NOTFOUND)
    return 0;
  if (rc != 0)
    return rc;
  if (row.token > token) {
    error = std::string{fenced_prefix} + "session '" + session_id
            + "' is now run by " + row.holder + " (lease token "
            + std::to_string(row.token) + "); this writer holds token "
            + std::to_string(token);
    return 1;
  }
  return 0;
}

result<std::shared_ptr<session_lease_store>>
open_lmdb_session_leases(lmdb_session_store& store,
                         std::function<int64_t()> now_ms) {
  auto& env = store.env();
  if (env.read_only())
    return status::failure(status_code::permission_denied,
                           "leases: the store is open read-only");
  MDB_dbi dbi = 0;
  if (!find_dbi(env.raw(), dbi)) {
    auto opened = env.open_dbi("leases");
    if (!opened)
      return opened.get_status();
    dbi = *opened;
  }
  if (!now_ms)
    now_ms = wall_ms;
  return std::shared_ptr<session_lease_store>(
    std::make_shared<lmdb_leases>(env, dbi, std::move(now_ms)));
}

} // namespace mibyan
