// The full-text index, part: query evaluation (storage/lmdb/fts_index.hpp).
#include "storage/lmdb/fts_index.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <queue>

#include "storage/byte_codec.hpp"
#include "storage/lmdb/fts_block.hpp"

namespace mibyan {

namespace {

// Walks one term's postings block by block, in id order.
class block_reader {
public:
  block_reader() = default;
  block_reader(const block_reader&) = delete;
  block_reader(block_reader&& o) noexcept
    : cur_(o.cur_), prefix_(std::move(o.prefix_)),
      entries_(std::move(o.entries_)), i_(o.i_), done_(o.done_),
      rc_(o.rc_) {
    o.cur_ = nullptr;
  }
  ~block_reader() {
    if (cur_ != nullptr)
      mdb_cursor_close(cur_);
  }

  int open(MDB_txn* txn, MDB_dbi dbi, const std::string& term) {
    prefix_ = term;
    prefix_.push_back('\0');
    if (int rc = mdb_cursor_open(txn, dbi, &cur_); rc != 0)
      return rc;
    MDB_val k = lmdb_env::val(prefix_);
    MDB_val v;
    load(mdb_cursor_get(cur_, &k, &v, MDB_SET_RANGE), k, v);
    return rc_;
  }

  bool done() const { return done_; }
  int rc() const { return rc_; }
  const fts_block::entry& at() const { return entries_[i_]; }

  void next() {
    if (++i_ < entries_.size())
      return;
    next_block();
  }

  // Moves to the first posting with id >= target; true if it is target.
  bool advance_to(uint64_t target) {
    while (!done_) {
      if (entries_.back().id >= target) {
        // Inside this block: the postings are sorted.
        auto it = std::lower_bound(
          entries_.begin() + static_cast<std::ptrdiff_t>(i_), entries_.end(),
          target,
          [](const fts_block::entry& e, uint64_t t) { return e.id < t; });
        i_ = static_cast<size_t>(it - entries_.begin());
        return entries_[i_].id == target;
      }
      // Past this block: the next one may do, else seek the block that
      // holds target (the last whose first id <= target).
      std::string k = prefix_;
      codec::put_be64(k, target);
      MDB_val key = lmdb_env::val(k);
      MDB_val v;
      int rc = mdb_cursor_get(cur_, &key, &v, MDB_SET_RANGE);
      if (rc == 0 && lmdb_env::view(key) == k) {
        load(rc, key, v);
        continue;
      }
      if (rc != 0 && rc != MDB_NOTFOUND) {
        load(rc, key, v);
        continue;
      }
      // The block before the first key past target may hold it, unless
      // it is the current block (all below target).
      uint64_t current_first = entries_.front().id;
      rc = mdb_cursor_get(cur_, &key, &v, rc == 0 ? MDB_PREV : MDB_LAST);
      if (rc == 0 && is_ours(key)
          && codec::read_be64(static_cast<const char*>(key.mv_data)
                              + prefix_.size())
               > current_first) {
        load(rc, key, v);
        if (!done_ && entries_.back().id < target)
          next_block();
        continue;
      }
      if (rc == 0)
        rc = mdb_cursor_get(cur_, &key, &v, MDB_NEXT);
      load(rc, key, v);
    }
    return false;
  }

private:
  bool is_ours(const MDB_val& k) const {
    return k.mv_size == prefix_.size() + 8
           && std::memcmp(k.mv_data, prefix_.data(), prefix_.size()) == 0;
  }

  void next_block() {
    MDB_val k;
    MDB_val v;
    load(mdb_cursor_get(cur_, &k, &v, MDB_NEXT), k, v);
  }

  void load(int op_rc, const MDB_val& k, const MDB_val& v) {
    i_ = 0;
    done_ = false;
    if (op_rc != 0) {
      if (op_rc != MDB_NOTFOUND)
        rc_ = op_rc;
      done_ = true;
      return;
    }
    if (!is_ours(k)) {
      done_ = true;
      return;
    }
    uint64_t first = codec::read_be64(static_cast<const char*>(k.mv_data)
                                      + prefix_.size());
    if (!fts_block::decode(lmdb_env::view(v), first, entries_)) {
      rc_ = MDB_CORRUPTED;
      done_ = true;
    }
  }

