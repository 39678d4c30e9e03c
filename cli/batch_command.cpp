// `mibyan batch`: runs every prompt of a JSONL file through the agent with
// bounded concurrency and merges the trajectories (docs/batch.md).
//
// Threads: the main thread owns the run (launching turns, writing samples,
// progress, checkpoint); turns complete on runtime threads, whose callbacks
// only queue the outcome and wake the main thread (no file I/O there).
#include "cli/commands.hpp"
#include "cli/interrupt_watcher.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <set>

#include <unistd.h>

#include "agent/turn_result.hpp"
#include "base/json.hpp"
#include "base/log.hpp"
#include "base/private_file.hpp"
#include "runtime/runtime.hpp"
#include "storage/batch_run.hpp"
#include "storage/trajectory.hpp"
#include "tools/registry.hpp"

namespace mibyan::cli {

namespace {

using clock_type = std::chrono::steady_clock;

void usage() {
  std::cerr
    << "usage: mibyan batch PROMPTS.jsonl --run-name R [--workers N]\n"
       "                    [--resume] [--provider P] [--model M]\n"
       "                    [--base-url URL] [--api-key K] [--toolsets a,b]\n"
       "                    [--max-iterations N]\n"
       "  Runs each line's \"prompt\" as its own conversation, at most N\n"
       "  at a time (default 4), and merges the samples into\n"
       "  $MIBYAN_HOME/batch/R/trajectories.jsonl with stats.json.\n"
       "  --resume continues run R: finished prompts are skipped, the\n"
       "  rest (including those in flight when it stopped) run again.\n";
}

struct finished {
  batch::prompt_entry prompt;
  turn_result out;
  int64_t duration_ms = 0;
};

// The completion queue between runtime threads and the main thread.
struct inbox {
  std::mutex mtx;
  std::condition_variable cv;
  std::deque<finished> items;
};

std::string format_eta(double seconds) {
  if (!(seconds >= 0) || seconds > 360000)
    return "?";
  auto s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60,
                  s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

// Error kind of a turn that produced no sample.
std::string failure_kind(const turn_result& res) {
  auto reason = turn_exit_reason(res);
  auto cut = reason.find('(');
  if (cut != std::string::npos)
    reason.resize(cut);
  return reason.empty() ? std::string{"turn_failed"} : reason;
}

std::string checkpoint_json(const std::string& run_name,
                            const std::set<uint64_t>& done,
                            const std::set<uint64_t>& in_flight,
                            int64_t errors) {
  json::value c = json::value::make_object();
  c["run_name"] = run_name;
  json::value d = json::value::make_array();
  for (auto i : done)
    d.push_back(static_cast<int64_t>(i));
  c["completed_prompts"] = std::move(d);
  json::value f = json::value::make_array();
  for (auto i : in_flight)
    f.push_back(static_cast<int64_t>(i));
  c["in_flight"] = std::move(f);
  c["errors_this_run"] = errors;
  c["last_updated"] = static_cast<int64_t>(std::time(nullptr));
  return c.dump() + "\n";
}

} // namespace

int batch_command(const std::vector<std::string>& args,
                  const global_flags& flags) {
  turn_call base;
  base.source = "batch";
  std::string run_name;
  int64_t workers = 4;
  bool resume = false;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    std::string text;
    auto value = [&](std::string& out) {
      if (i + 1 >= args.size())
        return false;
      out = args[++i];
      return true;
    };
    if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (a == "--resume") {
      resume = true;
    } else if (a == "--run-name" || a == "--workers") {
      if (!value(text)) {
        std::cerr << "mibyan batch: " << a << " needs a value\n";
        return 2;
      }
      if (a == "--run-name") {
        run_name = text;
      } else {
        char* end = nullptr;
        workers = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || workers < 1 || workers > 256) {
          std::cerr << "mibyan batch: --workers must be an integer from 1 "
                       "to 256, got '"
                    << text << "'\n";
          return 2;
        }
      }
    } else if (a == "--session") {
      std::cerr << "mibyan batch: --session does not apply (every prompt "
                   "gets its own session)\n";
      return 2;
    } else if (is_agent_flag(a)) {
      if (!value(text)) {
        std::cerr << "mibyan batch: " << a << " needs a value\n";
        return 2;
      }
      if (auto err = apply_agent_flag(a, text, base); !err.empty()) {
        std::cerr << "mibyan batch: " << err << "\n";
        return 2;
      }
    } else if (a.size() > 1 && a[0] == '-') {
      std::cerr << "mibyan batch: unknown option " << a << "\n";
      usage();
      return 2;
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 1) {
    std::cerr << "mibyan batch: expected one PROMPTS.jsonl argument, got "
              << positional.size() << "\n";
    usage();
    return 2;
  }
  if (run_name.empty()) {
    std::cerr << "mibyan batch: --run-name is required\n";
    usage();
    return 2;
  }
  const auto& prompts_path = positional[0];

