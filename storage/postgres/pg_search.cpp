// The PostgreSQL session store, part: full-text search (tsvector + GIN)
// and the consistency check.
#include "storage/postgres/pg_session_store.hpp"

#include <algorithm>
#include <map>

#include "base/json.hpp"
#include "storage/lmdb/fts_index.hpp"
#include "storage/fts_query.hpp"
#include "storage/postgres/pg_store_detail.hpp"
#include "storage/store_checks.hpp"

namespace mibyan {

using namespace store_checks;
using pg::param;

namespace {

// Matches ranked at most (more when a page reaches past it).
constexpr uint64_t rank_window = 5000;

} // namespace

store_result<search_results>
pg_session_store::do_search(const search_request& req,
                            const fts_query& q) const {
  using result = store_result<search_results>;
  const std::vector<std::string>& roles = req.roles; // checked
  const std::string tsq = pgd::tsquery_text(q);
  const param role_param = roles.empty() ? param{}
                                         : param{pgd::text_array(roles)};
  search_results out;
  auto st = read(
    "search",
    [&](pg::connection& c) {
      out = search_results{};
      if (!req.session_id.empty()) {
        session_info s;
        if (auto r = pgd::read_session(c, req.session_id, s, false,
                                       "search");
            !r)
          return r;
      }
      // Candidates: the newest `window` matches (all of them unless a
      // query matches more than that), ranked by ts_rank_cd with
      // normalization 1 (divided by 1 + log(length)): cover density,
      // shorter messages first among equals; ties go to the newer
      // message, as in the LMDB index. Ranking every match of a very
      // common word would cost ~8 us a match (docs/storage.md, "Search").
      // `m.id + 0` keeps the planner off a backward scan of the primary
      // key filtered by @@, which reads the whole table for a rare word;
      // the GIN index finds the matches and a top-N sort keeps the newest.
      const uint64_t window = std::max<uint64_t>(
        rank_window, static_cast<uint64_t>(req.offset + req.limit));
      // Only ids go through the top-N sort of the candidates (whole rows
      // would overflow work_mem into an external sort); the ranked rows
      // are joined back by primary key.
      auto r = c.exec(
        "SELECT m.id, m.session_id, m.role, ts_rank_cd(m.tsv, q.q, "
        "1)::float8 AS score, m.record, c.n FROM (SELECT m.id, count(*) "
        "OVER () AS n FROM mibyan_messages m WHERE m.tsv @@ $1::tsquery AND "
        "($2::text[] IS NULL OR m.role = ANY($2::text[])) AND ($3 = '' OR "
        "m.session_id = $3) ORDER BY m.id + 0 DESC LIMIT $6) c JOIN "
        "mibyan_messages m ON m.id = c.id, (SELECT $1::tsquery AS q) q "
        "ORDER BY score DESC, m.id DESC LIMIT $4 OFFSET $5",
        {param{tsq}, role_param, param{req.session_id},
         param{static_cast<uint64_t>(req.limit)},
         param{static_cast<uint64_t>(req.offset)}, param{window}},
        "search");
      if (!r)
        return r.get_status();
      // `n` counts every match (the window runs before the LIMIT), so
      // one scan gives the candidates and the total.
      if (r->size() > 0) {
        out.total = static_cast<size_t>(r->i64(0, 5));
      } else if (req.offset > 0) {
        // A page past every match: count them.
        auto n = c.exec("SELECT count(*) FROM mibyan_messages m WHERE "
                        "m.tsv @@ $1::tsquery AND ($2::text[] IS NULL OR "
                        "m.role = ANY($2::text[])) AND ($3 = '' OR "
                        "m.session_id = $3)",
                        {param{tsq}, role_param, param{req.session_id}},
                        "search");
        if (!n)
          return n.get_status();
        out.total = static_cast<size_t>(n->i64(0, 0));
      }
      for (int i = 0; i < r->size(); ++i) {
        search_hit h;
        h.message_id = static_cast<uint64_t>(r->i64(i, 0));
        h.session_id = r->str(i, 1);
        h.role = r->str(i, 2);
        h.score = r->f64(i, 3);
        stored_message sm;
        if (!decode_message(r->bytes(i, 4), sm))
          return status::failure(status_code::data_corrupt,
                                 "search: message "
                                   + std::to_string(h.message_id)
                                   + " is damaged or of a newer version");
        auto text = indexed_text(sm.message);
        h.snippet = fts_index::snippet(text, q);
        fts_index::snippet_spans(text, q, 200, h.text, h.highlights);
        out.hits.push_back(std::move(h));
      }
      return status{};
    },
    true);
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_status
pg_session_store::do_verify(bool deep,
                            std::vector<std::string>& problems) const {
  return read(
    "verify",
    [&](pg::connection& c) {
      problems.clear();
      auto counts = c.exec("SELECT session_id, count(*), sum(tool_calls) "
                           "FROM mibyan_messages GROUP BY session_id",
                           {}, "verify");
      if (!counts)
        return counts.get_status();
      std::map<std::string, std::pair<int64_t, int64_t>> counted;
      // sum(integer) is bigint.
      for (int i = 0; i < counts->size(); ++i)
        counted[counts->str(i, 0)] = {counts->i64(i, 1), counts->i64(i, 2)};
      auto sessions = c.exec("SELECT id, record FROM mibyan_sessions", {},
                             "verify");
      if (!sessions)
        return sessions.get_status();
      for (int i = 0; i < sessions->size(); ++i) {
        auto id = sessions->str(i, 0);
        auto decoded = decode_session(sessions->bytes(i, 1));
        if (!decoded) {
          problems.push_back("session " + id + ": " + decoded.error);
          continue;
        }
        auto& s = *decoded;
        if (s.id != id)
          problems.push_back("session " + id + " is stored under the "
                             "wrong id");
        auto cnt = counted[id];
        counted.erase(id);
        if (s.message_count != cnt.first || s.tool_call_count != cnt.second)
          problems.push_back(
            "session " + id + " counts " + std::to_string(s.message_count)
            + " messages / " + std::to_string(s.tool_call_count)
            + " tool calls but holds " + std::to_string(cnt.first) + " / "
            + std::to_string(cnt.second));
      }
      for (auto& [id, cnt] : counted)
        problems.push_back(std::to_string(cnt.first)
                           + " messages belong to missing session " + id);
      auto orphans = c.exec(
        "SELECT r.id FROM mibyan_responses r LEFT JOIN mibyan_sessions s "
        "ON s.id = r.session_id WHERE s.id IS NULL",
        {}, "verify");
      if (!orphans)
        return orphans.get_status();
      for (int i = 0; i < orphans->size(); ++i)
        problems.push_back("response " + orphans->str(i, 0)
                           + " belongs to a missing session");
      // Every message decodes, matches its row, and (deep) its words are
      // in its tsvector exactly as this build's tokenizer makes them.
      int64_t after = 0;
      for (;;) {
        auto r = c.exec(
          deep ? "SELECT id, session_id, idem_key, record, tsv::text FROM "
                 "mibyan_messages WHERE id > $1 ORDER BY id LIMIT 1000"
               : "SELECT id, session_id, idem_key, record, '' FROM "
                 "mibyan_messages WHERE id > $1 ORDER BY id LIMIT 1000",
          {param{after}}, "verify");
        if (!r)
          return r.get_status();
        for (int i = 0; i < r->size(); ++i) {
          auto id = static_cast<uint64_t>(r->i64(i, 0));
          stored_message m;
          if (!decode_message(r->bytes(i, 3), m)) {
            problems.push_back("message " + std::to_string(id)
                               + " is undecodable");
            continue;
          }
          if (m.id != id || m.session_id != r->bytes(i, 1)
              || (r->null(i, 2) ? !m.key.empty() : m.key != r->bytes(i, 2)))
            problems.push_back("message " + std::to_string(id)
                               + " does not match its row");
          if (deep) {
            auto want = c.exec("SELECT $1::tsvector::text",
                               {param{pgd::tsvector_text(
                                 indexed_text(m.message))}},
                               "verify");
            if (!want)
              return want.get_status();
            if (want->bytes(0, 0) != r->bytes(i, 4))
              problems.push_back("message " + std::to_string(id)
                                 + " is not indexed as its text says");
          }
        }
        if (r->size() < 1000)
          break;
        after = r->i64(r->size() - 1, 0);
      }
      return status{};
    },
    true);
}

} // namespace mibyan
