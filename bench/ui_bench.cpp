// Benchmarks the dashboard's JSON endpoints (serve/ui_api.hpp, docs/serve.md
// "Dashboard") over real HTTP on loopback, with 100,000 stored sessions
// (built once in a temporary $MIBYAN_HOME) and one 1,000-message session:
//   * GET /ui/api/sessions?limit=50 (first page), p50/p95; goal p50 < 5 ms;
//   * GET /ui/api/sessions/{id} of the 1,000-message session; goal p50 <
//     50 ms;
//   * a deep page (offset N/2) and usage over all sessions, for the record;
// each against the bare store call in the same run (list_sessions of the
// same page; load_messages of the same session) as the baseline.
//
//   mibyan_ui_bench [--quick] [--sessions N] [--requests R]
//
// --quick: 10,000 sessions, 50 requests each.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.hpp"
#include "bench/bench_http.hpp"
#include "bench/bench_rows.hpp"
#include "bench/bench_serve.hpp"
#include "bench/bench_util.hpp"
#include "config/loader.hpp"
#include "runtime/runtime.hpp"
#include "serve/http_server.hpp"
#include "storage/session_store.hpp"

using namespace mibyan;
using namespace mibyan::bench;
namespace fs = std::filesystem;

namespace {

[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "mibyan_ui_bench: %s\n", m.c_str());
  std::exit(1);
}

// One keep-alive connection; get() returns the body of a 200 answer.
struct client {
  int fd = -1;
  std::string buf;
  explicit client(uint16_t port) : fd(connect_loopback(port)) {}
  ~client() { ::close(fd); }
  std::string get(const std::string& path, uint16_t port) {
    if (!round_trip(fd,
                    "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:"
                      + std::to_string(port) + "\r\n\r\n",
                    buf))
      die("unexpected answer: " + buf.substr(0, 300));
    return reply_body(buf);
  }
};

struct stats {
  double p50, p95;
};

template <class F>
stats measure(int n, F&& f) {
  std::vector<double> xs;
  for (int i = 0; i < 3; ++i)
    f(); // warm-up
  for (int i = 0; i < n; ++i) {
    auto t = clock_type::now();
    f();
    xs.push_back(ms_since(t));
  }
  return {percentile(xs, 0.5), percentile(xs, 0.95)};
}

} // namespace

