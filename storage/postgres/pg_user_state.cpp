// The user-state store on PostgreSQL (storage/postgres/pg_side_stores.hpp):
// one row per document in mibyan_user_state, versions from the sequence
// mibyan_user_state_versions. A batch locks the rows it compares (SELECT
// ... FOR UPDATE) and inserts new ones with ON CONFLICT DO NOTHING, so two
// gateways writing one document serialise and the second one's stale
// version is refused, never silently overwritten.
#include "storage/user_state_store.hpp"

#include <chrono>

#include "storage/postgres/pg_connection.hpp"
#include "storage/postgres/pg_session_store.hpp"
#include "storage/postgres/pg_side_stores.hpp"

namespace mibyan {

using pg::param;

namespace {

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

std::string conflict_text(const char* what, user_state_kind kind,
                          const user_doc_write& c, bool exists,
                          uint64_t found) {
  return std::string{what} + ": conflict: " + to_string(kind) + " document '"
         + c.name + "' is "
         + (exists ? "at version " + std::to_string(found)
                   : std::string{"deleted"})
         + ", the change expected "
         + (c.expected == 0 ? std::string{"no document"}
                            : "version " + std::to_string(c.expected));
}

class pg_user_state final : public user_state_store {
public:
  explicit pg_user_state(pg_session_store& s) : s_(s) {}

  store_result<user_doc> get(user_state_kind kind,
                             const std::string& name) const override {
    const char* what = "read user state";
    if (auto st = check_user_doc_name(name, what); !st)
      return st;
    user_doc d;
    d.name = name;
    auto st = s_.read(what, [&](pg::connection& c) {
      auto r = c.exec("SELECT version, updated_at_ms, bytes FROM "
                      "mibyan_user_state WHERE kind = $1 AND name = $2",
                      {param{static_cast<int>(kind)}, param{name}}, what);
      if (!r)
        return r.get_status();
      if (r->size() == 0)
        return status::failure(status_code::not_found,
                               std::string{what} + ": no " + to_string(kind)
                                 + " document '" + name + "'");
      d.version = static_cast<uint64_t>(r->i64(0, 0));
      d.updated_at_ms = r->i64(0, 1);
      d.bytes = r->str(0, 2);
      return status{};
    });
    if (!st)
      return st;
    return store_result<user_doc>{std::move(d)};
  }

  store_result<std::vector<user_doc>> list(user_state_kind kind,
                                           bool with_bytes) const override {
    const char* what = "list user state";
    std::vector<user_doc> out;
    auto st = s_.read(what, [&](pg::connection& c) {
      out.clear();
      auto r = c.exec(with_bytes
                        ? "SELECT name, version, updated_at_ms, bytes FROM "
                          "mibyan_user_state WHERE kind = $1 ORDER BY name"
                        : "SELECT name, version, updated_at_ms FROM "
                          "mibyan_user_state WHERE kind = $1 ORDER BY name",
                      {param{static_cast<int>(kind)}}, what);
      if (!r)
        return r.get_status();
      for (int i = 0; i < r->size(); ++i) {
        user_doc d;
        d.name = r->str(i, 0);
        d.version = static_cast<uint64_t>(r->i64(i, 1));
        d.updated_at_ms = r->i64(i, 2);
        if (with_bytes)
          d.bytes = r->str(i, 3);
        out.push_back(std::move(d));
      }
      return status{};
    });
    if (!st)
      return st;
    return store_result<std::vector<user_doc>>{std::move(out)};
  }

  store_result<std::vector<uint64_t>>
  write(user_state_kind kind,
        const std::vector<user_doc_write>& changes) override {
    const char* what = "write user state";
    if (auto st = check_user_doc_writes(changes, what); !st)
      return st;
    std::vector<uint64_t> versions;
    bool conflict = false;
    std::string conflict_msg;
    int64_t at = wall_ms();
    int k = static_cast<int>(kind);
    auto st = s_.write_txn(what, [&](pg::connection& c) {
      versions.assign(changes.size(), 0);
      conflict = false;
      for (size_t i = 0; i < changes.size(); ++i) {
        auto& ch = changes[i];
        auto cur = c.exec("SELECT version FROM mibyan_user_state WHERE "
                          "kind = $1 AND name = $2 FOR UPDATE",
                          {param{k}, param{ch.name}}, what);
        if (!cur)
          return cur.get_status();
        bool exists = cur->size() > 0;
        uint64_t found = exists ? static_cast<uint64_t>(cur->i64(0, 0)) : 0;
        if (ch.expected != user_doc_any_version
            && !(ch.erase && ch.expected == 0 && !exists)
            && (exists ? found != ch.expected : ch.expected != 0)) {
          conflict = true;
          conflict_msg = conflict_text(what, kind, ch, exists, found);
          return status::failure(status_code::already_exists, conflict_msg);
        }
        if (ch.erase) {
          if (exists) {
            auto del = c.exec("DELETE FROM mibyan_user_state WHERE kind = $1 "
                              "AND name = $2",
                              {param{k}, param{ch.name}}, what);
            if (!del)
              return del.get_status();
          }
          continue;
        }
        // A row another transaction inserted after our SELECT makes the
        // insert do nothing: then it is a conflict unless any version was
        // accepted (the upsert below handles that case).
        auto up = c.exec(
          exists || ch.expected == user_doc_any_version
            ? "INSERT INTO mibyan_user_state (kind, name, version, "
              "updated_at_ms, bytes) VALUES ($1, $2, "
              "nextval('mibyan_user_state_versions'), $3, $4) ON CONFLICT "
              "(kind, name) DO UPDATE SET version = EXCLUDED.version, "
              "updated_at_ms = EXCLUDED.updated_at_ms, bytes = "
              "EXCLUDED.bytes RETURNING version"
            : "INSERT INTO mibyan_user_state (kind, name, version, "
              "updated_at_ms, bytes) VALUES ($1, $2, "
              "nextval('mibyan_user_state_versions'), $3, $4) ON CONFLICT "
              "(kind, name) DO NOTHING RETURNING version",
          {param{k}, param{ch.name}, param{at}, param::bytes(ch.bytes)},
          what);
        if (!up)
          return up.get_status();
        if (up->size() == 0) {
          conflict = true;
          conflict_msg = conflict_text(what, kind, ch, true, 0);
          return status::failure(status_code::already_exists, conflict_msg);
        }
        versions[i] = static_cast<uint64_t>(up->i64(0, 0));
      }
      return status{};
    });
    if (conflict)
      return store_result<std::vector<uint64_t>>::failure(
        status_code::already_exists, conflict_msg);
    if (!st)
      return st;
    return store_result<std::vector<uint64_t>>{std::move(versions)};
  }

private:
  pg_session_store& s_;
};

} // namespace

store_result<std::unique_ptr<user_state_store>>
open_pg_user_state(pg_session_store& store) {
  return store_result<std::unique_ptr<user_state_store>>{
    std::unique_ptr<user_state_store>{new pg_user_state(store)}};
}

} // namespace mibyan
