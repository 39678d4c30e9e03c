// Soak run (docs/testing.md, "Soak and leaks"): many concurrent
// conversations with tool rounds and execute_code against a misbehaving
// scripted provider (bench/soak_provider.py: 429s, 500s, malformed bodies,
// broken tool calls), with random interrupts and random kernel kills, for
// a fixed time. Reports turns completed, outcomes by kind, RSS at start,
// middle and end, what is left after shutdown (fds, child processes,
// zombies, threads) and the LMDB size against the data stored.
//
//   mibyan_soak [--seconds S | --minutes M] [--conversations N] [--seed K]
//               [--quick] [--no-interrupts] [--no-kills]
// Defaults: 10 minutes, 200 conversations. --quick: 30 s, 50
// conversations. --no-interrupts / --no-kills leave out one kind of
// disturbance, to tell which path a growth comes from. With
// MIBYAN_SOAK_EXIT_AT_END_OF_LOAD=1 the process _Exits at the end of the
// load, so a heap profiler (heaptrack) lists what is live then. Exit 1 when a child process or zombie is left, a turn
// hangs past the end, no turn completed, or an fd is left open after the
// runtime is destroyed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <malloc.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/turn_result.hpp"
#include "base/json.hpp"
#include "runtime/runtime.hpp"

#ifndef MIBYAN_BENCH_DIR
#define MIBYAN_BENCH_DIR "bench"
#endif

extern char** environ;

using namespace mibyan;
using clock_type = std::chrono::steady_clock;

namespace {

long count_dir(const std::string& path) {
  long n = 0;
  if (DIR* d = ::opendir(path.c_str())) {
    while (auto* e = ::readdir(d))
      if (e->d_name[0] != '.')
        ++n;
    ::closedir(d);
  }
  return n;
}

// VmRSS, or with `anon` RssAnon: the heap without LMDB's mapped file
// (file pages touched through the map count in VmRSS).
long rss_mib(bool anon = false) {
  FILE* f = std::fopen("/proc/self/status", "r");
  char line[256];
  long kib = 0;
  const char* key = anon ? "RssAnon:" : "VmRSS:";
  size_t klen = std::strlen(key);
  while (f && std::fgets(line, sizeof line, f))
    if (std::strncmp(line, key, klen) == 0)
      kib = std::atol(line + klen);
  if (f)
    std::fclose(f);
  return kib / 1024;
}

// Bytes the program holds from malloc (all arenas, mmapped blocks too), in
// MiB with one decimal: what RSS would be without the allocator's retained
// free memory. Growing RSS with a flat figure here is fragmentation or
// retention, not a leak.
double heap_in_use_mib() {
  auto mi = ::mallinfo2();
  return static_cast<double>(mi.uordblks + mi.hblkhd) / (1 << 20);
}

// Child pids of this process (all threads), with their state letter.
std::map<pid_t, char> children() {
  std::map<pid_t, char> out;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (auto* e = ::readdir(d)) {
      if (e->d_name[0] == '.')
        continue;
      std::string p = std::string{"/proc/self/task/"} + e->d_name
                      + "/children";
      if (FILE* f = std::fopen(p.c_str(), "r")) {
        int pid;
        while (std::fscanf(f, "%d", &pid) == 1)
          out[pid] = '?';
        std::fclose(f);
      }
    }
    ::closedir(d);
  }
  for (auto& [pid, state] : out) {
    std::string p = "/proc/" + std::to_string(pid) + "/stat";
    if (FILE* f = std::fopen(p.c_str(), "r")) {
      char buf[512] = {0};
      size_t n = std::fread(buf, 1, sizeof buf - 1, f);
      std::fclose(f);
      std::string s{buf, n};
      auto close = s.rfind(')');
      if (close != std::string::npos && close + 2 < s.size())
        state = s[close + 2];
    }
  }
  return out;
}

