// Benchmarks the secret redactor (base/redact.hpp) on ~16 MB of mixed
// tool output (build logs, source code, JSON, git log lines with hashes,
// UUIDs, base64) holding a few secrets, against memcpy and a memchr
// newline count over the same text. Reports MB/s (median of the runs).
//
// Usage: mibyan_redact_bench [repetitions]   (default 5)
#include <cstring>
#include <random>

#include "bench/bench_row.hpp"
#include "bench/bench_util.hpp"
#include "base/redact.hpp"

using namespace mibyan;
using namespace mibyan::bench;

namespace {

std::string corpus(size_t target) {
  std::mt19937 rng{42};
  auto hex = [&](size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i)
      s.push_back("0123456789abcdef"[rng() % 16]);
    return s;
  };
  const char* lines[] = {
    "[ 42%] Building CXX object CMakeFiles/mibyan.dir/tools/terminal.cpp.o\n",
    "  auto result = dispatch_tool(reg, name, std::move(args), ctx);\n",
    "{\"name\": \"mibyan\", \"version\": \"0.1.0\", \"max_tokens\": 4096, "
    "\"author\": \"someone\"}\n",
    "def handler(event, context):\n    token = get_token()\n    return "
    "{'status': 200}\n",
    "INFO 2026-12-01T14:45:48Z request served in 12 ms path=/api/v1/items\n",
    "data: SGVsbG8gd29ybGQsIHRoaXMgaXMganVzdCBiYXNlNjQgdGV4dA==\n",
    "export PATH=/usr/local/bin:/usr/bin:/bin HOME=/home/user\n",
  };
  std::string s;
  size_t k = 0;
  while (s.size() < target) {
    s += lines[k % 7];
    if (k % 5 == 0)
      s += "commit " + hex(40) + "\nAuthor: Dev <dev@example.test>\n";
    if (k % 11 == 0)
      s += "id " + hex(8) + "-" + hex(4) + "-" + hex(4) + "-" + hex(4) + "-"
           + hex(12) + " sha256:" + hex(64) + "\n";
    if (k % 997 == 0)
      s += "OPENAI_API_KEY=sk-proj-" + hex(48) + "\nAuthorization: Bearer "
           + hex(32) + "\nplanted-bench-secret-123\n";
    ++k;
  }
  return s;
}

double mbps(size_t bytes, double ms) {
  return bytes / 1e6 / (ms / 1e3);
}

} // namespace

int main(int argc, char** argv) {
  int reps = mibyan::bench::bench_quick(argc, argv) ? 3
             : argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  auto text = corpus(16 << 20);
  redactor r{{{"BENCH_TOKEN", "planted-bench-secret-123"},
              {"OTHER_SECRET", "another-secret-value"},
              {"DB_PASSWORD", "Tr0ub4dor&3-horse"}}};
  std::vector<double> t_red, t_copy, t_chr;
  std::string out, copy(text.size(), '\0');
  size_t sink = 0;
  for (int i = 0; i < reps; ++i) {
    auto t0 = clock_type::now();
    r.redact_to(text, out);
    t_red.push_back(ms_since(t0));
    sink += out.size();
    t0 = clock_type::now();
    std::memcpy(copy.data(), text.data(), text.size());
    t_copy.push_back(ms_since(t0));
    sink += copy[i];
    t0 = clock_type::now();
    const char* p = text.data();
    const char* end = p + text.size();
    size_t lines = 0;
    while ((p = static_cast<const char*>(std::memchr(p, '\n', end - p)))) {
      ++lines;
      ++p;
    }
    t_chr.push_back(ms_since(t0));
    sink += lines;
  }
  // Prose with nothing to redact (no output copy).
  const std::string sentence = "The quick brown fox jumps over the lazy dog "
                               "while the build keeps running tests. ";
  std::string clean;
  while (clean.size() < text.size())
    clean += sentence;
  std::vector<double> t_clean;
  for (int i = 0; i < reps; ++i) {
    auto t0 = clock_type::now();
    sink += r.redact_to(clean, out);
    t_clean.push_back(ms_since(t0));
  }
  std::printf("%-44s %10s\n", "case", "MB/s");
  std::printf("%-44s %10.0f\n", "redact, mixed tool output (with secrets)",
              mbps(text.size(), percentile(t_red, 0.5)));
  std::printf("%-44s %10.0f\n", "redact, prose (nothing to redact)",
              mbps(clean.size(), percentile(t_clean, 0.5)));
  std::printf("%-44s %10.0f\n", "memcpy (same text)",
              mbps(text.size(), percentile(t_copy, 0.5)));
  std::printf("%-44s %10.0f\n", "memchr newline count (same text)",
              mbps(text.size(), percentile(t_chr, 0.5)));
  {
    using mibyan::bench::bench_row;
    auto red = mbps(text.size(), percentile(t_red, 0.5));
    auto cln = mbps(clean.size(), percentile(t_clean, 0.5));
    auto chr = mbps(text.size(), percentile(t_chr, 0.5));
    bench_row("redact: mixed tool output", red, chr, "MB/s",
              "info (vs memchr line count)", std::nullopt);
    bench_row("redact: prose, nothing to redact", cln, chr, "MB/s",
              "info (vs memchr line count)", std::nullopt);
  }
  std::printf("(text %.1f MB, %d runs, median; sink %zu)\n",
              text.size() / 1e6, reps, sink % 10);
  return 0;
}
