#include "storage/fts_index.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "storage/byte_codec.hpp"
#include "storage/fts_tokenizer.hpp"

namespace mibyan {

namespace {

const std::string stats_key{"\0", 1};

std::string posting_key(std::string_view term, uint64_t id) {
  std::string k;
  k.reserve(term.size() + 9);
  k.append(term.data(), term.size());
  k.push_back('\0');
  codec::put_be64(k, id);
  return k;
}

// A term's positions in one document, in increasing order.
using term_positions = std::map<std::string, std::vector<uint32_t>>;

uint32_t collect_terms(std::string_view text, term_positions& out) {
  uint32_t length = 0;
  fts_for_each_token(text, [&](const fts_token& t) {
    out[std::string{t.term}].push_back(t.position);
    ++length;
  });
  return length;
}

struct posting {
  fts_role role = fts_role::other;
  uint64_t doc_length = 0;
  uint64_t count = 0;
  std::string_view positions;  // delta-coded varints, `count` of them
};

bool decode_posting(std::string_view v, posting& p) {
  if (v.empty())
    return false;
  p.role = static_cast<fts_role>(static_cast<uint8_t>(v.front()));
  v.remove_prefix(1);
  if (!codec::get_varint(v, p.doc_length) || !codec::get_varint(v, p.count))
    return false;
  p.positions = v;
  return true;
}

bool decode_positions(std::string_view v, uint64_t count,
                      std::vector<uint32_t>& out) {
  out.clear();
  uint64_t pos = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t delta = 0;
    if (!codec::get_varint(v, delta))
      return false;
    pos += delta;
    out.push_back(static_cast<uint32_t>(pos));
  }
  return true;
}

int read_stats(MDB_txn* txn, MDB_dbi dbi, fts_stats& st) {
  std::string_view v;
  int rc = lmdb_env::get(txn, dbi, stats_key, v);
  if (rc == MDB_NOTFOUND) {
    st = fts_stats{};
    return 0;
  }
  if (rc != 0)
    return rc;
  if (v.size() != 16)
    return MDB_CORRUPTED;
  st.doc_count = codec::read_be64(v.data());
  st.total_length = codec::read_be64(v.data() + 8);
  return 0;
}

int write_stats(MDB_txn* txn, MDB_dbi dbi, const fts_stats& st) {
  std::string v;
  codec::put_be64(v, st.doc_count);
  codec::put_be64(v, st.total_length);
  return lmdb_env::put(txn, dbi, stats_key, v);
}

// Adds `delta` (+1/-1) to a term's document frequency; deletes at zero.
int bump_df(MDB_txn* txn, MDB_dbi dbi, std::string_view term, int delta) {
  std::string_view v;
  uint64_t df = 0;
  int rc = lmdb_env::get(txn, dbi, term, v);
  if (rc == 0) {
    if (!codec::get_varint(v, df))
      return MDB_CORRUPTED;
  } else if (rc != MDB_NOTFOUND) {
    return rc;
  }
  if (delta < 0 && df == 0)
    return 0;  // already absent: nothing to count down
  df = delta < 0 ? df - 1 : df + 1;
  if (df == 0)
    return lmdb_env::del(txn, dbi, term);
  std::string nv;
  codec::put_varint(nv, df);
  return lmdb_env::put(txn, dbi, term, nv);
}

// Closes a cursor when leaving scope (read-only transactions require it).
struct cursor_guard {
  MDB_cursor* c = nullptr;
  cursor_guard() = default;
  cursor_guard(const cursor_guard&) = delete;
  cursor_guard(cursor_guard&& other) noexcept : c(other.c) {
    other.c = nullptr;
  }
  ~cursor_guard() {
    if (c != nullptr)
      mdb_cursor_close(c);
  }
};

// Walks one term's postings in id order.
struct term_cursor {
  cursor_guard guard;
  std::string prefix;  // term \0
  bool done = false;
  uint64_t id = 0;
  std::string_view value;
  int rc = 0;  // first LMDB error, if any