std::string cmdline(pid_t pid) {
  std::string p = "/proc/" + std::to_string(pid) + "/cmdline";
  std::string out;
  if (FILE* f = std::fopen(p.c_str(), "r")) {
    char buf[512];
    size_t n = std::fread(buf, 1, sizeof buf, f);
    out.assign(buf, n);
    std::fclose(f);
  }
  return out;
}

uint64_t tree_bytes = 0;
int add_size(const char*, const struct stat* st, int type, struct FTW*) {
  if (type == FTW_F)
    tree_bytes += static_cast<uint64_t>(st->st_size);
  return 0;
}

// Size of the LMDB files (data.mdb) under `dir`.
uint64_t lmdb_bytes(const std::string& dir) {
  tree_bytes = 0;
  ::nftw(dir.c_str(),
         [](const char* path, const struct stat* st, int type, struct FTW* f) {
           if (type == FTW_F && std::strstr(path, "data.mdb"))
             return add_size(path, st, type, f);
           return 0;
         },
         16, FTW_PHYS);
  return tree_bytes;
}

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  return ::remove(path);
}

struct conversation {
  int id = 0;
  int generation = 0;
  int turn = 0;
  std::string session;
  uint64_t last_messages_bytes = 0;
};

struct soak_state {
  std::mutex mtx;
  std::condition_variable cv;
  std::map<std::string, long> outcomes;
  std::set<std::string> active;   // sessions with a turn running
  long turns = 0, completed = 0, in_flight = 0;
  uint64_t stored_bytes = 0;      // messages of finished sessions
  std::atomic<bool> stopping{false};
};

std::string classify(const turn_result& o, bool& completed,
                     uint64_t& messages_bytes) {
  completed = false;
  if (!o.started)
    return "start_error";
  // The size of the conversation as the JSON result would carry it.
  auto msgs = json::value::make_array();
  for (auto& m : o.messages)
    msgs.push_back(turn_message_json(m));
  messages_bytes = msgs.dump().size();
  if (o.interrupted)
    return "interrupted";
  auto reason = turn_exit_reason(o);
  auto cut = reason.find('(');
  if (cut != std::string::npos)
    reason.resize(cut);
  if (o.failed)
    return "failed:" + (reason.empty() ? std::string{"?"} : reason);
  completed = o.completed;
  return completed ? "completed" : "partial:" + reason;
}

} // namespace

