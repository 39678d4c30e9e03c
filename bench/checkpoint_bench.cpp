// Benchmarks file checkpoints (docs/checkpoints.md) on a generated project
// of 2,000 source-like files (about 8 MB) plus an ignored build directory:
//  - the first snapshot, against reading every file once (the least any
//    snapshot must do) and against the git command doing the same job in
//    a shadow repository (`git add -A` + `git write-tree` + `git
//    commit-tree`, what a shell-out implementation runs);
//  - a repeated snapshot of the unchanged tree (the stat cache), against
//    the git command's repeat;
//  - a restore of the one file the agent changed.
// Reports milliseconds (median of the runs).
//
// Usage: mibyan_checkpoint_bench [--quick] [files]   (default 2000)
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <fcntl.h>
#include <unistd.h>

#include "bench/bench_row.hpp"
#include "bench/bench_util.hpp"
#include "storage/file_checkpoint_store.hpp"

using namespace mibyan;
using namespace mibyan::bench;
namespace fs = std::filesystem;

namespace {

std::string make_text(std::mt19937& rng, size_t bytes) {
  static const char* words[] = {"int", "return", "auto", "const", "std::string",
                                "if", "for", "value", "result", "{", "}", ";",
                                "namespace", "mibyan", "(", ")", "\n"};
  std::string s;
  while (s.size() < bytes) {
    s += words[rng() % 17];
    s += ' ';
  }
  return s;
}

size_t read_all(const std::string& root) {
  size_t total = 0;
  std::string buf(1 << 16, '\0');
  for (auto& e : fs::recursive_directory_iterator(root)) {
    if (e.path().filename() == ".git" || !e.is_regular_file())
      continue;
    if (e.path().string().find("/build/") != std::string::npos)
      continue;
    int fd = ::open(e.path().c_str(), O_RDONLY);
    while (fd >= 0) {
      auto n = ::read(fd, buf.data(), buf.size());
      if (n <= 0)
        break;
      total += static_cast<size_t>(n);
    }
    if (fd >= 0)
      ::close(fd);
  }
  return total;
}

double git_snapshot(const std::string& git_dir, const std::string& root) {
  auto cmd = "cd '" + root + "' && GIT_DIR='" + git_dir + "' GIT_WORK_TREE='"
             + root + "' git add -A >/dev/null 2>&1 && t=$(GIT_DIR='" + git_dir
             + "' git write-tree) && GIT_DIR='" + git_dir
             + "' GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b "
               "GIT_COMMITTER_EMAIL=b@b git commit-tree $t -m c >/dev/null";
  auto t0 = clock_type::now();
  if (std::system(cmd.c_str()) != 0)
    return -1;
  return ms_since(t0);
}

} // namespace

int main(int argc, char** argv) {
  bool quick = bench_quick(argc, argv);
  int files = 2000;
  for (int i = 1; i < argc; ++i)
    if (std::atoi(argv[i]) > 0)
      files = std::atoi(argv[i]);
  int reps = quick ? 3 : 5;
  char tmpl[] = "/tmp/mibyan-cpbench-XXXXXX";
  std::string base = ::mkdtemp(tmpl);
  auto root = base + "/project";
  std::mt19937 rng{7};
  for (int i = 0; i < files; ++i) {
    auto dir = root + "/src/m" + std::to_string(i % 50);
    fs::create_directories(dir);
    std::ofstream{dir + "/f" + std::to_string(i) + ".cpp"}
      << make_text(rng, 2000 + rng() % 4000);
  }
  fs::create_directories(root + "/build");
  for (int i = 0; i < 200; ++i)
    std::ofstream{root + "/build/o" + std::to_string(i) + ".o"}
      << make_text(rng, 8000);
  std::ofstream{root + "/.gitignore"} << "build/\n";
  (void)read_all(root); // warm the page cache for every contender

  std::vector<double> t_read, t_first, t_repeat, t_git_first, t_git_repeat,
    t_restore;
  for (int r = 0; r < reps; ++r) {
    auto t0 = clock_type::now();
    size_t sink = read_all(root);
    t_read.push_back(ms_since(t0));
    (void)sink;
    auto store_dir = base + "/store" + std::to_string(r);
    auto store = file_checkpoint_store::open(store_dir);
    if (!store) {
      std::fprintf(stderr, "open: %s\n", store.error.c_str());
      return 1;
    }
    snapshot_request req;
    req.project = root;
    req.tool = "patch";
    t0 = clock_type::now();
    auto s1 = (*store)->snapshot(req);
    t_first.push_back(ms_since(t0));
    t0 = clock_type::now();
    auto s2 = (*store)->snapshot(req);
    t_repeat.push_back(ms_since(t0));
    if (!s1 || !s2) {
      std::fprintf(stderr, "snapshot: %s\n", (s1 ? s2 : s1).error.c_str());
      return 1;
    }
    // The agent changes one file; restore it.
    auto victim = root + "/src/m3/f3.cpp";
    std::ofstream{victim, std::ios::app} << "// changed\n";
    (void)(*store)->add_agent_files(root, s2->checkpoint.number,
                                    {"src/m3/f3.cpp"});
    restore_options ro;
    ro.safety_snapshot = false;
    t0 = clock_type::now();
    auto rs = (*store)->restore(root, s2->checkpoint.number, ro);
    t_restore.push_back(ms_since(t0));
    if (!rs || rs->restored.size() != 1) {
      std::fprintf(stderr, "restore failed\n");
      return 1;
    }
    auto git_dir = base + "/git" + std::to_string(r);
    if (std::system(("git init -q --bare '" + git_dir + "'").c_str()) == 0) {
      t_git_first.push_back(git_snapshot(git_dir, root));
      t_git_repeat.push_back(git_snapshot(git_dir, root));
    }
  }
  fs::remove_all(base);
  auto med = [](std::vector<double> v) { return percentile(v, 50); };
  auto label = std::to_string(files) + " files";
  bench_row("checkpoint: first snapshot (" + label + ") vs reading every file",
            med(t_first), med(t_read), "ms", "informational", std::nullopt);
  if (!t_git_first.empty() && t_git_first[0] > 0) {
    bench_row("checkpoint: first snapshot (" + label + ") vs git add+commit",
              med(t_first), med(t_git_first), "ms", "<= 1.0x git",
              med(t_first) <= med(t_git_first));
    bench_row("checkpoint: unchanged re-snapshot vs git add+commit",
              med(t_repeat), med(t_git_repeat), "ms", "<= 1.0x git",
              med(t_repeat) <= med(t_git_repeat));
  } else {
    bench_row("checkpoint: unchanged re-snapshot (" + label + ")",
              med(t_repeat), std::nullopt, "ms", "informational",
              std::nullopt);
  }
  bench_row("checkpoint: restore one agent file (" + label + ")",
            med(t_restore), med(t_first), "ms", "informational", std::nullopt);
  return 0;
}
