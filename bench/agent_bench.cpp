// Benchmarks the agent loop against baselines measured in the same run:
// 1. loop overhead per iteration: turns of N tool rounds (each model reply
//    asks for one `read_file` of a small file, then a final answer) against
//    a scripted OpenAI-compatible server in this process; the time per
//    iteration is compared with the raw HTTP round trip of a plain socket
//    client sending a recorded request body of the same turn to the same
//    server (which includes the server's handling time), and the server's
//    own time per request is reported separately;
// 2. 1,000 concurrent conversations of 5 tool rounds each: iterations
//    (model calls) per second and peak RSS (VmHWM before and after);
// 3. SSE parse throughput: ~50 MB built from the recorded OpenAI streams of
//    the provider corpus fed through `openai::stream_accumulator` in 64 KiB
//    pieces, against a memchr newline count over the same bytes (and the
//    bare `sse_parser` as a split).
// Sections 1 and 2 run twice: with $MIBYAN_HOME (the LMDB session store) on
// disk, where every appended message is one fsync'd commit through the
// single session writer, and on tmpfs (/dev/shm), where fsync is free, which
// isolates the loop's own CPU cost. A 4 KiB fdatasync is timed as the disk's
// baseline. VmHWM is reset (/proc/self/clear_refs) before each section 2
// run; the second run's "warm" figure includes heap the allocator kept from
// the first. The LMDB session store has its own benchmark:
// mibyan_store_bench.
//
// The scripted server is one epoll thread (HTTP/1.1 keep-alive, 127.0.0.1,
// ephemeral port). It decides its reply by counting the tool messages in
// the request: fewer than the conversation's rounds (read from the prompt,
// "rounds=N") gives a streamed tool call, otherwise a streamed answer. It
// times its own handling (request complete -> response written).
//
// Concurrency: section 2 starts all 1,000 turns from one thread with
// `runtime::run_turn_async` (no caller thread per conversation); the turns
// run on the runtime's actors, the provider calls on the shared curl multi
// handle. The server counts the
// conversations in flight (first request seen, final answer not yet sent)
// and reports the maximum, which shows whether the 1,000 really overlapped.
//
// Usage: mibyan_agent_bench [--quick] [--conversations N] [--turns N]
//                           [--only SECTION]
// (--quick: 200 conversations, fewer turns, no store-on-disk overhead run)
#include <algorithm>
#include <cmath>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/turn_result.hpp"
#include "bench/bench_rows.hpp"
#include "bench/bench_util.hpp"
#include "bench/scripted_provider.hpp"
#include "config/options.hpp"
#include "providers/openai_codec.hpp"
#include "base/sse_parser.hpp"
#include "base/json.hpp"
#include "base/log.hpp"
#include "runtime/runtime.hpp"
#include "tools/registry.hpp"
#include "tools/core_tools.hpp"

#ifndef MIBYAN_CORPUS_DIR
#define MIBYAN_CORPUS_DIR "../shared/data/provider-transcripts/corpus"
#endif

namespace fs = std::filesystem;
using namespace mibyan;
using namespace mibyan::bench;

namespace {

// -- helpers ------------------------------------------------------------------

std::string fmt(double v, int prec = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "agent_bench: %s\n", msg.c_str());
  std::exit(1);
}

// A VmHWM / VmRSS line of /proc/self/status in KiB.
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


// -- table --------------------------------------------------------------------

struct row {
  std::string metric, ours, base, ratio, goal;
};

std::vector<row> table;

void add_row(std::string metric, std::string ours, std::string base,
             std::string ratio, std::string goal) {
  table.push_back({std::move(metric), std::move(ours), std::move(base),
                   std::move(ratio), std::move(goal)});
}

void print_table() {
  std::printf("\n| metric | ours | baseline | ratio | goal |\n");
  std::printf("|---|---|---|---|---|\n");
  for (auto& r : table)
    std::printf("| %s | %s | %s | %s | %s |\n", r.metric.c_str(),
                r.ours.c_str(), r.base.c_str(), r.ratio.c_str(),
                r.goal.c_str());
}

// -- runtime ------------------------------------------------------------------

struct bench_env {
  fs::path tmp;
  fs::path shm;     // a tmpfs directory ("" when /dev/shm is unusable)
  std::string file; // the small file read_file reads
};

