#define BOOST_TEST_MODULE fts
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "storage/fts_query.hpp"
#include "storage/fts_tokenizer.hpp"
#include "storage/lmdb/fts_index.hpp"
#include "storage/lmdb/lmdb_env.hpp"
#include "storage/session_store.hpp"
#include "tests/support/store_backends.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

chat_message msg(std::string role, std::string content) {
  chat_message m;
  m.role = std::move(role);
  m.content = std::move(content);
  if (m.role == "tool")
    m.tool_call_id = "call_1";
  return m;
}

struct fixture : test::store_fixture {
  void session(const std::string& id) {
    new_session ns;
    ns.id = id;
    auto r = store->create_session(ns);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  }

  uint64_t add(const std::string& sid, const std::string& role,
               const std::string& text) {
    auto r = store->append_message(sid, msg(role, text));
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
    return r->id;
  }

  search_results find(const std::string& query,
                      std::vector<std::string> roles = {},
                      const std::string& sid = {}, size_t limit = 20,
                      size_t offset = 0) {
    search_request q;
    q.query = query;
    q.roles = std::move(roles);
    q.session_id = sid;
    q.limit = limit;
    q.offset = offset;
    auto r = store->search(q);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
    return *r;
  }

  std::vector<uint64_t> ids(const std::string& query) {
    std::vector<uint64_t> out;
    for (auto& h : find(query, {}, {}, 1000).hits)
      out.push_back(h.message_id);
    return out;
  }

  std::string error_of(const search_request& q) {
    auto r = store->search(q);
    BOOST_TEST(!r.ok());
    return r.error;
  }
};

double bm25(double n, double df, double tf, double dl, double avgdl) {
  double idf = std::log(1.0 + (n - df + 0.5) / (df + 0.5));
  return idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl));
}

// The same on an LMDB store, for the cases of LMDB-only behaviour.
struct lmdb_fixture : fixture {
  lmdb_fixture() { BOOST_REQUIRE(start("lmdb")); }
};

} // namespace

// -- tokenizer and query parser -----------------------------------------------

BOOST_AUTO_TEST_SUITE(tokenizer)

BOOST_AUTO_TEST_CASE(lower_cases_and_splits_on_ascii_punctuation) {
  auto t = fts_tokenize("Hello, World! foo_bar-baz x.y/z 42abc\tTAB");
  std::vector<std::string> want{"hello", "world", "foo", "bar", "baz",
                                "x",     "y",     "z",   "42abc", "tab"};
  BOOST_TEST(t == want);
}

BOOST_AUTO_TEST_CASE(keeps_non_ascii_bytes_inside_words) {
  auto t = fts_tokenize("Caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac bad\xff!");
  std::vector<std::string> want{"caf\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac",
                                "bad\xff"};
  BOOST_TEST(t == want);
}

BOOST_AUTO_TEST_CASE(drops_long_words_but_counts_their_position) {
  std::string text = "a " + std::string(65, 'x') + " b " + std::string(64, 'y');
  std::vector<std::pair<std::string, uint32_t>> got;
  fts_for_each_token(text, [&](const fts_token& t) {
    got.emplace_back(std::string{t.term}, t.position);
  });
  BOOST_REQUIRE(got.size() == 3u);
  BOOST_TEST(got[0].second == 0u);
  BOOST_TEST(got[1].first == "b");
  BOOST_TEST(got[1].second == 2u);
  BOOST_TEST(got[2].first == std::string(64, 'y'));
  BOOST_TEST(fts_tokenize("").empty());
  BOOST_TEST(fts_tokenize(" ,.;!? ").empty());
}

BOOST_AUTO_TEST_CASE(parses_terms_phrases_and_sloppy_input) {
  auto q = parse_fts_query(R"(Foo "Bar baz" AND foo session_store "open)");
  BOOST_REQUIRE(q.units.size() == 4u);
  BOOST_TEST((q.units[0].terms == std::vector<std::string>{"foo"}));
  BOOST_TEST((q.units[1].terms == std::vector<std::string>{"bar", "baz"}));
  BOOST_TEST(q.units[1].is_phrase());
  BOOST_TEST((q.units[2].terms
              == std::vector<std::string>{"session", "store"}));
  BOOST_TEST((q.units[3].terms == std::vector<std::string>{"open"}));
  BOOST_TEST(parse_fts_query("").empty());
  BOOST_TEST(parse_fts_query("\"\" !!! ***").empty());
  BOOST_TEST(parse_fts_query("\"").empty());
  BOOST_TEST(parse_fts_query("AND").empty());
  BOOST_TEST((parse_fts_query("and").units.size() == 1u));
}

