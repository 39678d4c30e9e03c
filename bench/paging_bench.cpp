// Benchmarks paging a large file from a script: an execute_code cell calls
// read_file(path, offset, limit=2000) in a loop over a 200,000-line file
// (the real tool, through the real kernel bridge and invocation actors),
// against `cat` of the same bytes, repetitions alternating so that load
// from other processes hits both alike. Prints wall time (median) and CPU
// time: ours is the runtime process plus the kernel's Python process, cat's
// is the child's alone.
//
// The in-process row (dispatch_tool without a script) is in
// mibyan_tools_bench --only paging.
//
// Usage: mibyan_paging_bench [repetitions | --quick]   (default 5; quick 2)
// Prints BENCH_ROW lines (bench/bench_row.hpp) for scripts/bench.sh.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include "bench/bench_row.hpp"
#include "bench/bench_util.hpp"
#include "base/json.hpp"
#include "config/options.hpp"
#include "runtime/runtime.hpp"

namespace fs = std::filesystem;
using namespace mibyan;
using namespace mibyan::bench;

namespace {

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "mibyan_paging_bench: %s\n", why.c_str());
  std::exit(1);
}

double usage_ms(int who) {
  rusage u{};
  getrusage(who, &u);
  auto ms = [](const timeval& v) { return v.tv_sec * 1e3 + v.tv_usec / 1e3; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

struct cell_result {
  double wall_ms = 0;   // measured inside the script
  double python_cpu_ms = 0;
  int pages = 0;
  long long chars = 0;
};

cell_result page_from_script(runtime& rt, const std::string& path) {
  static int seq = 0;
  const std::string code =
    "import time\n"
    "from mibyan_tools import read_file\n"
    "t, c = time.perf_counter(), time.process_time()\n"
    "off, pages, chars = 1, 0, 0\n"
    "while True:\n"
    "    r = read_file('" + path + "', offset=off, limit=2000)\n"
    "    pages += 1\n"
    "    chars += len(r['content'])\n"
    "    if not r.get('truncated'):\n"
    "        break\n"
    "    off = r['next_offset']\n"
    "print((time.perf_counter() - t) * 1e3, (time.process_time() - c) * 1e3,"
    " pages, chars)\n";
  json::value args;
  args["code"] = code;
  auto out = rt.call_tool({"paging", "p" + std::to_string(++seq),
                           "execute_code", args.dump(), ""});
  auto parsed = json::parse(out.result_json);
  if (!parsed || parsed.v->get_string("status") != "success")
    die("execute_code failed: " + out.result_json);
  cell_result r;
  if (std::sscanf(parsed.v->get_string("output").c_str(), "%lf %lf %d %lld",
                  &r.wall_ms, &r.python_cpu_ms, &r.pages, &r.chars) != 4)
    die("unexpected output: " + parsed.v->get_string("output"));
  return r;
}

} // namespace

int main(int argc, char** argv) {
  int reps = bench_quick(argc, argv) ? 2
             : argc > 1 && std::atoi(argv[1]) > 0 ? std::atoi(argv[1]) : 5;
  char tmpl[] = "/tmp/mibyan-paging-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr)
    die("mkdtemp failed");
  fs::path root = tmpl;
  auto big = (root / "big.txt").string();
  {
    std::ofstream out(big);
    for (int i = 0; i < 200000; ++i)
      out << "line " << i << ": the quick brown fox jumps over the dog\n";
  }
  auto size_mb = static_cast<double>(fs::file_size(big)) / (1024 * 1024);
  options opts;
  opts.home = (root / "home").string();
  opts.code_execution.prestart_kernels = 1;
  opts.code_execution.max_tool_calls = 5000;
  opts.approvals.unattended_mode = "approve";
  auto created = create_runtime(opts);
  if (!created)
    die("create_runtime: " + created.error);
  auto& rt = **created;
  page_from_script(rt, big); // warm: the kernel, the file's line index
  std::vector<double> ours, ours_cpu, base, base_cpu, script_ms;
  cell_result last;
  for (int i = 0; i < reps; ++i) {
    double self0 = usage_ms(RUSAGE_SELF);
    auto start = clock_type::now();
    last = page_from_script(rt, big);
    double wall = ms_since(start);
    double self = usage_ms(RUSAGE_SELF) - self0;
    ours.push_back(last.wall_ms);
    script_ms.push_back(wall);
    ours_cpu.push_back(self + last.python_cpu_ms);
    double child0 = usage_ms(RUSAGE_CHILDREN);
    base.push_back(spawn_to_null({"cat", big}, root.string()));
    base_cpu.push_back(usage_ms(RUSAGE_CHILDREN) - child0);
  }
  std::printf("read_file paging from a script (%.1f MB, %d pages of 2000 "
              "lines, %lld characters, median of %d)\n",
              size_mb, last.pages, last.chars, reps);
  std::printf("%-44s %10s %10s %8s\n", "case", "ours ms", "cat ms", "ratio");
  std::printf("%-44s %10.1f %10.1f %8.2f\n", "wall, the loop inside the script",
              median(ours), median(base), median(ours) / median(base));
  std::printf("%-44s %10.1f %10.1f %8.2f\n", "wall, the whole cell",
              median(script_ms), median(base),
              median(script_ms) / median(base));
  std::printf("%-44s %10.1f %10.1f %8.2f\n",
              "CPU, runtime + kernel process (cat: child)", median(ours_cpu),
              median(base_cpu), median(ours_cpu) / median(base_cpu));
  bench_row("read_file: 2000-line pages of a 200k-line file, from a script",
            median(ours), median(base), "ms", "<= 2x cat",
            median(ours) <= 2 * median(base));
  std::error_code ec;
  fs::remove_all(root, ec);
  return 0;
}