// `$MIBYAN_HOME` (and so the LMDB store) on disk, or on tmpfs where fsync
// costs nothing, which isolates the loop's CPU cost from durability.
std::unique_ptr<runtime> make_runtime(const bench_env& env,
                                      const std::string& name, bool tmpfs) {
  options opts;
  opts.home = ((tmpfs ? env.shm : env.tmp) / name).string();
  opts.code_execution.prestart_kernels = 0;
  opts.approvals.unattended_mode = "approve"; // docs/approvals.md
  opts.agent.api_max_retries = 1;
  opts.logging.level = "warning";
  std::string err;
  auto rt = create_runtime(opts);
  if (!rt)
    die("create_runtime: " + rt.error);
  return std::move(*rt);
}

turn_call make_call(const scripted_server& srv, const std::string& sid,
                    int rounds, bool stream) {
  turn_call c;
  c.session_id = sid;
  c.prompt = "Read the file again and again. rounds=" + std::to_string(rounds);
  c.provider.provider = "custom";
  c.provider.base_url = srv.url();
  c.provider.model = "m";
  c.provider.api_key = "sk-bench-0123456789";
  c.max_iterations = rounds + 5;
  c.toolsets = {"file"};
  c.stream = stream;
  return c;
}

// Runs one turn and checks it did `rounds` tool rounds and finished.
void run_checked(runtime& rt, const turn_call& c, int rounds) {
  auto out = rt.run_turn(c);
  if (!out.started)
    die("run_turn: " + out.error);
  if (!out.completed || out.api_calls != rounds + 1)
    die("unexpected turn result (api_calls " + std::to_string(out.api_calls)
        + ", exit " + to_string(out.exit) + "): "
        + out.final_response.value_or("null"));
}

// -- sections -----------------------------------------------------------------

// Median latency of a 4 KiB write + fdatasync in `dir`, in milliseconds.
double fsync_ms(const fs::path& dir, int n) {
  auto path = (dir / "fsync-probe").string();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                  0600);
  if (fd < 0)
    die("cannot create " + path);
  std::string block(4096, 'x');
  std::vector<double> t;
  for (int i = 0; i < n; ++i) {
    auto start = clock_type::now();
    if (::pwrite(fd, block.data(), block.size(),
                 static_cast<off_t>(i) * 4096)
          != static_cast<ssize_t>(block.size())
        || ::fdatasync(fd) != 0)
      die("write/fdatasync failed in " + dir.string());
    t.push_back(ms_since(start));
  }
  ::close(fd);
  ::unlink(path.c_str());
  return median(t);
}

struct overhead_result {
  double overhead_ms = 0;  // ours - plain RTT, per iteration
  double plain_ms = 0;     // the plain client's round trip
  std::string recorded;    // a request body from the middle of a turn
};

