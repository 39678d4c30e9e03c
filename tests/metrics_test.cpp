// The metrics registry (base/metrics.hpp) and the series of
// base/runtime_metrics.hpp: exact sums under concurrency, histogram
// buckets, label cardinality, escaping, stable output, callback gauges,
// and a strict parse of every rendering (tests/support/prom_text.hpp).
#define BOOST_TEST_MODULE metrics
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "base/metrics.hpp"
#include "base/runtime_metrics.hpp"
#include "tests/support/prom_text.hpp"

using namespace mibyan;
using namespace mibyan::metrics;
namespace prom = mibyan::test::prom;

namespace {

prom::document parse_ok(const std::string& text) {
  auto doc = prom::parse(text);
  BOOST_REQUIRE_MESSAGE(doc.error.empty(), doc.error << "\n--- text ---\n"
                                                     << text);
  return doc;
}

double value(const prom::document& d, const std::string& key) {
  auto it = d.values.find(key);
  BOOST_REQUIRE_MESSAGE(it != d.values.end(), "no series " << key);
  return it->second;
}

} // namespace

BOOST_AUTO_TEST_CASE(counters_from_many_threads_sum_exactly) {
  registry r;
  auto& fam = r.counter("t_events_total", "Events.", {"kind"});
  auto& cached = fam.with({"cached"});
  constexpr int threads = 8;
  constexpr int per = 100000;
  std::vector<std::thread> ts;
  std::atomic<bool> go{false};
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      while (!go.load())
        std::this_thread::yield();
      for (int i = 0; i < per; ++i) {
        cached.inc();
        // A lookup per event, from every thread, of a few shared series.
        fam.with({i % 2 ? "odd" : "even"}).inc(2);
        if (i % 1000 == 0)
          fam.with({"thread" + std::to_string(t)}).inc();
      }
    });
  go = true;
  for (auto& t : ts)
    t.join();
  BOOST_TEST(cached.value() == uint64_t{threads} * per);
  BOOST_TEST(fam.with({"odd"}).value() == uint64_t{threads} * per);
  BOOST_TEST(fam.with({"even"}).value() == uint64_t{threads} * per);
  for (int t = 0; t < threads; ++t)
    BOOST_TEST(fam.with({"thread" + std::to_string(t)}).value()
               == uint64_t{per / 1000});
  auto doc = parse_ok(r.render());
  BOOST_TEST(value(doc, R"(t_events_total{kind="cached"})")
             == double(threads) * per);
  BOOST_TEST(fam.size() == size_t{2 + 1 + threads});
}

BOOST_AUTO_TEST_CASE(gauges_add_and_subtract_exactly_across_threads) {
  registry r;
  auto& g = r.gauge("t_open", "Open things.").with({});
  std::vector<std::thread> ts;
  for (int t = 0; t < 6; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 50000; ++i) {
        g.inc();
        if (i % 2)
          g.dec();
      }
    });
  for (auto& t : ts)
    t.join();
  BOOST_TEST(g.value() == 6.0 * 25000);
  {
    gauge_hold h1{g}, h2{g};
    BOOST_TEST(g.value() == 6.0 * 25000 + 2);
  }
  BOOST_TEST(g.value() == 6.0 * 25000);
  g.set(-1.5);
  auto doc = parse_ok(r.render());
  BOOST_TEST(value(doc, "t_open{}") == -1.5);
}

