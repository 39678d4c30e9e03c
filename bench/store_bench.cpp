// Session store benchmark: append throughput (one durable transaction per
// append, as in production, and batched), on-disk size, and full-text
// query latency at ~1M messages against a naive linear scan baseline.
//
//   mibyan_store_bench [--quick] [--messages N] [--sessions S]
//                      [--durable-seconds T] [--batch B] [--dir DIR] [--keep]
//                      [--no-sqlite]
//
// --quick: 100k messages, 2 s of durable appends. Unless --no-sqlite, the
// same messages and queries go through SQLite FTS5 (python3's sqlite3
// module, a regular fts5 table with the default unicode61 tokenizer) in
// the same run: query p50/p99 (count of matches + top 10 by bm25 with a
// snippet, as ours) and index size (the fts5 shadow tables without the
// content table, from dbstat).
//
// The store goes into a temporary directory under $TMPDIR (same disk as
// the product's $MIBYAN_HOME here) unless --dir is given.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "bench/bench_rows.hpp"
#include "storage/fts_query.hpp"
#include "storage/fts_tokenizer.hpp"
#include "storage/lmdb/fts_block.hpp"
#include "storage/lmdb/lmdb_inspect.hpp"
#include "storage/session_store.hpp"

using namespace mibyan;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// English-like text: the most frequent English words, then pseudo-words
// built from syllables, drawn with a Zipf(1.0) distribution over ranks.
class text_generator {
public:
  explicit text_generator(unsigned seed) : rng_(seed) {
    const char* common[] = {
      "the", "of", "and", "to", "a", "in", "is", "it", "you", "that", "he",
      "was", "for", "on", "are", "with", "as", "i", "his", "they", "be",
      "at", "one", "have", "this", "from", "or", "had", "by", "not", "word",
      "but", "what", "some", "we", "can", "out", "other", "were", "all",
      "there", "when", "up", "use", "your", "how", "said", "an", "each",
      "she", "which", "do", "their", "time", "if", "will", "way", "about",
      "many", "then", "them", "write", "would", "like", "so", "these", "her",
      "long", "make", "thing", "see", "him", "two", "has", "look", "more",
      "day", "could", "go", "come", "did", "number", "sound", "no", "most",
      "people", "my", "over", "know", "water", "than", "call", "first",
      "who", "may", "down", "side", "been", "now", "find", "file", "server",
      "error", "function", "build", "test", "config", "python", "request"};
    for (auto w : common)
      vocab_.push_back(w);
    const char* syl[] = {"ka", "lo", "mi", "ren", "to", "sa", "vel", "qu",
                         "dor", "ian", "pe", "ro", "ste", "na", "ble", "cor",
                         "ex", "ul", "tra", "mon", "gi", "fa", "zen", "ly",
                         "ph", "ore", "tic", "al", "be", "do"};
    std::uniform_int_distribution<int> pick(0, 29);
    std::uniform_int_distribution<int> len(2, 4);
    while (vocab_.size() < 30000) {
      std::string w;
      int n = len(rng_);
      for (int i = 0; i < n; ++i)
        w += syl[pick(rng_)];
      vocab_.push_back(w);
    }
    double sum = 0;
    for (size_t r = 0; r < vocab_.size(); ++r) {
      sum += 1.0 / static_cast<double>(r + 1);
      cdf_.push_back(sum);
    }
    for (auto& c : cdf_)
      c /= sum;
  }

  const std::string& word() {
    std::uniform_real_distribution<double> u(0, 1);
    auto it = std::lower_bound(cdf_.begin(), cdf_.end(), u(rng_));
    return vocab_[std::min<size_t>(it - cdf_.begin(), vocab_.size() - 1)];
  }

  const std::string& word_at(size_t rank) const { return vocab_[rank]; }

  // ~30 words in sentences.
  std::string message() {
    std::uniform_int_distribution<int> len(20, 40);
    std::uniform_int_distribution<int> sentence(5, 14);
    int n = len(rng_);
    std::string out;
    int until_stop = sentence(rng_);
    bool cap = true;
    for (int i = 0; i < n; ++i) {
      std::string w = word();
      if (cap && !w.empty())
        w[0] = static_cast<char>(
          std::toupper(static_cast<unsigned char>(w[0])));
      cap = false;
      out += w;
      if (--until_stop == 0 || i + 1 == n) {
        out += (rng_() % 5 == 0) ? "? " : ". ";
        until_stop = sentence(rng_);
        cap = true;
      } else {
        out += (rng_() % 12 == 0) ? ", " : " ";
      }
    }
    out.pop_back();
    return out;
  }