overhead_result loop_overhead(const bench_env& env, scripted_server& srv,
                              bool tmpfs, int turns) {
  const int rounds = 20;
  const char* where = tmpfs ? "store on tmpfs" : "store on disk";
  std::printf("\n## 1%s. Loop overhead per iteration, %s (%d turns x %d "
              "tool rounds + answer)\n", tmpfs ? "b" : "a", where, turns,
              rounds);
  auto rt = make_runtime(env, tmpfs ? "home-overhead-shm" : "home-overhead",
                         tmpfs);
  for (int i = 0; i < 3; ++i)
    run_checked(*rt, make_call(srv, "warm-" + std::to_string(i), rounds, true),
                rounds);
  // The direct cost of the tool itself (in-thread dispatch_tool).
  options cfg;
  tool_registry reg;
  reg.add(make_read_file_tool());
  std::atomic<bool> cancel{false};
  tool_context ctx;
  ctx.cfg = &cfg;
  ctx.cancelled = &cancel;
  ctx.cwd = env.tmp.string();
  json::value args;
  args["path"] = env.file;
  auto args_text = args.dump();
  // A request body from the middle of a turn, for the plain client.
  {
    std::lock_guard<std::mutex> g{srv.recorded_mtx};
    srv.recorded.clear();
  }
  srv.record_at = rounds / 2;
  run_checked(*rt, make_call(srv, "record", rounds, true), rounds);
  srv.record_at = -1;
  std::string recorded;
  {
    std::lock_guard<std::mutex> g{srv.recorded_mtx};
    recorded = srv.recorded;
  }
  if (recorded.empty())
    die("no request body was recorded");
  plain_round_trips(srv.port(), recorded, 200);
  // Alternate: one streamed turn, one plain-client batch, one JSON turn,
  // so outside load hits all alike.
  std::vector<double> per_iter, per_iter_json, server_ms, rtt, tool_ms;
  double cpu_ms = 0;  // process CPU time (all threads) in streamed turns
  for (int i = 0; i < turns; ++i) {
    for (bool stream : {true, false}) {
      srv.reset();
      auto cpu0 = process_cpu_ms();
      auto start = clock_type::now();
      run_checked(*rt,
                  make_call(srv,
                            (stream ? "s-" : "j-") + std::to_string(i),
                            rounds, stream),
                  rounds);
      auto ms = ms_since(start) / (rounds + 1);
      if (stream)
        cpu_ms += process_cpu_ms() - cpu0;
      (stream ? per_iter : per_iter_json).push_back(ms);
      if (stream)
        server_ms.push_back(ns_to_ms(srv.handling_ns) / srv.requests);
    }
    auto r = plain_round_trips(srv.port(), recorded, rounds + 1);
    rtt.insert(rtt.end(), r.begin(), r.end());
    auto t0 = clock_type::now();
    for (int k = 0; k < rounds; ++k) {
      auto res = dispatch_tool(reg, "read_file", std::string_view{args_text},
                               ctx);
      if (res.find("content") == nullptr)
        die("read_file failed: " + res.dump());
    }
    tool_ms.push_back(ms_since(t0) / rounds);
  }
  auto it = median(per_iter), it_json = median(per_iter_json);
  auto base = median(rtt), srv_ms = median(server_ms);
  // Tool rounds carry the tool's own cost; the final answer does not.
  auto tool_share = median(tool_ms) * rounds / (rounds + 1);
  std::printf("request body recorded at round %d: %zu bytes\n", rounds / 2,
              recorded.size());
  std::printf("ours per iteration (stream):  p50 %.3f ms  p90 %.3f ms\n", it,
              percentile(per_iter, 0.9));
  std::printf("ours per iteration (json):    p50 %.3f ms\n", it_json);
  std::printf("server handling per request:  p50 %.3f ms\n", srv_ms);
  std::printf("plain client round trip:      p50 %.3f ms  p99 %.3f ms "
              "(includes server handling)\n", base, percentile(rtt, 0.99));
  std::printf("read_file dispatch in-thread: p50 %.3f ms\n",
              median(tool_ms));
  std::printf("process CPU per iteration (all threads, incl. the server): "
              "%.3f ms\n", cpu_ms / (turns * (rounds + 1)));
  std::printf("overhead = ours - plain RTT = %.3f ms; without the tool's own "
              "work: %.3f ms\n", it - base, it - base - tool_share);
  std::string w = std::string{" ("} + where + ")";
  add_row("iteration, streamed" + w, fmt(it, 3) + " ms",
          fmt(base, 3) + " ms (plain HTTP RTT, same body)",
          fmt(it / base) + "x", "-");
  add_row("loop overhead per iteration" + w, fmt(it - base, 3) + " ms",
          "0 (plain client)", "-", "< 1 ms");
  add_row("  same, minus read_file's own work" + w,
          fmt(it - base - tool_share, 3) + " ms",
          fmt(median(tool_ms), 3) + " ms (read_file in-thread)", "-",
          "< 1 ms");
  add_row("iteration, non-streamed JSON" + w, fmt(it_json, 3) + " ms",
          fmt(base, 3) + " ms (plain HTTP RTT)", fmt(it_json / base) + "x",
          "info");
  if (!tmpfs) {
    auto fs_ms = fsync_ms(env.tmp, 50);
    std::printf("4 KiB write + fdatasync in $MIBYAN_HOME's dir: p50 %.3f "
                "ms\n", fs_ms);
    add_row("iteration, streamed" + w, fmt(it, 3) + " ms",
            fmt(fs_ms, 3) + " ms (one 4 KiB fdatasync)",
            fmt(it / fs_ms) + "x", "info: fsyncs/iteration");
    add_row("scripted server handling / request", fmt(srv_ms, 3) + " ms",
            fmt(base, 3) + " ms (plain HTTP RTT)", fmt(srv_ms / base) + "x",
            "info (in both)");
  }
  return overhead_result{it - base, base, recorded};
}

struct conc_result {
  double ips = 0;       // iterations (model calls) per second
  double peak_mib = 0;  // VmHWM after the run
};

