// Benchmarks the cost of live watchers (docs/serve.md, "Operator
// console"): the latency of a chat turn over real HTTP with one tool
// round (a read_file call, then the streamed answer) against `mibyan serve`
// in this process, with 0 and then 100 connected GET /ui/api/live
// watchers reading every event (one thread polls all their sockets).
// The phases alternate (0, 100, 0, 100, ...; 8 rounds) so drift hits both
// alike; the row is p50(100 watchers) / p50(0 watchers) over all turns of
// the same run (the median of the per-round ratios is printed too), goal
// < 1.05 (issue 23: "100 browsers watching turns add < 5 % to turn
// latency"). It also checks that every watcher saw every turn end.
//
// Usage: mibyan_live_bench [--quick] [turns_per_phase (default 80)]
#include <algorithm>
#include <atomic>
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
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.hpp"
#include "bench/bench_row.hpp"
#include "bench/bench_util.hpp"
#include "bench/bench_http.hpp"
#include "bench/bench_serve.hpp"
#include "bench/scripted_provider.hpp"
#include "config/loader.hpp"
#include "runtime/runtime.hpp"
#include "runtime/turn_events.hpp"
#include "serve/http_server.hpp"

namespace fs = std::filesystem;
using namespace mibyan;
using namespace mibyan::bench;

namespace {

// One chat turn with one tool round on keep-alive connection `fd` (a
// non-streamed reply: a streamed one would measure the delayed-ACK stalls
// of small SSE writes, not the turn). The turn itself streams from the
// provider, so the hub sees its deltas as well as its tool events.
void chat_turn(int fd, std::string& in) {
  static const std::string body
    = R"({"model":"m","stream":false,"messages":[{"role":"user",)"
      R"("content":"rounds=1 please"}]})";
  if (!round_trip(fd,
                  "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  "Content-Type: application/json\r\nContent-Length: "
                    + std::to_string(body.size()) + "\r\n\r\n" + body,
                  in))
    provider_die("a turn failed: " + in.substr(0, 300));
}

// Watchers: `n` GET /ui/api/live connections read by one thread, which
// counts the turn_end events they receive.
class watchers {
public:
  watchers(uint16_t port, int n) {
    for (int i = 0; i < n; ++i) {
      int fd = connect_loopback(port);
      // The Host names the server (the dashboard's DNS-rebinding check).
      send_all(fd, "GET /ui/api/live HTTP/1.1\r\nHost: 127.0.0.1:"
                     + std::to_string(port) + "\r\n\r\n");
      fds_.push_back(fd);
    }
    tails_.resize(fds_.size());
    thread_ = std::thread([this] { loop(); });
  }
  ~watchers() {
    stop_ = true;
    thread_.join();
    for (int fd : fds_)
      ::close(fd);
  }
  uint64_t turn_ends() const { return ends_.load(); }
  uint64_t lagged() const { return lagged_.load(); }

private:
  void loop() {
    std::vector<pollfd> pf;
    for (int fd : fds_)
      pf.push_back({fd, POLLIN, 0});
    char buf[65536];
    while (!stop_) {
      if (::poll(pf.data(), pf.size(), 50) <= 0)
        continue;
      for (size_t i = 0; i < pf.size(); ++i) {
        if (!(pf[i].revents & POLLIN))
          continue;
        auto got = ::read(pf[i].fd, buf, sizeof buf);
        if (got <= 0)
          continue;
        // Count markers across reads: keep a short tail.
        auto text = tails_[i] + std::string{buf, static_cast<size_t>(got)};
        ends_ += count_of(text, "event: turn_end\n");
        lagged_ += count_of(text, "event: lagged\n");
        tails_[i] = text.size() > 32 ? text.substr(text.size() - 32) : text;
        // A marker counted in the tail is not counted again.
        auto cut = tails_[i].rfind('\n');
        tails_[i] = cut == std::string::npos ? tails_[i]
                                             : tails_[i].substr(cut + 1);
      }
    }
  }

