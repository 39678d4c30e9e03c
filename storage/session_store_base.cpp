// What every session store backend shares: the input checks of the
// public operations and the read-modify-write operations written over the
// backend's primitives (storage/session_store_base.hpp).
#include "storage/session_store_base.hpp"

#include <chrono>

#include "base/json.hpp"
#include "storage/lmdb/fts_index.hpp"
#include "storage/store_checks.hpp"

namespace mibyan {

using namespace store_checks;

namespace {

status invalid(const char* what, const std::string& why) {
  return status::failure(status_code::invalid_argument,
                         std::string{what} + ": " + why);
}

// `invalid` as a result<T>.
template <class T>
store_result<T> refuse(const char* what, const std::string& why) {
  return store_result<T>::failure(status_code::invalid_argument,
                                  std::string{what} + ": " + why);
}

} // namespace

void session_store_base::set_common_options(size_t max_message_bytes,
                                            std::function<int64_t()> now_ms) {
  max_message_bytes_ = max_message_bytes;
  now_ms_ = std::move(now_ms);
}

int64_t session_store_base::now() const {
  if (now_ms_)
    return now_ms_();
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch())
    .count();
}

const char* session_store_base::write_op_name(store_write::kind k) {
  switch (k) {
    case store_write::kind::create: return "create_session";
    case store_write::kind::append: return "append_message";
    case store_write::kind::usage: return "add_usage";
    case store_write::kind::end: return "end_session";
  }
  return "write";
}

// -- sessions -----------------------------------------------------------------

store_result<session_info>
session_store_base::prepare_session(const new_session& ns) const {
  using result = store_result<session_info>;
  const char* what = "create_session";
  session_info s;
  s.started_at_ms = ns.started_at_ms > 0 ? ns.started_at_ms : now();
  if (!ns.id.empty()) {
    if (auto err = check_session_id(ns.id); !err.empty())
      return refuse<session_info>(what, err);
    s.id = ns.id;
  }
  if (!ns.parent_session_id.empty())
    if (auto err = check_session_id(ns.parent_session_id); !err.empty())
      return refuse<session_info>(what, "parent " + err);
  struct field {
    const char* name;
    const std::string* value;
  };
  for (auto f : {field{"source", &ns.source}, field{"model", &ns.model},
                 field{"provider", &ns.provider}, field{"cwd", &ns.cwd},
                 field{"title", &ns.title}}) {
    size_t max = f.value == &ns.cwd ? 4096 : max_title_bytes;
    if (auto err = check_text_field(f.name, *f.value, max); !err.empty())
      return refuse<session_info>(what, err);
  }
  s.source = ns.source;
  s.model = ns.model;
  s.provider = ns.provider;
  s.cwd = ns.cwd;
  s.title = ns.title;
  s.parent_session_id = ns.parent_session_id;
  if (!ns.metadata_json.empty()) {
    constexpr size_t max_metadata_bytes = 16 * 1024;
    if (ns.metadata_json.size() > max_metadata_bytes)
      return refuse<session_info>(what, "metadata is over 16 KiB");
    auto m = json::parse(ns.metadata_json);
    if (!m || !m.v->is_object())
      return refuse<session_info>(what, "metadata is not a JSON object");
    s.metadata_json = m.v->dump();
  }
  return result{std::move(s)};
}

store_result<session_info>
session_store_base::create_session(const new_session& ns) {
  using result = store_result<session_info>;
  auto prepared = prepare_session(ns);
  if (!prepared)
    return prepared;
  session_info s = std::move(*prepared);
  const bool generated = s.id.empty();
  if (auto st = do_create_session(s, generated); !st)
    return result{st};
  return result{std::move(s)};
}

store_result<session_info>
session_store_base::get_session(const std::string& id) const {
  if (auto err = check_session_id(id); !err.empty())
    return refuse<session_info>("get_session", err);
  return do_get_session(id);
}