conc_result concurrent_conversations(const bench_env& env,
                                     scripted_server& srv, int n,
                                     bool tmpfs) {
  const int rounds = 5;
  const char* where = tmpfs ? "store on tmpfs" : "store on disk";
  std::printf("\n## 2%s. %d concurrent conversations x %d tool rounds, %s\n",
              tmpfs ? "b" : "a", n, rounds, where);
  // Reset the peak RSS so section 1 does not count (Linux >= 4.0).
  {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
  }
  long hwm_start = proc_status_kib("VmHWM");
  auto rt = make_runtime(env, (tmpfs ? "home-conc-shm-" : "home-conc-")
                                   + std::to_string(n), tmpfs);
  for (int i = 0; i < 4; ++i)
    run_checked(*rt, make_call(srv, "cwarm-" + std::to_string(i), rounds,
                               true),
                rounds);
  long hwm_before = proc_status_kib("VmHWM");
  long rss_before = proc_status_kib("VmRSS");
  srv.reset();
  // Every turn is started with run_turn_async from this thread, so no
  // caller thread waits per conversation; the completions count down.
  std::mutex mtx;
  std::condition_variable cv;
  int pending = n;
  int failures = 0;
  std::string first_error;
  std::vector<turn_call> calls;
  calls.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    calls.push_back(make_call(srv, "conv-" + std::to_string(i), rounds, true));
  long rss_threads = proc_status_kib("VmRSS");
  auto start = clock_type::now();
  for (auto& call : calls)
    rt->run_turn_async(call, [&](turn_result out) {
      // Runs on a runtime thread: check, count down, no waiting.
      std::string problem = out.started ? "" : out.error;
      if (problem.empty() && (!out.completed || out.api_calls != 6))
        problem = "turn did not complete 5 rounds: "
                  + turn_exit_reason(out) + " " + out.error;
      std::lock_guard<std::mutex> g{mtx};
      if (!problem.empty() && failures++ == 0)
        first_error = problem;
      if (--pending == 0)
        cv.notify_all();
    });
  {
    std::unique_lock<std::mutex> g{mtx};
    cv.wait(g, [&] { return pending == 0; });
  }
  auto wall_ms = ms_since(start);
  long hwm_after = proc_status_kib("VmHWM");
  long rss_after = proc_status_kib("VmRSS");
  if (failures > 0)
    die(std::to_string(failures) + " conversations failed; first: "
        + first_error);
  auto iterations = static_cast<double>(n) * (rounds + 1);
  auto ips = iterations / (wall_ms / 1000);
  auto server_busy = ns_to_ms(srv.handling_ns);
  std::printf("wall %.0f ms for %d conversations, %.0f model calls "
              "(%llu requests at the server, %llu connections opened)\n",
              wall_ms, n, iterations,
              static_cast<unsigned long long>(srv.requests.load()),
              static_cast<unsigned long long>(srv.connections.load()));
  std::printf("conversations in flight at the server: max %lld\n",
              static_cast<long long>(srv.max_in_flight.load()));
  std::printf("iterations/s: %.0f (tool rounds/s %.0f); server busy %.0f ms "
              "(%.1f%% of wall)\n", ips, ips * rounds / (rounds + 1),
              server_busy, 100 * server_busy / wall_ms);
  std::printf("VmHWM: reset %ld KiB, runtime warm %ld KiB, after %ld "
              "KiB (delta %ld KiB)\n", hwm_start, hwm_before, hwm_after,
              hwm_after - hwm_before);
  std::printf("VmRSS: before %ld KiB, %d turn calls built %ld KiB, after "
              "%ld KiB\n", rss_before, n, rss_threads, rss_after);
  double ips_excl = iterations / ((wall_ms - server_busy) / 1000);
  std::string w = std::string{" ("} + where + ")";
  add_row(std::to_string(n) + " conversations: iterations/s" + w,
          fmt(ips, 0) + " /s",
          fmt(ips_excl, 0) + " /s (server time subtracted)", "-", "info");
  add_row(std::to_string(n) + " conversations: max in flight" + w,
          std::to_string(srv.max_in_flight.load()), std::to_string(n)
            + " (requested)", "-", "true concurrency");
  add_row(std::to_string(n) + " conversations: peak RSS (VmHWM)" + w,
          fmt(hwm_after / 1024.0, 1) + " MiB",
          fmt(hwm_before / 1024.0, 1) + " MiB (warm runtime, idle)",
          "+" + fmt((hwm_after - hwm_before) / 1024.0, 1) + " MiB",
          "< 1024 MiB");
  return conc_result{ips, hwm_after / 1024.0};
}