  MDB_cursor* cur_ = nullptr;
  std::string prefix_;
  std::vector<fts_block::entry> entries_;
  size_t i_ = 0;
  bool done_ = true;
  int rc_ = 0;
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

// Best first: higher score, then the newer message.
bool better(const fts_match& x, const fts_match& y) {
  if (x.score != y.score)
    return x.score > y.score;
  return x.message_id > y.message_id;
}

} // namespace

int fts_index::search(MDB_txn* txn, const fts_query& q,
                      const fts_filter& filter, fts_search_out& out,
                      std::string& error) const {
  out = fts_search_out{};
  if (q.empty())
    return 0;
  if (!available_) {
    error = "the full-text index has the old format";
    return lmdb_env::user_error;
  }
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
  if (int rc = stats(txn, st, error); rc != 0)
    return rc;
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
  std::vector<block_reader> readers(terms.size());
  for (size_t i = 0; i < terms.size(); ++i)
    if (int rc = readers[i].open(txn, blocks_, terms[i]); rc != 0) {
      error = "open index cursor";
      return rc;
    }
  // Units refer to terms by index.
  std::vector<std::vector<size_t>> units;
  for (auto& u : q.units) {
    std::vector<size_t> r;
    for (auto& t : u.terms)
      r.push_back(static_cast<size_t>(
        std::find(terms.begin(), terms.end(), t) - terms.begin()));
    units.push_back(std::move(r));
  }
  std::vector<std::vector<uint32_t>> positions(terms.size());
  std::vector<bool> decoded(terms.size());
  // The page needs the best offset + limit; a min-heap keeps them.
  size_t keep = filter.offset + filter.limit;
  auto worse_on_top = [](const fts_match& x, const fts_match& y) {
    return better(x, y);
  };
  std::priority_queue<fts_match, std::vector<fts_match>,
                      decltype(worse_on_top)>
    top(worse_on_top);
  size_t total = 0;
  block_reader& driver = readers[order[0]];
  for (; !driver.done(); driver.next()) {
    const auto& d = driver.at();
    uint64_t id = d.id;
    if (filter.role_mask != 0
        && (filter.role_mask & (1u << static_cast<unsigned>(d.role))) == 0)
      continue;
    bool match = true;
    bool exhausted = false;
    for (size_t k = 1; k < order.size() && match; ++k) {
      auto& r = readers[order[k]];
      if (!r.advance_to(id)) {
        match = false;
        exhausted = r.done();
      }
    }
    if (exhausted)
      break;  // a term has no more postings: nothing further can match
    if (!match)
      continue;
    std::fill(decoded.begin(), decoded.end(), false);
    double score = 0;
    double doc_len = static_cast<double>(d.doc_length);
    for (auto& u : units) {
      if (u.size() == 1) {
        double tf = static_cast<double>(readers[u[0]].at().tf);
        score += idfs[u[0]] * bm25_tf(tf, doc_len, avg_len);
        continue;
      }
      std::vector<std::vector<uint32_t>*> lists;
      for (auto t : u) {
        if (!decoded[t]) {
          auto& e = readers[t].at();
          if (!fts_block::positions(e.positions, e.tf, positions[t])) {
            error = "decode positions of '" + terms[t] + "'";
            return MDB_CORRUPTED;
          }
          decoded[t] = true;
        }
        lists.push_back(&positions[t]);
      }
      double tf = static_cast<double>(phrase_count(lists));
      if (tf == 0) {
        match = false;
        break;
      }
      double phrase_idf = 0;
      for (auto t : u)
        phrase_idf += idfs[t];
      score += phrase_idf * bm25_tf(tf, doc_len, avg_len);
    }
    if (!match || (filter.accept && !filter.accept(id)))
      continue;
    ++total;
    if (keep == 0)
      continue;
    fts_match m{id, d.role, score};
    if (top.size() < keep) {
      top.push(m);
    } else if (better(m, top.top())) {
      top.pop();
      top.push(m);
    }
  }
  for (auto& r : readers)
    if (r.rc() != 0) {
      error = "scan postings";
      return r.rc();
    }
  out.total = total;
  std::vector<fts_match> best;
  best.reserve(top.size());
  while (!top.empty()) {
    best.push_back(top.top());
    top.pop();
  }
  std::reverse(best.begin(), best.end());
  if (filter.offset < best.size())
    out.matches.assign(best.begin() + static_cast<std::ptrdiff_t>(
                                        filter.offset),
                       best.end());
  return 0;
}

} // namespace mibyan