store_result<std::vector<session_info>>
session_store_base::list_sessions(size_t limit, size_t offset) const {
  return list_sessions_where(limit, offset, {}, nullptr);
}

store_result<std::vector<std::string>>
session_store_base::list_children(const std::string& id) const {
  if (auto err = check_session_id(id); !err.empty())
    return refuse<std::vector<std::string>>("list_children", err);
  return do_list_children(id);
}

store_status session_store_base::set_title(const std::string& id,
                                           const std::string& title) {
  const char* what = "set_title";
  if (auto err = check_text_field("title", title, max_title_bytes);
      !err.empty())
    return invalid(what, err);
  if (auto err = check_session_id(id); !err.empty())
    return invalid(what, err);
  return update_session(id, what, [&](session_info& s) { s.title = title; });
}

store_status session_store_base::end_session(const std::string& id,
                                             const std::string& reason,
                                             int64_t ended_at_ms) {
  const char* what = "end_session";
  if (auto err = check_text_field("end reason", reason, max_title_bytes);
      !err.empty())
    return invalid(what, err);
  if (auto err = check_session_id(id); !err.empty())
    return invalid(what, err);
  int64_t at = ended_at_ms > 0 ? ended_at_ms : now();
  return update_session(id, what,
                        [&](session_info& s) { apply_end(s, reason, at); });
}

store_status session_store_base::add_usage(const std::string& id,
                                           const token_usage& u,
                                           int64_t api_calls) {
  const char* what = "add_usage";
  if (auto err = check_usage(u, api_calls); !err.empty())
    return invalid(what, err);
  if (auto err = check_session_id(id); !err.empty())
    return invalid(what, err);
  return update_session(
    id, what, [&](session_info& s) { apply_usage(s, u, api_calls); });
}

store_status session_store_base::delete_session(const std::string& id) {
  if (auto err = check_session_id(id); !err.empty())
    return invalid("delete_session", err);
  return do_delete_session(id);
}

// -- approvals ----------------------------------------------------------------

store_result<std::vector<std::string>>
session_store_base::get_approvals(const std::string& id) const {
  if (auto err = check_session_id(id); !err.empty())
    return refuse<std::vector<std::string>>("get_approvals", err);
  return do_get_approvals(id);
}

store_status
session_store_base::set_approvals(const std::string& id,
                                  const std::vector<std::string>& keys) {
  if (auto err = check_session_id(id); !err.empty())
    return invalid("set_approvals", err);
  if (auto err = check_approval_keys(keys); !err.empty())
    return invalid("set_approvals", err);
  return do_set_approvals(id, keys);
}

// -- responses ----------------------------------------------------------------

store_status session_store_base::put_response(const stored_response& r) {
  if (auto err = check_response_id(r.id).error; !err.empty())
    return invalid("put_response", err);
  if (auto err = check_session_id(r.session_id); !err.empty())
    return invalid("put_response", err);
  return do_put_response(r);
}

store_result<stored_response>
session_store_base::get_response(const std::string& id) const {
  if (auto err = check_response_id(id).error; !err.empty())
    return refuse<stored_response>("get_response", err);
  return do_get_response(id);
}

store_status session_store_base::delete_response(const std::string& id) {
  if (auto err = check_response_id(id).error; !err.empty())
    return invalid("delete_response", err);
  return do_delete_response(id);
}

store_result<std::vector<stored_response>>
session_store_base::list_responses(const std::string& session_id) const {
  if (auto err = check_session_id(session_id); !err.empty())
    return refuse<std::vector<stored_response>>("list_responses", err);
  return do_list_responses(session_id);
}

store_result<uint64_t>
session_store_base::last_message_id(const std::string& session_id) const {
  if (auto err = check_session_id(session_id); !err.empty())
    return refuse<uint64_t>("last_message_id", err);
  return do_last_message_id(session_id);
}

// -- scheduled jobs -----------------------------------------------------------

store_status session_store_base::put_cron_job(const cron_job_record& j) {
  if (auto err = check_cron_job_id(j.id).error; !err.empty())
    return invalid("put_cron_job", err);
  return do_put_cron_job(j);
}

