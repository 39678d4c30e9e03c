// Benchmarks the metrics (docs/metrics.md):
//   1. `GET /metrics` over real HTTP against an in-process `mibyan serve`
//      after a workload (turns with tool calls through the server) and with
//      every family populated (each registered tool x each outcome, each
//      approval decision, each provider failure class, several models, each
//      route x several statuses): p50 and p95 against `GET /health` on the
//      same keep-alive connection, the two interleaved. Goal: p50 < 2 ms.
//   2. Rendering alone (registry::render, no HTTP).
//   3. The cost of one labelled count on a hot path (count_tool_call: a
//      sharded-table lookup, a counter and a histogram), one thread and two
//      threads, against the script tool call it rides on (the in-script
//      no-op row of mibyan_exec_bench: compare that row before and after
//      this instrumentation for the end-to-end ratio).
//
// Prints BENCH_ROW lines (bench/bench_row.hpp) for scripts/bench.sh.
// Usage: mibyan_metrics_bench [--quick]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.hpp"
#include "base/metrics.hpp"
#include "base/runtime_metrics.hpp"
#include "bench/bench_row.hpp"
#include "bench/bench_util.hpp"
#include "bench/bench_http.hpp"
#include "bench/bench_serve.hpp"
#include "bench/scripted_provider.hpp"
#include "config/loader.hpp"
#include "runtime/runtime.hpp"
#include "serve/http_server.hpp"
#include "tools/registry.hpp"

namespace fs = std::filesystem;
using namespace mibyan;
using namespace mibyan::bench;

namespace {

std::string get_request(const std::string& path) {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
}

std::string chat_request(int rounds) {
  auto body = std::string{R"({"model":"m","messages":[{"role":"user","content":"rounds=)"}
              + std::to_string(rounds) + R"( please"}]})";
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
         "Content-Type: application/json\r\nContent-Length: "
         + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Every family gets the series a busy node would have.
void populate(const tool_registry& tools) {
  using namespace metrics;
  for (auto* t : tools.all())
    for (auto o : {"ok", "error", "timeout", "interrupted", "cancelled"})
      count_tool_call(t->name(), o, 0.003);
  count_tool_call("execute_code", "ok", 0.2);
  for (auto o : {"ok", "partial", "failed", "interrupted"})
    for (auto e : {"completed", "interrupted_by_user", "provider_error",
                   "max_iterations_reached"})
      count_turn(o, e, 1.5);
  count_turn_not_started();
  for (auto p : {"custom", "openrouter", "anthropic"}) {
    count_provider_call(p, "ok", 0.8);
    count_provider_call(p, "error", 2.0);
    count_provider_fallback(p);
    for (auto c : {"rate_limit", "timeout", "server", "overloaded",
                   "transport", "auth", "context_overflow"}) {
      count_provider_error(p, c);
      count_provider_retry(p, c);
    }
    for (auto m : {"model-a", "model-b", "model-c"})
      count_tokens(p, m, 1000, 200, 50, 10, 5);
  }
  for (auto d : {"once", "session", "always", "deny", "timeout", "cancelled",
                 "no_channel", "reviewer_approve", "reviewer_deny",
                 "context_approve", "hardline", "deny_rule", "sudo_stdin"})
    count_approval(d);
  for (auto r : {"/health", "/metrics", "/v1/models", "/v1/chat/completions",
                 "/v1/sessions", "/v1/approvals", "/v1/clarifications",
                 "/v1/responses", "/ui/api/sessions", "/ui/", "/x"})
    for (int s : {200, 400, 401, 404, 429})
      count_http_request(http_route_class(r), s, 0.001);
  observe_store_commit(0.002);
}

struct timing {
  double p50 = 0, p95 = 0;
};

timing summarize(const std::vector<double>& xs) {
  return {median(xs), percentile(xs, 0.95)};
}

} // namespace

