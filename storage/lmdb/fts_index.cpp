#include "storage/lmdb/fts_index.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "storage/byte_codec.hpp"
#include "storage/lmdb/fts_block.hpp"
#include "storage/fts_tokenizer.hpp"
#include "storage/lmdb/lmdb_store_detail.hpp"

namespace mibyan {

namespace {

using store_detail::cursor_guard;

const std::string stats_key{"\0", 1};

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

// Adds `delta` (> 0, or -1) to a term's document frequency; deletes at
// zero.
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
  df = delta < 0 ? df - 1 : df + static_cast<uint64_t>(delta);
  if (df == 0)
    return lmdb_env::del(txn, dbi, term);
  std::string nv;
  codec::put_varint(nv, df);
  return lmdb_env::put(txn, dbi, term, nv);
}

// The block of `term` that holds (or would hold) `id`: the one with the
// largest first id <= id. `found` is false when the term has no such
// block; else `k`/`v` are its key and value.
int find_block(MDB_cursor* c, std::string_view term, uint64_t id,
               bool& found, MDB_val& k, MDB_val& v) {
  found = false;
  auto want = fts_block::key(term, id);
  k = lmdb_env::val(want);
  int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
  if (rc == 0 && lmdb_env::view(k) == want) {
    found = true;
    return 0;
  }
  if (rc == 0)
    rc = mdb_cursor_get(c, &k, &v, MDB_PREV);
  else if (rc == MDB_NOTFOUND)
    rc = mdb_cursor_get(c, &k, &v, MDB_LAST);
  if (rc == MDB_NOTFOUND)
    return 0;
  if (rc != 0)
    return rc;
  auto key = lmdb_env::view(k);
  found = key.size() == term.size() + 9 && key[term.size()] == '\0'
          && key.compare(0, term.size(), term) == 0;
  return 0;
}

uint64_t key_id(const MDB_val& k) {
  return codec::read_be64(static_cast<const char*>(k.mv_data) + k.mv_size
                          - 8);
}

} // namespace

// The last block add_many wrote per term (fts_index.hpp, "Last-block
// cache").
struct fts_index::last_blocks {
  struct block {
    std::string key;
    std::string value;
    uint64_t last_id = 0;
  };
  std::mutex mtx;
  std::unordered_map<std::string, block> by_term;

  // The last id of the block (`k`, `v`) if it is the one remembered for
  // `term`, byte for byte.
  bool last_id(const std::string& term, const MDB_val& k, const MDB_val& v,
               uint64_t& out) {
    std::lock_guard<std::mutex> g{mtx};
    auto it = by_term.find(term);
    if (it == by_term.end() || lmdb_env::view(k) != it->second.key
        || lmdb_env::view(v) != it->second.value)
      return false;
    out = it->second.last_id;
    return true;
  }

  void remember(const std::string& term, const std::string& key,
                const std::string& value, uint64_t last_id) {
    std::lock_guard<std::mutex> g{mtx};
    auto it = by_term.find(term);
    if (value.size() >= fts_block::max_block_bytes) {
      // A full block is never extended: the next posting opens a new one.
      if (it != by_term.end())
        by_term.erase(it);
      return;
    }
    if (it == by_term.end()) {
      if (by_term.size() >= last_block_cache_terms)
        by_term.clear(); // bounded; the hot terms come back at once
      it = by_term.emplace(term, block{}).first;
    }
    it->second.key = key;
    it->second.value = value;
    it->second.last_id = last_id;
  }
};

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

int fts_index::open_in(MDB_txn* txn, bool read_only, fts_index& out,
                       std::string& error) {
  out = fts_index{};
  out.last_ = std::make_shared<last_blocks>();
  unsigned create = read_only ? 0u : unsigned{MDB_CREATE};
  MDB_dbi blocks = 0;
  int rc = mdb_dbi_open(txn, "fts_blocks", create, &blocks);
  if (rc == MDB_NOTFOUND && read_only)
    return 0;  // the old format: unavailable until rebuilt
  if (rc != 0) {
    error = "open database fts_blocks";
    return rc;
  }
  MDB_dbi df = 0;
  if ((rc = mdb_dbi_open(txn, "fts_df", create, &df)) != 0) {
    error = "open database fts_df";
    return rc;
  }
  out.blocks_ = blocks;
  out.df_ = df;
  out.available_ = true;
  return 0;
}

int fts_index::add(MDB_txn* txn, uint64_t id, fts_role role,
                   std::string_view text, std::string& error) const {
  std::vector<document> one(1);
  one[0].id = id;
  one[0].role = role;
  one[0].text.assign(text.data(), text.size());
  return add_many(txn, one, error);
}