BOOST_AUTO_TEST_CASE(histogram_buckets_are_cumulative_with_le_semantics) {
  registry r;
  auto& h = r.histogram("t_latency_seconds", "Latency.", {"op"},
                        {1, 0.1, 0.5, 0.5, 10}) // unsorted, duplicated
              .with({"read"});
  // Exactly on a bound counts in that bucket (le = less or equal).
  for (double v : {0.05, 0.1, 0.1000001, 0.5, 0.7, 1.0, 3.0, 11.0, 1e9})
    h.observe(v);
  auto snap = h.read();
  BOOST_TEST(snap.count == 9u);
  // Bounds: 0.1 0.5 1 10 +Inf
  std::vector<uint64_t> want{2, 4, 6, 7, 9};
  BOOST_TEST(snap.cumulative == want, boost::test_tools::per_element());
  auto doc = parse_ok(r.render());
  BOOST_TEST(value(doc, R"(t_latency_seconds_bucket{le="0.1",op="read"})")
             == 2);
  BOOST_TEST(value(doc, R"(t_latency_seconds_bucket{le="0.5",op="read"})")
             == 4);
  BOOST_TEST(value(doc, R"(t_latency_seconds_bucket{le="1",op="read"})")
             == 6);
  BOOST_TEST(value(doc, R"(t_latency_seconds_bucket{le="10",op="read"})")
             == 7);
  BOOST_TEST(value(doc, R"(t_latency_seconds_bucket{le="+Inf",op="read"})")
             == 9);
  BOOST_TEST(value(doc, R"(t_latency_seconds_count{op="read"})") == 9);
  BOOST_TEST(value(doc, R"(t_latency_seconds_sum{op="read"})")
             == 0.05 + 0.1 + 0.1000001 + 0.5 + 0.7 + 1.0 + 3.0 + 11.0 + 1e9,
             boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(histogram_counts_from_many_threads_are_exact) {
  registry r;
  auto& h = r.histogram("t_h", "H.", {}, {1, 2, 3}).with({});
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 40000; ++i)
        h.observe(i % 4 + 0.5); // 0.5 1.5 2.5 3.5
    });
  for (auto& t : ts)
    t.join();
  auto s = h.read();
  std::vector<uint64_t> want{80000, 160000, 240000, 320000};
  BOOST_TEST(s.cumulative == want, boost::test_tools::per_element());
  BOOST_TEST(s.count == 320000u);
  BOOST_TEST(s.sum == 80000 * (0.5 + 1.5 + 2.5 + 3.5));
  parse_ok(r.render());
}

BOOST_AUTO_TEST_CASE(rendering_escapes_label_values_and_help) {
  registry r;
  auto& c = r.counter("t_escapes_total",
                      "Help with a backslash \\ and a\nnewline.", {"v"});
  std::string nasty = "quote \" backslash \\ newline \n end";
  c.with({nasty}).inc(7);
  c.with({"plain"}).inc();
  auto text = r.render();
  BOOST_TEST(text.find(R"(v="quote \" backslash \\ newline \n end")")
             != std::string::npos);
  BOOST_TEST(text.find("# HELP t_escapes_total Help with a backslash \\\\ "
                       "and a\\nnewline.\n")
             != std::string::npos);
  auto doc = parse_ok(text);
  // The parser reads back exactly what was put in.
  BOOST_TEST(value(doc, prom::series_key("t_escapes_total", {{"v", nasty}}))
             == 7);
  BOOST_REQUIRE(doc.families.size() == 1u);
  BOOST_TEST(doc.families[0].help
             == "Help with a backslash \\ and a\nnewline.");
  BOOST_TEST(doc.families[0].type == "counter");
}

BOOST_AUTO_TEST_CASE(output_is_sorted_and_stable) {
  registry r;
  // Registered and populated out of order.
  auto& b = r.counter("t_b_total", "B.", {"x"});
  auto& a = r.gauge("t_a", "A.", {"x", "y"});
  for (auto v : {"zeta", "alpha", "mu", "beta"})
    b.with({v}).inc();
  a.with({"2", "b"}).set(1);
  a.with({"10", "a"}).set(2);
  a.with({"2", "a"}).set(3);
  auto first = r.render();
  auto second = r.render();
  BOOST_TEST(first == second);
  auto doc = parse_ok(first);
  std::vector<std::string> names;
  for (auto& f : doc.families)
    names.push_back(f.name);
  BOOST_TEST(names == (std::vector<std::string>{"t_a", "t_b_total"}),
             boost::test_tools::per_element());
  std::vector<std::string> xs;
  for (auto& s : doc.families[1].samples)
    xs.push_back(s.labels.at("x"));
  BOOST_TEST(xs == (std::vector<std::string>{"alpha", "beta", "mu", "zeta"}),
             boost::test_tools::per_element());
  // Series sort by label values in label order (strings, not numbers).
  auto pos = [&](const std::string& s) { return first.find(s); };
  BOOST_TEST(pos(R"(t_a{x="10",y="a"})") < pos(R"(t_a{x="2",y="a"})"));
  BOOST_TEST(pos(R"(t_a{x="2",y="a"})") < pos(R"(t_a{x="2",y="b"})"));
}