  void load(int op_rc, const MDB_val& k, const MDB_val& v) {
    if (op_rc != 0) {
      if (op_rc != MDB_NOTFOUND)
        rc = op_rc;
      done = true;
      return;
    }
    if (k.mv_size != prefix.size() + 8
        || std::memcmp(k.mv_data, prefix.data(), prefix.size()) != 0) {
      done = true;
      return;
    }
    id = codec::read_be64(static_cast<const char*>(k.mv_data)
                          + prefix.size());
    value = lmdb_env::view(v);
  }

  void seek(uint64_t target) {
    std::string k = prefix;
    codec::put_be64(k, target);
    MDB_val key = lmdb_env::val(k);
    MDB_val v;
    load(mdb_cursor_get(guard.c, &key, &v, MDB_SET_RANGE), key, v);
  }

  void next() {
    MDB_val key;
    MDB_val v;
    load(mdb_cursor_get(guard.c, &key, &v, MDB_NEXT), key, v);
  }

  // Moves to the first posting with id >= target; true if it is target.
  bool advance_to(uint64_t target) {
    if (done)
      return false;
    for (int i = 0; i < 4 && id < target; ++i) {
      next();
      if (done)
        return false;
    }
    if (id < target)
      seek(target);
    return !done && id == target;
  }
};

double idf(double n_docs, double df) {
  return std::log(1.0 + (n_docs - df + 0.5) / (df + 0.5));
}

double bm25_tf(double tf, double doc_length, double avg_length) {
  double norm = fts_index::k1
                * (1.0 - fts_index::b
                   + fts_index::b * doc_length / avg_length);
  return tf * (fts_index::k1 + 1.0) / (tf + norm);
}

// Number of places where `lists[0][p] + k` is in `lists[k]` for every k.
uint64_t phrase_count(const std::vector<std::vector<uint32_t>*>& lists) {
  uint64_t n = 0;
  for (uint32_t p : *lists[0]) {
    bool all = true;
    for (size_t k = 1; k < lists.size() && all; ++k)
      all = std::binary_search(lists[k]->begin(), lists[k]->end(),
                               p + static_cast<uint32_t>(k));
    if (all)
      ++n;
  }
  return n;
}

} // namespace

fts_role fts_role_of(std::string_view role) {
  if (role == "system")
    return fts_role::system;
  if (role == "user")
    return fts_role::user;
  if (role == "assistant")
    return fts_role::assistant;
  if (role == "tool")
    return fts_role::tool;
  return fts_role::other;
}

const char* fts_role_name(fts_role r) {
  switch (r) {
    case fts_role::system:
      return "system";
    case fts_role::user:
      return "user";
    case fts_role::assistant:
      return "assistant";
    case fts_role::tool:
      return "tool";
    default:
      return "other";
  }
}

store_result<fts_index> fts_index::open(lmdb_env& env) {
  fts_index idx;
  auto terms = env.open_dbi("fts_terms");
  if (!terms)
    return store_result<fts_index>::failure(terms.error);
  auto df = env.open_dbi("fts_df");
  if (!df)
    return store_result<fts_index>::failure(df.error);
  idx.terms_ = *terms;
  idx.df_ = *df;
  return store_result<fts_index>{idx};
}

int fts_index::add(MDB_txn* txn, uint64_t id, fts_role role,
                   std::string_view text, std::string& error) const {
  term_positions terms;
  uint32_t length = collect_terms(text, terms);
  std::string value;
  for (auto& [term, positions] : terms) {
    value.clear();
    value.push_back(static_cast<char>(role));
    codec::put_varint(value, length);
    codec::put_varint(value, positions.size());
    uint32_t prev = 0;
    for (auto p : positions) {
      codec::put_varint(value, p - prev);
      prev = p;
    }
    int rc = lmdb_env::put(txn, terms_, posting_key(term, id), value);
    if (rc == 0)
      rc = bump_df(txn, df_, term, +1);
    if (rc != 0) {
      error = "index term '" + term + "'";
      return rc;
    }
  }
  fts_stats st;
  int rc = read_stats(txn, df_, st);
  if (rc == 0) {
    st.doc_count += 1;
    st.total_length += length;
    rc = write_stats(txn, df_, st);
  }
  if (rc != 0)
    error = "update index statistics";
  return rc;
}

