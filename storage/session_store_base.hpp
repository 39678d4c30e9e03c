// File: storage/session_store_base.hpp
//
// What every session store backend shares: the public operations of
// session_store (storage/session_store.hpp) check their input here, once,
// with the same messages and codes on every backend, and then call the
// backend's primitive (`do_*`, update_session), which does only what is
// specific to its database. A read-modify-write of a session (set_title,
// end_session, add_usage) and of a cron job (update_cron_job) is written
// once here over the backend's update_session / do_update_cron_job.
//
// Contract of the primitives (for backend authors):
//   - They are called only with checked input: ids well-formed, text
//     fields UTF-8 and within their bounds, messages storable, search
//     queries with words. They check what needs the database (existence,
//     a taken id, a read-only store) and name the operation in errors
//     ("get_session: session 'x' does not exist").
//   - They keep the contract of session_store: one transaction per call,
//     callable from any thread, nothing throws.
//   - A function argument passed to a primitive (update_session's `fn`,
//     do_update_cron_job's `fn`) may run more than once when the backend
//     retries its transaction; it has no side effects outside its record.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "storage/fts_query.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

class session_store_base : public session_store {
public:
  // -- sessions ----------------------------------------------------------------
  store_result<session_info> create_session(const new_session& s) final;
  store_result<session_info> get_session(const std::string& id) const final;
  /// list_sessions_where without a filter.
  store_result<std::vector<session_info>>
  list_sessions(size_t limit, size_t offset) const final;
  store_result<std::vector<std::string>>
  list_children(const std::string& id) const final;
  store_status set_title(const std::string& id,
                         const std::string& title) final;
  store_status end_session(const std::string& id, const std::string& reason,
                           int64_t ended_at_ms = 0) final;
  store_status add_usage(const std::string& id, const token_usage& usage,
                         int64_t api_calls = 1) final;
  store_status delete_session(const std::string& id) final;

  // -- approvals ---------------------------------------------------------------
  store_result<std::vector<std::string>>
  get_approvals(const std::string& id) const final;
  store_status set_approvals(const std::string& id,
                             const std::vector<std::string>& keys) final;

  // -- responses ---------------------------------------------------------------
  store_status put_response(const stored_response& r) final;
  store_result<stored_response>
  get_response(const std::string& id) const final;
  store_status delete_response(const std::string& id) final;
  store_result<uint64_t>
  last_message_id(const std::string& session_id) const final;

  // -- scheduled jobs ----------------------------------------------------------
  store_status put_cron_job(const cron_job_record& j) final;
  store_result<cron_job_record>
  get_cron_job(const std::string& id) const final;
  store_status delete_cron_job(const std::string& id) final;
  store_result<cron_job_record>
  update_cron_job(const std::string& id,
                  const std::function<status(cron_job_record& j)>& fn) final;
  store_status put_cron_run(const cron_run_record& r, size_t keep) final;
  store_result<cron_run_record>
  get_cron_run(const std::string& id) const final;
  store_result<std::vector<cron_run_record>>
  list_cron_runs(const std::string& job_id, size_t limit, size_t offset,
                 bool* more = nullptr) const final;
  store_status apply_cron_changes(const cron_changes& c, size_t keep) final;

  // -- messages ----------------------------------------------------------------
  /// append_batch of one message, its errors named "append_message".
  store_result<append_outcome>
  append_message(const std::string& session_id, const chat_message& m,
                 const std::string& key = {}) final;
  store_result<std::vector<append_outcome>>
  append_batch(const std::vector<pending_append>& batch) final;
  store_status commit_group(std::vector<store_write>& writes) final;
  store_result<std::vector<stored_message>>
  load_messages(const std::string& session_id) const final;

  // -- search and maintenance --------------------------------------------------
  store_result<search_results> search(const search_request& req) const final;
  /// Runs do_verify and reports its problems (at most 20 listed) as one
  /// data_corrupt error.
  store_status verify(bool deep = false) const final;

protected:
  session_store_base() = default;

