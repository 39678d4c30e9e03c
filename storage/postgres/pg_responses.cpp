// The PostgreSQL session store, part: stored responses of the Responses API
// (a response belongs to a session and goes with it: ON DELETE CASCADE)
// and last_message_id.
#include "storage/postgres/pg_session_store.hpp"

#include "storage/postgres/pg_store_detail.hpp"
#include "storage/store_checks.hpp"

namespace mibyan {

using namespace store_checks;
using pg::param;

store_status pg_session_store::do_put_response(const stored_response& r) {
  auto value = encode_response(r);
  return write_txn("put_response", [&](pg::connection& c) {
    auto s = c.exec("SELECT 1 FROM mibyan_sessions WHERE id = $1 "
                    "FOR KEY SHARE",
                    {param{r.session_id}}, "put_response");
    if (!s)
      return s.get_status();
    if (s->size() == 0)
      return status::failure(status_code::not_found,
                             "put_response: session '" + r.session_id
                               + "' does not exist");
    auto w = c.exec("INSERT INTO mibyan_responses (id, session_id, record) "
                    "VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET "
                    "session_id = EXCLUDED.session_id, record = "
                    "EXCLUDED.record",
                    {param{r.id}, param{r.session_id}, param::bytes(value)},
                    "put_response");
    return w.get_status();
  });
}

store_result<stored_response>
pg_session_store::do_get_response(const std::string& id) const {
  using result = store_result<stored_response>;
  stored_response out;
  auto st = read("get_response", [&](pg::connection& c) {
    auto r = c.exec("SELECT record FROM mibyan_responses WHERE id = $1",
                    {param{id}}, "get_response");
    if (!r)
      return r.get_status();
    if (r->size() == 0)
      return status::failure(status_code::not_found,
                             "get_response: no response '" + id + "'");
    if (!decode_response(r->bytes(0, 0), out))
      return status::failure(status_code::data_corrupt,
                             "get_response: response '" + id
                               + "' is damaged or of a newer version");
    return status{};
  });
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_status pg_session_store::do_delete_response(const std::string& id) {
  return write_txn("delete_response", [&](pg::connection& c) {
    auto r = c.exec("DELETE FROM mibyan_responses WHERE id = $1",
                    {param{id}}, "delete_response");
    if (!r)
      return r.get_status();
    if (r->affected() == 0)
      return status::failure(status_code::not_found,
                             "delete_response: no response '" + id + "'");
    return status{};
  });
}

store_result<uint64_t>
pg_session_store::do_last_message_id(const std::string& session_id) const {
  using result = store_result<uint64_t>;
  uint64_t last = 0;
  auto st = read(
    "last_message_id",
    [&](pg::connection& c) {
      session_info s;
      if (auto r = pgd::read_session(c, session_id, s, false,
                                     "last_message_id");
          !r)
        return r;
      auto r = c.exec("SELECT max(id) FROM mibyan_messages WHERE "
                      "session_id = $1",
                      {param{session_id}}, "last_message_id");
      if (!r)
        return r.get_status();
      last = static_cast<uint64_t>(r->i64(0, 0));
      return status{};
    },
    true);
  if (!st)
    return result{st};
  return result{last};
}

} // namespace mibyan
