// Benchmarks `mibyan serve` (serve/http_server, docs/serve.md) against
// baselines measured in the same run, all in this process:
// 1. serve overhead per turn, with 0 and 1 tool rounds, at 1, 16 and 256
//    concurrent clients (each a thread with one keep-alive connection,
//    sending non-streaming chat completions): requests/s, p50 and p99. The
//    same-run baselines are (a) a plain HTTP round trip to the scripted
//    provider (bench/scripted_provider.hpp) and (b) the same turn through
//    `runtime::run_turn` without HTTP. "Serve overhead" is the serve p50
//    minus (b) (the HTTP layer alone); "node overhead" is the serve p50
//    minus the provider round trips of the turn, (a) x provider calls.
// 2. The Responses API against chat completions, one client, 0 tool rounds:
//    POST /v1/responses with store:false against a stateless chat
//    completion, with store:true (a new kept session and a stored response
//    each) against a chat completion with a new X-Mibyan-Session each, and
//    a previous_response_id chain against one X-Mibyan-Session; p50 ratios.
// 3. 1,000 streaming clients connected at once: the provider holds every
//    request, so all 1,000 turns are open with their SSE responses started;
//    VmRSS/VmHWM of the whole process (server, runtime, provider stand-in
//    and the client sockets) are read then, then the provider answers and
//    every client must see `data: [DONE]`.
// $MIBYAN_HOME is on tmpfs (/dev/shm) so the LMDB fsync of each stored
// message does not hide the CPU cost being measured (mibyan_store_bench
// and mibyan_agent_bench measure the disk case).
//
// Usage: mibyan_serve_bench [requests_per_client_at_256 (default 8)]
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
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.hpp"
#include "bench/bench_http.hpp"
#include "bench/bench_row.hpp"
#include "bench/bench_serve.hpp"
#include "bench/bench_util.hpp"
#include "bench/scripted_provider.hpp"
#include "config/loader.hpp"
#include "serve/http_server.hpp"
#include "runtime/runtime.hpp"

namespace fs = std::filesystem;
using namespace mibyan;
using namespace mibyan::bench;

namespace {

long proc_status_kib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  auto klen = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, klen, key) == 0 && line.size() > klen
        && line[klen] == ':')
      return std::atol(line.c_str() + klen + 1);
  return -1;
}

std::string chat_request(int rounds, bool stream) {
  auto body = std::string{R"({"model":"m","stream":)"}
              + (stream ? "true" : "false")
              + R"(,"messages":[{"role":"user","content":"rounds=)"
              + std::to_string(rounds) + R"( please"}]})";
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
         "Content-Type: application/json\r\nContent-Length: "
         + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A POST of `body` to `path` with extra header lines `headers`.
std::string post_request(const std::string& path, const std::string& body,
                         const std::string& headers = {}) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
         "Content-Type: application/json\r\n" + headers + "Content-Length: "
         + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The "resp_..." id in a reply ("" when none).
std::string response_id_in(const std::string& reply) {
  auto p = reply.find("\"id\":\"resp_");
  if (p == std::string::npos)
    return {};
  p += 6;
  return reply.substr(p, reply.find('"', p) - p);
}

struct load_result {
  double rps = 0, p50 = 0, p99 = 0;
  size_t errors = 0;
};

// Runs `clients` threads released together; each calls `setup(c)` once,
// then `one(c)` `per_client` times (false counts an error), timing each
// call. Throughput is over the wall time from the release.
template <class Setup, class One, class Teardown>
load_result run_clients(int clients, int per_client, Setup setup, One one,
                        Teardown teardown) {
  std::vector<std::vector<double>> lat(static_cast<size_t>(clients));
  std::atomic<size_t> errors{0};
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      setup(c);
      ++ready;
      while (!go)
        std::this_thread::yield();
      for (int i = 0; i < per_client; ++i) {
        auto t0 = clock_type::now();
        bool ok = one(c);
        lat[static_cast<size_t>(c)].push_back(ms_since(t0));
        if (!ok)
          ++errors;
      }
      teardown(c);
    });
  while (ready < clients)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto t0 = clock_type::now();
  go = true;
  for (auto& t : threads)
    t.join();
  auto wall = ms_since(t0);
  std::vector<double> all;
  for (auto& l : lat)
    all.insert(all.end(), l.begin(), l.end());
  load_result r;
  r.rps = all.size() / (wall / 1000);
  r.p50 = median(all);
  r.p99 = percentile(all, 0.99);
  r.errors = errors;
  return r;
}

