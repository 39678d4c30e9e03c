// Scheduler benchmark (docs/cron.md, "Running, approvals and delivery";
// issue 24's goals): a runtime whose store holds 10,000 scheduled jobs.
//   1. Idle CPU: the process's CPU time (getrusage) over an idle window with
//      the scheduler holding the 10,000 jobs, against the same runtime's
//      idle window before the scheduler started (the baseline, same run).
//      Goal ~0: the scheduler sleeps on one timer.
//   2. Memory: VmRSS and the allocator's in-use bytes (mallinfo2) before
//      and after the scheduler loaded the jobs. Goal < 20 MiB.
//   3. Due-to-start delay with the real clock: N more jobs ("in 20s", added
//      one by one, so their due times spread over the adding) run against
//      an in-process scripted provider; the delay is the run record's
//      started_ms minus its scheduled_for_ms (the scheduler started the
//      run), and the run's session's started_at_ms minus it (the turn is
//      under way). Goal p50 and p99 < 50 ms.
// Prints a table and BENCH_ROW lines (scripts/bench.sh). --quick: shorter
// windows and fewer timed jobs.
#include <malloc.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_row.hpp"
#include "bench/bench_util.hpp"
#include "bench/scripted_provider.hpp"
#include "cron/cron_service.hpp"
#include "cron/engine.hpp"
#include "runtime/cron_scheduler.hpp"
#include "runtime/runtime.hpp"
#include "storage/session_store.hpp"

using namespace mibyan;
using namespace mibyan::bench;
namespace fs = std::filesystem;

namespace {

double cpu_ms() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec * 1e3 + u.ru_utime.tv_usec / 1e3
         + u.ru_stime.tv_sec * 1e3 + u.ru_stime.tv_usec / 1e3;
}

long status_kib(const char* key) {
  std::ifstream in{"/proc/self/status"};
  std::string line;
  auto k = std::string{key} + ":";
  while (std::getline(in, line))
    if (line.rfind(k, 0) == 0)
      return std::stol(line.substr(k.size()));
  return 0;
}

double heap_mib() {
  auto m = ::mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd) / (1024.0 * 1024.0);
}

// CPU milliseconds per second of wall time over `window`.
double idle_cpu(std::chrono::milliseconds window) {
  auto c0 = cpu_ms();
  auto t0 = clock_type::now();
  std::this_thread::sleep_for(window);
  return (cpu_ms() - c0) / (ms_since(t0) / 1000.0);
}

// 10,000 jobs written in one transaction, as a scheduler's adds would.
void seed_jobs(const std::string& home, int n) {
  session_store_options so;
  so.dir = session_store::default_dir(home);
  auto st = open_session_store(so);
  if (!st)
    bench_die("store: " + st.error);
  cron_engine_options eo;
  eo.clock = [] {
    return std::chrono::time_point_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now());
  };
  eo.default_zone = "UTC";
  cron_engine e{eo};
  cron_changes all;
  const char* schedules[] = {"every 1d", "0 3 * * *", "30 4 * * 1-5",
                             "every 12h"};
  for (int i = 0; i < n; ++i) {
    cron_job j;
    j.name = "job " + std::to_string(i);
    j.schedule = schedules[i % 4];
    j.timezone = i % 2 ? "Europe/Berlin" : "America/New_York";
    j.prompt = "summarise the night's events, part " + std::to_string(i);
    j.deliver = {"session"};
    auto ch = e.add(std::move(j));
    if (!ch)
      bench_die("add: " + ch.error);
    all.append(std::move(*ch));
  }
  if (auto s = (*st)->apply_cron_changes(all, 100); !s)
    bench_die("apply: " + s.error);
}

} // namespace

