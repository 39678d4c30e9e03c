#include "tools/file_checkpointer.hpp"

#include <algorithm>
#include <set>

#include <glob.h>

#include "approvals/destructive.hpp"
#include "base/log.hpp"
#include "config/options.hpp"
#include "storage/file_checkpoint_store.hpp"
#include "storage/file_checkpoint_git.hpp"
#include "tools/agent/agent_tool_state.hpp"

namespace mibyan {

namespace {

// Key of a call outside a turn in turns_ (its own one-call "turn").
std::string call_key(const tool_context& ctx) {
  return ctx.session_id + "\n#call\n" + ctx.call_id;
}

std::string parent_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0)
    return "/";
  return path.substr(0, slash);
}

} // namespace

file_checkpointer::file_checkpointer(std::string home)
  : home_(std::move(home)) {
}

file_checkpointer::~file_checkpointer() = default;

void file_checkpointer::begin_turn(const std::string& session, int64_t turn) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& t = turns_[session];
  t.turn = turn;
  t.taken.clear();
}

void file_checkpointer::post_note(const std::string& session,
                                  std::string text) {
  std::lock_guard<std::mutex> guard{mtx_};
  notes_[session].push_back(std::move(text));
}

std::vector<std::string>
file_checkpointer::take_notes(const std::string& session) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = notes_.find(session);
  if (i == notes_.end())
    return {};
  auto out = std::move(i->second);
  notes_.erase(i);
  return out;
}

void file_checkpointer::forget(const std::string& session) {
  std::lock_guard<std::mutex> guard{mtx_};
  turns_.erase(session);
  notes_.erase(session);
}

result<std::shared_ptr<file_checkpoint_store>>
file_checkpointer::store(const options& cfg) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (store_)
    return store_;
  file_checkpoint_limits lim;
  lim.max_file_bytes = static_cast<uint64_t>(cfg.checkpoints.max_file_mb) << 20;
  lim.max_files = static_cast<size_t>(cfg.checkpoints.max_files);
  lim.keep = static_cast<size_t>(cfg.checkpoints.keep);
  lim.max_age_ms = cfg.checkpoints.max_age_days * 86'400'000;
  auto opened = file_checkpoint_store::open(
    file_checkpoint_store::default_dir(home_), lim);
  if (!opened)
    return opened.get_status(); // tried again on the next call
  store_ = std::shared_ptr<file_checkpoint_store>(std::move(*opened));
  return store_;
}

checkpoint_guard file_checkpointer::take(
  const tool_context& ctx, const std::string& project,
  const std::string& tool, const std::string& reason,
  const std::vector<std::string>& agent_files) {
  checkpoint_guard g;
  bool block = ctx.cfg->checkpoints.on_failure == "block";
  auto fail = [&](const std::string& why) {
    g.blocked = block;
    g.warning = "No checkpoint was taken of " + project + " before this "
                + tool + ": " + why
                + (block ? " (checkpoints.on_failure is block: nothing was "
                           "changed)"
                         : " (the change went ahead; it cannot be rolled "
                           "back with mibyan checkpoints)");
    MIBYAN_LOG(warning, "checkpoints", g.warning);
  };
  // This turn's checkpoint of the project, if one was taken.
  std::string key;
  int64_t turn = 0;
  int64_t taken = -1; // -1: none yet this turn
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = turns_.find(ctx.session_id);
    if (i != turns_.end() && !ctx.session_id.empty()) {
      key = ctx.session_id;
      turn = i->second.turn;
    } else {
      key = call_key(ctx);
      // Calls outside a turn whose tool failed before after_write: bounded.
      if (turns_.size() > 4096)
        for (auto j = turns_.begin(); j != turns_.end();)
          j = j->first.find("\n#call\n") != std::string::npos
                ? turns_.erase(j)
                : std::next(j);
      turns_[key].turn = 0;
    }
    auto& t = turns_[key];
    if (auto j = t.taken.find(project); j != t.taken.end())
      taken = j->second;
  }
  // (store() takes mtx_ itself: never called with it held.)
  if (taken == 0)
    return g; // the snapshot failed earlier this turn: said then
  if (taken > 0) {
    if (!agent_files.empty())
      if (auto st = store(*ctx.cfg); st)
        if (auto a = (*st)->add_agent_files(project, taken, agent_files); !a)
          MIBYAN_LOG(warning, "checkpoints", a.error);
    return g;
  }
  auto st = store(*ctx.cfg);
  if (!st) {
    fail(st.error);
    std::lock_guard<std::mutex> guard{mtx_};
    turns_[key].taken[project] = 0;
    return g;
  }
  snapshot_request req;
  req.project = project;
  req.session_id = ctx.session_id;
  req.turn = turn;
  req.tool = tool;
  req.reason = reason;
  req.agent_files = agent_files;
  auto snap = (*st)->snapshot(req);
  std::lock_guard<std::mutex> guard{mtx_};
  if (!snap) {
    fail(snap.error);
    turns_[key].taken[project] = 0;
    return g;
  }
  turns_[key].taken[project] = snap->checkpoint.number;
  if (!snap->warnings.empty()) {
    std::string w = "Checkpoint " + std::to_string(snap->checkpoint.number)
                    + " of " + project + ":";
    for (auto& x : snap->warnings)
      w += " " + x + ";";
    w.pop_back();
    g.warning = w;
  }
  return g;
}

