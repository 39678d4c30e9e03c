// The prompt store on PostgreSQL (storage/postgres/pg_side_stores.hpp):
// each distinct prompt once in mibyan_prompts under its SHA-256, one
// reference per session in mibyan_session_prompts; a prompt goes with its
// last reference, in the same transaction.
#include "storage/prompt_store.hpp"

#include "base/crypto.hpp"
#include "storage/postgres/pg_connection.hpp"
#include "storage/postgres/pg_session_store.hpp"
#include "storage/postgres/pg_side_stores.hpp"

namespace mibyan {

using pg::param;

namespace {

// Points `sid` at `hash` (a stored prompt) and deletes the prompt it
// pointed at before when nothing else references it.
status reference_in(pg::connection& c, const std::string& sid,
                    const std::string& hash, const char* what) {
  auto old = c.exec("SELECT hash FROM mibyan_session_prompts WHERE "
                    "session_id = $1 FOR UPDATE",
                    {param{sid}}, what);
  if (!old)
    return old.get_status();
  if (old->size() > 0 && old->bytes(0, 0) == hash)
    return {};
  auto up = c.exec("INSERT INTO mibyan_session_prompts (session_id, hash) "
                   "VALUES ($1, $2) ON CONFLICT (session_id) DO UPDATE SET "
                   "hash = EXCLUDED.hash",
                   {param{sid}, param{hash}}, what);
  if (!up)
    return up.get_status();
  if (old->size() > 0) {
    auto gc = c.exec("DELETE FROM mibyan_prompts p WHERE p.hash = $1 AND "
                     "NOT EXISTS (SELECT 1 FROM mibyan_session_prompts s "
                     "WHERE s.hash = $1)",
                     {param{old->str(0, 0)}}, what);
    if (!gc)
      return gc.get_status();
  }
  return {};
}

class pg_prompt_store final : public prompt_store {
public:
  explicit pg_prompt_store(pg_session_store& s) : s_(s) {}

  store_result<std::string> put(const std::string& sid,
                                const std::string& text) override {
    if (sid.empty())
      return store_result<std::string>::failure(
        status_code::invalid_argument, "store prompt: empty session id");
    auto hash = sha256_hex(text);
    auto st = s_.write_txn("store prompt", [&](pg::connection& c) {
      auto ins = c.exec("INSERT INTO mibyan_prompts (hash, prompt) VALUES "
                        "($1, $2) ON CONFLICT (hash) DO NOTHING",
                        {param{hash}, param::bytes(text)}, "store prompt");
      if (!ins)
        return ins.get_status();
      return reference_in(c, sid, hash, "store prompt");
    });
    if (!st)
      return store_result<std::string>{st};
    return store_result<std::string>{hash};
  }

  store_status reference(const std::string& sid,
                         const std::string& hash) override {
    if (sid.empty() || hash.empty())
      return status::failure(status_code::invalid_argument,
                             "reference prompt: empty session id or hash");
    return s_.write_txn("reference prompt", [&](pg::connection& c) {
      auto p = c.exec("SELECT 1 FROM mibyan_prompts WHERE hash = $1 FOR "
                      "KEY SHARE",
                      {param{hash}}, "reference prompt");
      if (!p)
        return p.get_status();
      if (p->size() == 0)
        return status::failure(status_code::not_found,
                               "reference prompt: no prompt " + hash
                                 + " is stored");
      return reference_in(c, sid, hash, "reference prompt");
    });
  }

  store_result<std::string> hash_of(const std::string& sid) const override {
    std::string out;
    auto st = s_.read("read prompt reference", [&](pg::connection& c) {
      auto r = c.exec("SELECT hash FROM mibyan_session_prompts WHERE "
                      "session_id = $1",
                      {param{sid}}, "read prompt reference");
      if (!r)
        return r.get_status();
      if (r->size() == 0)
        return status::failure(status_code::not_found,
                               "read prompt reference: session " + sid
                                 + " has no stored prompt");
      out = r->str(0, 0);
      return status{};
    });
    if (!st)
      return store_result<std::string>{st};
    return store_result<std::string>{std::move(out)};
  }

  store_result<std::string> get(const std::string& hash) const override {
    std::string out;
    auto st = s_.read("read prompt", [&](pg::connection& c) {
      auto r = c.exec("SELECT prompt FROM mibyan_prompts WHERE hash = $1",
                      {param{hash}}, "read prompt");
      if (!r)
        return r.get_status();
      if (r->size() == 0)
        return status::failure(status_code::not_found, "read prompt: prompt "
                                                         + hash
                                                         + " is not stored");
      out = r->str(0, 0);
      return status{};
    });
    if (!st)
      return store_result<std::string>{st};
    if (sha256_hex(out) != hash)
      return store_result<std::string>::failure(
        status_code::data_corrupt,
        "read prompt: prompt " + hash + " does not match its hash");
    return store_result<std::string>{std::move(out)};
  }

  store_status drop(const std::string& sid) override {
    return s_.write_txn("drop prompt reference", [&](pg::connection& c) {
      auto r = c.exec(
        "WITH gone AS (DELETE FROM mibyan_session_prompts WHERE session_id "
        "= $1 RETURNING hash) DELETE FROM mibyan_prompts p USING gone WHERE "
        "p.hash = gone.hash AND NOT EXISTS (SELECT 1 FROM "
        "mibyan_session_prompts s WHERE s.hash = gone.hash AND "
        "s.session_id <> $1)",
        {param{sid}}, "drop prompt reference");
      return r.get_status();
    });
  }

  store_result<size_t> collect() override {
    size_t removed = 0;
    auto st = s_.write_txn("collect prompts", [&](pg::connection& c) {
      auto refs = c.exec("DELETE FROM mibyan_session_prompts r WHERE NOT "
                         "EXISTS (SELECT 1 FROM mibyan_sessions s WHERE "
                         "s.id = r.session_id)",
                         {}, "collect prompts");
      if (!refs)
        return refs.get_status();
      auto p = c.exec("DELETE FROM mibyan_prompts p WHERE NOT EXISTS "
                      "(SELECT 1 FROM mibyan_session_prompts s WHERE "
                      "s.hash = p.hash)",
                      {}, "collect prompts");
      if (!p)
        return p.get_status();
      removed = static_cast<size_t>(p->affected());
      return status{};
    });
    if (!st)
      return store_result<size_t>{st};
    return store_result<size_t>{removed};
  }

  store_result<size_t> count() const override {
    size_t n = 0;
    auto st = s_.read("count prompts", [&](pg::connection& c) {
      auto r = c.exec("SELECT count(*) FROM mibyan_prompts", {},
                      "count prompts");
      if (!r)
        return r.get_status();
      n = static_cast<size_t>(r->i64(0, 0));
      return status{};
    });
    if (!st)
      return store_result<size_t>{st};
    return store_result<size_t>{n};
  }

private:
  pg_session_store& s_;
};

} // namespace

store_result<std::unique_ptr<prompt_store>>
open_pg_prompt_store(pg_session_store& store) {
  return store_result<std::unique_ptr<prompt_store>>{
    std::unique_ptr<prompt_store>{new pg_prompt_store(store)}};
}

} // namespace mibyan