BOOST_AUTO_TEST_SUITE_END()

// -- search -------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(search)

// LMDB only: BM25 scores and order (PostgreSQL ranks differently,
// docs/storage.md).
BOOST_FIXTURE_TEST_CASE(bm25_orders_a_handcrafted_corpus, lmdb_fixture) {
  session("s");
  // dl: 2, 5, 21, 2
  auto d1 = add("s", "user", "apple banana");
  auto d2 = add("s", "user", "apple apple apple banana cherry");
  auto d3 = add("s", "user", "apple one two three four five six seven eight "
                             "nine ten eleven twelve thirteen fourteen fifteen "
                             "sixteen seventeen eighteen nineteen twenty");
  auto d4 = add("s", "user", "banana cherry");
  auto r = find("apple");
  BOOST_REQUIRE(r.hits.size() == 3u);
  BOOST_TEST(r.total == 3u);
  BOOST_TEST(r.hits[0].message_id == d2);
  BOOST_TEST(r.hits[1].message_id == d1);
  BOOST_TEST(r.hits[2].message_id == d3);
  double avgdl = (2 + 5 + 21 + 2) / 4.0;
  BOOST_TEST(r.hits[0].score == bm25(4, 3, 3, 5, avgdl),
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(r.hits[1].score == bm25(4, 3, 1, 2, avgdl),
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(r.hits[2].score == bm25(4, 3, 1, 21, avgdl),
             boost::test_tools::tolerance(1e-9));
  // Equal scores: the newer message first.
  auto b = find("banana");
  BOOST_REQUIRE(b.hits.size() == 3u);
  BOOST_TEST(b.hits[0].message_id == d4);
  BOOST_TEST(b.hits[1].message_id == d1);
  BOOST_TEST(b.hits[2].message_id == d2);
  // Several terms: AND, and scores add up.
  auto two = find("cherry banana");
  BOOST_REQUIRE(two.hits.size() == 2u);
  BOOST_TEST(two.hits[0].message_id == d4);
  BOOST_TEST(two.hits[0].score
               == bm25(4, 2, 1, 2, avgdl) + bm25(4, 3, 1, 2, avgdl),
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(find("apple durian").total == 0u);
  BOOST_TEST(find("durian").total == 0u);
}

// LMDB only: BM25 scores and order (PostgreSQL ranks differently,
// docs/storage.md).
BOOST_FIXTURE_TEST_CASE(a_rare_term_outweighs_a_common_one, lmdb_fixture) {
  session("s");
  for (int i = 0; i < 20; ++i)
    add("s", "user", "common filler words number " + std::to_string(i));
  auto rare = add("s", "user", "common rare");
  auto common = add("s", "user", "common common");
  auto r = find("common");
  BOOST_TEST(r.total == 22u);
  auto x = find("rare");
  BOOST_REQUIRE(x.hits.size() == 1u);
  BOOST_TEST(x.hits[0].message_id == rare);
  BOOST_TEST(x.hits[0].score > r.hits[0].score);
  BOOST_TEST(r.hits[0].message_id == common);  // tf 2, short
}

MIBYAN_STORE_TEST_CASE(phrases_need_consecutive_words_in_order, fixture) {
  session("s");
  auto yes = add("s", "user", "The quick brown fox jumps");
  auto punct = add("s", "user", "quick, brown... FOX!");
  add("s", "user", "brown quick fox");
  add("s", "user", "quick fox brown");
  add("s", "user", "quick red brown fox");
  auto twice = add("s", "user", "quick brown fox and quick brown fox");
  auto got = ids("\"quick brown fox\"");
  std::set<uint64_t> want{yes, punct, twice};
  BOOST_TEST(std::set<uint64_t>(got.begin(), got.end()) == want);
  BOOST_TEST(got.front() == twice);  // two occurrences rank first
  BOOST_TEST(find("quick brown fox").total == 6u);
  BOOST_TEST(find("\"fox quick\"").total == 0u);
  // A bare compound word is a phrase.
  auto code = add("s", "assistant", "call session_store::open first");
  add("s", "assistant", "store the session");
  BOOST_TEST((ids("session_store") == std::vector<uint64_t>{code}));
  // Phrase plus term.
  BOOST_TEST((ids("\"quick brown\" jumps") == std::vector<uint64_t>{yes}));
}

MIBYAN_STORE_TEST_CASE(role_and_session_filters, fixture) {
  session("a");
  session("b");
  auto au = add("a", "user", "deploy the server");
  auto aa = add("a", "assistant", "deploy done");
  auto at = add("a", "tool", "deploy log");
  auto bu = add("b", "user", "deploy again");
  BOOST_TEST(find("deploy").total == 4u);
  auto users = find("deploy", {"user"});
  BOOST_TEST(users.total == 2u);
  for (auto& h : users.hits)
    BOOST_TEST(h.role == "user");
  auto ua = find("deploy", {"user", "assistant"}, "a");
  std::set<uint64_t> got;
  for (auto& h : ua.hits) {
    got.insert(h.message_id);
    BOOST_TEST(h.session_id == "a");
  }
  BOOST_TEST((got == std::set<uint64_t>{au, aa}));
  auto tool = find("deploy", {"tool"});
  BOOST_REQUIRE(tool.hits.size() == 1u);
  BOOST_TEST(tool.hits[0].message_id == at);
  auto b = find("deploy", {}, "b");
  BOOST_REQUIRE(b.hits.size() == 1u);
  BOOST_TEST(b.hits[0].message_id == bu);
  BOOST_TEST(find("deploy", {"system"}).total == 0u);
}

MIBYAN_STORE_TEST_CASE(limit_and_offset_page_through_total, fixture) {
  session("s");
  for (int i = 0; i < 30; ++i)
    add("s", "user", "page item " + std::to_string(i));
  auto p1 = find("page", {}, {}, 10, 0);
  auto p3 = find("page", {}, {}, 10, 25);
  BOOST_TEST(p1.total == 30u);
  BOOST_TEST(p1.hits.size() == 10u);
  BOOST_TEST(p3.total == 30u);
  BOOST_TEST(p3.hits.size() == 5u);
  BOOST_TEST(find("page", {}, {}, 10, 30).hits.empty());
  std::set<uint64_t> seen;
  for (size_t off = 0; off < 30; off += 7)
    for (auto& h : find("page", {}, {}, 7, off).hits)
      seen.insert(h.message_id);
  BOOST_TEST(seen.size() == 30u);
}

MIBYAN_STORE_TEST_CASE(snippets_highlight_and_cut, fixture) {
  session("s");
  std::string text;
  for (int i = 0; i < 60; ++i)
    text += "filler" + std::to_string(i) + " ";
  text += "the Needle\nis here ";
  for (int i = 0; i < 60; ++i)
    text += "tail" + std::to_string(i) + " ";
  add("s", "user", text);
  auto r = find("needle");
  BOOST_REQUIRE(r.hits.size() == 1u);
  auto& s = r.hits[0].snippet;
  BOOST_TEST(contains(s, ">>>Needle<<< is here"), s);
  BOOST_TEST(s.substr(0, 3) == "...");
  BOOST_TEST(s.substr(s.size() - 3) == "...");
  BOOST_TEST(s.size() <= 230u);
  BOOST_TEST(!contains(s, "\n"));
  add("s", "user", "Short needle.");
  auto all = find("needle");
  BOOST_TEST(all.hits[0].snippet == "Short >>>needle<<<");
}

MIBYAN_STORE_TEST_CASE(tool_calls_and_tool_names_are_indexed, fixture) {
  session("s");
  chat_message call = msg("assistant", "");
  call.tool_calls.push_back(tool_call{"c1", "web_search",
                                      R"({"query":"lmdb cursor"})"});
  auto a = add("s", "assistant", "x");
  (void) a;
  auto r = store->append_message("s", call);
  BOOST_REQUIRE(r.ok());
  chat_message res = msg("tool", "results");
  res.tool_name = "web_extract";
  auto t = store->append_message("s", res);
  BOOST_TEST((ids("cursor") == std::vector<uint64_t>{r->id}));
  BOOST_TEST((ids("web_search") == std::vector<uint64_t>{r->id}));
  BOOST_TEST((ids("extract") == std::vector<uint64_t>{t->id}));
}

MIBYAN_STORE_TEST_CASE(unicode_words_are_searchable, fixture) {
  session("s");
  auto c = add("s", "user", "un caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac");
  BOOST_TEST((ids("CAF\xc3\xa9") == std::vector<uint64_t>{c}));
  BOOST_TEST((ids("\xe6\x97\xa5\xe6\x9c\xac") == std::vector<uint64_t>{c}));
  BOOST_TEST(ids("cafe").empty());
}

MIBYAN_STORE_TEST_CASE(deletes_remove_postings_and_statistics, fixture) {
  session("keep");
  session("drop");
  auto k = add("keep", "user", "alpha beta");
  add("drop", "user", "alpha gamma");
  add("drop", "user", "gamma gamma delta");
  double before = find("alpha").hits[0].score;
  BOOST_TEST(find("gamma").total == 2u);
  BOOST_REQUIRE(store->delete_session("drop").ok());
  BOOST_TEST(find("gamma").total == 0u);
  BOOST_TEST(find("delta").total == 0u);
  auto a = find("alpha");
  BOOST_REQUIRE(a.hits.size() == 1u);
  BOOST_TEST(a.hits[0].message_id == k);
  // LMDB only (BM25): N = 1, df = 1, dl = avgdl = 2: the statistics
  // shrank with the delete.
  if (is_lmdb()) {
    BOOST_TEST(a.hits[0].score == bm25(1, 1, 1, 2, 2),
               boost::test_tools::tolerance(1e-9));
    BOOST_TEST(a.hits[0].score != before);
  }
  auto v = store->verify(true);
  BOOST_TEST(v.ok(), v.error);
}

MIBYAN_STORE_TEST_CASE(bad_queries_give_clear_errors, fixture) {
  session("s");
  add("s", "user", "hello");
  search_request q;
  BOOST_TEST(contains(error_of(q), "no searchable words"));
  q.query = "  ,,, \"\" ";
  BOOST_TEST(contains(error_of(q), "no searchable words"));
  q.query = std::string(100, 'z');
  BOOST_TEST(contains(error_of(q), "no searchable words"));
  q.query = "hello";
  q.roles = {"robot"};
  BOOST_TEST(contains(error_of(q), "unknown role 'robot'"));
  q.roles = {};
  q.limit = 0;
  BOOST_TEST(contains(error_of(q), "limit must be between 1 and 1000"));
  q.limit = 1001;
  BOOST_TEST(contains(error_of(q), "limit must be between 1 and 1000"));
  q.limit = 10;
  q.session_id = "ghost";
  BOOST_TEST(contains(error_of(q), "session 'ghost' does not exist"));
  q.session_id = "bad id";
  BOOST_TEST(contains(error_of(q), "may only contain"));
  // Unbalanced quotes and stray operators are sanitised, not errors.
  q.session_id = "";
  q.query = "\"hello";
  BOOST_TEST(store->search(q)->total == 1u);
  q.query = "hello AND *** (";
  BOOST_TEST(store->search(q)->total == 1u);
}

// Compares the index against a brute-force evaluation on a random corpus:
// same matches, same scores, same order.
// LMDB only: BM25 scores and order (PostgreSQL ranks differently,
// docs/storage.md).
BOOST_FIXTURE_TEST_CASE(agrees_with_brute_force_on_a_random_corpus,
                        lmdb_fixture) {
  std::mt19937 rng{1234};
  std::vector<std::string> vocab;
  for (int i = 0; i < 60; ++i)
    vocab.push_back("w" + std::to_string(i));
  // Zipf-like: low indices are common.
  auto word = [&] {
    std::uniform_real_distribution<double> u(0, 1);
    return vocab[static_cast<size_t>(std::pow(u(rng), 2.5) * vocab.size())];
  };
  session("a");
  session("b");
  struct doc {
    uint64_t id;
    std::string session;
    std::vector<std::string> words;
  };
  std::vector<doc> docs;
  std::vector<pending_append> batch;
  for (int i = 0; i < 1500; ++i) {
    std::vector<std::string> w;
    std::string text;
    int n = 1 + static_cast<int>(rng() % 25);
    for (int j = 0; j < n; ++j) {
      w.push_back(word());
      text += w.back() + (j % 4 == 3 ? ". " : " ");
    }
    std::string sid = i % 3 == 0 ? "b" : "a";
    batch.push_back({sid, msg("user", text), ""});
    docs.push_back({0, sid, w});
  }
  auto r = store->append_batch(batch);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  for (size_t i = 0; i < docs.size(); ++i)
    docs[i].id = (*r)[i].id;
  double total_len = 0;
  std::map<std::string, double> df;
  for (auto& d : docs) {
    total_len += static_cast<double>(d.words.size());
    for (auto& w : std::set<std::string>(d.words.begin(), d.words.end()))
      df[w] += 1;
  }
  double n = static_cast<double>(docs.size());
  double avgdl = total_len / n;
  for (int round = 0; round < 150; ++round) {
    std::vector<std::string> terms;
    int nt = 1 + static_cast<int>(rng() % 3);
    bool phrase = round % 5 == 4;
    for (int j = 0; j < nt; ++j)
      terms.push_back(word());
    std::string query;
    for (auto& t : terms)
      query += t + " ";
    if (phrase)
      query = "\"" + query + "\"";
    std::string only = round % 4 == 1 ? "b" : "";
    // Brute force.
    std::vector<std::pair<double, uint64_t>> expect;
    for (auto& d : docs) {
      if (!only.empty() && d.session != only)
        continue;
      double score = 0;
      bool ok = true;
      if (phrase) {
        double tf = 0;
        for (size_t p = 0; p + terms.size() <= d.words.size(); ++p) {
          bool all = true;
          for (size_t k = 0; k < terms.size() && all; ++k)
            all = d.words[p + k] == terms[k];
          tf += all ? 1 : 0;
        }
        ok = tf > 0;
        // A phrase weighs the sum of its words' idf (repeats included).
        double idf = 0;
        for (auto& t : terms)
          idf += std::log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5));
        double dl = static_cast<double>(d.words.size());
        score = idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl));
      } else {
        for (auto& t : std::set<std::string>(terms.begin(), terms.end())) {
          double tf = static_cast<double>(
            std::count(d.words.begin(), d.words.end(), t));
          if (tf == 0) {
            ok = false;
            break;
          }
          score += bm25(n, df[t], tf, static_cast<double>(d.words.size()),
                        avgdl);
        }
      }
      if (ok)
        expect.emplace_back(score, d.id);
    }
    std::sort(expect.begin(), expect.end(), [](auto& x, auto& y) {
      return x.first != y.first ? x.first > y.first : x.second > y.second;
    });
    auto got = find(query, {}, only, 50);
    BOOST_TEST_CONTEXT("query " << query << " session " << only) {
      BOOST_TEST(got.total == expect.size());
      size_t m = std::min<size_t>(50, expect.size());
      BOOST_REQUIRE(got.hits.size() == m);
      for (size_t i = 0; i < m; ++i) {
        BOOST_TEST(got.hits[i].score == expect[i].first,
                   boost::test_tools::tolerance(1e-9));
        // Ties may differ only by floating-point noise; compare ids when
        // the scores are clearly distinct from the neighbours.
        bool distinct = (i == 0 || std::abs(expect[i - 1].first
                                            - expect[i].first) > 1e-9)
                        && (i + 1 >= expect.size()
                            || std::abs(expect[i + 1].first
                                        - expect[i].first) > 1e-9);
        if (distinct)
          BOOST_TEST(got.hits[i].message_id == expect[i].second);
      }
    }
  }
  BOOST_TEST(store->verify(true).ok());
}