  auto loaded = batch::load_prompts(prompts_path);
  if (!loaded) {
    std::cerr << "mibyan batch: " << loaded.error << "\n";
    return 2;
  }
  auto& pf = *loaded;
  for (auto& b : pf.bad_lines)
    std::cerr << "mibyan batch: " << prompts_path << ": skipped " << b
              << "\n";
  if (pf.prompts.empty()) {
    std::cerr << "mibyan batch: " << prompts_path
              << " has no usable prompt lines\n";
    return 2;
  }

  options opts;
  if (!load_config_or_report(flags, opts))
    return 2;
  auto dir = batch::run_dir(opts.home, run_name);
  if (!dir) {
    std::cerr << "mibyan batch: " << dir.error << "\n";
    return 2;
  }
  batch::run_paths rp{*dir};
  // The run's identity: a resumed run must use the same prompts file.
  {
    std::string text;
    auto prev = json::value{};
    if (FILE* f = std::fopen(rp.run_file().c_str(), "rb")) {
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
        text.append(buf, n);
      std::fclose(f);
      auto parsed = json::parse(text);
      if (parsed && parsed.v->is_object())
        prev = std::move(*parsed.v);
    }
    if (prev.is_object()) {
      if (!resume) {
        std::cerr << "mibyan batch: run '" << run_name << "' already exists ("
                  << rp.dir << "); pass --resume to continue it or choose "
                               "another --run-name\n";
        return 2;
      }
      if (prev.get_string("prompts_hash", "") != pf.hash) {
        std::cerr << "mibyan batch: the prompts file differs from the one "
                     "run '"
                  << run_name
                  << "' started with; resume with the same file or choose "
                     "another --run-name\n";
        return 2;
      }
    }
    if (auto made = make_private_dirs(rp.samples_dir()); !made.ok()) {
      std::cerr << "mibyan batch: " << made.error << "\n";
      return 1;
    }
    if (!prev.is_object()) {
      json::value run = json::value::make_object();
      run["run_name"] = run_name;
      run["prompts_file"] = prompts_path;
      run["prompts_hash"] = pf.hash;
      run["total_prompts"] = static_cast<int64_t>(pf.prompts.size());
      run["started_at"] = static_cast<int64_t>(std::time(nullptr));
      if (auto w = batch::write_atomic(rp.run_file(), run.pretty() + "\n");
          !w.ok()) {
        std::cerr << "mibyan batch: " << w.error << "\n";
        return 1;
      }
    }
  }

  auto done = batch::completed_samples(rp);
  std::deque<batch::prompt_entry> todo;
  for (auto& p : pf.prompts)
    if (done.count(p.index) == 0)
      todo.push_back(p);
  const size_t total = pf.prompts.size();
  const size_t done_before = total - todo.size();
  if (resume && done_before > 0)
    std::cerr << "mibyan batch: resuming '" << run_name << "': "
              << done_before << " of " << total << " prompts already done\n";

  block_interrupt_signals();
  auto made = create_runtime(std::move(opts));
  if (!made) {
    std::cerr << "mibyan: cannot start the runtime: " << made.error << "\n";
    return 1;
  }
  std::unique_ptr<runtime> rt = std::move(*made);
  rt->set_approval_context(approval_context::cron);

  std::set<std::string> known_tools;
  std::vector<trajectory_tool> offered;
  for (auto t : tools_of(*rt).all()) {
    known_tools.insert(t->name());
    bool wanted = base.toolsets.empty();
    for (auto& ts : base.toolsets)
      wanted = wanted || ts == t->toolset();
    if (wanted)
      offered.push_back({t->name(), t->description(), t->schema()});
  }

  inbox box;
  std::atomic<bool> stopping{false};
  std::mutex flight_mtx; // guards in_flight for the interrupt thread
  std::map<uint64_t, std::string> in_flight; // index -> session id
  int64_t errors = 0, finished_now = 0;
  bool config_failure = false;
  auto started = clock_type::now();
  auto last_progress = clock_type::time_point{};
  auto last_checkpoint = clock_type::now();
  bool tty = ::isatty(2) == 1;

  auto launch = [&](batch::prompt_entry p) {
    turn_call call = base;
    call.prompt = p.prompt;
    call.session_id = new_session_id();
    call.stream = true;
    {
      std::lock_guard<std::mutex> g{flight_mtx};
      in_flight[p.index] = call.session_id;
    }
    auto t0 = clock_type::now();
    rt->run_turn_async(call, [&box, p = std::move(p), t0](turn_result o) {
      finished f;
      f.prompt = p;
      f.out = std::move(o);
      f.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        clock_type::now() - t0)
                        .count();
      std::lock_guard<std::mutex> g{box.mtx};
      box.items.push_back(std::move(f));
      box.cv.notify_one();
    });
  };

