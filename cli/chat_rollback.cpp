// chat's /rollback (cli/rollback.hpp, docs/checkpoints.md).
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/rollback.hpp"
#include "config/options.hpp"
#include "runtime/runtime.hpp"
#include "storage/session_store.hpp"
#include "tools/file_checkpointer.hpp"

namespace mibyan::cli {

result<std::unique_ptr<file_checkpoint_store>>
open_checkpoints(const options& opts) {
  file_checkpoint_limits lim;
  lim.max_file_bytes = static_cast<uint64_t>(opts.checkpoints.max_file_mb) << 20;
  lim.max_files = static_cast<size_t>(opts.checkpoints.max_files);
  lim.keep = static_cast<size_t>(opts.checkpoints.keep);
  lim.max_age_ms = opts.checkpoints.max_age_days * 86'400'000;
  return file_checkpoint_store::open(
    file_checkpoint_store::default_dir(opts.home), lim);
}

void chat_rollback(runtime& rt, const options& opts,
                   const std::string& session_id, const std::string& arg) {
  int64_t number = 0;
  bool all = false;
  std::istringstream words{arg};
  for (std::string w; words >> w;) {
    if (w == "--all") {
      all = true;
    } else if (number == 0 && w.size() < 18
               && w.find_first_not_of("0123456789") == std::string::npos) {
      number = std::stoll(w);
    } else {
      std::cerr << "usage: /rollback [N] [--all]\n";
      return;
    }
  }
  auto store = open_checkpoints(opts);
  if (!store) {
    std::cerr << "rollback: " << store.error << "\n";
    return;
  }
  auto sessions = session_store_of(rt);
  std::vector<rollback_target> targets;
  if (number == 0) {
    auto t = last_turn_targets(**store, session_id);
    if (!t) {
      std::cerr << "rollback: " << t.error << "\n";
      return;
    }
    targets = std::move(*t);
  } else {
    // Checkpoint N of the session's project.
    std::error_code ec;
    std::string cwd = std::filesystem::current_path(ec).string();
    if (sessions)
      if (auto info = sessions->get_session(session_id);
          info && !info->cwd.empty())
        cwd = info->cwd;
    auto project = file_checkpoint_store::project_of(cwd, cwd);
    auto l = (*store)->list(project);
    if (!l) {
      std::cerr << "rollback: " << l.error << "\n";
      return;
    }
    for (auto& c : *l)
      if (c.number == number)
        targets.push_back(
          rollback_target{project, number, c.session_id, c.turn, c.tool});
    if (targets.empty()) {
      std::cerr << "rollback: no checkpoint " << number << " in " << project
                << " (mibyan checkpoints list)\n";
      return;
    }
  }
  restore_options ro;
  ro.all = all;
  ro.session_id = session_id;
  auto r = run_rollback(**store, targets, ro);
  if (!r) {
    std::cerr << "rollback: " << r.error << "\n";
    return;
  }
  std::cout << describe_rollback(*r) << std::flush;
  if (!sessions) {
    std::cerr << "rollback: the session store is unavailable: the turn is "
                 "not marked as undone\n";
    return;
  }
  if (auto m = store_rollback_marker(*sessions, session_id, r->marker); !m) {
    std::cerr << "rollback: the files were restored, but the session could "
                 "not be marked: "
              << m.error << "\n";
    return;
  }
  if (sessions->get_session(session_id)) {
    checkpointer_of(rt)->post_note(session_id, r->marker);
    std::cout << "the last turn is marked as undone; the next message tells "
                 "the model\n"
              << std::flush;
  }
}

} // namespace mibyan::cli