BOOST_AUTO_TEST_SUITE_END()

// -- the last-block cache (storage/lmdb/fts_index.hpp) ------------------------

BOOST_AUTO_TEST_SUITE(last_block_cache)

namespace {

// An fts_index over its own environment, driven transaction by transaction.
struct index_fixture {
  test::temp_dir tmp;
  std::unique_ptr<lmdb_env> env;
  fts_index idx;

  index_fixture() {
    lmdb_options lo;
    lo.dir = tmp / "env";
    lo.map_size = uint64_t{64} << 20;
    auto e = lmdb_env::open(lo);
    BOOST_REQUIRE_MESSAGE(e.ok(), e.error);
    env = std::move(*e);
    auto st = env->setup(
      [&](MDB_txn* txn, std::string& error) {
        return fts_index::open_in(txn, false, idx, error);
      },
      "open index");
    BOOST_REQUIRE_MESSAGE(st.ok(), st.error);
  }

  // Adds message `id`; `commit` false aborts the transaction after the
  // index was written in it.
  void add(uint64_t id, const std::string& text, bool commit = true) {
    auto st = env->write(
      [&](MDB_txn* txn, std::string& error) {
        std::vector<fts_index::document> docs(1);
        docs[0].id = id;
        docs[0].role = fts_role::user;
        docs[0].text = text;
        int rc = idx.add_many(txn, docs, error);
        if (rc == 0 && !commit) {
          error = "aborted on purpose";
          return lmdb_env::user_error;
        }
        return rc;
      },
      "add");
    BOOST_TEST(st.ok() == commit);
  }

