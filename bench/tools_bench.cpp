// Benchmarks the file tools against the command-line programs they wrap:
// - search_files (through dispatch_tool) vs. running `rg` directly, on a
//   generated tree of 50,000 small files;
// - read_file paging (2000-line pages until the end) vs. `cat file`.
// Each case runs a few times; the table shows medians and ours/baseline.
//
// Usage: mibyan_tools_bench [repetitions | --quick] [--only paging]
//        (default 3 repetitions; quick 1; --only paging skips the search
//        cases and their 50,000-file tree)
// Prints BENCH_ROW lines (bench/bench_row.hpp) for scripts/bench.sh.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/options.hpp"
#include "bench/bench_row.hpp"
#include "bench/bench_util.hpp"
#include "base/subprocess.hpp"
#include "tools/core_tools.hpp"
#include "tools/registry.hpp"


namespace fs = std::filesystem;
using namespace mibyan;
using namespace mibyan::bench;

namespace {

// CPU time (user + system, ms) of this thread, and of the reaped children.
double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
double children_cpu_ms() {
  rusage u{};
  getrusage(RUSAGE_CHILDREN, &u);
  auto ms = [](const timeval& v) { return v.tv_sec * 1e3 + v.tv_usec / 1e3; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

struct row {
  std::string name;
  double ours;
  double base;
  std::string base_name;
  std::string note;
};

void print_table(const std::vector<row>& rows, const char* unit) {
  std::printf("%-36s %12s %12s %8s  %s\n", "case", (std::string{"ours "} +
              unit).c_str(), (std::string{"base "} + unit).c_str(),
              "ratio", "baseline / note");
  for (auto& r : rows)
    std::printf("%-36s %12.1f %12.1f %8.2f  %s%s%s\n", r.name.c_str(),
                r.ours, r.base, r.ours / r.base, r.base_name.c_str(),
                r.note.empty() ? "" : "; ", r.note.c_str());
}

} // namespace

int main(int argc, char** argv) {
  auto bench_start = clock_type::now();
  int reps = bench_quick(argc, argv) ? 1
             : argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  bool paging_only = false;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string{argv[i]} == "--only")
      paging_only = std::string{argv[i + 1]} == "paging";
  auto rg = find_executable("rg");
  if (rg.empty()) {
    std::fprintf(stderr, "rg not found (apt-get install ripgrep)\n");
    return 1;
  }
  char tmpl[] = "/tmp/mibyan-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr)
    return 1;
  std::string root = tmpl;
  std::string tree = root + "/tree";
  // -- generate the tree ----------------------------------------------------
  auto gen_start = clock_type::now();
  const int file_count = paging_only ? 0 : 50000;
  for (int i = 0; i < file_count; ++i) {
    auto dir = tree + "/d" + std::to_string(i / 500) + "/e"
               + std::to_string((i / 50) % 10);
    if (i % 50 == 0)
      fs::create_directories(dir);
    std::ofstream out(dir + "/f" + std::to_string(i) + ".txt");
    out << "hello world line one\nhello world line two\n"
        << "some ordinary text " << i << "\n"
        << (i % 100 == 0 ? "needle_" + std::to_string(i) + " found here\n"
                         : std::string{"nothing special\n"})
        << "the end\n";
  }
  std::printf("generated %d files in %.0f ms under %s\n", file_count,
              ms_since(gen_start), tree.c_str());
  // -- set up the tools -------------------------------------------------------
  options cfg;
  std::atomic<bool> cancelled{false};
  tool_registry reg;
  reg.add(make_search_files_tool());
  reg.add(make_read_file_tool());
  tool_context ctx;
  ctx.cwd = root;
  ctx.home = root;
  ctx.cfg = &cfg;
  ctx.cancelled = &cancelled;
  auto reset_deadline = [&] {
    ctx.deadline = clock_type::now() + std::chrono::minutes(5);
  };
  // Warm the page cache so both sides see the same state.
  if (!paging_only) {
    spawn_to_null({rg, "--files", "tree"}, root);
    spawn_to_null({rg, "-e", "zzz", "tree"}, root);
  }

  std::vector<row> rows;
  auto bench_search = [&](const std::string& name, const std::string& args,
                          std::vector<std::string> base_argv,
                          const std::string& base_name) {
    std::vector<double> ours, base;
    json::value last;
    for (int i = 0; i < reps; ++i) {
      reset_deadline();
      auto start = clock_type::now();
      last = dispatch_tool(reg, "search_files", std::string_view{args}, ctx);
      ours.push_back(ms_since(start));
      base.push_back(spawn_to_null(base_argv, root));
    }
    if (auto e = last.find("error")) {
      std::fprintf(stderr, "%s failed: %s\n", name.c_str(),
                   e->dump().c_str());
      std::exit(1);
    }
    std::string note = "total_count=" + last["total_count"].dump();
    if (last.find("limit_reason") != nullptr)
      note += " (lower bound)";
    rows.push_back({name, median(ours), median(base), base_name, note});
    bench_row("search_files: " + name, median(ours), median(base), "ms",
              "info (vs " + base_name + ")", std::nullopt);
  };
  if (!paging_only) {
    bench_search("search content, 500 hits",
                 R"({"pattern":"needle_[0-9]+","path":"tree"})",
                 {rg, "-e", "needle_[0-9]+", "tree"}, "rg -e PAT tree");
    bench_search("search content, 500 hits, -j1 base",
                 R"({"pattern":"needle_[0-9]+","path":"tree"})",
                 {rg, "--threads=1", "--json", "-e", "needle_[0-9]+", "tree"},
                 "rg --threads=1 --json -e PAT tree");
    bench_search("search content, 100k hits",
                 R"({"pattern":"hello","path":"tree"})",
                 {rg, "-e", "hello", "tree"}, "rg -e hello tree");
    bench_search("search content, 500 hits, count",
                 R"({"pattern":"needle_[0-9]+","path":"tree",)"
                 R"("output_mode":"count"})",
                 {rg, "--count", "-e", "needle_[0-9]+", "tree"},
                 "rg --count -e PAT tree");
    bench_search("search files *.txt (50k)",
                 R"({"pattern":"*.txt","target":"files","path":"tree"})",
                 {rg, "--files", "-g", "*.txt", "tree"},
                 "rg --files -g '*.txt' tree");
    std::printf("\nsearch_files vs rg (median of %d, 2 cores)\n", reps);
    print_table(rows, "ms");
  }

  // -- read_file paging vs cat ----------------------------------------------
  auto big = root + "/big.txt";
  {
    std::ofstream out(big);
    for (int i = 0; i < 200000; ++i)
      out << "line " << i << ": the quick brown fox jumps over the dog\n";
  }
  auto size_mb = static_cast<double>(fs::file_size(big)) / (1024 * 1024);
  std::vector<double> ours, base, ours_cpu, base_cpu;
  int pages = 0;
  for (int i = 0; i < reps; ++i) {
    auto start = clock_type::now();
    auto cpu_start = thread_cpu_ms();
    int64_t offset = 1;
    pages = 0;
    while (true) {
      reset_deadline();
      json::value args;
      args["path"] = big;
      args["offset"] = offset;
      args["limit"] = 2000;
      auto r = dispatch_tool(reg, "read_file", args, ctx);
      ++pages;
      if (r.find("error") != nullptr) {
        std::fprintf(stderr, "read_file failed at offset %lld: %s\n",
                     static_cast<long long>(offset), r.dump().c_str());
        return 1;
      }
      auto total = r.get_int("total_lines", 0);
      auto next = r.get_int("next_offset", offset + 2000);
      if (next > total || pages > 100000)
        break;
      offset = next;
    }
    ours.push_back(ms_since(start));
    ours_cpu.push_back(thread_cpu_ms() - cpu_start);
    auto child_start = children_cpu_ms();
    base.push_back(spawn_to_null({"cat", big}, root));
    base_cpu.push_back(children_cpu_ms() - child_start);
  }
  double ours_ms = median(ours), base_ms = median(base);
  std::printf("\nread_file paging vs cat (%.1f MB, %d pages of 2000 lines, "
              "median of %d)\n", size_mb, pages, reps);
  std::printf("%-36s %12s %12s %8s\n", "case", "ours MB/s", "cat MB/s",
              "ratio");
  std::printf("%-36s %12.1f %12.1f %8.3f   (%.1f ms vs %.1f ms)\n",
              "read_file 2000-line pages", size_mb / (ours_ms / 1000),
              size_mb / (base_ms / 1000),
              (size_mb / (ours_ms / 1000)) / (size_mb / (base_ms / 1000)),
              ours_ms, base_ms);
  // CPU time is steadier than wall time on a loaded machine (cat's is the
  // child's alone, without the spawn).
  std::printf("%-36s %12.1f %12.1f %8.3f   (CPU ms, ours / cat)\n",
              "read_file 2000-line pages, CPU", median(ours_cpu),
              median(base_cpu), median(ours_cpu) / median(base_cpu));
  bench_row("read_file: 2000-line pages of a 200k-line file", ours_ms,
            base_ms, "ms", "<= 2x cat", ours_ms <= 2 * base_ms);
  std::error_code ec;
  fs::remove_all(root, ec);
  std::printf("\ntotal bench time %.1f s\n", ms_since(bench_start) / 1000);
  return 0;
}