int main(int argc, char** argv) {
  bool quick = bench_quick(argc, argv);
  const int jobs = 10000;
  const int timed = quick ? 60 : 200;
  auto window = std::chrono::milliseconds(quick ? 2000 : 5000);
  auto home = fs::temp_directory_path()
              / ("mibyan-cron-bench-" + std::to_string(::getpid()));
  fs::create_directories(home);
  scripted_server provider{(home / "unused.txt").string()};
  seed_jobs(home.string(), jobs);

  options o;
  o.home = home.string();
  o.code_execution.sandbox = "off";
  o.code_execution.prestart_kernels = 0;
  o.cron.max_concurrent = 64;
  std::string err;
  auto made = create_runtime(o);
  if (!made)
    bench_die("runtime: " + made.error);
  auto rt = std::move(*made);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  // -- idle: the baseline, then with the scheduler ---------------------------
  double base_cpu = idle_cpu(window);
  ::malloc_trim(0);
  long rss0 = status_kib("VmRSS");
  double heap0 = heap_mib();
  cron_scheduler_options so;
  so.provider.provider = "custom";
  so.provider.base_url = provider.url();
  so.provider.model = "m";
  so.provider.api_key = "sk-bench-0123456789";
  auto load_t0 = clock_type::now();
  if (auto s = start_cron_scheduler(*rt, so); !s)
    bench_die("scheduler: " + s.error);
  cron_scheduler_stats stats;
  for (int i = 0; i < 600 && stats.jobs < jobs; ++i) {
    stats = cron_stats(*rt);
    if (stats.jobs < jobs)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  double load_ms = ms_since(load_t0);
  if (stats.jobs < jobs)
    bench_die("the scheduler did not load the jobs");
  ::malloc_trim(0);
  long rss1 = status_kib("VmRSS");
  double heap1 = heap_mib();
  auto wakes0 = cron_stats(*rt).wakes;
  double sched_cpu = idle_cpu(window);
  auto wakes1 = cron_stats(*rt).wakes;

  // -- due-to-start delay, real clock -----------------------------------------
  auto svc = cron_of(*rt);
  std::vector<std::string> ids;
  // Due well after the last add: the adds (one stored transaction each)
  // do not compete with the runs.
  auto sched = std::string{"in "} + (quick ? "10s" : "20s");
  auto add_t0 = clock_type::now();
  for (int i = 0; i < timed; ++i) {
    auto def = cron_job_from_json(
      *json::parse(R"({"schedule":")" + sched + R"(","prompt":"ping"})").v,
      "UTC");
    if (!def)
      bench_die("def: " + def.error);
    auto j = svc->add(*def);
    if (!j)
      bench_die("add: " + j.error);
    ids.push_back(j->id);
    // One due job every ~13 ms (the add's own time plus this).
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  double add_ms = ms_since(add_t0);
  std::vector<double> delays;
  // Due -> the run's session made (its turn is under way).
  std::vector<double> session_delays;
  size_t ok = 0;
  auto deadline = clock_type::now() + std::chrono::seconds(120);
  for (auto& id : ids) {
    for (;;) {
      auto h = svc->history(id, 5, 0, nullptr);
      if (h && !h->empty() && h->front().ended_ms != 0) {
        auto& r = h->front();
        delays.push_back(static_cast<double>(r.started_ms
                                             - r.scheduled_for_ms));
        if (auto sess = session_store_of(*rt)->get_session(r.session_id))
          session_delays.push_back(static_cast<double>(
            sess->started_at_ms - r.scheduled_for_ms));
        ok += r.status == "ok" ? 1 : 0;
        break;
      }
      if (clock_type::now() > deadline)
        bench_die("job " + id + " did not run in time");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  double p50 = percentile(delays, 0.50);
  double p99 = percentile(delays, 0.99);
  double mx = percentile(delays, 1.0);
  double s50 = percentile(session_delays, 0.50);
  double s99 = percentile(session_delays, 0.99);

  std::printf("cron scheduler, %d jobs scheduled (%s)\n", jobs,
              quick ? "quick" : "full");
  std::printf("  load at start            %8.1f ms\n", load_ms);
  std::printf("  idle CPU, no scheduler   %8.3f ms/s\n", base_cpu);
  std::printf("  idle CPU, scheduler      %8.3f ms/s  (%lld timer wake-ups in "
              "%.1f s)\n",
              sched_cpu, static_cast<long long>(wakes1 - wakes0),
              window.count() / 1000.0);
  std::printf("  VmRSS                    %8ld -> %ld KiB (+%.1f MiB)\n", rss0,
              rss1, (rss1 - rss0) / 1024.0);
  std::printf("  heap in use              %8.1f -> %.1f MiB (+%.1f MiB)\n",
              heap0, heap1, heap1 - heap0);
  std::printf("  %d adds                 %8.1f ms (%.2f ms each)\n", timed,
              add_ms, add_ms / timed);
  std::printf("  due -> start, %d runs    p50 %.1f ms  p99 %.1f ms  max %.1f "
              "ms  (%zu ok)\n",
              timed, p50, p99, mx, ok);
  std::printf("  due -> session made       p50 %.1f ms  p99 %.1f ms  (%zu)\n",
              s50, s99, session_delays.size());
  double rss_mib = (rss1 - rss0) / 1024.0;
  bench_row("cron: idle CPU with 10,000 jobs", sched_cpu, base_cpu, "ms/s",
            "~0 (< 1 ms/s above the idle runtime)",
            sched_cpu - base_cpu < 1.0, sched_cpu - base_cpu);
  bench_row("cron: memory of 10,000 jobs (RSS delta)", rss_mib, std::nullopt,
            "MiB", "< 20", rss_mib < 20);
  bench_row("cron: memory of 10,000 jobs (heap delta)", heap1 - heap0,
            std::nullopt, "MiB", "< 20", heap1 - heap0 < 20);
  bench_row("cron: due to start p50", p50, std::nullopt, "ms", "< 50",
            p50 < 50);
  bench_row("cron: due to start p99", p99, std::nullopt, "ms", "< 50",
            p99 < 50);
  bench_row("cron: due to the run's session made p99", s99, std::nullopt,
            "ms", "< 50", s99 < 50);
  stop_cron_scheduler(*rt);
  rt.reset();
  std::error_code ec;
  fs::remove_all(home, ec);
  return 0;
}