int fts_index::remove(MDB_txn* txn, uint64_t id, std::string_view text,
                      std::string& error) const {
  term_positions terms;
  uint32_t length = collect_terms(text, terms);
  for (auto& entry : terms) {
    const std::string& term = entry.first;
    int rc = lmdb_env::del(txn, terms_, posting_key(term, id));
    if (rc == 0)
      rc = bump_df(txn, df_, term, -1);
    else if (rc == MDB_NOTFOUND)
      rc = 0;  // never indexed: nothing to count down
    if (rc != 0) {
      error = "remove index term '" + term + "'";
      return rc;
    }
  }
  fts_stats st;
  int rc = read_stats(txn, df_, st);
  if (rc == 0) {
    st.doc_count = st.doc_count > 0 ? st.doc_count - 1 : 0;
    st.total_length = st.total_length >= length ? st.total_length - length
                                                : 0;
    rc = write_stats(txn, df_, st);
  }
  if (rc != 0)
    error = "update index statistics";
  return rc;
}

int fts_index::stats(MDB_txn* txn, fts_stats& out, std::string& error) const {
  int rc = read_stats(txn, df_, out);
  if (rc != 0)
    error = "read index statistics";
  return rc;
}

int fts_index::search(MDB_txn* txn, const fts_query& q,
                      const fts_filter& filter, fts_search_out& out,
                      std::string& error) const {
  out = fts_search_out{};
  if (q.empty())
    return 0;
  auto terms = q.distinct_terms();
  // Document frequencies: a term nobody used means no match at all.
  std::vector<uint64_t> dfs(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    std::string_view v;
    int rc = lmdb_env::get(txn, df_, terms[i], v);
    if (rc == MDB_NOTFOUND)
      return 0;
    if (rc != 0 || !codec::get_varint(v, dfs[i])) {
      error = "read document frequency of '" + terms[i] + "'";
      return rc != 0 ? rc : MDB_CORRUPTED;
    }
  }
  fts_stats st;
  if (int rc = read_stats(txn, df_, st); rc != 0) {
    error = "read index statistics";
    return rc;
  }
  double n_docs = static_cast<double>(std::max<uint64_t>(st.doc_count, 1));
  double avg_len = st.doc_count == 0 ? 1.0
                                     : static_cast<double>(st.total_length)
                                         / static_cast<double>(st.doc_count);
  if (avg_len <= 0)
    avg_len = 1.0;
  std::vector<double> idfs(terms.size());
  for (size_t i = 0; i < terms.size(); ++i)
    idfs[i] = idf(n_docs, static_cast<double>(dfs[i]));
  // Rarest term first: its postings drive the intersection.
  std::vector<size_t> order(terms.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t x, size_t y) { return dfs[x] < dfs[y]; });
  std::vector<term_cursor> cursors(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    int rc = mdb_cursor_open(txn, terms_, &cursors[i].guard.c);
    if (rc != 0) {
      error = "open index cursor";
      return rc;
    }
    cursors[i].prefix = terms[i];
    cursors[i].prefix.push_back('\0');
    cursors[i].seek(0);
  }
  // Units refer to terms by index.
  struct unit_ref {
    std::vector<size_t> term_idx;
  };
  std::vector<unit_ref> units;
  for (auto& u : q.units) {
    unit_ref r;
    for (auto& t : u.terms)
      r.term_idx.push_back(static_cast<size_t>(
        std::find(terms.begin(), terms.end(), t) - terms.begin()));
    units.push_back(std::move(r));
  }
  std::vector<posting> posts(terms.size());
  std::vector<std::vector<uint32_t>> positions(terms.size());
  std::vector<bool> decoded(terms.size());
  std::vector<fts_match> all;
  term_cursor& driver = cursors[order[0]];
  for (; !driver.done; driver.next()) {
    uint64_t id = driver.id;
    if (!decode_posting(driver.value, posts[order[0]])) {
      error = "decode posting of '" + terms[order[0]] + "'";
      return MDB_CORRUPTED;
    }
    auto role = posts[order[0]].role;
    if (filter.role_mask != 0
        && (filter.role_mask & (1u << static_cast<unsigned>(role))) == 0)
      continue;
    bool match = true;
    bool exhausted = false;
    for (size_t k = 1; k < order.size() && match; ++k) {
      auto& c = cursors[order[k]];
      if (!c.advance_to(id)) {
        match = false;
        exhausted = c.done;
      } else if (!decode_posting(c.value, posts[order[k]])) {
        error = "decode posting of '" + terms[order[k]] + "'";
        return MDB_CORRUPTED;
      }
    }
    if (exhausted)
      break;  // a term has no more postings: nothing further can match
    if (!match)
      continue;
    std::fill(decoded.begin(), decoded.end(), false);
    double score = 0;
    double doc_len = static_cast<double>(posts[order[0]].doc_length);
    for (auto& u : units) {
      double tf = 0;
      if (u.term_idx.size() == 1) {
        tf = static_cast<double>(posts[u.term_idx[0]].count);
        score += idfs[u.term_idx[0]] * bm25_tf(tf, doc_len, avg_len);
        continue;
      }
      std::vector<std::vector<uint32_t>*> lists;
      for (auto t : u.term_idx) {
        if (!decoded[t]) {
          if (!decode_positions(posts[t].positions, posts[t].count,
                                positions[t])) {
            error = "decode positions of '" + terms[t] + "'";
            return MDB_CORRUPTED;
          }
          decoded[t] = true;
        }
        lists.push_back(&positions[t]);
      }
      tf = static_cast<double>(phrase_count(lists));
      if (tf == 0) {
        match = false;
        break;
      }
      double phrase_idf = 0;
      for (auto t : u.term_idx)
        phrase_idf += idfs[t];
      score += phrase_idf * bm25_tf(tf, doc_len, avg_len);
    }
    if (!match || (filter.accept && !filter.accept(id)))
      continue;
    all.push_back(fts_match{id, role, score});
  }
  for (auto& c : cursors)
    if (c.rc != 0) {
      error = "scan postings";
      return c.rc;
    }
  out.total = all.size();
  auto better = [](const fts_match& x, const fts_match& y) {
    if (x.score != y.score)
      return x.score > y.score;
    return x.message_id > y.message_id;
  };
  size_t end = std::min(all.size(), filter.offset + filter.limit);
  if (filter.offset >= all.size() || filter.limit == 0)
    return 0;
  std::partial_sort(all.begin(), all.begin() + end, all.end(), better);
  out.matches.assign(all.begin() + filter.offset, all.begin() + end);
  return 0;
}