checkpoint_guard
file_checkpointer::before_write(const tool_context& ctx,
                                const std::vector<std::string>& paths,
                                const std::string& tool) {
  std::lock_guard<std::mutex> serial{snap_mtx_};
  checkpoint_guard out;
  std::set<std::string> projects;
  for (auto& p : paths)
    projects.insert(file_checkpoint_store::project_of(p, ctx.cwd));
  for (auto& project : projects) {
    auto g = take(ctx, project, tool, {}, {});
    out.blocked = out.blocked || g.blocked;
    if (!g.warning.empty())
      out.warning += (out.warning.empty() ? "" : "\n") + g.warning;
  }
  return out;
}

checkpoint_guard
file_checkpointer::before_command(const tool_context& ctx,
                                  const std::string& workdir,
                                  const std::string& command) {
  auto d = approvals::classify_destructive(command);
  if (!d.destructive)
    return {};
  std::lock_guard<std::mutex> serial{snap_mtx_};
  auto project = file_checkpoint_store::project_of(workdir, ctx.cwd);
  // The command's targets, as paths of the project (globs expanded now,
  // before the command removes what they match).
  std::vector<std::string> files;
  bool whole = d.whole_tree;
  auto add = [&](const std::string& abs) {
    auto rel = file_checkpoint_detail::relative_to(project, abs);
    if (rel.empty())
      return; // outside the project: not in this checkpoint
    if (std::find(files.begin(), files.end(), rel) == files.end())
      files.push_back(rel);
  };
  for (auto& t : d.targets) {
    auto abs = t.front() == '/' ? t : workdir + "/" + t;
    if (t.find_first_of("*?[") != std::string::npos) {
      glob_t g{};
      if (::glob(abs.c_str(), GLOB_NOSORT, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i)
          add(g.gl_pathv[i]);
      ::globfree(&g);
      continue;
    }
    add(abs);
  }
  if (whole || (files.empty() && d.targets.empty()))
    files = {"."};
  std::string reason;
  for (auto& r : d.reasons)
    reason += (reason.empty() ? "" : ", ") + r;
  auto g = take(ctx, project, "terminal", reason, files);
  std::lock_guard<std::mutex> guard{mtx_};
  if (ctx.session_id.empty() || turns_.count(ctx.session_id) == 0)
    turns_.erase(call_key(ctx)); // its files are recorded already
  return g;
}

void file_checkpointer::after_write(const tool_context& ctx,
                                    const std::vector<std::string>& paths) {
  std::map<std::string, std::vector<std::string>> by_project;
  for (auto& p : paths) {
    auto project = file_checkpoint_store::project_of(p, ctx.cwd);
    auto rel = file_checkpoint_detail::relative_to(project, p);
    if (!rel.empty())
      by_project[project].push_back(rel);
  }
  std::map<std::string, int64_t> numbers;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = turns_.find(ctx.session_id);
    bool in_turn = i != turns_.end() && !ctx.session_id.empty();
    if (!in_turn)
      i = turns_.find(call_key(ctx));
    if (i == turns_.end())
      return;
    numbers = i->second.taken;
    if (!in_turn)
      turns_.erase(i); // a call outside a turn is its own turn
  }
  auto st = store(*ctx.cfg);
  if (!st)
    return;
  for (auto& [project, rels] : by_project) {
    auto n = numbers.find(project);
    if (n == numbers.end() || n->second <= 0)
      continue;
    if (auto a = (*st)->add_agent_files(project, n->second, rels); !a)
      MIBYAN_LOG(warning, "checkpoints",
                 "cannot record the agent's files of checkpoint "
                   << n->second << ": " << a.error);
  }
}

file_checkpointer* checkpointer_for(const tool_context& ctx) {
  if (ctx.cfg == nullptr || !ctx.cfg->checkpoints.enabled
      || ctx.agent == nullptr)
    return nullptr;
  return ctx.agent->checkpoints.get();
}

void add_checkpoint_warning(json::value& result, const checkpoint_guard& g) {
  if (!g.warning.empty())
    result["_checkpoint_warning"] = g.warning;
}

} // namespace mibyan