int main(int argc, char** argv) {
  const bool quick = bench_quick(argc, argv);
  const int scrapes = quick ? 300 : 2000;
  log::set_level(log::level::warning);
  serve_rig rig{"metrics", "bench_"};
  auto& rt = rig.rt;
  auto port = rig.port;

  // The workload: turns with tool calls through the server.
  std::string in;
  int fd = connect_loopback(port);
  for (int i = 0; i < (quick ? 20 : 100); ++i)
    if (!round_trip(fd, chat_request(i % 3), in))
      provider_die("a workload turn failed: " + in.substr(0, 200));
  populate(tools_of(*rt));

  std::printf("mibyan metrics benchmark (%u cores)\n\n",
              std::thread::hardware_concurrency());
  // 1. Scrape against /health, interleaved on one keep-alive connection.
  auto metrics_req = get_request("/metrics");
  auto health_req = get_request("/health");
  for (int i = 0; i < 50; ++i) { // warm-up
    round_trip(fd, metrics_req, in);
    round_trip(fd, health_req, in);
  }
  size_t body_bytes = in.size();
  round_trip(fd, metrics_req, in);
  body_bytes = in.size() - in.find("\r\n\r\n") - 4;
  size_t lines = static_cast<size_t>(std::count(in.begin(), in.end(), '\n'));
  std::vector<double> scrape_ms, health_ms;
  for (int i = 0; i < scrapes; ++i) {
    auto t0 = clock_type::now();
    if (!round_trip(fd, metrics_req, in))
      provider_die("scrape failed");
    scrape_ms.push_back(ms_since(t0));
    t0 = clock_type::now();
    if (!round_trip(fd, health_req, in))
      provider_die("health failed");
    health_ms.push_back(ms_since(t0));
  }
  ::close(fd);
  auto s = summarize(scrape_ms), h = summarize(health_ms);
  std::printf("exposition: %zu bytes, %zu lines\n", body_bytes, lines);
  std::printf("GET /metrics  p50 %.3f ms  p95 %.3f ms\n", s.p50, s.p95);
  std::printf("GET /health   p50 %.3f ms  p95 %.3f ms  (baseline)\n", h.p50,
              h.p95);
  bench_row("metrics: GET /metrics p50 (all series populated)", s.p50, h.p50,
            "ms", "< 2 ms", s.p50 < 2.0);
  bench_row("metrics: GET /metrics p95 (all series populated)", s.p95, h.p95,
            "ms", "< 2 ms", s.p95 < 2.0);

  // 2. Rendering alone.
  std::vector<double> render_ms;
  size_t sink = 0;
  for (int i = 0; i < scrapes; ++i) {
    auto t0 = clock_type::now();
    sink += metrics::registry::global().render().size();
    render_ms.push_back(ms_since(t0));
  }
  auto r = summarize(render_ms);
  std::printf("render only   p50 %.3f ms  p95 %.3f ms\n", r.p50, r.p95);
  bench_row("metrics: render only p50", r.p50, std::nullopt, "ms",
            "informational", std::nullopt);

  // 3. One labelled count on a hot path.
  const int n = quick ? 200000 : 2000000;
  auto per_call_ns = [&](int threads) {
    std::vector<std::thread> ts;
    std::atomic<bool> go{false};
    auto t0 = clock_type::now();
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&] {
        while (!go.load())
          ;
        for (int i = 0; i < n; ++i)
          metrics::count_tool_call("read_file", "ok", 0.0001);
      });
    t0 = clock_type::now();
    go = true;
    for (auto& t : ts)
      t.join();
    return ms_since(t0) * 1e6 / n; // wall ns per call per thread
  };
  double one = per_call_ns(1), two = per_call_ns(2);
  std::printf("count_tool_call: %.0f ns/call (1 thread), %.0f ns/call "
              "(2 threads at once)\n",
              one, two);
  bench_row("metrics: count_tool_call per call, 1 thread", one, std::nullopt,
            "ns", "informational", std::nullopt);
  bench_row("metrics: count_tool_call per call, 2 threads", two, std::nullopt,
            "ns", "informational", std::nullopt);
  return sink == 0 ? 1 : 0;
}
