// Session store on PostgreSQL against LMDB, same machine, same run
// (docs/storage.md, "PostgreSQL"): durable append p50/p99 (one transaction
// per append, as production writes), history load of a 1,000-message
// session, and full-text search p50/p99 over a generated corpus.
//
//   mibyan_pg_store_bench [--messages N] [--appends A] [--queries Q]
//
// PostgreSQL is a throw-away server (tests/support/pg_server.hpp) with
// fsync on (durable commits, like LMDB's), reached over its unix socket.
// Both stores get the same messages and queries. Ratios are PostgreSQL /
// LMDB (higher = PostgreSQL slower).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "bench/bench_rows.hpp"
#include "storage/postgres/pg_session_store.hpp"
#include "storage/session_store.hpp"
#include "tests/support/pg_server.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using clock_type = std::chrono::steady_clock;

namespace {

double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t)
    .count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Words drawn with a Zipf(1.0) distribution over a generated vocabulary.
class words {
public:
  explicit words(unsigned seed, size_t vocab = 50000) : rng_(seed) {
    const char* syl[] = {"ka", "lo", "mi", "ren", "sta", "vu", "tor", "pel",
                         "qui", "dan", "sho", "er", "ix", "ol", "bra", "nek"};
    std::mt19937 g(7);
    for (size_t i = 0; i < vocab; ++i) {
      std::string w;
      size_t n = 1 + i % 3 + (i > 1000 ? 1 : 0);
      for (size_t k = 0; k < n; ++k)
        w += syl[g() % 16];
      vocab_.push_back(w + std::to_string(i % 97));
    }
    double sum = 0;
    for (size_t i = 0; i < vocab; ++i)
      cdf_.push_back(sum += 1.0 / static_cast<double>(i + 1));
    for (auto& c : cdf_)
      c /= sum;
  }
  const std::string& pick() {
    double u = std::uniform_real_distribution<double>(0, 1)(rng_);
    auto i = static_cast<size_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u)
                                 - cdf_.begin());
    return vocab_[std::min(i, vocab_.size() - 1)];
  }
  const std::string& rank(size_t r) const { return vocab_[r]; }
  std::string text(size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) {
      if (i)
        s += ' ';
      s += pick();
    }
    return s;
  }

private:
  std::mt19937 rng_;
  std::vector<std::string> vocab_;
  std::vector<double> cdf_;
};

chat_message message(words& w, size_t i) {
  chat_message m;
  m.role = i % 2 == 0 ? "user" : "assistant";
  m.content = w.text(20 + i % 60);
  return m;
}

struct figures {
  double append_p50 = 0, append_p99 = 0;
  double load_p50 = 0, load_p99 = 0;
  double search_p50 = 0, search_p99 = 0;
  double fill_s = 0;
  size_t hits = 0;
  /// The slowest queries (ms, query, matches).
  std::vector<std::tuple<double, std::string, size_t>> slowest;
};

template <class Store>
bool measure(Store& store, const char* name, size_t corpus, size_t appends,
             size_t queries, figures& f) {
  words w(42);
  // Durable appends, one per transaction.
  new_session ns;
  ns.id = "append";
  if (!store.create_session(ns).ok())
    return false;
  std::vector<double> lat;
  for (size_t i = 0; i < appends; ++i) {
    auto m = message(w, i);
    auto t = clock_type::now();
    auto r = store.append_message("append", m);
    lat.push_back(ms_since(t));
    if (!r) {
      std::fprintf(stderr, "%s: append: %s\n", name, r.error.c_str());
      return false;
    }
  }
  f.append_p50 = percentile(lat, 0.5);
  f.append_p99 = percentile(lat, 0.99);
  // A 1,000-message session, loaded 50 times.
  ns.id = "history";
  if (!store.create_session(ns).ok())
    return false;
  std::vector<pending_append> batch;
  for (size_t i = 0; i < 1000; ++i)
    batch.push_back({"history", message(w, i), ""});
  if (!store.append_batch(batch).ok())
    return false;
  lat.clear();
  for (int i = 0; i < 50; ++i) {
    auto t = clock_type::now();
    auto r = store.load_messages("history");
    lat.push_back(ms_since(t));
    if (!r || r->size() != 1000)
      return false;
  }
  f.load_p50 = percentile(lat, 0.5);
  f.load_p99 = percentile(lat, 0.99);
  // The search corpus: sessions of 100 messages, bulk-loaded in group
  // commits of 10 sessions with their 1,000 messages (one transaction and
  // one fsync each), so a corpus of 1M messages loads in minutes.
  auto t0 = clock_type::now();
  size_t done = 0;
  std::vector<store_write> group;
  for (size_t s = 0; done < corpus; ++s) {
    store_write cw;
    cw.what = store_write::kind::create;
    cw.create.id = "c" + std::to_string(s);
    group.push_back(std::move(cw));
    for (size_t i = 0; i < 100 && done < corpus; ++i, ++done) {
      store_write aw;
      aw.what = store_write::kind::append;
      aw.append = {"c" + std::to_string(s), message(w, done), ""};
      group.push_back(std::move(aw));
    }
    if (s % 10 == 9 || done == corpus) {
      if (!store.commit_group(group).ok())
        return false;
      for (auto& wr : group)
        if (!wr.status.ok()) {
          std::fprintf(stderr, "%s: load: %s\n", name,
                       wr.status.error.c_str());
          return false;
        }
      group.clear();
    }
  }
  f.fill_s = ms_since(t0) / 1000;
  // Queries: a frequent, a middling and a rare word; and two-word ANDs.
  words qw(99);
  std::mt19937 g(5);
  lat.clear();
  for (size_t i = 0; i < queries; ++i) {
    search_request q;
    switch (i % 4) {
      case 0: q.query = qw.rank(g() % 20); break;
      case 1: q.query = qw.rank(100 + g() % 900); break;
      case 2: q.query = qw.rank(5000 + g() % 40000); break;
      default: q.query = qw.rank(g() % 200) + " " + qw.rank(g() % 2000);
    }
    q.limit = 10;
    auto t = clock_type::now();
    auto r = store.search(q);
    lat.push_back(ms_since(t));
    if (!r) {
      std::fprintf(stderr, "%s: search: %s\n", name, r.error.c_str());
      return false;
    }
    f.hits += r->total;
    f.slowest.emplace_back(lat.back(), q.query, r->total);
  }
  std::sort(f.slowest.rbegin(), f.slowest.rend());
  f.slowest.resize(std::min<size_t>(f.slowest.size(), 3));
  f.search_p50 = percentile(lat, 0.5);
  f.search_p99 = percentile(lat, 0.99);
  return true;
}

} // namespace