load_result run_load(uint16_t port, int clients, int per_client, int rounds) {
  auto req = chat_request(rounds, false);
  std::vector<int> fds(static_cast<size_t>(clients), -1);
  std::vector<std::string> ins(static_cast<size_t>(clients));
  return run_clients(
    clients, per_client,
    [&](int c) { fds[static_cast<size_t>(c)] = connect_loopback(port); },
    [&](int c) {
      auto k = static_cast<size_t>(c);
      return round_trip(fds[k], req, ins[k]);
    },
    [&](int c) { ::close(fds[static_cast<size_t>(c)]); });
}

// The same load through runtime::run_turn (no HTTP): `clients` threads,
// each running `per_client` turns one after another.
load_result run_direct_load(runtime& rt, const http_server_settings& st,
                            int clients, int per_client, int rounds) {
  // Sessions are closed after the timed turns, as outside a benchmark.
  std::vector<std::vector<std::string>> done(static_cast<size_t>(clients));
  return run_clients(
    clients, per_client, [](int) {},
    [&](int c) {
      turn_call call = st.turn;
      call.session_id = st.new_session_id();
      call.prompt = "rounds=" + std::to_string(rounds) + " please";
      auto out = rt.run_turn(call);
      done[static_cast<size_t>(c)].push_back(out.session_id);
      return out.started;
    },
    [&](int c) {
      for (auto& id : done[static_cast<size_t>(c)])
        rt.close_session(id);
    });
}

// The same turn through run_turn, no HTTP: p50 over `n` turns.
double direct_turn_p50(runtime& rt, const http_server_settings& st,
                       int rounds, int n) {
  std::vector<double> xs;
  for (int i = 0; i < n; ++i) {
    turn_call c = st.turn;
    c.session_id = st.new_session_id();
    c.prompt = "rounds=" + std::to_string(rounds) + " please";
    auto t0 = clock_type::now();
    auto out = rt.run_turn(c);
    xs.push_back(ms_since(t0));
    if (!out.started)
      provider_die("run_turn: " + out.error);
    rt.close_session(out.session_id);
  }
  return median(xs);
}

} // namespace

