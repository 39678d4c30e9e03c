// `mibyan cron run` (no job id): the scheduler of $MIBYAN_HOME's jobs in the
// foreground, until SIGINT or SIGTERM (docs/cron.md, "Running, approvals
// and delivery"). `mibyan cron run ID` (run one job now) is cron_command's.
#include "cli/commands.hpp"

#include <csignal>
#include <iostream>

#include <pthread.h>

#include "base/log.hpp"
#include "runtime/cron_scheduler.hpp"
#include "runtime/runtime.hpp"

namespace mibyan::cli {

namespace {

void cron_run_usage() {
  std::cerr << "usage: mibyan cron run [--provider P] [--model M] "
               "[--base-url URL]\n"
               "  Runs the scheduler of $MIBYAN_HOME's jobs in the foreground "
               "until SIGINT or\n"
               "  SIGTERM. When another process (mibyan serve, a gateway "
               "node) runs it, this\n"
               "  one waits as a standby and takes over when that one stops.\n"
               "  The provider flags apply to jobs that name no provider or "
               "model.\n";
}

} // namespace

int cron_run_command(const std::vector<std::string>& args,
                     const global_flags& flags) {
  cron_scheduler_options so;
  turn_call tmpl;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "-h" || a == "--help") {
      cron_run_usage();
      return 0;
    }
    bool ok = a == "--provider" || a == "--model" || a == "--base-url"
              || a == "--api-key";
    if (!ok) {
      std::cerr << "mibyan cron run: unknown option " << a << "\n";
      cron_run_usage();
      return 2;
    }
    if (i + 1 >= args.size()) {
      std::cerr << "mibyan cron run: " << a << " needs a value\n";
      return 2;
    }
    if (auto err = apply_agent_flag(a, args[++i], tmpl); !err.empty()) {
      std::cerr << "mibyan cron run: " << err << "\n";
      return 2;
    }
  }
  so.provider = tmpl.provider;
  so.holder = "mibyan cron run";
  options opts;
  if (!load_config_or_report(flags, opts))
    return 2;
  // Only the main thread takes these signals; the runtime's threads
  // inherit the mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  std::string error;
  auto made = create_runtime(std::move(opts));
  if (!made) {
    std::cerr << "mibyan: cannot start the runtime: " << made.error << "\n";
    return 1;
  }
  std::unique_ptr<runtime> rt = std::move(*made);
  if (auto st = start_cron_scheduler(*rt, so); !st) {
    std::cerr << "mibyan cron run: " << st.error << "\n";
    return 1;
  }
  auto stats = cron_stats(*rt);
  if (stats.active) {
    std::cout << "mibyan cron run: scheduler running (" << stats.jobs
              << (stats.jobs == 1 ? " job" : " jobs") << ")" << std::endl;
  } else {
    auto who = cron_of(*rt)->scheduler().holder;
    std::cout << "mibyan cron run: standby (the scheduler runs in "
              << (who.empty() ? std::string{"another process"} : who) << ")"
              << std::endl;
  }
  int sig = 0;
  for (;;)
    if (sigwait(&set, &sig) == 0 && (sig == SIGINT || sig == SIGTERM))
      break;
  MIBYAN_LOG(info, "cron", "signal " << sig << ": stopping the scheduler");
  stop_cron_scheduler(*rt);
  rt.reset();
  return 0;
}

} // namespace mibyan::cli