  void remove(uint64_t id, const std::string& text) {
    auto st = env->write(
      [&](MDB_txn* txn, std::string& error) {
        return idx.remove(txn, id, text, error);
      },
      "remove");
    BOOST_REQUIRE_MESSAGE(st.ok(), st.error);
  }

  // The ids matching `query`, ascending.
  std::vector<uint64_t> ids(const std::string& query) {
    std::vector<uint64_t> out;
    auto st = env->read(
      [&](MDB_txn* txn, std::string& error) {
        fts_filter f;
        f.limit = 1000;
        fts_search_out res;
        int rc = idx.search(txn, parse_fts_query(query), f, res, error);
        for (auto& m : res.matches)
          out.push_back(m.message_id);
        return rc;
      },
      "search");
    BOOST_REQUIRE_MESSAGE(st.ok(), st.error);
    std::sort(out.begin(), out.end());
    return out;
  }

  // The index's own consistency check over the messages `live`.
  std::vector<std::string> problems(const std::set<uint64_t>& live) {
    std::vector<std::string> out;
    auto st = env->read(
      [&](MDB_txn* txn, std::string& error) {
        return idx.verify(
          txn,
          [&](uint64_t id, fts_role& role) {
            role = fts_role::user;
            return live.count(id) > 0;
          },
          live.size(), out, error);
      },
      "verify");
    BOOST_REQUIRE_MESSAGE(st.ok(), st.error);
    return out;
  }
};

using ids_t = std::vector<uint64_t>;

} // namespace