BOOST_AUTO_TEST_CASE(label_cardinality_is_bounded) {
  registry r;
  auto& f = r.counter("t_capped_total", "Capped.", {"k"}, 5);
  for (int i = 0; i < 100; ++i)
    f.with({"v" + std::to_string(i)}).inc();
  // Five real series, then everything goes to the one "other" series.
  BOOST_TEST(f.size() == 6u);
  BOOST_TEST(f.with({"v0"}).value() == 1u);
  BOOST_TEST(f.with({"other"}).value() == 95u);
  // Values that cannot be shown as given collapse to "other" too.
  auto& g = r.counter("t_clean_total", "Clean.", {"k"});
  g.with({""}).inc();
  g.with({std::string(200, 'x')}).inc();
  g.with({std::string{"\xff\xfe"}}).inc();
  g.with({std::string{"\xc0\xaf"}}).inc(); // overlong '/'
  g.with({"ok \xc3\xa9"}).inc();           // valid UTF-8 stays
  g.with({"unit\x1fseparator"}).inc();      // the table's key separator
  BOOST_TEST(g.with({"other"}).value() == 5u);
  BOOST_TEST(g.with({"ok \xc3\xa9"}).value() == 1u);
  // Missing label values become "other" rather than a malformed line.
  auto& two = r.counter("t_two_total", "Two.", {"a", "b"});
  two.with({"x"}).inc();
  BOOST_TEST(two.with({"x", "other"}).value() == 1u);
  parse_ok(r.render());
}

BOOST_AUTO_TEST_CASE(registration_is_idempotent_and_mismatches_are_detached) {
  registry r;
  auto& a = r.counter("t_same_total", "Same.", {"l"});
  auto& b = r.counter("t_same_total", "Other help.", {"l"});
  BOOST_TEST(&a == &b);
  a.with({"x"}).inc();
  // Same name, other labels or type: a detached family, never rendered.
  auto& c = r.counter("t_same_total", "Same.", {"m"});
  BOOST_TEST(&c != &a);
  c.with({"y"}).inc(5);
  auto& g = r.gauge("t_same_total", "Same.", {"l"});
  g.with({"x"}).set(9);
  auto& bad = r.counter("0bad name", "Bad.");
  bad.with({}).inc();
  auto& le = r.counter("t_le_total", "Reserved label.", {"le"});
  le.with({"1"}).inc();
  auto doc = parse_ok(r.render());
  BOOST_TEST(doc.families.size() == 1u);
  BOOST_TEST(value(doc, R"(t_same_total{l="x"})") == 1);
}

BOOST_AUTO_TEST_CASE(callback_gauges_are_read_at_scrape_and_detach) {
  registry r;
  auto& f = r.callback_gauge("t_members", "Members by state.", {"state"});
  // None attached: HELP and TYPE only, still valid.
  auto doc = parse_ok(r.render());
  BOOST_TEST(doc.families.size() == 1u);
  BOOST_TEST(doc.families[0].samples.empty());
  int up = 3;
  auto h1 = f.attach([&](sample_sink& out) {
    out.add({"up"}, up);
    out.add({"lost"}, 1);
  });
  {
    auto h2 = f.attach([](sample_sink& out) { out.add({"up"}, 2); });
    doc = parse_ok(r.render());
    BOOST_TEST(value(doc, R"(t_members{state="up"})") == 5); // summed
    BOOST_TEST(value(doc, R"(t_members{state="lost"})") == 1);
  }
  up = 4; // read at scrape time
  doc = parse_ok(r.render());
  BOOST_TEST(value(doc, R"(t_members{state="up"})") == 4);
  h1.reset();
  doc = parse_ok(r.render());
  BOOST_TEST(doc.values.empty());
  // A throwing reader loses its samples, not the scrape.
  auto h3 = f.attach([](sample_sink&) { throw std::runtime_error("x"); });
  parse_ok(r.render());
}