  std::vector<int> fds_;
  std::vector<std::string> tails_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> ends_{0}, lagged_{0};
};

// `n` streamed turns, each in a new session on one keep-alive connection;
// their latencies in ms.
std::vector<double> run_turns(uint16_t port, int n) {
  std::vector<double> xs;
  int fd = connect_loopback(port);
  std::string in;
  for (int i = 0; i < n; ++i) {
    auto t0 = clock_type::now();
    chat_turn(fd, in);
    xs.push_back(ms_since(t0));
  }
  ::close(fd);
  return xs;
}

} // namespace

int main(int argc, char** argv) {
  const bool quick = bench_quick(argc, argv);
  int per_phase = quick ? 30 : 80;
  for (int i = 1; i < argc; ++i)
    if (std::atoi(argv[i]) > 0)
      per_phase = std::atoi(argv[i]);
  const int n_watchers = 100;
  const int rounds = quick ? 4 : 8;
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  log::set_level(log::level::warning);
  serve_rig rig{"live", "live_"};
  auto& rt = rig.rt;
  auto port = rig.port;
  std::printf("live watchers benchmark: turns with one tool round "
              "over HTTP, %d turns per phase, %d rounds of (0, %d watchers)"
              "; cores %u\n\n",
              per_phase, rounds, n_watchers,
              std::thread::hardware_concurrency());
  run_turns(port, 30); // warm-up
  std::vector<double> none, many, paired;
  uint64_t ends = 0, lagged = 0;
  size_t watched_turns = 0;
  for (int r = 0; r < rounds; ++r) {
    auto a = run_turns(port, per_phase);
    none.insert(none.end(), a.begin(), a.end());
    double a50 = median(a);
    {
      watchers w(port, n_watchers);
      // Every watcher subscribed (its snapshot sent) before timing.
      auto& hub = turn_events_of(*rt);
      for (int i = 0; i < 10000 && hub.subscribers()
                                     < static_cast<size_t>(n_watchers);
           ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (hub.subscribers() < static_cast<size_t>(n_watchers))
        provider_die("only " + std::to_string(hub.subscribers())
                     + " live watchers subscribed");
      auto b = run_turns(port, per_phase);
      many.insert(many.end(), b.begin(), b.end());
      paired.push_back(median(b) / a50);
      watched_turns += b.size();
      // Let the watchers drain the last turn's events.
      auto want = static_cast<uint64_t>(n_watchers) * b.size();
      for (int i = 0; i < 10000 && w.turn_ends() < want; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ends += w.turn_ends();
      lagged += w.lagged();
    }
    // The watchers' connections are gone before the next quiet phase.
    for (int i = 0; i < 10000 && turn_events_of(*rt).subscribers() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  double p0 = median(none), p100 = median(many);
  std::printf("%-26s %10s %10s %10s\n", "", "p50 ms", "p90 ms", "p99 ms");
  std::printf("%-26s %10.3f %10.3f %10.3f\n", "0 watchers", p0,
              percentile(none, 0.9), percentile(none, 0.99));
  std::printf("%-26s %10.3f %10.3f %10.3f\n", "100 watchers", p100,
              percentile(many, 0.9), percentile(many, 0.99));
  std::printf("\nratio p50 %.3f (median of the %d paired rounds %.3f); "
              "turn_end events seen %llu of %zu (watchers x turns); lagged "
              "markers %llu\n",
              p100 / p0, rounds, median(paired),
              static_cast<unsigned long long>(ends),
              watched_turns * n_watchers,
              static_cast<unsigned long long>(lagged));
  bench_row("live: turn p50 with 100 watchers vs none", p100, p0, "ms",
            "< 1.05x, every watcher sees every turn",
            p100 / p0 < 1.05 && ends == watched_turns * n_watchers);
  return 0;
}