  std::mt19937& rng() { return rng_; }

private:
  std::mt19937 rng_;
  std::vector<std::string> vocab_;
  std::vector<double> cdf_;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// The baseline: scan every message, tokenize it, and test the query
// (all terms present; phrases consecutive). No ranking.
size_t linear_scan(const std::vector<std::string>& corpus,
                   const fts_query& q) {
  size_t hits = 0;
  std::vector<std::string> words;
  for (auto& text : corpus) {
    words.clear();
    fts_for_each_token(text, [&](const fts_token& t) {
      words.emplace_back(t.term);
    });
    bool all = true;
    for (auto& u : q.units) {
      bool found = false;
      for (size_t p = 0; p + u.terms.size() <= words.size() && !found; ++p) {
        bool ok = true;
        for (size_t k = 0; k < u.terms.size() && ok; ++k)
          ok = words[p + k] == u.terms[k];
        found = ok;
      }
      if (!found) {
        all = false;
        break;
      }
    }
    hits += all ? 1 : 0;
  }
  return hits;
}

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

int varint_bytes(uint64_t v) {
  int n = 1;
  for (; v >= 0x80; v >>= 7)
    ++n;
  return n;
}

// Where the full-text index's bytes go (goal 4 of the performance round):
// the payload of fts_blocks split by field, LMDB's per-record and per-page
// overhead, and how full the leaf pages are. LMDB's figures: a leaf node is
// an 8-byte header plus key and value, with a 2-byte slot in the page's
// index; a page has a 16-byte header.
void index_breakdown(const session_store& store, uint64_t page_size) {
  auto blocks = lmdb_inspect::scan(store, "fts_blocks");
  auto db = lmdb_inspect::database(store, "fts_blocks");
  if (!blocks || !db) {
    std::fprintf(stderr, "index breakdown: %s\n",
                 (!blocks ? blocks.error : db.error).c_str());
    return;
  }
  uint64_t key_bytes = 0, value_bytes = 0, postings = 0, id_bytes = 0,
           doc_bytes = 0, tf_bytes = 0, pos_bytes = 0, bad = 0;
  std::vector<fts_block::entry> entries;
  for (auto& [k, v] : *blocks) {
    key_bytes += k.size();
    value_bytes += v.size();
    if (k.size() < 9) {
      ++bad;
      continue;
    }
    uint64_t first = 0;
    for (size_t i = k.size() - 8; i < k.size(); ++i)
      first = first << 8 | static_cast<unsigned char>(k[i]);
    if (!fts_block::decode(v, first, entries)) {
      ++bad;
      continue;
    }
    uint64_t prev = first;
    for (auto& e : entries) {
      ++postings;
      id_bytes += varint_bytes(e.id - prev);
      prev = e.id;
      doc_bytes += varint_bytes(uint64_t{e.doc_length} * 4
                                + (static_cast<uint64_t>(e.role) & 3u));
      tf_bytes += varint_bytes(e.tf);
      pos_bytes += e.positions.size();
    }
  }
  uint64_t records = blocks->size();
  uint64_t node_bytes = key_bytes + value_bytes + records * 10;
  uint64_t leaf_room = db->leaf_pages * (page_size - 16);
  auto pct = [&](uint64_t b) {
    return 100.0 * static_cast<double>(b)
           / static_cast<double>(db->pages * page_size);
  };
  std::printf("  fts_blocks, where the bytes go: %llu blocks, %llu postings "
              "(%.1f per block), %s in %llu leaf + %llu branch + %llu "
              "overflow pages (depth %u)%s\n",
              static_cast<unsigned long long>(records),
              static_cast<unsigned long long>(postings),
              records ? static_cast<double>(postings) / records : 0.0,
              mib(db->pages * page_size).c_str(),
              static_cast<unsigned long long>(db->leaf_pages),
              static_cast<unsigned long long>(db->branch_pages),
              static_cast<unsigned long long>(db->overflow_pages), db->depth,
              bad ? " (some blocks did not decode)" : "");
  std::printf("    positions %s (%.0f%%), doc length+role %s (%.0f%%), "
              "id deltas %s (%.0f%%), tf %s (%.0f%%), keys %s (%.0f%%), "
              "LMDB node headers %s (%.0f%%)\n",
              mib(pos_bytes).c_str(), pct(pos_bytes), mib(doc_bytes).c_str(),
              pct(doc_bytes), mib(id_bytes).c_str(), pct(id_bytes),
              mib(tf_bytes).c_str(), pct(tf_bytes), mib(key_bytes).c_str(),
              pct(key_bytes), mib(records * 10).c_str(), pct(records * 10));
  std::printf("    leaf pages %.0f%% full (records %s of %s of leaf room); "
              "unused leaf room %s (%.0f%% of the database)\n",
              leaf_room ? 100.0 * static_cast<double>(node_bytes) / leaf_room
                        : 0.0,
              mib(node_bytes).c_str(), mib(leaf_room).c_str(),
              mib(leaf_room > node_bytes ? leaf_room - node_bytes : 0).c_str(),
              pct(leaf_room > node_bytes ? leaf_room - node_bytes : 0));
}

} // namespace