int main(int argc, char** argv) {
  bool quick = bench_quick(argc, argv);
  int64_t sessions = quick ? 10'000 : 100'000;
  int requests = quick ? 50 : 200;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--sessions") == 0)
      sessions = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--requests") == 0)
      requests = std::atoi(argv[i + 1]);
  }
  log::set_level(log::level::warning);
  const char* tmp = std::getenv("TMPDIR");
  fs::path home = fs::path{tmp ? tmp : "/tmp"}
                  / ("mibyan-ui-bench-" + std::to_string(::getpid()));
  fs::create_directories(home);
  fs::permissions(home, fs::perms::owner_all);
  ::setenv("MIBYAN_HOME", home.c_str(), 1);
  options opts;
  auto rt = bench_runtime(opts);
  auto store = session_store_of(*rt);
  if (!store)
    die("no store");

  // The store: `sessions` sessions in group commits, then one session of
  // 1,000 messages (user/assistant, ~400 bytes each).
  auto t0 = clock_type::now();
  // Sessions one second apart ending now: all inside usage?days=2.
  const int64_t start_ms
    = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch())
        .count()
      - sessions * 1000;
  for (int64_t i = 0; i < sessions;) {
    std::vector<store_write> group;
    for (int j = 0; j < 2000 && i < sessions; ++j, ++i) {
      store_write w;
      w.what = store_write::kind::create;
      w.create.id = "bench_" + std::to_string(i);
      w.create.source = i % 10 == 0 ? "cron" : "cli";
      w.create.model = "model-" + std::to_string(i % 3);
      w.create.title = "session number " + std::to_string(i);
      w.create.started_at_ms = start_ms + i * 1000;
      group.push_back(std::move(w));
    }
    if (auto st = store->commit_group(group); !st)
      die("commit: " + st.error);
  }
  new_session big;
  big.id = "bench_transcript";
  big.started_at_ms = start_ms - 1000; // not on the first page
  if (auto r = store->create_session(big); !r)
    die("create: " + r.error);
  std::vector<pending_append> batch;
  for (int i = 0; i < 1000; ++i) {
    pending_append p;
    p.session_id = big.id;
    p.message.role = i % 2 ? "assistant" : "user";
    p.message.content = "message " + std::to_string(i) + ": "
                        + std::string(380, "abcdefgh "[i % 9]);
    p.message.timestamp_ms = start_ms + i;
    batch.push_back(std::move(p));
  }
  if (auto r = store->append_batch(batch); !r)
    die("append: " + r.error);
  double build_s = ms_since(t0) / 1000;

  http_server_settings st;
  st.host = "127.0.0.1";
  st.port = 0;
  st.limits = opts.server;
  st.model_id = "m";
  st.new_session_id = [] { return std::string{"unused"}; };
  auto started = http_server::start(*rt, st);
  if (!started)
    die("serve: " + started.error);
  auto server = std::move(*started);
  auto port = server->port();
  std::printf("dashboard endpoints: %lld sessions (built in %.1f s), %d "
              "requests each, one keep-alive connection\n\n",
              static_cast<long long>(sessions), build_s, requests);

  client c{port};
  auto list_http = measure(requests, [&] {
    c.get("/ui/api/sessions?limit=50", port);
  });
  auto list_store = measure(requests, [&] {
    auto r = store->list_sessions(50, 0);
    if (!r || r->size() != 50)
      die("list failed");
  });
  auto tr_http = measure(requests, [&] {
    c.get("/ui/api/sessions/bench_transcript", port);
  });
  auto tr_store = measure(requests, [&] {
    auto r = store->load_messages("bench_transcript");
    if (!r || r->size() != 1000)
      die("load failed");
  });
  auto deep_http = measure(std::max(5, requests / 10), [&] {
    c.get("/ui/api/sessions?limit=50&offset="
            + std::to_string(sessions / 2),
          port);
  });

  auto usage_http = measure(5, [&] { c.get("/ui/api/usage?days=2", port); });

  std::printf("%-44s %9s %9s %12s\n", "", "p50 ms", "p95 ms", "store p50");
  std::printf("%-44s %9.3f %9.3f %12.3f\n", "GET /ui/api/sessions?limit=50",
              list_http.p50, list_http.p95, list_store.p50);
  std::printf("%-44s %9.3f %9.3f %12.3f\n",
              "GET /ui/api/sessions/{id} (1,000 messages)", tr_http.p50,
              tr_http.p95, tr_store.p50);
  std::printf("%-44s %9.3f %9.3f %12s\n",
              "GET /ui/api/sessions?offset=N/2 (deep page)", deep_http.p50,
              deep_http.p95, "-");
  std::printf("%-44s %9.3f %9.3f %12s\n",
              "GET /ui/api/usage?days=2 (all sessions)", usage_http.p50,
              usage_http.p95, "-");
  std::printf("\n");
  bench_row("ui_sessions_list_p50_ms", list_http.p50, list_store.p50,
            list_http.p50 / list_store.p50, "ms", "p50 < 5 ms",
            list_http.p50 < 5);
  bench_row("ui_sessions_list_p95_ms", list_http.p95, list_store.p95,
            list_http.p95 / list_store.p95, "ms", "", -1);
  bench_row("ui_transcript_1000_p50_ms", tr_http.p50, tr_store.p50,
            tr_http.p50 / tr_store.p50, "ms", "p50 < 50 ms", tr_http.p50 < 50);
  bench_row("ui_transcript_1000_p95_ms", tr_http.p95, tr_store.p95,
            tr_http.p95 / tr_store.p95, "ms", "", -1);
  bench_row("ui_sessions_deep_page_p50_ms", deep_http.p50, std::nan(""),
            std::nan(""), "ms", "", -1);
  bench_row("ui_usage_all_sessions_p50_ms", usage_http.p50, std::nan(""),
            std::nan(""), "ms", "", -1);
  server->shutdown(std::chrono::seconds(5));
  server.reset();
  rt.reset();
  std::error_code ec;
  fs::remove_all(home, ec);
  return 0;
}
