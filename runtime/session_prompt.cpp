#include "runtime/session_prompt.hpp"

#include "agent/context_files.hpp"
#include "base/log.hpp"
#include "config/options.hpp"
#include "storage/prompt_store.hpp"
#include "storage/session_store.hpp"
#include "tools/agent/memory_store.hpp"

namespace mibyan {

namespace {

void join_block(std::string& out, const std::string& block) {
  if (block.empty())
    return;
  if (!out.empty())
    out += "\n\n";
  out += block;
}

// The stored prompt of `sid`, or of the nearest ancestor in its chain that
// has one (a compressed session whose reference was not written).
// Returns "" (hash and text) when there is none; `missing` names a
// reference whose prompt is gone.
bool find_stored(session_store* store, prompt_store& prompts,
                 const std::string& sid, std::string& hash,
                 std::string& text, std::string& missing) {
  std::string cur = sid;
  for (int depth = 0; depth < 64 && !cur.empty(); ++depth) {
    auto h = prompts.hash_of(cur);
    if (h) {
      auto t = prompts.get(*h);
      if (t) {
        hash = *h;
        text = std::move(*t);
        if (cur != sid) {
          if (auto st = prompts.reference(sid, hash); !st)
            MIBYAN_LOG(warning, "runtime",
                       "cannot reference the prompt of " << cur << " from "
                         << sid << ": " << st.error);
        }
        return true;
      }
      missing = t.error;
      return false; // a lost prompt is reported, not replaced by a parent's
    }
    if (h.code != status_code::not_found) {
      missing = h.error;
      return false;
    }
    if (store == nullptr)
      return false;
    auto info = store->get_session(cur);
    if (!info)
      return false;
    cur = info->parent_session_id;
  }
  return false;
}

} // namespace

std::string session_prompt::notice() const {
  std::string out;
  if (replayed) {
    out += "context: the session's stored system prompt was replayed";
    if (!hash.empty())
      out += " (" + hash.substr(0, 12) + ")";
    out += "\n";
  } else if (files.empty()) {
    out += "context: no context files loaded\n";
  } else {
    out += "context: loaded";
    for (size_t i = 0; i < files.size(); ++i)
      out += (i == 0 ? " " : ", ") + files[i];
    out += "\n";
  }
  for (auto& w : warnings)
    out += "warning: " + w + "\n";
  return out;
}

session_prompt compose_session_prompt(
  const options& cfg, const std::string& cwd,
  std::string (*base_prompt)(const std::string& cwd),
  const user_state_store* user_state) {
  session_prompt out;
  loaded_context ctx;
  if (cfg.agent.context_files) {
    context_load_options lo;
    lo.cwd = cwd;
    lo.home = cfg.home;
    lo.max_chars = static_cast<size_t>(cfg.context_files.max_chars);
    lo.refuse_flagged = cfg.context_files.on_injection == "refuse";
    ctx = load_context_files(lo);
    if (!ctx.soul.path.empty())
      out.files.push_back(ctx.soul.label);
    for (auto& f : ctx.files)
      out.files.push_back(f.label);
    out.warnings = ctx.warnings;
  }
  join_block(out.text, ctx.soul_block());
  join_block(out.text, base_prompt(cwd));
  join_block(out.text, ctx.project_block());
  join_block(out.text, memory_prompt_snapshot(cfg.home, cfg, user_state));
  return out;
}

session_prompt resolve_session_prompt(
  const options& cfg, session_store* store, prompt_store* prompts,
  const session_prompt_request& req,
  std::string (*base_prompt)(const std::string& cwd)) {
  std::string missing;
  if (prompts != nullptr && req.exists) {
    session_prompt out;
    if (find_stored(store, *prompts, req.session_id, out.hash, out.text,
                    missing)) {
      out.replayed = true;
      return out;
    }
  }
  auto out = compose_session_prompt(cfg, req.cwd, base_prompt,
                                    req.user_state);
  if (!missing.empty())
    out.warnings.push_back(
      "the stored system prompt of session " + req.session_id
      + " is missing (" + missing
      + "); it was rebuilt from the current files, so it may differ from "
        "the one the session started with");
  else if (req.exists && req.message_count > 0)
    out.warnings.push_back(
      "session " + req.session_id + " has no stored system prompt ("
      + (prompts == nullptr
           ? std::string{"this session store keeps none"}
           : std::string{"it was started by an older version of Mibyan"})
      + "); it was rebuilt from the current files");
  for (auto& w : out.warnings)
    MIBYAN_LOG(warning, "runtime", "session " << req.session_id << ": " << w);
  if (prompts != nullptr && req.store)
    store_session_prompt(*prompts, req.session_id, out);
  return out;
}

void store_session_prompt(prompt_store& prompts,
                          const std::string& session_id,
                          session_prompt& prompt) {
  auto h = prompts.put(session_id, prompt.text);
  if (h) {
    prompt.hash = *h;
    return;
  }
  prompt.warnings.push_back("the system prompt could not be stored ("
                            + h.error + "); a resume will rebuild it");
  MIBYAN_LOG(warning, "runtime",
             "session " << session_id << ": " << prompt.warnings.back());
}

} // namespace mibyan