int main(int argc, char** argv) {
  size_t corpus = 100000, appends = 1000, queries = 200;
  for (int i = 1; i < argc; ++i) {
    auto arg = std::string{argv[i]};
    auto next = [&] { return i + 1 < argc ? std::strtoull(argv[++i], nullptr, 10) : 0ull; };
    if (arg == "--messages")
      corpus = next();
    else if (arg == "--appends")
      appends = next();
    else if (arg == "--queries")
      queries = next();
    else {
      std::fprintf(stderr, "usage: mibyan_pg_store_bench [--messages N] "
                           "[--appends A] [--queries Q]\n");
      return 2;
    }
  }
  std::string why;
  test::pg_server_options po;
  po.durable = true;
  auto pg = test::pg_server::start(why, po);
  if (!pg) {
    std::fprintf(stderr, "cannot start PostgreSQL: %s\n", why.c_str());
    return 1;
  }
  auto db = pg->fresh_database("bench");
  test::temp_dir tmp;
  session_store_options lo;
  lo.dir = tmp / "lmdb";
  auto lmdb = session_store::open(lo);
  pg_store_options o;
  o.url = pg->url(db);
  auto pgs = pg_session_store::open(o);
  if (!lmdb || !pgs) {
    std::fprintf(stderr, "open: %s %s\n", lmdb.error.c_str(),
                 pgs.error.c_str());
    return 1;
  }
  figures fl, fp;
  std::printf("corpus %zu messages, %zu durable appends, %zu queries\n",
              corpus, appends, queries);
  if (!measure(**lmdb, "lmdb", corpus, appends, queries, fl)
      || !measure(**pgs, "postgres", corpus, appends, queries, fp))
    return 1;
  std::printf("%-34s %12s %12s %8s\n", "", "postgres", "lmdb", "ratio");
  auto row = [](const char* what, double p, double l, const char* unit,
                const char* metric) {
    std::printf("%-34s %9.3f %s %9.3f %s %8.2f\n", what, p, unit, l, unit,
                l > 0 ? p / l : 0.0);
    bench::bench_row(metric, p, l, l > 0 ? p / l : std::nan(""), unit, "",
                     -1);
  };
  row("append p50 (durable, 1 per txn)", fp.append_p50, fl.append_p50, "ms",
      "pg_store.append_p50_ms");
  row("append p99", fp.append_p99, fl.append_p99, "ms",
      "pg_store.append_p99_ms");
  row("history load, 1,000 msgs, p50", fp.load_p50, fl.load_p50, "ms",
      "pg_store.history_load_p50_ms");
  row("history load p99", fp.load_p99, fl.load_p99, "ms",
      "pg_store.history_load_p99_ms");
  row("search p50 (top 10 + total)", fp.search_p50, fl.search_p50, "ms",
      "pg_store.search_p50_ms");
  row("search p99", fp.search_p99, fl.search_p99, "ms",
      "pg_store.search_p99_ms");
  row("corpus fill (groups of 1,000)", fp.fill_s, fl.fill_s, "s ",
      "pg_store.fill_s");
  for (auto& [ms, q, n] : fp.slowest)
    std::printf("slowest on postgres: %.1f ms '%s' (%zu matches)\n", ms,
                q.c_str(), n);
  std::printf("matches found: postgres %zu, lmdb %zu (must be equal)\n",
              fp.hits, fl.hits);
  return fp.hits == fl.hits ? 0 : 1;
}