  auto progress = [&](bool final_line) {
    auto now = clock_type::now();
    if (!final_line && now - last_progress < std::chrono::seconds(tty ? 0 : 2)
        && last_progress != clock_type::time_point{})
      return;
    last_progress = now;
    double secs = std::chrono::duration<double>(now - started).count();
    double rate = secs > 0 ? static_cast<double>(finished_now) / secs : 0;
    size_t remaining = total - done.size();
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "batch %s: %zu/%zu done, %lld errors, %.2f/s, ETA %s",
                  run_name.c_str(), done.size(), total,
                  static_cast<long long>(errors), rate,
                  rate > 0 ? format_eta(static_cast<double>(remaining) / rate)
                                .c_str()
                           : "?");
    if (tty)
      std::cerr << "\r" << buf << "\033[K" << (final_line ? "\n" : "")
                << std::flush;
    else
      std::cerr << buf << "\n" << std::flush;
  };

  auto write_checkpoint = [&] {
    std::set<uint64_t> flying;
    {
      std::lock_guard<std::mutex> g{flight_mtx};
      for (auto& [i, s] : in_flight)
        flying.insert(i);
    }
    auto w = batch::write_atomic(rp.checkpoint_file(),
                                 checkpoint_json(run_name, done, flying,
                                                 errors));
    if (!w.ok())
      MIBYAN_LOG(warning, "batch", "checkpoint not written: " << w.error);
    last_checkpoint = clock_type::now();
  };

  {
    interrupt_watcher watcher{[&] {
      if (stopping.exchange(true))
        return;
      std::cerr << "\nmibyan batch: interrupted; finishing the samples in "
                   "flight is abandoned, the run can be resumed\n";
      std::lock_guard<std::mutex> g{flight_mtx};
      for (auto& [i, sid] : in_flight)
        rt->interrupt(sid, "the batch was interrupted");
    }};
    size_t running = 0;
    while (true) {
      while (!stopping && !config_failure && !todo.empty()
             && running < static_cast<size_t>(workers)) {
        auto p = std::move(todo.front());
        todo.pop_front();
        ++running;
        launch(std::move(p));
      }
      if (running == 0)
        break;
      std::deque<finished> got;
      {
        std::unique_lock<std::mutex> lk{box.mtx};
        box.cv.wait_for(lk, std::chrono::milliseconds(500),
                        [&] { return !box.items.empty(); });
        got.swap(box.items);
      }
      for (auto& f : got) {
        --running;
        std::string sid;
        {
          std::lock_guard<std::mutex> g{flight_mtx};
          sid = in_flight[f.prompt.index];
          in_flight.erase(f.prompt.index);
        }
        rt->close_session(sid);
        auto idx = f.prompt.index;
        if (!f.out.started) {
          ++errors;
          (void)batch::append_error(rp, idx,
                                    f.out.config_error ? "config" : "start",
                                    f.out.error);
          if (f.out.config_error && !config_failure) {
            config_failure = true;
            std::cerr << "mibyan batch: " << f.out.error << "\n";
          }
          continue;
        }
        const auto& res = f.out;
        if (res.failed || res.interrupted) {
          ++errors;
          (void)batch::append_error(rp, idx,
                              res.interrupted ? std::string{"interrupted"}
                                              : failure_kind(res),
                              res.error.empty() ? "the turn failed"
                                                : res.error);
          continue;
        }
        // The conversation's JSON form, rendered here at the edge.
        auto msgs = json::value::make_array();
        for (auto& m : res.messages)
          msgs.push_back(turn_message_json(m));
        auto traj = make_trajectory(msgs, offered, res.provider.model,
                                    res.completed, std::time(nullptr));
        auto sample = batch::make_sample(f.prompt, run_name, res,
                                         turn_exit_reason(res),
                                         std::move(traj["conversations"]),
                                         f.duration_ms);
        if (auto w = batch::write_sample(rp, idx, sample.dump()); !w.ok()) {
          ++errors;
          std::cerr << "mibyan batch: sample " << idx << " not saved: "
                    << w.error << "\n";
          continue;
        }
        done.insert(idx);
        ++finished_now;
      }
      if (clock_type::now() - last_checkpoint > std::chrono::seconds(1))
        write_checkpoint();
      progress(false);
    }
    write_checkpoint();
    progress(true);
  }
  rt.reset();

  double wall = std::chrono::duration<double>(clock_type::now() - started)
                  .count();
  auto merged = batch::merge_run(rp, run_name, known_tools,
                                 static_cast<int64_t>(total),
                                 static_cast<int64_t>(pf.bad_lines.size()),
                                 wall);
  if (!merged) {
    std::cerr << "mibyan batch: merge failed: " << merged.error << "\n";
    return 1;
  }
  std::cerr << batch::summary_table(merged->stats);
  std::cerr << "trajectories: " << rp.trajectories_file() << "\n";
  if (config_failure)
    return 2;
  if (stopping)
    return 130;
  return done.size() == total ? 0 : 1;
}

} // namespace mibyan::cli