int fts_index::add_many(MDB_txn* txn, const std::vector<document>& docs,
                        std::string& error) const {
  // term -> its new postings, ids increasing
  struct pending {
    fts_block::entry e;
    std::vector<uint32_t> positions;
  };
  std::map<std::string, std::vector<pending>> by_term;
  fts_stats add_st;
  for (auto& d : docs) {
    if (d.role == fts_role::other) {
      error = "index message " + std::to_string(d.id) + ": role has no code";
      return lmdb_env::user_error;
    }
    term_positions terms;
    uint32_t length = collect_terms(d.text, terms);
    add_st.doc_count += 1;
    add_st.total_length += length;
    for (auto& [term, positions] : terms) {
      pending p;
      p.e.id = d.id;
      p.e.doc_length = length;
      p.e.role = d.role;
      p.positions = std::move(positions);
      by_term[term].push_back(std::move(p));
    }
  }
  cursor_guard cur;
  int rc = mdb_cursor_open(txn, blocks_, &cur.c);
  if (rc != 0) {
    error = "open index cursor";
    return rc;
  }
  std::vector<fts_block::entry> entries;
  std::string key;
  std::string value;
  for (auto& [term, posts] : by_term) {
    bool found = false;
    MDB_val k;
    MDB_val v;
    rc = find_block(cur.c, term, UINT64_MAX, found, k, v);
    value.clear();
    uint64_t prev = 0;
    if (rc == 0 && found && v.mv_size < fts_block::max_block_bytes) {
      // Extend the term's last block (ids only grow). Its last id comes
      // from the cache when the block is byte for byte the one remembered.
      if (!last_ || !last_->last_id(term, k, v, prev)) {
        if (!fts_block::decode(lmdb_env::view(v), key_id(k), entries)) {
          error = "index term '" + term + "': malformed block";
          return MDB_CORRUPTED;
        }
        prev = entries.back().id;
      }
      if (prev >= posts.front().e.id) {
        error = "index term '" + term + "': out-of-order block";
        return MDB_CORRUPTED;
      }
      key.assign(static_cast<const char*>(k.mv_data), k.mv_size);
      value.assign(static_cast<const char*>(v.mv_data), v.mv_size);
    }
    for (size_t i = 0; rc == 0 && i < posts.size(); ++i) {
      if (value.empty() || value.size() >= fts_block::max_block_bytes) {
        if (!value.empty())
          rc = lmdb_env::put(txn, blocks_, key, value);
        key = fts_block::key(term, posts[i].e.id);
        value.clear();
        prev = posts[i].e.id;
      }
      fts_block::append(value, prev, posts[i].e, posts[i].positions);
      prev = posts[i].e.id;
    }
    if (rc == 0)
      rc = lmdb_env::put(txn, blocks_, key, value);
    if (rc == 0 && last_)
      last_->remember(term, key, value, prev);
    if (rc == 0)
      rc = bump_df(txn, df_, term, static_cast<int>(posts.size()));
    if (rc != 0) {
      error = "index term '" + term + "'";
      return rc;
    }
  }
  fts_stats st;
  rc = read_stats(txn, df_, st);
  if (rc == 0) {
    st.doc_count += add_st.doc_count;
    st.total_length += add_st.total_length;
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
  cursor_guard cur;
  int rc = mdb_cursor_open(txn, blocks_, &cur.c);
  if (rc != 0) {
    error = "open index cursor";
    return rc;
  }
  std::vector<fts_block::entry> entries;
  for (auto& entry : terms) {
    const std::string& term = entry.first;
    bool found = false;
    MDB_val k;
    MDB_val v;
    rc = find_block(cur.c, term, id, found, k, v);
    if (rc == 0 && found) {
      uint64_t first = key_id(k);
      std::string key{static_cast<const char*>(k.mv_data), k.mv_size};
      std::string old{static_cast<const char*>(v.mv_data), v.mv_size};
      if (!fts_block::decode(old, first, entries)) {
        error = "remove index term '" + term + "': malformed block";
        return MDB_CORRUPTED;
      }
      std::string value;
      uint64_t prev = 0;
      bool removed = false;
      for (auto& e : entries) {
        if (e.id == id) {
          removed = true;
          continue;
        }
        if (value.empty())
          prev = e.id;
        fts_block::append_encoded(value, prev, e);
        prev = e.id;
      }
      if (!removed)
        continue;  // never indexed: nothing to count down
      if (value.empty() || entries.front().id == id) {
        rc = lmdb_env::del(txn, blocks_, key);
        if (rc == 0 && !value.empty())
          rc = lmdb_env::put(txn, blocks_,
                             fts_block::key(term, entries[1].id), value);
      } else {
        rc = lmdb_env::put(txn, blocks_, key, value);
      }
      if (rc == 0)
        rc = bump_df(txn, df_, term, -1);
    }
    if (rc != 0) {
      error = "remove index term '" + term + "'";
      return rc;
    }
  }
  fts_stats st;
  rc = read_stats(txn, df_, st);
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

int fts_index::clear(MDB_txn* txn, std::string& error) const {
  int rc = mdb_drop(txn, blocks_, 0);
  if (rc == 0)
    rc = mdb_drop(txn, df_, 0);
  if (rc != 0)
    error = "clear the full-text index";
  return rc;
}

int fts_index::stats(MDB_txn* txn, fts_stats& out, std::string& error) const {
  int rc = read_stats(txn, df_, out);
  if (rc != 0)
    error = "read index statistics";
  return rc;
}

int fts_index::verify(MDB_txn* txn,
                      const std::function<bool(uint64_t, fts_role&)>& role_of,
                      uint64_t doc_count, std::vector<std::string>& problems,
                      std::string& error) const {
  if (!available_) {
    problems.push_back("the full-text index has the old format (rebuilt "
                       "by the next read-write open)");
    return 0;
  }
  cursor_guard cur;
  int rc = mdb_cursor_open(txn, blocks_, &cur.c);
  if (rc != 0) {
    error = "open index cursor";
    return rc;
  }
  std::unordered_map<std::string, uint64_t> counts;
  std::unordered_map<uint64_t, uint64_t> lengths;
  std::vector<fts_block::entry> entries;
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
    uint64_t first = key_id(k);
    if (!fts_block::decode(lmdb_env::view(v), first, entries)) {
      problems.push_back("malformed posting block of '" + term
                         + "' at message " + std::to_string(first));
      continue;
    }
    for (auto& e : entries) {
      std::vector<uint32_t> pos;
      if (!fts_block::positions(e.positions, e.tf, pos))
        problems.push_back("malformed positions of '" + term
                           + "' for message " + std::to_string(e.id));
      fts_role role;
      if (!role_of(e.id, role))
        problems.push_back("posting of '" + term + "' references missing "
                           "message " + std::to_string(e.id));
      else if (role != e.role)
        problems.push_back("posting of '" + term + "' for message "
                           + std::to_string(e.id) + " has the wrong role");
      ++counts[term];
      lengths[e.id] = e.doc_length;
    }
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
  if (!available_)
    return 0;
  term_positions terms;
  collect_terms(text, terms);
  cursor_guard cur;
  int rc = mdb_cursor_open(txn, blocks_, &cur.c);
  if (rc != 0) {
    error = "open index cursor";
    return rc;
  }
  std::vector<fts_block::entry> entries;
  for (auto& [term, pos] : terms) {
    bool found = false;
    MDB_val k;
    MDB_val v;
    if ((rc = find_block(cur.c, term, id, found, k, v)) != 0) {
      error = "read posting";
      return rc;
    }
    const fts_block::entry* hit = nullptr;
    if (found && fts_block::decode(lmdb_env::view(v), key_id(k), entries))
      for (auto& e : entries)
        if (e.id == id)
          hit = &e;
    if (hit == nullptr)
      problems.push_back("message " + std::to_string(id) + " lacks a "
                         "posting for '" + term + "'");
    else if (hit->tf != pos.size())
      problems.push_back("posting of '" + term + "' for message "
                         + std::to_string(id) + " has wrong positions");
  }
  return 0;
}

void fts_index::snippet_spans(std::string_view content, const fts_query& q,
                              size_t max_bytes, std::string& out,
                              std::vector<std::pair<size_t, size_t>>& hits) {
  struct word {
    size_t begin;
    size_t end;
    bool hit;
  };
  out.clear();
  hits.clear();
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
    return;
  size_t start = first_hit == SIZE_MAX ? 0
                                       : (first_hit > 6 ? first_hit - 6 : 0);
  size_t begin = words[start].begin;
  size_t last = start;
  while (last + 1 < words.size()
         && words[last + 1].end - begin <= max_bytes)
    ++last;
  if (start > 0)
    out += "...";
  size_t at = begin;
  for (size_t i = start; i <= last; ++i) {
    out.append(content.substr(at, words[i].begin - at));
    auto b = out.size();
    out.append(content.substr(words[i].begin, words[i].end - words[i].begin));
    if (words[i].hit)
      hits.emplace_back(b, out.size());
    at = words[i].end;
  }
  if (last + 1 < words.size())
    out += "...";
  for (auto& c : out)
    if (c == '\n' || c == '\r' || c == '\t')
      c = ' ';
}

std::string fts_index::snippet(std::string_view content, const fts_query& q,
                               size_t max_bytes) {
  std::string text;
  std::vector<std::pair<size_t, size_t>> hits;
  snippet_spans(content, q, max_bytes, text, hits);
  std::string out;
  size_t at = 0;
  for (auto& [b, e] : hits) {
    out.append(text, at, b - at);
    out += ">>>";
    out.append(text, b, e - b);
    out += "<<<";
    at = e;
  }
  out.append(text, at, std::string::npos);
  return out;
}

} // namespace mibyan