BOOST_AUTO_TEST_CASE(values_are_written_as_prometheus_reads_them) {
  auto text = [](double v) {
    std::string s;
    append_value(s, v);
    return s;
  };
  BOOST_TEST(text(0) == "0");
  BOOST_TEST(text(42) == "42");
  BOOST_TEST(text(-3) == "-3");
  BOOST_TEST(text(0.1) == "0.1");
  BOOST_TEST(text(0.0001) == "0.0001");
  BOOST_TEST(text(2.5e-9) == "2.5e-09");
  BOOST_TEST(text(1e300) == "1e+300");
  BOOST_TEST(text(INFINITY) == "+Inf");
  BOOST_TEST(text(-INFINITY) == "-Inf");
  BOOST_TEST(text(NAN) == "NaN");
  for (double v : {0.1, 1.0 / 3, 123456.789, 2.5e-9, 1e300}) {
    double back = std::strtod(text(v).c_str(), nullptr);
    BOOST_TEST(back == v);
  }
}

BOOST_AUTO_TEST_CASE(the_strict_parser_rejects_malformed_text) {
  const char* bad[] = {
    "x 1",                                         // no newline at the end
    "x 1\n",                                       // no TYPE
    "# TYPE x counter\nx{a=\"b\\t\"} 1\n",         // undefined escape
    "# TYPE x counter\nx{a=\"b} 1\n",              // unterminated value
    "# TYPE x counter\nx{a=b} 1\n",                // unquoted value
    "# TYPE x counter\nx{1a=\"b\"} 1\n",           // bad label name
    "# TYPE x counter\nx{a=\"1\",a=\"2\"} 1\n",    // duplicate label
    "# TYPE x counter\nx 1\nx 2\n",                // duplicate series
    "# TYPE x counter\nx -1\n",                    // negative counter
    "# TYPE x counter\nx one\n",                   // bad value
    "# TYPE x counter\nx\n",                       // no value
    "# TYPE x counter\n# TYPE x counter\nx 1\n",   // second TYPE
    "# TYPE x counter\n# HELP x a\\q\nx 1\n",      // bad HELP escape
    "# TYPE x widget\nx 1\n",                      // unknown type
    "# TYPE x gauge\n# TYPE y gauge\nx 1\ny 1\nx{a=\"b\"} 2\n", // interleaved
    "# TYPE x gauge\nx 1\n# HELP x late\n",        // HELP after samples
    "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
    "h_sum 1\nh_count 1\n",                        // not cumulative
    "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n", // no +Inf
    "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n",
    "# TYPE h histogram\nh_sum 1\n",               // sum without buckets
    "# TYPE h histogram\nh 1\n",                   // no suffix
    "# TYPE x gauge\r\nx 1\r\n",                   // CR
    "# TYPE 9x gauge\n9x 1\n",                     // bad metric name
  };
  for (auto* t : bad)
    BOOST_TEST(!prom::parse(t).error.empty(), "accepted: " << t);
  auto ok = prom::parse("# a comment\n# HELP x The \\\\ x.\n# TYPE x gauge\n"
                        "x{a=\"\\\"\"} +Inf 1700000000000\n\n"
                        "# TYPE h histogram\nh_bucket{le=\"0.5\"} 0\n"
                        "h_bucket{le=\"+Inf\"} 1\nh_sum 3\nh_count 1\n");
  BOOST_TEST(ok.error.empty(), ok.error);
}

