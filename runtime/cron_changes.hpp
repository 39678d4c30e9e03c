// File: runtime/cron_changes.hpp
//
// Job changes across processes (docs/cron.md, "Running, approvals and
// delivery"): whoever changes jobs in a store (the `cronjob` tool, `mibyan
// cron add|edit|pause|resume|remove|run`, the dashboard) touches
// `<store dir>/cron.changed`, and a scheduler running in any process on
// that store learns of it through inotify at once, without polling.
//
// Thread safety: cron_signal_change may be called from any thread (it
// blocks briefly on file I/O: not on a CAF scheduler thread). A watcher
// owns one thread that sleeps in poll() until the file changes or the
// watcher is destroyed. CAF-free; never throws.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/status.hpp"

namespace mibyan {

/// Tells the schedulers of the store in `store_dir` that jobs changed
/// (creates or touches `cron.changed`).
status cron_signal_change(const std::string& store_dir);

class cron_change_watcher {
public:
  /// Watches `<store_dir>/cron.changed` (created when missing); `on_change`
  /// runs on the watcher's thread after each change (a burst of changes
  /// may come as one call). Must be quick and must not block.
  static result<std::unique_ptr<cron_change_watcher>>
  start(const std::string& store_dir, std::function<void()> on_change);

  /// Stops and joins the thread; `on_change` is not called afterwards.
  ~cron_change_watcher();
  cron_change_watcher(const cron_change_watcher&) = delete;
  cron_change_watcher& operator=(const cron_change_watcher&) = delete;

private:
  cron_change_watcher() = default;
  void run();

  std::string dir_;
  std::string file_;
  std::function<void()> on_change_;
  int inotify_ = -1;
  int wake_ = -1; // eventfd: stop
  int wd_ = -1;
  std::thread thread_;
};

} // namespace mibyan