store_result<cron_job_record>
session_store_base::get_cron_job(const std::string& id) const {
  if (auto err = check_cron_job_id(id).error; !err.empty())
    return refuse<cron_job_record>("get_cron_job", err);
  return do_get_cron_job(id);
}

store_status session_store_base::delete_cron_job(const std::string& id) {
  if (auto err = check_cron_job_id(id).error; !err.empty())
    return invalid("delete_cron_job", err);
  return do_delete_cron_job(id);
}

store_result<cron_job_record> session_store_base::update_cron_job(
  const std::string& id, const std::function<status(cron_job_record&)>& fn) {
  const char* what = "update_cron_job";
  if (auto err = check_cron_job_id(id).error; !err.empty())
    return refuse<cron_job_record>(what, err);
  return do_update_cron_job(id, [&](cron_job_record& j) {
    if (auto refused = fn(j); !refused.ok())
      return status::failure(refused.code,
                             std::string{what} + ": " + refused.error);
    if (j.id != id)
      return invalid(what, "the id cannot change");
    return status{};
  });
}

store_status session_store_base::put_cron_run(const cron_run_record& r,
                                              size_t keep) {
  if (auto err = check_cron_run_id(r.id).error; !err.empty())
    return invalid("put_cron_run", err);
  if (auto err = check_cron_job_id(r.job_id).error; !err.empty())
    return invalid("put_cron_run", err);
  return do_put_cron_run(r, keep);
}

store_result<cron_run_record>
session_store_base::get_cron_run(const std::string& id) const {
  if (auto err = check_cron_run_id(id).error; !err.empty())
    return refuse<cron_run_record>("get_cron_run", err);
  return do_get_cron_run(id);
}

store_result<std::vector<cron_run_record>>
session_store_base::list_cron_runs(const std::string& job_id, size_t limit,
                                   size_t offset, bool* more) const {
  using result = store_result<std::vector<cron_run_record>>;
  if (more != nullptr)
    *more = false;
  if (auto err = check_cron_job_id(job_id).error; !err.empty())
    return refuse<std::vector<cron_run_record>>("list_cron_runs", err);
  if (limit == 0)
    return result{std::vector<cron_run_record>{}};
  return do_list_cron_runs(job_id, limit, offset, more);
}

store_status session_store_base::apply_cron_changes(const cron_changes& c,
                                                    size_t keep) {
  const char* what = "apply_cron_changes";
  if (c.empty())
    return {};
  for (auto& j : c.jobs)
    if (auto err = check_cron_job_id(j.id).error; !err.empty())
      return invalid(what, err);
  for (auto& r : c.runs) {
    auto err = check_cron_run_id(r.id).error;
    if (err.empty())
      err = check_cron_job_id(r.job_id).error;
    if (!err.empty())
      return invalid(what, err);
  }
  for (auto& d : c.deleted_jobs)
    if (auto err = check_cron_job_id(d).error; !err.empty())
      return invalid(what, err);
  return do_apply_cron_changes(c, keep);
}

// -- messages -----------------------------------------------------------------

std::string session_store_base::check_append(const pending_append& p) const {
  if (auto err = check_session_id(p.session_id); !err.empty())
    return err;
  if (auto err = check_message(p.message, max_message_bytes_); !err.empty())
    return err;
  if (p.key.size() > max_key_bytes)
    return "idempotency key is longer than " + std::to_string(max_key_bytes)
           + " bytes";
  if (p.key.find('\0') != std::string::npos)
    return "idempotency key contains a NUL byte";
  return {};
}

store_result<append_outcome>
session_store_base::append_message(const std::string& session_id,
                                   const chat_message& m,
                                   const std::string& key) {
  auto r = append_batch({pending_append{session_id, m, key}});
  if (!r) {
    std::string_view prefix = "append_batch";
    auto err = r.error;
    if (err.compare(0, prefix.size(), prefix) == 0)
      err.replace(0, prefix.size(), "append_message");
    return store_result<append_outcome>::failure(r.code, err);
  }
  return store_result<append_outcome>{r->front()};
}