// The scripted server alone: `clients` plain keep-alive clients each send
// `per_client` recorded request bodies back to back; requests per second.
double server_capacity(scripted_server& srv, const std::string& body,
                       int clients, int per_client) {
  std::vector<std::thread> ts;
  auto start = clock_type::now();
  for (int c = 0; c < clients; ++c)
    ts.emplace_back([&] { plain_round_trips(srv.port(), body, per_client); });
  for (auto& t : ts)
    t.join();
  return clients * per_client / (ms_since(start) / 1000);
}


std::string read_whole(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void sse_throughput() {
  std::printf("\n## 3. SSE parse throughput (openai stream accumulator)\n");
  fs::path dir{MIBYAN_CORPUS_DIR};
  std::string unit;
  for (auto name :
       {"001-openai-stream-text-usage-chunk.sse",
        "002-openai-stream-tool-call.sse",
        "003-openai-stream-parallel-tool-calls.sse",
        "005-openai-stream-reasoning-model-tool-call.sse"}) {
    auto text = read_whole(dir / name);
    if (text.empty())
      die("cannot read corpus file " + (dir / name).string());
    // Drop the end marker so the replicas form one long stream.
    std::string kept;
    std::istringstream lines{text};
    std::string line;
    while (std::getline(lines, line))
      if (line.rfind("data: [DONE]", 0) != 0)
        kept += line + "\n";
    unit += kept;
  }
  std::string body;
  const size_t target = size_t{50} << 20;
  body.reserve(target + unit.size() + 64);
  while (body.size() < target)
    body += unit;
  body += "data: [DONE]\n\n";
  const size_t piece = 64 * 1024;
  double mb = static_cast<double>(body.size()) / 1e6;
  std::vector<double> ours, parser_only, base;
  size_t sink = 0;
  for (int rep = 0; rep < 3; ++rep) {
    {
      auto start = clock_type::now();
      size_t lines_seen = 0;
      for (size_t off = 0; off < body.size(); off += piece) {
        auto len = std::min(piece, body.size() - off);
        const char* p = body.data() + off;
        const char* end = p + len;
        while ((p = static_cast<const char*>(
                  std::memchr(p, '\n', static_cast<size_t>(end - p))))
               != nullptr) {
          ++lines_seen;
          ++p;
        }
      }
      base.push_back(ms_since(start));
      sink += lines_seen;
    }
    {
      sse_parser parser;
      std::vector<sse_event> evs;
      auto start = clock_type::now();
      size_t events = 0;
      for (size_t off = 0; off < body.size(); off += piece) {
        parser.feed(std::string_view{body}.substr(off, piece), evs);
        events += evs.size();
        evs.clear();
      }
      parser.finish(evs);
      parser_only.push_back(ms_since(start));
      sink += events;
    }
    {
      openai::stream_accumulator acc;
      size_t text_bytes = 0;
      acc.on_text([&](std::string_view s) { text_bytes += s.size(); });
      auto start = clock_type::now();
      for (size_t off = 0; off < body.size(); off += piece)
        acc.feed(std::string_view{body}.substr(off, piece));
      auto res = acc.finish();
      ours.push_back(ms_since(start));
      if (!res.error.empty())
        die("stream accumulator failed: " + res.error);
      if (rep == 0)
        std::printf("accumulated: %zu chunks, %zu text bytes, %zu content "
                    "bytes, %zu tool calls, finish %s\n",
                    static_cast<size_t>(acc.chunks()), text_bytes,
                    res.content.size(), res.tool_calls.size(),
                    res.finish_reason.c_str());
      sink += res.content.size();
    }
  }
  auto o = mb / (median(ours) / 1000), p = mb / (median(parser_only) / 1000),
       b = mb / (median(base) / 1000);
  std::printf("%.1f MB in 64 KiB pieces (sink %zu)\n", mb, sink);
  std::printf("stream_accumulator: %.0f MB/s; sse_parser alone: %.0f MB/s; "
              "memchr newline count: %.0f MB/s\n", o, p, b);
  add_row("SSE accumulate (openai, 64 KiB pieces)", fmt(o, 0) + " MB/s",
          fmt(b, 0) + " MB/s (memchr newline count)", fmt(o / b, 3) + "x",
          "info");
  add_row("SSE framing only (sse_parser)", fmt(p, 0) + " MB/s",
          fmt(b, 0) + " MB/s (memchr newline count)", fmt(p / b, 3) + "x",
          "info");
}

} // namespace