int main(int argc, char** argv) {
  size_t total_messages = 1'000'000;
  size_t sessions = 1000;
  double durable_seconds = 20;
  size_t baseline_messages = 100'000;
  size_t batch_size = 10000;
  std::string dir;
  bool keep = false;
  bool sqlite = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string{argv[++i]} : ""; };
    if (a == "--messages")
      total_messages = std::stoul(next());
    else if (a == "--sessions")
      sessions = std::stoul(next());
    else if (a == "--durable-seconds")
      durable_seconds = std::stod(next());
    else if (a == "--batch")
      batch_size = std::max<size_t>(1, std::stoul(next()));
    else if (a == "--dir")
      dir = next();
    else if (a == "--keep")
      keep = true;
    else if (a == "--quick") {
      total_messages = 100'000;
      durable_seconds = 2;
    } else if (a == "--no-sqlite")
      sqlite = false;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (dir.empty()) {
    const char* t = std::getenv("TMPDIR");
    std::string base = t && *t ? t : "/tmp";
    dir = base + "/mibyan_store_bench_" + std::to_string(::getpid());
  }
  std::filesystem::remove_all(dir);
  session_store_options o;
  o.dir = dir;
  auto opened = open_session_store(o);
  if (!opened) {
    std::fprintf(stderr, "%s\n", opened.error.c_str());
    return 1;
  }
  auto& store = **opened;
  text_generator gen{42};
  std::vector<std::string> sids;
  std::vector<std::string> baseline_corpus;
  std::vector<std::string> phrase_sources;
  std::printf("store bench: %zu messages over %zu sessions in %s\n",
              total_messages, sessions, dir.c_str());

  auto start = clock_type::now();
  for (size_t i = 0; i < sessions; ++i) {
    new_session ns;
    ns.id = "bench_" + std::to_string(i);
    ns.model = "bench-model";
    auto r = store.create_session(ns);
    if (!r) {
      std::fprintf(stderr, "%s\n", r.error.c_str());
      return 1;
    }
    sids.push_back(r->id);
  }
  std::printf("  create %zu sessions (1 txn each):  %.0f sessions/s\n",
              sessions, static_cast<double>(sessions) / seconds_since(start));

  size_t n = 0;
  std::ofstream corpus_out;
  if (sqlite)
    corpus_out.open(dir + ".corpus.txt");
  auto next_message = [&](chat_message& m, std::string& sid) {
    static const char* roles[] = {"user", "assistant", "assistant", "tool"};
    m = chat_message{};
    m.role = roles[n % 4];
    m.content = gen.message();
    if (m.role == "tool") {
      m.tool_call_id = "call_" + std::to_string(n);
      m.tool_name = "terminal";
    }
    sid = sids[(n / 8) % sids.size()];  // runs of 8 per session
    if (baseline_corpus.size() < baseline_messages)
      baseline_corpus.push_back(m.content);
    if (corpus_out)
      corpus_out << m.content << '\n';
    if (n % 5000 == 0)
      phrase_sources.push_back(m.content);
    ++n;
  };

  // Phase 1: production mode, one committed (fsync'd) transaction each.
  start = clock_type::now();
  size_t durable = 0;
  chat_message m;
  std::string sid;
  while (n < total_messages && seconds_since(start) < durable_seconds) {
    next_message(m, sid);
    auto r = store.append_message(sid, m);
    if (!r) {
      std::fprintf(stderr, "%s\n", r.error.c_str());
      return 1;
    }
    ++durable;
  }
  double t1 = seconds_since(start);
  std::printf("  append, 1 txn per message (durable): %zu in %.1f s = "
              "%.0f appends/s\n",
              durable, t1, static_cast<double>(durable) / t1);

  // Phase 2: batched, B messages per transaction (still fsync'd; the
  // product never uses MDB_NOSYNC, and neither does this bench).
  start = clock_type::now();
  size_t batched = 0;
  std::vector<pending_append> batch;
  while (n < total_messages) {
    batch.clear();
    while (batch.size() < batch_size && n < total_messages) {
      next_message(m, sid);
      batch.push_back({sid, std::move(m), ""});
    }
    auto r = store.append_batch(batch);
    if (!r) {
      std::fprintf(stderr, "%s\n", r.error.c_str());
      return 1;
    }
    batched += batch.size();
    if (batched % 100000 < batch_size)
      std::fprintf(stderr, "    ... %zu messages\n", n);
  }
  double t2 = seconds_since(start);
  if (batched > 0)
    std::printf("  append, batched %zu per txn:       %zu in %.1f s = "
                "%.0f appends/s\n",
                batch_size, batched, t2, static_cast<double>(batched) / t2);

  auto count = store.message_count();
  std::printf("  messages stored: %llu\n",
              static_cast<unsigned long long>(count ? *count : 0));
  auto envf = lmdb_inspect::environment(store);
  if (!envf) {
    std::fprintf(stderr, "%s\n", envf.error.c_str());
    return 1;
  }
  std::printf("  on disk: %s (map %s)\n", mib(envf->disk_bytes).c_str(),
              mib(envf->map_size).c_str());
  uint64_t fts_bytes = 0;  // pages of fts_blocks + fts_df
  for (auto name : {"msgs", "msg_by_id", "sessions", "fts_blocks", "fts_df"}) {
    auto db = lmdb_inspect::database(store, name);
    if (!db)
      continue;
    uint64_t bytes = db->pages * envf->page_size;
    if (std::string{name}.rfind("fts_", 0) == 0)
      fts_bytes += bytes;
    std::printf("    %-10s %12llu entries %12s\n", name,
                static_cast<unsigned long long>(db->entries),
                mib(bytes).c_str());
  }
  index_breakdown(store, envf->page_size);

  // Queries: 1-3 words drawn from vocabulary ranks 30..3000 (search
  // keywords rather than stop words), plus phrases cut from real messages.
  std::vector<std::string> queries;
  std::uniform_int_distribution<size_t> rank(30, 3000);
  auto& rng = gen.rng();
  for (int i = 0; i < 150; ++i) {
    std::string q;
    int terms = 1 + i % 3;
    for (int k = 0; k < terms; ++k)
      q += gen.word_at(rank(rng)) + " ";
    queries.push_back(q);
  }
  for (size_t i = 0; queries.size() < 200; ++i) {
    auto words = fts_tokenize(phrase_sources[i % phrase_sources.size()]);
    size_t len = 2 + i % 2;
    size_t at = rng() % (words.size() - len);
    std::string q = "\"";
    for (size_t k = 0; k < len; ++k)
      q += words[at + k] + " ";
    queries.push_back(q + "\"");
  }
  std::vector<double> fts_ms;
  size_t with_hits = 0;
  size_t total_hits = 0;
  for (auto& q : queries) {
    search_request req;
    req.query = q;
    req.limit = 10;
    auto t = clock_type::now();
    auto r = store.search(req);
    fts_ms.push_back(seconds_since(t) * 1000);
    if (!r) {
      std::fprintf(stderr, "query %s: %s\n", q.c_str(), r.error.c_str());
      return 1;
    }
    with_hits += r->total > 0 ? 1 : 0;
    total_hits += r->total;
  }
  {
    std::vector<std::pair<double, size_t>> slow;
    for (size_t i = 0; i < fts_ms.size(); ++i)
      slow.emplace_back(fts_ms[i], i);
    std::sort(slow.rbegin(), slow.rend());
    for (size_t i = 0; i < 4 && i < slow.size(); ++i)
      std::printf("    slowest: %8.3f ms  %s\n", slow[i].first,
                  queries[slow[i].second].c_str());
  }
  std::printf("  FTS over %zu messages, 200 queries (150 of 1-3 words, 50 "
              "phrases), top 10 with snippets:\n",
              n);
  std::printf("    p50 %.3f ms  p99 %.3f ms  max %.3f ms  (%zu queries "
              "with hits, %zu matches in all)\n",
              percentile(fts_ms, 0.5), percentile(fts_ms, 0.99),
              percentile(fts_ms, 1.0), with_hits, total_hits);

  // Stop-word queries: the worst case (most of the corpus matches).
  std::vector<double> stop_ms;
  for (auto q : {"the", "of and", "the to a", "is it you", "\"of the\""}) {
    search_request req;
    req.query = q;
    req.limit = 10;
    auto t = clock_type::now();
    auto r = store.search(req);
    stop_ms.push_back(seconds_since(t) * 1000);
    if (r)
      std::printf("    stop-word query %-12s %8zu matches %9.1f ms\n", q,
                  r->total, stop_ms.back());
  }

  // Baseline: linear scan over the first messages (in memory), same
  // queries. The same scan over 1M messages would take ~10x longer.
  std::vector<double> scan_ms;
  for (auto& q : queries) {
    auto parsed = parse_fts_query(q);
    auto t = clock_type::now();
    volatile size_t hits = linear_scan(baseline_corpus, parsed);
    (void) hits;
    scan_ms.push_back(seconds_since(t) * 1000);
    if (scan_ms.size() >= 50)
      break;  // 50 queries are enough for the baseline's percentiles
  }
  std::printf("  baseline: in-memory tokenize-and-match scan of the first "
              "%zu messages, first 50 queries:\n",
              baseline_corpus.size());
  std::printf("    p50 %.1f ms  p99 %.1f ms  (x%.0f for the full corpus)\n",
              percentile(scan_ms, 0.5), percentile(scan_ms, 0.99),
              static_cast<double>(n)
                / static_cast<double>(baseline_corpus.size()));
  std::printf("  full-text index (fts_blocks + fts_df): %s\n",
              mib(fts_bytes).c_str());
  double fts5_p50 = std::nan(""), fts5_p99 = std::nan("");
  double fts5_bytes = std::nan("");
  if (sqlite) {
    corpus_out.close();
    auto qpath = dir + ".queries.txt";
    {
      std::ofstream qo(qpath);
      for (auto& q : queries)
        qo << q << '\n';
    }
    auto out_path = dir + ".fts5.json";
    std::string cmd = std::string{"python3 "} + MIBYAN_BENCH_DIR
                      + "/fts5_baseline.py '" + dir + ".corpus.txt' '" + qpath
                      + "' '" + dir + ".fts5.db' > '" + out_path + "'";
    auto t = clock_type::now();
    int rc = std::system(cmd.c_str());
    std::ifstream in(out_path);
    std::string line;
    std::getline(in, line);
    if (rc != 0 || line.empty()) {
      std::fprintf(stderr, "SQLite FTS5 baseline failed (%s)\n", cmd.c_str());
    } else {
      // A flat scan of the one JSON line: "index_bytes": N, "query_ms": [..]
      auto num_after = [&](const char* key) {
        auto at = line.find(key);
        return at == std::string::npos
                 ? std::nan("")
                 : std::atof(line.c_str() + at + std::strlen(key));
      };
      fts5_bytes = num_after("\"index_bytes\": ");
      std::vector<double> qms;
      auto at = line.find("\"query_ms\": [");
      if (at != std::string::npos) {
        const char* p = line.c_str() + at + 13;
        while (*p != ']' && *p != '\0') {
          char* end = nullptr;
          qms.push_back(std::strtod(p, &end));
          p = end;
          while (*p == ',' || *p == ' ')
            ++p;
        }
      }
      fts5_p50 = percentile(qms, 0.5);
      fts5_p99 = percentile(qms, 0.99);
      std::printf("  SQLite FTS5 (python3 sqlite3, same %zu messages, same "
                  "queries; %.0f s incl. insert):\n", n, seconds_since(t));
      std::printf("    p50 %.3f ms  p99 %.3f ms; index %s (shadow tables "
                  "without content)\n", fts5_p50, fts5_p99,
                  mib(static_cast<uint64_t>(fts5_bytes)).c_str());
    }
    for (auto f : {".corpus.txt", ".queries.txt", ".fts5.json", ".fts5.db",
                   ".fts5.db-wal", ".fts5.db-shm"})
      std::filesystem::remove(dir + f);
  }
  auto row = [](const std::string& metric, double ours, double base,
                const char* unit, const std::string& goal, int met) {
    bench::bench_row(metric, ours, base, ours / base, unit, goal, met);
  };
  auto label = std::to_string(n / 1000) + "k messages";
  double p99 = percentile(fts_ms, 0.99);
  row("FTS query p99 over " + label + " (vs SQLite FTS5)", p99, fts5_p99,
      "ms", "< 10 ms", p99 < 10);
  row("FTS query p50 over " + label + " (vs SQLite FTS5)",
      percentile(fts_ms, 0.5), fts5_p50, "ms", "info", -1);
  double ours_mib = static_cast<double>(fts_bytes) / (1024.0 * 1024.0);
  double base_mib = fts5_bytes / (1024.0 * 1024.0);
  row("FTS index size over " + label + " (vs SQLite FTS5)", ours_mib,
      base_mib, "MiB", "<= SQLite FTS5's",
      std::isnan(base_mib) ? -1 : ours_mib <= base_mib);
  opened->reset();
  if (!keep)
    std::filesystem::remove_all(dir);
  return 0;
}