// A cached last block must never outlive the bytes it was taken from: an
// aborted transaction (the cache saw a block that was never committed) and
// a removal (the block was rewritten) both change the stored block, and the
// next append must find the real last id, or later postings decode to
// wrong ids.
BOOST_FIXTURE_TEST_CASE(an_aborted_append_is_not_remembered, index_fixture) {
  add(1, "apple pear");
  add(2, "apple plum");
  add(3, "apple fig", false); // aborted: the block keeps ids 1 and 2
  add(5, "apple kiwi");
  add(6, "apple lime");
  BOOST_TEST(ids("apple") == (ids_t{1, 2, 5, 6}));
  BOOST_TEST(ids("fig").empty());
  BOOST_TEST(ids("kiwi") == (ids_t{5}));
  BOOST_TEST(problems({1, 2, 5, 6}).empty());
}

BOOST_FIXTURE_TEST_CASE(a_removal_rewrites_the_remembered_block,
                        index_fixture) {
  add(1, "apple pear");
  add(2, "apple plum");
  add(3, "apple fig");
  remove(3, "apple fig"); // the last block of "apple" now ends at 2
  add(7, "apple kiwi");
  remove(1, "apple pear");
  add(8, "apple lime");
  BOOST_TEST(ids("apple") == (ids_t{2, 7, 8}));
  BOOST_TEST(ids("kiwi") == (ids_t{7}));
  BOOST_TEST(ids("lime") == (ids_t{8}));
  BOOST_TEST(problems({2, 7, 8}).empty());
}

// Many appends of one term fill and close blocks; the cache must follow
// the term across block boundaries (a full block is never extended).
BOOST_FIXTURE_TEST_CASE(follows_a_term_across_full_blocks, index_fixture) {
  ids_t want;
  std::set<uint64_t> live;
  for (uint64_t id = 1; id <= 600; ++id) {
    add(id, "common word number" + std::to_string(id % 7));
    want.push_back(id);
    live.insert(id);
  }
  BOOST_TEST(ids("common") == want);
  BOOST_TEST(ids("number3").size() == 86u);
  BOOST_TEST(problems(live).empty());
}

BOOST_AUTO_TEST_SUITE_END()