store_result<std::vector<append_outcome>>
session_store_base::append_batch(const std::vector<pending_append>& batch) {
  using result = store_result<std::vector<append_outcome>>;
  const char* what = "append_batch";
  for (size_t i = 0; i < batch.size(); ++i) {
    auto prefix = batch.size() == 1
                    ? std::string{what} + ": "
                    : std::string{what} + ": message " + std::to_string(i)
                        + ": ";
    if (auto err = check_append(batch[i]); !err.empty())
      return result::failure(status_code::invalid_argument, prefix + err);
  }
  return do_append_batch(batch, now());
}

store_status
session_store_base::commit_group(std::vector<store_write>& writes) {
  // Input checks need no transaction; a rejected write is skipped.
  std::vector<char> valid(writes.size(), 1);
  std::vector<session_info> prepared(writes.size());
  for (size_t i = 0; i < writes.size(); ++i) {
    auto& w = writes[i];
    std::string err;
    switch (w.what) {
      case store_write::kind::create: {
        auto r = prepare_session(w.create);
        if (!r) {
          w.status = r.get_status();
          valid[i] = 0;
          continue;
        }
        prepared[i] = std::move(*r);
        break;
      }
      case store_write::kind::append:
        err = check_append(w.append);
        break;
      case store_write::kind::usage:
        if ((err = check_session_id(w.session_id)).empty())
          err = check_usage(w.usage, w.api_calls);
        break;
      case store_write::kind::end:
        if ((err = check_session_id(w.session_id)).empty())
          err = check_text_field("end reason", w.reason, max_title_bytes);
        break;
    }
    if (!err.empty()) {
      w.status = invalid(write_op_name(w.what), err);
      valid[i] = 0;
    }
  }
  auto st = do_commit_group(writes, valid, prepared, now());
  if (!st)
    for (size_t i = 0; i < writes.size(); ++i)
      if (valid[i] != 0 && writes[i].status.ok())
        writes[i].status = status::failure(
          st.code, std::string{write_op_name(writes[i].what)} + ": "
                     + st.error);
  return st;
}

store_result<std::vector<stored_message>>
session_store_base::load_messages(const std::string& session_id) const {
  if (auto err = check_session_id(session_id); !err.empty())
    return refuse<std::vector<stored_message>>("load_messages", err);
  return do_load_messages(session_id);
}

// -- search and maintenance ---------------------------------------------------

store_result<search_results>
session_store_base::search(const search_request& req) const {
  const char* what = "search";
  auto q = parse_fts_query(req.query);
  if (q.empty())
    return refuse<search_results>(what,
                                  "the query has no searchable words "
                                  "(letters or digits, at most 64 bytes "
                                  "each)");
  if (req.limit == 0 || req.limit > max_search_limit)
    return refuse<search_results>(what,
                                  "limit must be between 1 and "
                                    + std::to_string(max_search_limit));
  for (auto& r : req.roles)
    if (fts_role_of(r) == fts_role::other)
      return refuse<search_results>(
        what, "unknown role '" + json::sanitize_utf8(r.substr(0, 40))
                + "'; use system, user, assistant or tool");
  if (!req.session_id.empty())
    if (auto err = check_session_id(req.session_id); !err.empty())
      return refuse<search_results>(what, err);
  return do_search(req, q);
}

store_status session_store_base::verify(bool deep) const {
  std::vector<std::string> problems;
  if (auto st = do_verify(deep, problems); !st)
    return st;
  if (problems.empty())
    return {};
  std::string msg = "verify: " + std::to_string(problems.size())
                    + " problem(s): ";
  for (size_t i = 0; i < problems.size() && i < 20; ++i)
    msg += (i > 0 ? "; " : "") + problems[i];
  return status::failure(status_code::data_corrupt, msg);
}

} // namespace mibyan
