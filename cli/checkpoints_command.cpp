// `mibyan checkpoints list|diff N|restore N|prune` (docs/checkpoints.md).
// The project is --project DIR, else the git root above the current
// directory, else the current directory.
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <iostream>

#include "base/json.hpp"
#include "cli/commands.hpp"
#include "cli/rollback.hpp"
#include "config/options.hpp"
#include "storage/file_checkpoint_store.hpp"
#include "storage/session_store.hpp"

namespace mibyan::cli {

namespace {

void usage() {
  std::cerr
    << "usage: mibyan checkpoints list [--project DIR] [--all-projects] "
       "[--json]\n"
       "       mibyan checkpoints diff N [--file PATH] [--project DIR]\n"
       "       mibyan checkpoints restore N [--file PATH] [--all] "
       "[--project DIR]\n"
       "       mibyan checkpoints restore --session ID [--all]\n"
       "       mibyan checkpoints prune\n"
       "  restore N puts back the files the agent wrote after checkpoint N\n"
       "  and keeps the user's own later edits of other files (--all\n"
       "  restores every file of the checkpoint); --session ID undoes that\n"
       "  session's last turn. A restore marks the session's last turn as\n"
       "  undone (docs/checkpoints.md).\n";
}

std::string when(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

json::value checkpoint_json(const file_checkpoint& c) {
  json::value o;
  o["number"] = c.number;
  o["project"] = c.project;
  o["time_ms"] = c.time_ms;
  o["session_id"] = c.session_id;
  o["turn"] = c.turn;
  o["tool"] = c.tool;
  o["reason"] = c.reason;
  o["files"] = c.files;
  json::value a = json::value::make_array();
  for (auto& f : c.agent_files)
    a.push_back(f);
  o["agent_files"] = std::move(a);
  json::value s = json::value::make_array();
  for (auto& f : c.skipped)
    s.push_back(f);
  o["skipped"] = std::move(s);
  o["rolled_back"] = c.rolled_back;
  o["commit"] = c.commit;
  return o;
}

int exit_for(status_code code) {
  return code == status_code::not_found || code == status_code::invalid_argument
           ? 2
           : 1;
}

} // namespace

int checkpoints_command(const std::vector<std::string>& args,
                        const global_flags& flags) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    usage();
    return args.empty() ? 2 : 0;
  }
  auto verb = args[0];
  std::string project_arg, file, session;
  bool all = false, json_out = false, all_projects = false;
  int64_t number = 0;
  for (size_t i = 1; i < args.size(); ++i) {
    auto& a = args[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= args.size()) {
        std::cerr << "mibyan checkpoints: " << a << " needs a value\n";
        return false;
      }
      out = args[++i];
      return true;
    };
    if (a == "--project") {
      if (!value(project_arg))
        return 2;
    } else if (a == "--file") {
      if (!value(file))
        return 2;
    } else if (a == "--session") {
      if (!value(session))
        return 2;
    } else if (a == "--all") {
      all = true;
    } else if (a == "--json") {
      json_out = true;
    } else if (a == "--all-projects") {
      all_projects = true;
    } else if (number == 0 && !a.empty() && a[0] != '-'
               && a.find_first_not_of("0123456789") == std::string::npos
               && a.size() < 18) {
      number = std::stoll(a);
    } else {
      std::cerr << "mibyan checkpoints: unexpected argument " << a << "\n";
      usage();
      return 2;
    }
  }
  options opts;
  if (!load_config_or_report(flags, opts))
    return 2;
  file_checkpoint_limits lim;
  lim.max_file_bytes = static_cast<uint64_t>(opts.checkpoints.max_file_mb) << 20;
  lim.max_files = static_cast<size_t>(opts.checkpoints.max_files);
  lim.keep = static_cast<size_t>(opts.checkpoints.keep);
  lim.max_age_ms = opts.checkpoints.max_age_days * 86'400'000;
  auto store = file_checkpoint_store::open(
    file_checkpoint_store::default_dir(opts.home), lim);
  if (!store) {
    std::cerr << "mibyan checkpoints: " << store.error << "\n";
    return 1;
  }
  std::error_code ec;
  auto cwd = std::filesystem::current_path(ec).string();
  std::string project;
  if (!project_arg.empty()) {
    auto abs = std::filesystem::absolute(project_arg, ec);
    auto canon = std::filesystem::weakly_canonical(abs, ec);
    project = ec ? abs.lexically_normal().string() : canon.string();
    if (project.size() > 1 && project.back() == '/')
      project.pop_back();
  } else {
    project = file_checkpoint_store::project_of(cwd, cwd);
  }
  auto& st = **store;
  if (verb == "list") {
    auto l = all_projects ? st.list_all() : st.list(project);
    if (!l) {
      std::cerr << "mibyan checkpoints: " << l.error << "\n";
      return 1;
    }
    if (json_out) {
      json::value a = json::value::make_array();
      for (auto& c : *l)
        a.push_back(checkpoint_json(c));
      std::cout << a.pretty() << "\n";
      return 0;
    }
    if (l->empty()) {
      std::cout << "no checkpoints for " << project << "\n";
      return 0;
    }
    std::string last_project;
    for (auto& c : *l) {
      if (c.project != last_project) {
        std::cout << c.project << "\n";
        last_project = c.project;
      }
      std::cout << "  " << c.number << "  " << when(c.time_ms) << "  "
                << (c.session_id.empty() ? "-" : c.session_id) << "  turn "
                << c.turn << "  " << c.tool
                << (c.reason.empty() ? "" : " (" + c.reason + ")") << "  "
                << c.files << " files";
      if (!c.agent_files.empty()) {
        std::cout << "  agent wrote:";
        for (auto& f : c.agent_files)
          std::cout << " " << f;
      }
      if (!c.skipped.empty())
        std::cout << "  left out: " << c.skipped.size();
      if (c.rolled_back)
        std::cout << "  [rolled back]";
      std::cout << "\n";
    }
    return 0;
  }
  if (verb == "diff") {
    if (number <= 0) {
      std::cerr << "mibyan checkpoints diff: give a checkpoint number\n";
      return 2;
    }
    auto d = st.diff(project, number, file);
    if (!d) {
      std::cerr << "mibyan checkpoints: " << d.error << "\n";
      return exit_for(d.code);
    }
    std::cout << *d;
    return 0;
  }
  if (verb == "restore") {
    std::vector<rollback_target> targets;
    if (!session.empty()) {
      auto t = last_turn_targets(st, session);
      if (!t) {
        std::cerr << "mibyan checkpoints: " << t.error << "\n";
        return exit_for(t.code);
      }
      targets = std::move(*t);
    } else {
      if (number <= 0) {
        std::cerr << "mibyan checkpoints restore: give a checkpoint number "
                     "or --session ID\n";
        return 2;
      }
      auto l = st.list(project);
      if (!l) {
        std::cerr << "mibyan checkpoints: " << l.error << "\n";
        return 1;
      }
      for (auto& c : *l)
        if (c.number == number)
          targets.push_back(rollback_target{project, number, c.session_id,
                                            c.turn, c.tool});
      if (targets.empty()) {
        std::cerr << "mibyan checkpoints: no checkpoint " << number << " in "
                  << project << " (mibyan checkpoints list)\n";
        return 2;
      }
    }
    restore_options ro;
    ro.all = all;
    ro.file = file;
    ro.session_id = targets.front().session_id;
    auto r = run_rollback(st, targets, ro);
    if (!r) {
      std::cerr << "mibyan checkpoints: " << r.error << "\n";
      return exit_for(r.code);
    }
    std::cout << describe_rollback(*r);
    // The session's last turn is marked as undone.
    auto sid = targets.front().session_id;
    if (!sid.empty()) {
      session_store_options so;
      so.dir = session_store::default_dir(opts.home);
      auto ss = session_store::open(so);
      if (!ss) {
        std::cerr << "mibyan checkpoints: the files were restored, but the "
                     "session could not be marked: "
                  << ss.error << "\n";
        return 1;
      }
      if (auto m = store_rollback_marker(**ss, sid, r->marker); !m) {
        std::cerr << "mibyan checkpoints: the files were restored, but the "
                     "session could not be marked: "
                  << m.error << "\n";
        return 1;
      }
      std::cout << "session " << sid << ": the last turn is marked as undone\n";
    }
    bool failed = false;
    for (auto& rep : r->reports)
      failed = failed || !rep.failed.empty();
    return failed ? 1 : 0;
  }
  if (verb == "prune") {
    auto n = st.prune();
    if (!n) {
      std::cerr << "mibyan checkpoints: " << n.error << "\n";
      return 1;
    }
    std::cout << "pruned " << *n << " checkpoint(s)\n";
    return 0;
  }
  std::cerr << "mibyan checkpoints: unknown command " << verb << "\n";
  usage();
  return 2;
}

} // namespace mibyan::cli