int main(int argc, char** argv) {
  const bool quick = bench_quick(argc, argv);
  int per256 = quick ? 2 : argc > 1 ? std::max(1, std::atoi(argv[1])) : 8;
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  log::set_level(log::level::warning);
  serve_rig rig{"serve", "bench_", [](http_server_settings& st) {
                  st.limits.max_concurrent_turns = 4096;
                  st.limits.max_connections = 8192;
                }};
  auto& rt = rig.rt;
  auto& provider = rig.provider;
  const auto& st = rig.st;
  auto port = rig.port;
  std::printf("mibyan serve benchmark (io_threads %lld, cores %u, "
              "MIBYAN_HOME on tmpfs)\n\n",
              static_cast<long long>(st.limits.io_threads),
              std::thread::hardware_concurrency());

  // Baselines.
  std::string in;
  {
    // Warm-up: the provider connection, kernels.
    int fd = connect_loopback(port);
    for (int i = 0; i < 20; ++i)
      round_trip(fd, chat_request(i % 2, false), in);
    ::close(fd);
  }
  std::string body = R"({"model":"m","stream":true,"messages":[{"role":"user","content":"rounds=0"}]})";
  auto rtt = plain_round_trips(provider.port(), body, 400);
  double rtt50 = median(rtt);
  std::printf("baseline: plain HTTP round trip to the provider  p50 %.3f ms  "
              "p99 %.3f ms\n",
              rtt50, percentile(rtt, 0.99));
  double direct0 = direct_turn_p50(*rt, st, 0, 200);
  double direct1 = direct_turn_p50(*rt, st, 1, 200);
  std::printf("baseline: run_turn without HTTP  0 tool rounds p50 %.3f ms, "
              "1 tool round p50 %.3f ms\n\n",
              direct0, direct1);

  std::printf("serve: HTTP clients against mibyan serve; direct: the same "
              "load through run_turn.\nserve ovh = serve p50 - direct p50 at "
              "the same concurrency; node ovh = serve p50 - provider round "
              "trips of the turn.\n\n");
  std::printf("%-6s %-7s | %8s %8s %8s %7s | %8s %8s | %9s %9s %4s\n",
              "rounds", "clients", "req/s", "p50 ms", "p99 ms", "p99/p50",
              "req/s", "p50 ms", "serve ovh", "node ovh", "err");
  for (int rounds : {0, 1}) {
    for (int clients : {1, 16, 256}) {
      int per = clients == 1 ? (quick ? 100 : 300)
                : clients == 16 ? (quick ? 10 : 40) : per256;
      auto r = run_load(port, clients, per, rounds);
      auto d = run_direct_load(*rt, st, clients, per, rounds);
      double calls = rounds + 1;
      std::printf("%-6d %-7d | %8.0f %8.3f %8.3f %7.2f | %8.0f %8.3f | "
                  "%9.3f %9.3f %4zu\n",
                  rounds, clients, r.rps, r.p50, r.p99, r.p99 / r.p50, d.rps,
                  d.p50, r.p50 - d.p50, r.p50 - calls * rtt50,
                  r.errors + d.errors);
      auto tag = std::to_string(rounds) + " tool rounds, "
                 + std::to_string(clients) + " clients";
      if (clients == 1)
        bench_row("serve: overhead per turn p50, " + tag, r.p50 - d.p50,
                  std::nullopt, "ms", "< 1 ms over run_turn",
                  r.p50 - d.p50 < 1.0);
      if (clients == 256)
        bench_row("serve: p99/p50, " + tag, r.p99 / r.p50, std::nullopt,
                  "x", "< 5", r.p99 / r.p50 < 5.0);
      bench_row("serve: throughput, " + tag, r.rps, d.rps, "req/s",
                "info (vs run_turn at the same concurrency)", std::nullopt);
    }
  }

  // The Responses API against chat completions (one client, 0 rounds).
  {
    const int per = quick ? 60 : 300;
    int fd = connect_loopback(port);
    auto p50_of = [&](auto make_request) {
      std::vector<double> xs;
      for (int i = 0; i < per; ++i) {
        auto req = make_request(i);
        auto t0 = clock_type::now();
        if (!round_trip(fd, req, in))
          provider_die("non-200 answer: " + in.substr(0, 300));
        xs.push_back(ms_since(t0));
      }
      return median(xs);
    };
    const std::string prompt = R"("rounds=0 please")";
    auto chat_body = R"({"model":"m","messages":[{"role":"user","content":)"
                     + prompt + "}]}";
    auto chat_stateless = p50_of([&](int) {
      return post_request("/v1/chat/completions", chat_body);
    });
    auto resp_stateless = p50_of([&](int) {
      return post_request("/v1/responses",
                          R"({"model":"m","store":false,"input":)" + prompt
                            + "}");
    });
    auto chat_kept = p50_of([&](int i) {
      return post_request("/v1/chat/completions", chat_body,
                          "X-Mibyan-Session: bench-kept-"
                            + std::to_string(i) + "\r\n");
    });
    auto resp_kept = p50_of([&](int) {
      return post_request("/v1/responses",
                          R"({"model":"m","input":)" + prompt + "}");
    });
    auto chat_chain = p50_of([&](int) {
      return post_request("/v1/chat/completions", chat_body,
                          "X-Mibyan-Session: bench-chain\r\n");
    });
    std::string prev;
    auto resp_chain = p50_of([&](int) {
      if (!in.empty())
        prev = response_id_in(in);
      auto body = std::string{R"({"model":"m","input":)"} + prompt;
      if (!prev.empty() && prev.rfind("resp_", 0) == 0)
        body += R"(,"previous_response_id":")" + prev + "\"";
      return post_request("/v1/responses", body + "}");
    });
    ::close(fd);
    std::printf("\nResponses API against chat completions (1 client, 0 tool "
                "rounds, p50 ms):\n"
                "  stateless: chat %.3f, responses store:false %.3f (%.2fx)\n"
                "  new kept session: chat %.3f, responses %.3f (%.2fx)\n"
                "  %d-turn chain: chat one session %.3f, "
                "previous_response_id %.3f (%.2fx)\n",
                chat_stateless, resp_stateless, resp_stateless / chat_stateless,
                chat_kept, resp_kept, resp_kept / chat_kept, per, chat_chain,
                resp_chain, resp_chain / chat_chain);
    bench_row("serve: Responses API p50, store:false vs stateless chat",
              resp_stateless, chat_stateless, "ms", "< 1.2x",
              resp_stateless < 1.2 * chat_stateless);
    bench_row("serve: Responses API p50, stored vs kept-session chat",
              resp_kept, chat_kept, "ms", "< 1.2x",
              resp_kept < 1.2 * chat_kept);
    bench_row("serve: Responses API p50, previous_response_id chain vs one "
              "kept session",
              resp_chain, chat_chain, "ms", "< 1.2x",
              resp_chain < 1.2 * chat_chain);
  }

  // 1,000 streaming clients at once.
  const int n = 1000;
  long rss_before = proc_status_kib("VmRSS");
  provider.hold(true);
  std::vector<int> fds;
  auto sreq = chat_request(0, true);
  for (int i = 0; i < n; ++i) {
    int fd = connect_loopback(port);
    if (::send(fd, sreq.data(), sreq.size(), MSG_NOSIGNAL)
        != static_cast<ssize_t>(sreq.size()))
      provider_die("send failed");
    fds.push_back(fd);
  }
  for (int i = 0; i < 60000 && provider.held.load() < static_cast<size_t>(n);
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto held = provider.held.load();
  long rss_open = proc_status_kib("VmRSS");
  provider.hold(false);
  size_t done = 0;
  std::vector<std::string> got(fds.size());
  auto deadline = clock_type::now() + std::chrono::seconds(120);
  std::vector<bool> finished(fds.size(), false);
  while (done < fds.size() && clock_type::now() < deadline) {
    std::vector<pollfd> pf;
    std::vector<size_t> idx;
    for (size_t i = 0; i < fds.size(); ++i)
      if (!finished[i]) {
        pf.push_back({fds[i], POLLIN, 0});
        idx.push_back(i);
      }
    if (::poll(pf.data(), pf.size(), 100) <= 0)
      continue;
    for (size_t k = 0; k < pf.size(); ++k) {
      if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      auto i = idx[k];
      char buf[16384];
      auto r = ::read(fds[i], buf, sizeof buf);
      if (r > 0)
        got[i].append(buf, static_cast<size_t>(r));
      if (r <= 0 || got[i].find("data: [DONE]") != std::string::npos) {
        finished[i] = true;
        ++done;
      }
    }
  }
  size_t ok = 0;
  for (auto& g : got)
    ok += g.find("data: [DONE]") != std::string::npos ? 1 : 0;
  for (int fd : fds)
    ::close(fd);
  long hwm = proc_status_kib("VmHWM");
  std::printf("\n%d streaming clients: %zu turns open at once at the "
              "provider; VmRSS %.1f MiB before, %.1f MiB with all open "
              "(+%.1f MiB, %.1f KiB per client); VmHWM %.1f MiB; %zu of %d "
              "saw [DONE]\n",
              n, held, rss_before / 1024.0, rss_open / 1024.0,
              (rss_open - rss_before) / 1024.0,
              static_cast<double>(rss_open - rss_before) / n, hwm / 1024.0,
              ok, n);
  bench_row("serve: 1000 open streaming turns, peak RSS", hwm / 1024.0,
            std::nullopt, "MiB", "< 1024 MiB, all [DONE]",
            hwm / 1024.0 < 1024 && ok == static_cast<size_t>(n));
  return 0;
}
