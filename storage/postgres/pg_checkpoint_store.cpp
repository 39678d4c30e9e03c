// The kernel checkpoint store on PostgreSQL
// (storage/postgres/pg_side_stores.hpp): one row per session with the
// latest checkpoint.
#include "storage/checkpoint_store.hpp"

#include "storage/postgres/pg_connection.hpp"
#include "storage/postgres/pg_session_store.hpp"
#include "storage/postgres/pg_side_stores.hpp"
#include "storage/store_checks.hpp"

namespace mibyan {

using pg::param;

namespace {

class pg_checkpoint_store final : public checkpoint_store {
public:
  pg_checkpoint_store(pg_session_store& s, std::shared_ptr<void> owner)
    : owner_(std::move(owner)), s_(s) {}

  store_status put(const std::string& session, uint64_t seq,
                   std::string_view bytes) override {
    if (auto err = store_checks::check_session_id(session); !err.empty())
      return status::failure(status_code::invalid_argument,
                             "store checkpoint: " + err);
    // One statement: a checkpoint not newer than the stored one changes
    // nothing, so writers finishing out of order never go backwards.
    return s_.write_txn("store checkpoint", [&](pg::connection& c) {
      auto r = c.exec(
        "INSERT INTO mibyan_checkpoints (session_id, seq, bytes) VALUES "
        "($1, $2, $3) ON CONFLICT (session_id) DO UPDATE SET seq = "
        "EXCLUDED.seq, bytes = EXCLUDED.bytes WHERE mibyan_checkpoints.seq "
        "< EXCLUDED.seq",
        {param{session}, param{seq}, param::bytes(std::string{bytes})},
        "store checkpoint");
      return r.get_status();
    });
  }

  store_result<std::optional<stored_checkpoint>>
  latest(const std::string& session) override {
    using res = store_result<std::optional<stored_checkpoint>>;
    if (auto err = store_checks::check_session_id(session); !err.empty())
      return res::failure(status_code::invalid_argument,
                          "read checkpoint: " + err);
    std::optional<stored_checkpoint> out;
    auto st = s_.read("read checkpoint", [&](pg::connection& c) {
      out.reset();
      auto r = c.exec("SELECT seq, bytes FROM mibyan_checkpoints WHERE "
                      "session_id = $1",
                      {param{session}}, "read checkpoint");
      if (!r)
        return r.get_status();
      if (r->size() > 0) {
        stored_checkpoint cp;
        cp.session = session;
        cp.seq = static_cast<uint64_t>(r->i64(0, 0));
        cp.bytes = r->str(0, 1);
        out = std::move(cp);
      }
      return status{};
    });
    if (!st)
      return res{st};
    return res{std::move(out)};
  }

  store_status remove(const std::string& session) override {
    if (auto err = store_checks::check_session_id(session); !err.empty())
      return status::failure(status_code::invalid_argument,
                             "remove checkpoints: " + err);
    return s_.write_txn("remove checkpoints", [&](pg::connection& c) {
      auto r = c.exec("DELETE FROM mibyan_checkpoints WHERE session_id = $1",
                      {param{session}}, "remove checkpoints");
      return r.get_status();
    });
  }

private:
  std::shared_ptr<void> owner_; // keeps s_ alive when set
  pg_session_store& s_;
};

} // namespace

store_result<std::unique_ptr<checkpoint_store>>
open_pg_checkpoint_store(pg_session_store& store,
                         std::shared_ptr<void> owner) {
  return store_result<std::unique_ptr<checkpoint_store>>{
    std::unique_ptr<checkpoint_store>{
      new pg_checkpoint_store(store, std::move(owner))}};
}

} // namespace mibyan
