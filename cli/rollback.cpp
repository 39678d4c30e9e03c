#include "cli/rollback.hpp"

#include <algorithm>
#include <chrono>
#include <map>

#include "storage/session_store.hpp"
#include "tools/file_checkpointer.hpp"

namespace mibyan::cli {

namespace {

std::string joined(const std::vector<std::string>& xs, size_t max = 20) {
  std::string out;
  for (size_t i = 0; i < xs.size() && i < max; ++i)
    out += (i ? ", " : "") + xs[i];
  if (xs.size() > max)
    out += " and " + std::to_string(xs.size() - max) + " more";
  return out;
}

} // namespace

result<std::vector<rollback_target>>
last_turn_targets(const file_checkpoint_store& store,
                  const std::string& session) {
  using R = result<std::vector<rollback_target>>;
  auto all = store.list_all();
  if (!all)
    return R{all.get_status()};
  // The newest checkpoint of the session decides the turn.
  const file_checkpoint* newest = nullptr;
  for (auto& c : *all)
    if (c.session_id == session && !c.rolled_back && c.tool != "restore"
        && (newest == nullptr || c.time_ms > newest->time_ms
            || (c.time_ms == newest->time_ms && c.number > newest->number)))
      newest = &c;
  if (newest == nullptr)
    return R::failure(status_code::not_found,
                      "session " + session
                        + " has no checkpoint to roll back (checkpoints are "
                          "taken with checkpoints.enabled or --checkpoints)");
  std::map<std::string, rollback_target> first;
  for (auto& c : *all) {
    if (c.session_id != session || c.turn != newest->turn || c.rolled_back
        || c.tool == "restore")
      continue;
    // Outside a turn (turn 0) only the newest checkpoint counts.
    if (newest->turn == 0 && &c != newest)
      continue;
    auto i = first.find(c.project);
    if (i == first.end() || c.number < i->second.number)
      first[c.project] = rollback_target{c.project, c.number, c.session_id,
                                         c.turn, c.tool};
  }
  std::vector<rollback_target> out;
  for (auto& [p, t] : first)
    out.push_back(t);
  return out;
}

result<rollback_result> run_rollback(file_checkpoint_store& store,
                                     const std::vector<rollback_target>& targets,
                                     const restore_options& opts) {
  rollback_result r;
  for (auto& t : targets) {
    auto rep = store.restore(t.project, t.number, opts);
    if (!rep)
      return result<rollback_result>{rep.get_status()};
    r.targets.push_back(t);
    r.reports.push_back(std::move(*rep));
  }
  r.marker = rollback_marker(r);
  return r;
}

std::string rollback_marker(const rollback_result& r) {
  std::string m = rollback_marker_prefix;
  m += " The user rolled files back";
  for (size_t i = 0; i < r.targets.size(); ++i) {
    auto& t = r.targets[i];
    auto& rep = r.reports[i];
    m += i ? "; and" : "";
    m += " to checkpoint " + std::to_string(t.number) + " of " + t.project;
    if (t.turn > 0)
      m += " (taken in turn " + std::to_string(t.turn) + ", before "
           + t.tool + ")";
    if (!rep.restored.empty())
      m += ": restored " + joined(rep.restored);
    if (!rep.deleted.empty())
      m += (rep.restored.empty() ? ": " : "; ") + std::string{"deleted "}
           + joined(rep.deleted);
    if (rep.restored.empty() && rep.deleted.empty())
      m += ": nothing differed";
    if (!rep.kept.empty())
      m += "; the user's own later changes were kept in " + joined(rep.kept);
    if (!rep.failed.empty())
      m += "; could not restore " + joined(rep.failed);
  }
  m += ". The file changes made since then (the last turn) are undone: "
       "those files are as they were before it. Do not assume the undone "
       "edits are present; re-read files before changing them.";
  return m;
}

status store_rollback_marker(session_store& store,
                             const std::string& session_id,
                             const std::string& marker) {
  if (session_id.empty() || marker.empty())
    return {};
  if (!store.get_session(session_id))
    return {}; // a session this store does not know: nothing to mark
  chat_message m;
  m.role = "user";
  m.content = marker;
  m.timestamp_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  auto appended = store.append_message(session_id, m);
  if (!appended)
    return appended.get_status();
  return {};
}

std::string describe_rollback(const rollback_result& r) {
  std::string out;
  for (size_t i = 0; i < r.targets.size(); ++i) {
    auto& t = r.targets[i];
    auto& rep = r.reports[i];
    out += "checkpoint " + std::to_string(t.number) + " of " + t.project
           + "\n";
    for (auto& f : rep.restored)
      out += "  restored " + f + "\n";
    for (auto& f : rep.deleted)
      out += "  deleted  " + f + "\n";
    for (auto& f : rep.kept)
      out += "  kept     " + f + " (changed after the checkpoint, not by "
                                 "the agent; --all restores it)\n";
    for (auto& f : rep.failed)
      out += "  FAILED   " + f + "\n";
    for (auto& w : rep.warnings)
      out += "  warning: " + w + "\n";
    if (rep.safety_number > 0)
      out += "  (the state before this restore is checkpoint "
             + std::to_string(rep.safety_number) + ")\n";
  }
  return out;
}

} // namespace mibyan::cli