  /// The limits and clock of session_store_options; a backend sets them
  /// when it opens, before any call.
  void set_common_options(size_t max_message_bytes,
                          std::function<int64_t()> now_ms);
  /// Milliseconds since the epoch (the injected clock when set).
  int64_t now() const;
  /// The operation a group-commit write stands for ("append_message"...),
  /// for error messages.
  static const char* write_op_name(store_write::kind k);

  // -- the backend's primitives (see the contract above) -----------------------

  /// Inserts `s` (its id generated when `generated`; the parent, when set,
  /// must exist). On success `s` is the stored session.
  virtual store_status do_create_session(session_info& s, bool generated) = 0;
  virtual store_result<session_info>
  do_get_session(const std::string& id) const = 0;
  virtual store_result<std::vector<std::string>>
  do_list_children(const std::string& id) const = 0;
  /// Reads session `id`, applies `fn`, writes it back, in one transaction.
  /// Errors: unknown session (not_found), and the backend's.
  virtual store_status
  update_session(const std::string& id, const char* what,
                 const std::function<void(session_info&)>& fn) = 0;
  virtual store_status do_delete_session(const std::string& id) = 0;

  virtual store_result<std::vector<std::string>>
  do_get_approvals(const std::string& id) const = 0;
  virtual store_status
  do_set_approvals(const std::string& id,
                   const std::vector<std::string>& keys) = 0;

  virtual store_status do_put_response(const stored_response& r) = 0;
  virtual store_result<stored_response>
  do_get_response(const std::string& id) const = 0;
  virtual store_status do_delete_response(const std::string& id) = 0;
  virtual store_result<uint64_t>
  do_last_message_id(const std::string& session_id) const = 0;

  virtual store_status do_put_cron_job(const cron_job_record& j) = 0;
  virtual store_result<cron_job_record>
  do_get_cron_job(const std::string& id) const = 0;
  virtual store_status do_delete_cron_job(const std::string& id) = 0;
  /// Reads job `id` (locked for the transaction), applies `fn` and writes
  /// the job back; an error of `fn` aborts the transaction and is returned
  /// as it is (the base has named the operation in it).
  virtual store_result<cron_job_record>
  do_update_cron_job(const std::string& id,
                     const std::function<status(cron_job_record&)>& fn) = 0;
  virtual store_status do_put_cron_run(const cron_run_record& r,
                                       size_t keep) = 0;
  virtual store_result<cron_run_record>
  do_get_cron_run(const std::string& id) const = 0;
  /// `limit` > 0.
  virtual store_result<std::vector<cron_run_record>>
  do_list_cron_runs(const std::string& job_id, size_t limit, size_t offset,
                    bool* more) const = 0;
  /// `c` is not empty.
  virtual store_status do_apply_cron_changes(const cron_changes& c,
                                             size_t keep) = 0;

  /// Appends the checked batch; `stamp` is the timestamp of messages
  /// without one.
  virtual store_result<std::vector<append_outcome>>
  do_append_batch(const std::vector<pending_append>& batch,
                  int64_t stamp) = 0;
  /// Applies the writes with `valid[i] != 0` in one transaction (`prepared[i]`
  /// is the checked session of a create), setting each one's status and
  /// outcome; returns the transaction's status (on a failure the base
  /// gives it to every write still ok).
  virtual store_status
  do_commit_group(std::vector<store_write>& writes,
                  const std::vector<char>& valid,
                  const std::vector<session_info>& prepared,
                  int64_t stamp) = 0;
  virtual store_result<std::vector<stored_message>>
  do_load_messages(const std::string& session_id) const = 0;

  /// `req` is checked and `q` its parsed query (at least one word).
  virtual store_result<search_results>
  do_search(const search_request& req, const fts_query& q) const = 0;
  /// Adds what is inconsistent to `problems`; an error when the check
  /// itself could not run.
  virtual store_status do_verify(bool deep,
                                 std::vector<std::string>& problems) const = 0;

private:
  store_result<session_info> prepare_session(const new_session& ns) const;
  std::string check_append(const pending_append& p) const;

  size_t max_message_bytes_ = size_t{16} << 20;
  std::function<int64_t()> now_ms_;
};

} // namespace mibyan
