#include "storage/postgres/pg_store_detail.hpp"

#include <algorithm>
#include <unordered_map>

#include "storage/fts_tokenizer.hpp"

namespace mibyan::pgd {

using pg::param;

status decode_session_row(std::string_view record, session_info& out,
                          const char* what) {
  auto decoded = decode_session(record);
  if (!decoded)
    return status::failure(decoded.code,
                           std::string{what} + ": " + decoded.error);
  out = std::move(*decoded);
  return {};
}

status read_session(pg::connection& c, const std::string& id,
                    session_info& out, bool lock, const char* what) {
  auto r = c.exec(lock ? "SELECT record FROM mibyan_sessions WHERE id = $1 "
                         "FOR UPDATE"
                       : "SELECT record FROM mibyan_sessions WHERE id = $1",
                  {param{id}}, what);
  if (!r)
    return r.get_status();
  if (r->size() == 0)
    return status::failure(status_code::not_found,
                           std::string{what} + ": session '" + id
                             + "' does not exist");
  return decode_session_row(r->bytes(0, 0), out, what);
}

status write_session(pg::connection& c, const session_info& s,
                     const char* what) {
  auto r = c.exec("UPDATE mibyan_sessions SET record = $2 WHERE id = $1",
                  {param{s.id}, param{encode_session(s)}}, what);
  return r.get_status();
}

std::string text_array(const std::vector<std::string>& ids) {
  std::string a = "{";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0)
      a += ',';
    a += '"';
    a += ids[i];
    a += '"';
  }
  a += '}';
  return a;
}

status lock_sessions(pg::connection& c, std::vector<std::string> ids,
                     std::map<std::string, session_info>& out,
                     const char* what) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.empty())
    return {};
  auto r = c.exec("SELECT record FROM mibyan_sessions WHERE id = "
                  "ANY($1::text[]) ORDER BY id FOR UPDATE",
                  {param{text_array(ids)}}, what);
  if (!r)
    return r.get_status();
  for (int i = 0; i < r->size(); ++i) {
    session_info s;
    if (auto st = decode_session_row(r->bytes(i, 0), s, what); !st)
      return st;
    auto id = s.id;
    out.emplace(std::move(id), std::move(s));
  }
  return {};
}

std::string tsvector_text(std::string_view text) {
  constexpr size_t max_positions = 256;
  constexpr uint32_t max_position = 16383;
  constexpr size_t max_bytes = 900 * 1024;
  std::vector<std::string> order;
  std::unordered_map<std::string, std::vector<uint32_t>> where;
  size_t bytes = 0;
  bool full = false;
  fts_for_each_token(text, [&](const fts_token& t) {
    auto it = where.find(std::string{t.term});
    if (it == where.end()) {
      if (full || bytes + t.term.size() + 16 > max_bytes) {
        full = true;
        return;
      }
      it = where.emplace(std::string{t.term}, std::vector<uint32_t>{})
             .first;
      order.push_back(it->first);
      bytes += t.term.size() + 8;
    }
    if (it->second.size() < max_positions) {
      it->second.push_back(std::min(t.position + 1, max_position));
      bytes += 6;
    }
  });
  std::string out;
  out.reserve(bytes + 16);
  for (auto& term : order) {
    if (!out.empty())
      out += ' ';
    out += '\'';
    out += term;
    out += '\'';
    char sep = ':';
    for (auto p : where[term]) {
      out += sep;
      out += std::to_string(p);
      sep = ',';
    }
  }
  return out;
}

std::string tsquery_text(const fts_query& q) {
  std::string out;
  for (auto& u : q.units) {
    if (!out.empty())
      out += " & ";
    if (u.terms.size() > 1)
      out += '(';
    for (size_t i = 0; i < u.terms.size(); ++i) {
      if (i > 0)
        out += " <-> ";
      out += '\'';
      out += u.terms[i];
      out += '\'';
    }
    if (u.terms.size() > 1)
      out += ')';
  }
  return out;
}

} // namespace mibyan::pgd