int main(int argc, char** argv) {
  double seconds = 600;
  int conversations = 200;
  unsigned seed = 1;
  bool interrupts_on = true, kills_on = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      return i + 1 < argc ? argv[++i] : "";
    };
    if (a == "--seconds")
      seconds = std::atof(next().c_str());
    else if (a == "--minutes")
      seconds = 60 * std::atof(next().c_str());
    else if (a == "--conversations")
      conversations = std::atoi(next().c_str());
    else if (a == "--seed")
      seed = static_cast<unsigned>(std::atoi(next().c_str()));
    else if (a == "--quick") {
      seconds = 30;
      conversations = 50;
    } else if (a == "--no-interrupts") {
      interrupts_on = false;
    } else if (a == "--no-kills") {
      kills_on = false;
    } else {
      std::fprintf(stderr,
                   "usage: mibyan_soak [--seconds S | --minutes M] "
                   "[--conversations N] [--seed K] [--quick] "
                   "[--no-interrupts] [--no-kills]\n");
      return 2;
    }
  }
  if (seconds <= 0 || conversations < 1) {
    std::fprintf(stderr, "mibyan_soak: bad --seconds or --conversations\n");
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);

  // The provider, a child process that prints its port.
  int pfd[2];
  if (::pipe(pfd) != 0)
    return 1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
  posix_spawn_file_actions_addclose(&fa, pfd[0]);
  std::string script = std::string{MIBYAN_BENCH_DIR} + "/soak_provider.py";
  std::string seed_text = std::to_string(seed);
  const char* pargv[] = {"python3", script.c_str(), seed_text.c_str(),
                         nullptr};
  pid_t provider = -1;
  if (posix_spawnp(&provider, "python3", &fa, nullptr,
                   const_cast<char**>(pargv), environ)
      != 0) {
    std::fprintf(stderr, "mibyan_soak: cannot start %s\n", script.c_str());
    return 1;
  }
  posix_spawn_file_actions_destroy(&fa);
  ::close(pfd[1]);
  char portbuf[16] = {0};
  for (size_t got = 0; got < sizeof portbuf - 1;) {
    auto n = ::read(pfd[0], portbuf + got, 1);
    if (n <= 0 || portbuf[got] == '\n')
      break;
    got += static_cast<size_t>(n);
  }
  ::close(pfd[0]);
  int port = std::atoi(portbuf);
  if (port <= 0) {
    std::fprintf(stderr, "mibyan_soak: the provider did not start\n");
    ::kill(provider, SIGKILL);
    return 1;
  }
  std::string base_url = "http://127.0.0.1:" + std::to_string(port) + "/v1";

  char tmpl[] = "/tmp/mibyan-soak-XXXXXX";
  std::string home = ::mkdtemp(tmpl);
  std::string work = home + "/work";
  ::mkdir(work.c_str(), 0700);

  long fds0 = count_dir("/proc/self/fd");
  long threads0 = count_dir("/proc/self/task");
  std::printf("soak: %d conversations for %.0f s, provider on port %d, "
              "home %s\n",
              conversations, seconds, port, home.c_str());

  options opts;
  opts.home = home;
  opts.approvals.unattended_mode = "approve";
  opts.code_execution.max_session_kernels = 64;
  std::string err;
  auto made = create_runtime(opts);
  if (!made) {
    std::fprintf(stderr, "mibyan_soak: runtime: %s\n", made.error.c_str());
    ::kill(provider, SIGKILL);
    return 1;
  }
  std::unique_ptr<runtime> rt = std::move(*made);

  soak_state st;
  std::vector<conversation> convs(static_cast<size_t>(conversations));
  std::function<void(conversation&)> start_turn;
  start_turn = [&](conversation& c) {
    if (c.turn >= 3) {
      rt->close_session(c.session);
      {
        std::lock_guard<std::mutex> g{st.mtx};
        st.stored_bytes += c.last_messages_bytes;
      }
      c.turn = 0;
      ++c.generation;
    }
    if (c.turn == 0)
      c.session = "soak-" + std::to_string(c.id) + "-"
                  + std::to_string(c.generation);
    turn_call call;
    call.session_id = c.session;
    call.prompt = "Soak turn " + std::to_string(c.turn)
                  + ": look around with the tools, then answer.";
    call.provider.provider = "custom";
    call.provider.base_url = base_url;
    call.provider.model = "m";
    call.max_iterations = 8;
    call.source = "soak";
    ++c.turn;
    {
      std::lock_guard<std::mutex> g{st.mtx};
      st.active.insert(c.session);
      ++st.in_flight;
    }
    rt->run_turn_async(call, [&st, &c, &start_turn](turn_result o) {
      bool completed = false;
      uint64_t bytes = 0;
      auto kind = classify(o, completed, bytes);
      if (bytes > 0)
        c.last_messages_bytes = bytes;
      bool again;
      {
        std::lock_guard<std::mutex> g{st.mtx};
        ++st.outcomes[kind];
        ++st.turns;
        st.completed += completed ? 1 : 0;
        st.active.erase(c.session);
        again = !st.stopping;
        if (!again)
          st.stored_bytes += c.last_messages_bytes;
      }
      if (again)
        start_turn(c); // never blocks: run_turn_async only sends
      std::lock_guard<std::mutex> g{st.mtx};
      --st.in_flight;
      st.cv.notify_all();
    });
  };

  auto t0 = clock_type::now();
  for (int i = 0; i < conversations; ++i) {
    convs[static_cast<size_t>(i)].id = i;
    start_turn(convs[static_cast<size_t>(i)]);
  }
  long rss_start = 0, rss_mid = 0, anon_start = 0, anon_mid = 0;
  double heap_start = 0, heap_mid = 0;
  long turns_mid = 0;
  // Heap in use, sampled every loop round: its instant value follows the
  // turns in flight, so the trend is judged on the medians of the second
  // and the last quarter of the run.
  std::vector<std::pair<double, double>> heap_samples; // (elapsed, MiB)
  std::mt19937 rng{seed};
  long interrupts = 0, kernel_kills = 0;
  auto deadline = t0 + std::chrono::duration_cast<clock_type::duration>(
                         std::chrono::duration<double>(seconds));
  auto next_report = t0 + std::chrono::seconds(10);
  bool mid_taken = false;
  while (clock_type::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto now = clock_type::now();
    double elapsed = std::chrono::duration<double>(now - t0).count();
    heap_samples.emplace_back(elapsed, heap_in_use_mib());
    if (rss_start == 0 && elapsed >= std::min(10.0, seconds / 4)) {
      rss_start = rss_mib();
      anon_start = rss_mib(true);
      heap_start = heap_in_use_mib();
    }
    if (!mid_taken && elapsed >= seconds / 2) {
      rss_mid = rss_mib();
      anon_mid = rss_mib(true);
      heap_mid = heap_in_use_mib();
      {
        std::lock_guard<std::mutex> g{st.mtx};
        turns_mid = st.turns;
      }
      mid_taken = true;
    }
    // Interrupt a random running turn about twice a second.
    if (rng() % 2 == 0 && interrupts_on) {
      std::string victim;
      {
        std::lock_guard<std::mutex> g{st.mtx};
        if (!st.active.empty()) {
          auto it = st.active.begin();
          std::advance(it, static_cast<long>(rng() % st.active.size()));
          victim = *it;
        }
      }
      if (!victim.empty()) {
        rt->interrupt(victim, "soak: random interrupt");
        ++interrupts;
      }
    }
    // Kill a random kernel (python runner or its sandbox) about once a
    // second.
    if (rng() % 5 == 0 && kills_on) {
      std::vector<pid_t> kernels;
      for (auto& [pid, state] : children())
        if (pid != provider && state != 'Z'
            && (cmdline(pid).find("mibyan_kernel") != std::string::npos
                || cmdline(pid).find("bwrap") != std::string::npos))
          kernels.push_back(pid);
      if (!kernels.empty()) {
        ::kill(kernels[rng() % kernels.size()], SIGKILL);
        ++kernel_kills;
      }
    }
    if (now >= next_report) {
      next_report += std::chrono::seconds(10);
      // Asked before taking st.mtx: the turn callbacks take it on the
      // runtime's threads, which the registry needs to answer.
      auto kernels = rt->kernel_stats();
      std::lock_guard<std::mutex> g{st.mtx};
      std::printf("soak: %4.0f s  turns %ld  completed %ld  in flight %ld  "
                  "RSS %ld MiB (anon %ld, heap in use %.1f)  kernels %s\n",
                  elapsed, st.turns, st.completed, st.in_flight, rss_mib(),
                  rss_mib(true), heap_in_use_mib(),
                  kernels.c_str());
      std::fflush(stdout);
    }
  }
  long rss_end_running = rss_mib();
  long anon_end_running = rss_mib(true);
  double heap_end_running = heap_in_use_mib();
  long turns_end_running = 0;
  {
    std::lock_guard<std::mutex> g{st.mtx};
    turns_end_running = st.turns;
  }
  // For heap profiling: everything still allocated here is live at the
  // end of the load (heaptrack then lists it as "leaked").
  if (const char* e = std::getenv("MIBYAN_SOAK_EXIT_AT_END_OF_LOAD");
      e && std::string{e} == "1") {
    std::fflush(stdout);
    std::_Exit(3);
  }
  // What the allocator keeps but the program does not use: RssAnon after
  // free pages are given back.
  ::malloc_trim(0);
  long anon_end_trimmed = rss_mib(true);
  st.stopping = true;
  // Let the running turns finish (bounded; interrupts speed them up).
  bool drained;
  {
    std::unique_lock<std::mutex> lk{st.mtx};
    for (auto& s : st.active)
      rt->interrupt(s, "soak: the run is over");
    drained = st.cv.wait_for(lk, std::chrono::seconds(120),
                             [&] { return st.in_flight == 0; });
  }
  for (auto& c : convs)
    rt->close_session(c.session);
  double wall = std::chrono::duration<double>(clock_type::now() - t0).count();
  auto kstats = rt->kernel_stats();
  rt.reset();
  long rss_end = rss_mib();
  long anon_end = rss_mib(true);

  // What is left once the runtime is gone (kernels die asynchronously:
  // wait up to 15 s for them).
  std::map<pid_t, char> left;
  for (int i = 0; i < 150; ++i) {
    left = children();
    left.erase(provider);
    if (left.empty())
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  long zombies = 0;
  for (auto& [pid, state] : left)
    zombies += state == 'Z' ? 1 : 0;
  long fds_end = count_dir("/proc/self/fd");
  long threads_end = count_dir("/proc/self/task");
  uint64_t db = lmdb_bytes(home);
  // The first runtime of a process installs the process-wide SIGTERM
  // watcher (base/host_hardening.cpp: a pipe pair and a thread) for the
  // life of the process; it is not counted as left over.
  constexpr long watcher_fds = 2;
  long fds_left = std::max(0L, fds_end - fds0 - watcher_fds);

  std::string provider_stats;
  ::kill(provider, SIGKILL);
  ::waitpid(provider, nullptr, 0);

  std::printf("\nsoak report (%.0f s, %d conversations, seed %u)\n", wall,
              conversations, seed);
  std::printf("  turns finished          %ld (%.1f/s), completed %ld\n",
              st.turns, static_cast<double>(st.turns) / wall, st.completed);
  std::printf("  outcomes by kind\n");
  for (auto& [k, n] : st.outcomes)
    std::printf("    %-34s %ld\n", k.c_str(), n);
  std::printf("  chaos                   %ld interrupts, %ld kernel kills\n",
              interrupts, kernel_kills);
  std::printf("  kernels                 %s\n", kstats.c_str());
  std::printf("  RSS MiB                 start %ld, middle %ld, end of load "
              "%ld, after shutdown %ld\n",
              rss_start, rss_mid, rss_end_running, rss_end);
  std::printf("  RssAnon MiB             start %ld, middle %ld, end of load "
              "%ld, after shutdown %ld\n",
              anon_start, anon_mid, anon_end_running, anon_end);
  std::printf("  heap in use MiB         start %.1f, middle %.1f, end of load "
              "%.1f (%ld turns after the middle); RssAnon after malloc_trim "
              "at the end of load %ld\n",
              heap_start, heap_mid, heap_end_running,
              turns_end_running - turns_mid, anon_end_trimmed);
  std::printf("  fds                     before %ld, after %ld (2 of them the "
              "process-wide SIGTERM watcher's pipe)\n",
              fds0, fds_end);
  std::printf("  threads                 before %ld, after %ld\n", threads0,
              threads_end);
  std::printf("  children left           %zu (zombies %ld)\n", left.size(),
              zombies);
  if (fds_left > 0 || threads_end > threads0 + 1) {
    std::string what;
    if (DIR* d = ::opendir("/proc/self/fd")) {
      while (auto* e = ::readdir(d)) {
        char target[256] = {0};
        std::string p = std::string{"/proc/self/fd/"} + e->d_name;
        if (e->d_name[0] != '.'
            && ::readlink(p.c_str(), target, sizeof target - 1) > 0) {
          what += std::string{" "} + e->d_name + "=" + target;
          // For a socket, the kernel's table line says what it is.
          std::string t = target;
          if (t.rfind("socket:[", 0) == 0) {
            auto inode = t.substr(8, t.size() - 9);
            for (auto table : {"tcp", "tcp6", "unix"}) {
              std::string tp = std::string{"/proc/self/net/"} + table;
              if (FILE* f = std::fopen(tp.c_str(), "r")) {
                char line[512];
                while (std::fgets(line, sizeof line, f))
                  if (std::strstr(line, (" " + inode + " ").c_str())
                      || std::strstr(line, (" " + inode + "\n").c_str()))
                    what += std::string{" ["} + table + ": " + line + "]";
                std::fclose(f);
              }
            }
          }
        }
      }
      ::closedir(d);
    }
    if (DIR* d = ::opendir("/proc/self/task")) {
      while (auto* e = ::readdir(d)) {
        if (e->d_name[0] == '.')
          continue;
        std::string p = std::string{"/proc/self/task/"} + e->d_name + "/comm";
        if (FILE* f = std::fopen(p.c_str(), "r")) {
          char comm[64] = {0};
          if (std::fgets(comm, sizeof comm, f))
            what += std::string{" thread:"} + comm;
          std::fclose(f);
        }
      }
      ::closedir(d);
    }
    std::printf("  open after shutdown    %s\n", what.c_str());
  }
  std::printf("  LMDB                    %.1f MiB for %.1f MiB of messages "
              "(%.2fx)\n",
              static_cast<double>(db) / (1 << 20),
              static_cast<double>(st.stored_bytes) / (1 << 20),
              st.stored_bytes ? static_cast<double>(db)
                                  / static_cast<double>(st.stored_bytes)
                              : 0.0);
  bool ok = drained && left.empty() && zombies == 0 && st.completed > 0
            && fds_left == 0;
  std::printf("BENCH_ROW {\"metric\":\"soak anonymous RSS growth "
              "middle->end of load\",\"ours\":%ld,\"baseline\":%ld,"
              "\"ratio\":%.3f,\"unit\":\"MiB\",\"goal\":\"flat (< 1.25x)\","
              "\"met\":%s}\n",
              anon_end_running, anon_mid,
              anon_mid ? static_cast<double>(anon_end_running) / anon_mid
                       : 0.0,
              anon_mid && anon_end_running * 4 < anon_mid * 5 ? "true"
                                                              : "false");
  // A leak grows with the turns run: the last quarter's median heap in use
  // against the second quarter's, within 5% plus 1 MiB.
  auto quarter_median = [&](double from, double to) {
    std::vector<double> xs;
    for (auto& [t, mib] : heap_samples)
      if (t >= from * seconds && t < to * seconds)
        xs.push_back(mib);
    if (xs.empty())
      return 0.0;
    std::nth_element(xs.begin(), xs.begin() + static_cast<long>(xs.size() / 2),
                     xs.end());
    return xs[xs.size() / 2];
  };
  double heap_q2 = quarter_median(0.25, 0.5);
  double heap_q4 = quarter_median(0.75, 1.01);
  std::printf("  heap in use, medians    second quarter %.1f MiB, last quarter "
              "%.1f MiB (%zu samples)\n",
              heap_q2, heap_q4, heap_samples.size());
  bool heap_flat = heap_q2 > 0 && heap_q4 <= heap_q2 * 1.05 + 1.0;
  std::printf("BENCH_ROW {\"metric\":\"soak heap in use (malloc), median of "
              "the last quarter vs the second\",\"ours\":%.1f,"
              "\"baseline\":%.1f,\"ratio\":%.3f,\"unit\":\"MiB\","
              "\"goal\":\"flat (<= 1.05x + 1 MiB)\",\"met\":%s}\n",
              heap_q4, heap_q2, heap_q2 > 0 ? heap_q4 / heap_q2 : 0.0,
              heap_flat ? "true" : "false");
  std::printf("BENCH_ROW {\"metric\":\"soak leftovers (children + fds over "
              "baseline)\",\"ours\":%ld,\"baseline\":0,\"ratio\":null,"
              "\"unit\":\"count\",\"goal\":\"0\",\"met\":%s}\n",
              static_cast<long>(left.size()) + fds_left,
              left.empty() && fds_left == 0 ? "true" : "false");
  std::printf("soak: %s\n", ok ? "PASS" : "FAIL");
  ::nftw(home.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  (void)provider_stats;
  (void)threads0;
  return ok ? 0 : 1;
}