BOOST_AUTO_TEST_CASE(the_exported_series_render_strictly) {
  register_all();
  count_turn("ok", "completed", 0.25);
  count_turn("weird", "strange", 1);
  count_turn_not_started();
  count_tool_call("read_file", "ok", 0.001);
  count_tool_call("read_file", "bogus", 0.001);
  count_provider_call("custom", "ok", 0.2);
  count_provider_error("custom", "rate_limit");
  count_provider_retry("custom", "rate_limit");
  count_provider_fallback("custom");
  count_tokens("custom", "m", 10, 5, 0, 0, 0);
  count_approval("once");
  count_approval("made-up");
  note_sandbox("auto", "bwrap");
  observe_store_commit(0.002);
  count_http_request(http_route_class("/v1/chat/completions"), 200, 0.01);
  count_http_request(http_route_class("/nowhere"), 404, 0.001);
  count_http_request(http_route_class("/metrics?x=1"), 999, 0.001);
  { live_kernel k; }
  auto doc = parse_ok(registry::global().render());
  std::set<std::string> names;
  for (auto& f : doc.families)
    names.insert(f.name);
  for (auto n :
       {"mibyan_turns_total", "mibyan_turn_duration_seconds",
        "mibyan_tool_calls_total", "mibyan_tool_duration_seconds",
        "mibyan_provider_calls_total", "mibyan_provider_call_duration_seconds",
        "mibyan_provider_errors_total", "mibyan_provider_retries_total",
        "mibyan_provider_fallbacks_total", "mibyan_tokens_total",
        "mibyan_approvals_total", "mibyan_kernels_alive",
        "mibyan_kernels_started_total", "mibyan_sandbox_info",
        "mibyan_store_commit_duration_seconds", "mibyan_store_used_bytes",
        "mibyan_store_file_bytes", "mibyan_cluster_members",
        "mibyan_mcp_servers", "mibyan_http_requests_total",
        "mibyan_http_request_duration_seconds",
        "mibyan_http_connections_open", "mibyan_process_start_time_seconds"})
    BOOST_TEST(names.count(n) == 1u, n);
  BOOST_TEST(
    value(doc, R"(mibyan_turns_total{exit="completed",outcome="ok"})") == 1);
  BOOST_TEST(value(doc, R"(mibyan_turns_total{exit="other",outcome="other"})")
             == 1);
  BOOST_TEST(
    value(doc, R"(mibyan_turns_total{exit="none",outcome="not_started"})")
    == 1);
  BOOST_TEST(
    value(doc, R"(mibyan_tool_calls_total{outcome="other",tool="read_file"})")
    == 1);
  BOOST_TEST(
    value(doc,
          R"(mibyan_tokens_total{kind="input",model="m",provider="custom"})")
    == 10);
  BOOST_TEST(doc.values.count(
               R"(mibyan_tokens_total{kind="cache_read",model="m",provider="custom"})")
             == 0u); // zero counts create no series
  BOOST_TEST(value(doc, R"(mibyan_approvals_total{decision="other"})") == 1);
  BOOST_TEST(
    value(doc, R"(mibyan_sandbox_info{kernels="bwrap",setting="auto"})") == 1);
  BOOST_TEST(
    value(doc, R"(mibyan_http_requests_total{route="chat",status="200"})")
    == 1);
  BOOST_TEST(
    value(doc, R"(mibyan_http_requests_total{route="other",status="404"})")
    == 1);
  BOOST_TEST(
    value(doc, R"(mibyan_http_requests_total{route="metrics",status="other"})")
    == 1);
  BOOST_TEST(value(doc, "mibyan_kernels_started_total{}") == 1);
  BOOST_TEST(value(doc, "mibyan_kernels_alive{}") == 0);
  BOOST_TEST(value(doc, "mibyan_store_commit_duration_seconds_count{}") == 1);
  BOOST_TEST(http_route_class("/v1/sessionsX") == "other");
  BOOST_TEST(http_route_class("/ui/api/sessions") == "ui_api");
  BOOST_TEST(http_route_class("/ui/") == "ui");
}