int fts_index::verify(MDB_txn* txn,
                      const std::function<bool(uint64_t, fts_role&)>& role_of,
                      uint64_t doc_count, std::vector<std::string>& problems,
                      std::string& error) const {
  cursor_guard cur;
  int rc = mdb_cursor_open(txn, terms_, &cur.c);
  if (rc != 0) {
    error = "open index cursor";
    return rc;
  }
  std::unordered_map<std::string, uint64_t> counts;
  std::unordered_map<uint64_t, uint64_t> lengths;
  MDB_val k;
  MDB_val v;
  for (rc = mdb_cursor_get(cur.c, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cur.c, &k, &v, MDB_NEXT)) {
    auto key = lmdb_env::view(k);
    if (key.size() < 10 || key[key.size() - 9] != '\0') {
      problems.push_back("malformed index key of " + std::to_string(key.size())
                         + " bytes");
      continue;
    }
    std::string term{key.substr(0, key.size() - 9)};
    uint64_t id = codec::read_be64(key.data() + key.size() - 8);
    posting p;
    std::vector<uint32_t> pos;
    if (!decode_posting(lmdb_env::view(v), p)
        || !decode_positions(p.positions, p.count, pos) || p.count == 0) {
      problems.push_back("malformed posting of '" + term + "' for message "
                         + std::to_string(id));
      continue;
    }
    fts_role role;
    if (!role_of(id, role))
      problems.push_back("posting of '" + term + "' references missing "
                         "message " + std::to_string(id));
    else if (role != p.role)
      problems.push_back("posting of '" + term + "' for message "
                         + std::to_string(id) + " has the wrong role");
    ++counts[term];
    lengths[id] = p.doc_length;
  }
  if (rc != MDB_NOTFOUND) {
    error = "scan postings";
    return rc;
  }
  // Every df entry must equal its posting count, and vice versa.
  cursor_guard dcur;
  if ((rc = mdb_cursor_open(txn, df_, &dcur.c)) != 0) {
    error = "open frequency cursor";
    return rc;
  }
  size_t seen = 0;
  for (rc = mdb_cursor_get(dcur.c, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(dcur.c, &k, &v, MDB_NEXT)) {
    auto key = lmdb_env::view(k);
    if (key == stats_key)
      continue;
    auto val = lmdb_env::view(v);
    uint64_t df = 0;
    codec::get_varint(val, df);
    auto it = counts.find(std::string{key});
    uint64_t n = it == counts.end() ? 0 : it->second;
    if (n != df)
      problems.push_back("term '" + std::string{key} + "' has frequency "
                         + std::to_string(df) + " but "
                         + std::to_string(n) + " postings");
    if (it != counts.end())
      ++seen;
  }
  if (rc != MDB_NOTFOUND) {
    error = "scan frequencies";
    return rc;
  }
  if (seen != counts.size())
    problems.push_back(std::to_string(counts.size() - seen)
                       + " indexed terms have no frequency entry");
  fts_stats st;
  if ((rc = read_stats(txn, df_, st)) != 0) {
    error = "read index statistics";
    return rc;
  }
  if (st.doc_count != doc_count)
    problems.push_back("index counts " + std::to_string(st.doc_count)
                       + " documents but the store holds "
                       + std::to_string(doc_count) + " messages");
  uint64_t total = 0;
  for (auto& entry : lengths)
    total += entry.second;
  if (st.total_length != total)
    problems.push_back("index total length " + std::to_string(st.total_length)
                       + " differs from the postings' "
                       + std::to_string(total));
  return 0;
}

int fts_index::verify_document(MDB_txn* txn, uint64_t id,
                               std::string_view text,
                               std::vector<std::string>& problems,
                               std::string& error) const {
  term_positions terms;
  collect_terms(text, terms);
  for (auto& [term, pos] : terms) {
    std::string_view v;
    int rc = lmdb_env::get(txn, terms_, posting_key(term, id), v);
    if (rc == MDB_NOTFOUND) {
      problems.push_back("message " + std::to_string(id) + " lacks a "
                         "posting for '" + term + "'");
      continue;
    }
    if (rc != 0) {
      error = "read posting";
      return rc;
    }
    posting p;
    if (!decode_posting(v, p) || p.count != pos.size())
      problems.push_back("posting of '" + term + "' for message "
                         + std::to_string(id) + " has wrong positions");
  }
  return 0;
}

std::string fts_index::snippet(std::string_view content, const fts_query& q,
                               size_t max_bytes) {
  struct word {
    size_t begin;
    size_t end;
    bool hit;
  };
  std::unordered_set<std::string> wanted;
  for (auto& t : q.distinct_terms())
    wanted.insert(t);
  std::vector<word> words;
  size_t first_hit = SIZE_MAX;
  fts_for_each_token(content, [&](const fts_token& t) {
    bool hit = wanted.count(std::string{t.term}) > 0;
    if (hit && first_hit == SIZE_MAX)
      first_hit = words.size();
    words.push_back(word{t.begin, t.end, hit});
  });
  if (words.empty())
    return {};
  size_t start = first_hit == SIZE_MAX ? 0
                                       : (first_hit > 6 ? first_hit - 6 : 0);
  size_t begin = words[start].begin;
  size_t last = start;
  while (last + 1 < words.size()
         && words[last + 1].end - begin <= max_bytes)
    ++last;
  std::string out;
  if (start > 0)
    out += "...";
  size_t at = begin;
  for (size_t i = start; i <= last; ++i) {
    out.append(content.substr(at, words[i].begin - at));
    if (words[i].hit) {
      out += ">>>";
      out.append(content.substr(words[i].begin, words[i].end - words[i].begin));
      out += "<<<";
    } else {
      out.append(content.substr(words[i].begin, words[i].end - words[i].begin));
    }
    at = words[i].end;
  }
  if (last + 1 < words.size())
    out += "...";
  for (auto& c : out)
    if (c == '\n' || c == '\r' || c == '\t')
      c = ' ';
  return out;
}

} // namespace mibyan
