// The PostgreSQL session store, part: scheduled jobs and their run history
// (storage/cron_record.hpp; records kept in the same binary encoding as in
// LMDB). A job's runs are ordered by `seq` (from mibyan_cron_run_seq, in
// insertion order) and go with the job (ON DELETE CASCADE).
#include "storage/postgres/pg_session_store.hpp"

#include "base/json.hpp"
#include "storage/postgres/pg_store_detail.hpp"

namespace mibyan {

using pg::param;

namespace {

status put_job_in(pg::connection& c, const cron_job_record& j,
                  const char* what) {
  auto r = c.exec("INSERT INTO mibyan_cron_jobs (id, record) VALUES ($1, $2) "
                  "ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record",
                  {param{j.id}, param::bytes(encode_cron_job(j))}, what);
  return r.get_status();
}

status read_job_in(pg::connection& c, const std::string& id, bool lock,
                   cron_job_record& out, const char* what) {
  auto r = c.exec(lock ? "SELECT record FROM mibyan_cron_jobs WHERE id = $1 "
                         "FOR UPDATE"
                       : "SELECT record FROM mibyan_cron_jobs WHERE id = $1",
                  {param{id}}, what);
  if (!r)
    return r.get_status();
  if (r->size() == 0)
    return status::failure(status_code::not_found,
                           std::string{what} + ": no job '" + id + "'");
  if (!decode_cron_job(r->bytes(0, 0), out))
    return status::failure(status_code::data_corrupt,
                           std::string{what} + ": job '" + id
                             + "' is damaged or of a newer version");
  return {};
}

// Inserts or replaces run `r`; `require_job` false drops a run whose job
// is gone (apply_cron_changes).
status put_run_in(pg::connection& c, const cron_run_record& r, size_t keep,
                  bool require_job, const char* what) {
  auto value = encode_cron_run(r);
  auto old = c.exec("SELECT job_id FROM mibyan_cron_runs WHERE id = $1 "
                    "FOR UPDATE",
                    {param{r.id}}, what);
  if (!old)
    return old.get_status();
  if (old->size() > 0) {
    if (old->bytes(0, 0) != r.job_id)
      return status::failure(status_code::invalid_argument,
                             std::string{what} + ": run '" + r.id
                               + "' belongs to another job");
    auto u = c.exec("UPDATE mibyan_cron_runs SET record = $2 WHERE id = $1",
                    {param{r.id}, param::bytes(value)}, what);
    return u.get_status();
  }
  // The job row is locked: runs of one job are inserted and pruned one
  // transaction at a time.
  auto job = c.exec("SELECT 1 FROM mibyan_cron_jobs WHERE id = $1 FOR UPDATE",
                    {param{r.job_id}}, what);
  if (!job)
    return job.get_status();
  if (job->size() == 0) {
    if (!require_job)
      return {};
    return status::failure(status_code::not_found,
                           std::string{what} + ": no job '" + r.job_id
                             + "'");
  }
  auto ins = c.exec("INSERT INTO mibyan_cron_runs (id, job_id, seq, record) "
                    "VALUES ($1, $2, nextval('mibyan_cron_run_seq'), $3)",
                    {param{r.id}, param{r.job_id}, param::bytes(value)},
                    what);
  if (!ins)
    return ins.get_status();
  if (keep == 0)
    return {};
  auto prune = c.exec(
    "DELETE FROM mibyan_cron_runs WHERE job_id = $1 AND seq < (SELECT seq "
    "FROM mibyan_cron_runs WHERE job_id = $1 ORDER BY seq DESC OFFSET $2 "
    "LIMIT 1)",
    {param{r.job_id}, param{static_cast<uint64_t>(keep - 1)}}, what);
  return prune.get_status();
}

} // namespace

store_status pg_session_store::do_put_cron_job(const cron_job_record& j) {
  return write_txn("put_cron_job", [&](pg::connection& c) {
    return put_job_in(c, j, "put_cron_job");
  });
}

store_result<cron_job_record>
pg_session_store::do_get_cron_job(const std::string& id) const {
  using result = store_result<cron_job_record>;
  cron_job_record out;
  auto st = read("get_cron_job", [&](pg::connection& c) {
    return read_job_in(c, id, false, out, "get_cron_job");
  });
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_result<cron_job_list>
pg_session_store::list_cron_jobs(bool schedulable_only) const {
  using result = store_result<cron_job_list>;
  cron_job_list out;
  auto st = read("list_cron_jobs", [&](pg::connection& c) {
    out = {};
    auto r = c.exec("SELECT id, record FROM mibyan_cron_jobs ORDER BY id",
                    {}, "list_cron_jobs");
    if (!r)
      return r.get_status();
    for (int i = 0; i < r->size(); ++i) {
      cron_job_record j;
      auto k = r->str(i, 0);
      if (!decode_cron_job(r->bytes(i, 1), j)) {
        out.damaged.push_back("job '" + json::sanitize_utf8(k)
                              + "' is damaged or of a newer version");
        continue;
      }
      if (j.id != k) {
        out.damaged.push_back("job '" + json::sanitize_utf8(k)
                              + "' is stored under the wrong key");
        continue;
      }
      if (!schedulable_only || (j.enabled && !j.paused))
        out.jobs.push_back(std::move(j));
    }
    return status{};
  });
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_status pg_session_store::do_delete_cron_job(const std::string& id) {
  return write_txn("delete_cron_job", [&](pg::connection& c) {
    auto r = c.exec("DELETE FROM mibyan_cron_jobs WHERE id = $1",
                    {param{id}}, "delete_cron_job");
    if (!r)
      return r.get_status();
    if (r->affected() == 0)
      return status::failure(status_code::not_found,
                             "delete_cron_job: no job '" + id + "'");
    return status{};
  });
}

store_result<cron_job_record> pg_session_store::do_update_cron_job(
  const std::string& id, const std::function<status(cron_job_record&)>& fn) {
  using result = store_result<cron_job_record>;
  cron_job_record j;
  auto st = write_txn("update_cron_job", [&](pg::connection& c) {
    j = {};
    if (auto s = read_job_in(c, id, true, j, "update_cron_job"); !s)
      return s;
    if (auto refused = fn(j); !refused.ok())
      return refused;
    return put_job_in(c, j, "update_cron_job");
  });
  if (!st)
    return result{st};
  return result{std::move(j)};
}

store_status pg_session_store::do_put_cron_run(const cron_run_record& r,
                                               size_t keep) {
  return write_txn("put_cron_run", [&](pg::connection& c) {
    return put_run_in(c, r, keep, true, "put_cron_run");
  });
}

store_result<cron_run_record>
pg_session_store::do_get_cron_run(const std::string& id) const {
  using result = store_result<cron_run_record>;
  cron_run_record out;
  auto st = read("get_cron_run", [&](pg::connection& c) {
    auto r = c.exec("SELECT record FROM mibyan_cron_runs WHERE id = $1",
                    {param{id}}, "get_cron_run");
    if (!r)
      return r.get_status();
    if (r->size() == 0)
      return status::failure(status_code::not_found,
                             "get_cron_run: no run '" + id + "'");
    if (!decode_cron_run(r->bytes(0, 0), out))
      return status::failure(status_code::data_corrupt,
                             "get_cron_run: run '" + id
                               + "' is damaged or of a newer version");
    return status{};
  });
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_result<std::vector<cron_run_record>>
pg_session_store::do_list_cron_runs(const std::string& job_id, size_t limit,
                                    size_t offset, bool* more) const {
  using result = store_result<std::vector<cron_run_record>>;
  std::vector<cron_run_record> out;
  bool has_more = false;
  auto st = read("list_cron_runs", [&](pg::connection& c) {
    out.clear();
    has_more = false;
    auto r = c.exec("SELECT record, seq FROM mibyan_cron_runs WHERE "
                    "job_id = $1 ORDER BY seq DESC LIMIT $2 OFFSET $3",
                    {param{job_id}, param{static_cast<uint64_t>(limit) + 1},
                     param{static_cast<uint64_t>(offset)}},
                    "list_cron_runs");
    if (!r)
      return r.get_status();
    for (int i = 0; i < r->size(); ++i) {
      if (out.size() == limit) {
        has_more = true;
        break;
      }
      cron_run_record run;
      if (!decode_cron_run(r->bytes(i, 0), run))
        return status::failure(status_code::data_corrupt,
                               "list_cron_runs: run number "
                                 + std::to_string(r->i64(i, 1)) + " of job '"
                                 + job_id
                                 + "' is damaged or of a newer version");
      out.push_back(std::move(run));
    }
    return status{};
  });
  if (!st)
    return result{st};
  if (more != nullptr)
    *more = has_more;
  return result{std::move(out)};
}

store_status pg_session_store::do_apply_cron_changes(const cron_changes& c,
                                                     size_t keep) {
  const char* what = "apply_cron_changes";
  return write_txn(what, [&](pg::connection& conn) {
    for (auto& j : c.jobs)
      if (auto st = put_job_in(conn, j, what); !st)
        return st;
    for (auto& r : c.runs)
      if (auto st = put_run_in(conn, r, keep, false, what); !st)
        return st;
    for (auto& d : c.deleted_jobs) {
      auto r = conn.exec("DELETE FROM mibyan_cron_jobs WHERE id = $1",
                         {param{d}}, what);
      if (!r)
        return r.get_status();
    }
    return status{};
  });
}

} // namespace mibyan