// Usage: mibyan_agent_bench [--quick] [--conversations N] [--turns N]
//                           [--only overhead|concurrent|sse]
// (--turns: section 1's measured turns on tmpfs, e.g. for a profile)
int main(int argc, char** argv) {
  bool quick = false;
  int conversations = 1000;
  int turns = 0; // section 1's measured turns per store (0 = default)
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick")
      quick = true;
    else if (a == "--conversations" && i + 1 < argc)
      conversations = std::max(1, std::atoi(argv[++i]));
    else if (a == "--only" && i + 1 < argc)
      only = argv[++i];
    else if (a == "--turns" && i + 1 < argc)
      turns = std::max(1, std::atoi(argv[++i]));
    else if (std::isdigit(static_cast<unsigned char>(a[0])))
      conversations = std::max(1, std::atoi(a.c_str()));
    else
      die("unknown argument " + a);
  }
  if (quick && conversations == 1000)
    conversations = 200;
  auto want = [&](const char* s) { return only.empty() || only == s; };
  auto total_start = clock_type::now();
  log::set_level(log::level::warning);
  for (auto name : {"OPENAI_API_KEY", "CUSTOM_API_KEY"})
    ::unsetenv(name);
  bench_env env;
  char tmpl[] = "/tmp/mibyan_agent_bench_XXXXXX";
  if (::mkdtemp(tmpl) == nullptr)
    die("mkdtemp failed");
  env.tmp = tmpl;
  env.file = (env.tmp / "small.txt").string();
  char shm_tmpl[] = "/dev/shm/mibyan_agent_bench_XXXXXX";
  if (::mkdtemp(shm_tmpl) != nullptr)
    env.shm = shm_tmpl;
  else
    die("this benchmark needs a tmpfs at /dev/shm");
  {
    std::ofstream out(env.file);
    for (int i = 0; i < 10; ++i)
      out << "line " << i << " of a small file\n";
  }
  std::printf("# agent loop benchmark (%d concurrent conversations%s)\n",
              conversations, quick ? ", quick" : "");
  const double nan = std::nan("");
  {
    scripted_server srv{env.file};
    std::string recorded;
    if (want("overhead")) {
      if (!quick)
        loop_overhead(env, srv, false, 10);
      auto o = loop_overhead(env, srv, true,
                             turns > 0 ? turns : quick ? 4 : 10);
      recorded = o.recorded;
      bench_row("agent loop overhead per iteration (store on tmpfs)",
                o.overhead_ms, o.plain_ms, nan, "ms",
                "< 0.2 ms (ours - plain HTTP RTT)", o.overhead_ms < 0.2);
    }
    if (want("concurrent")) {
      // First, so its peak RSS holds no heap left from other sections.
      auto big = concurrent_conversations(env, srv, conversations, true);
      // Group commit: 100 conversations, store on disk vs on tmpfs.
      auto shm = concurrent_conversations(env, srv, 100, true);
      auto disk = concurrent_conversations(env, srv, 100, false);
      bench_row("100 conversations: iterations/s, store on disk vs tmpfs",
                disk.ips, shm.ips, disk.ips / shm.ips, "it/s",
                ">= 0.5x the tmpfs rate", disk.ips / shm.ips >= 0.5);
      if (recorded.empty()) {  // a request body for the plain clients
        {
          std::lock_guard<std::mutex> g{srv.recorded_mtx};
          srv.recorded.clear();
        }
        srv.record_at = 2;
        auto rt = make_runtime(env, "home-record", true);
        run_checked(*rt, make_call(srv, "record", 5, true), 5);
        srv.record_at = -1;
        std::lock_guard<std::mutex> g{srv.recorded_mtx};
        recorded = srv.recorded;
      }
      auto cap = server_capacity(srv, recorded, 8, quick ? 300 : 1000);
      std::printf("scripted server alone (8 plain keep-alive clients): "
                  "%.0f requests/s\n", cap);
      bench_row(std::to_string(conversations)
                  + " conversations x 5 tool rounds: peak RSS",
                big.peak_mib, nan, nan, "MiB", "< 100 MiB",
                big.peak_mib < 100);
      bench_row(std::to_string(conversations)
                  + " conversations: iterations/s vs the server alone",
                big.ips, cap, big.ips / cap, "it/s",
                "info: server's own capacity as baseline", -1);
    }
  }
  if (want("sse"))
  sse_throughput();
  add_row("LMDB session store", "see mibyan_store_bench", "-", "-", "-");
  print_table();
  std::printf("\ntotal bench time: %.1f s\n", ms_since(total_start) / 1000);
  std::error_code ec;
  fs::remove_all(env.tmp, ec);
  if (!env.shm.empty())
    fs::remove_all(env.shm, ec);
  return 0;
}
