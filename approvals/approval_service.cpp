#include "approvals/approval_service.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>

#include <limits.h>
#include <stdlib.h>

#include "approvals/approval_engine.hpp"
#include "approvals/approval_messages.hpp"
#include "approvals/guardian.hpp"
#include "config/allowlist_writer.hpp"
#include "config/options.hpp"
#include "base/log.hpp"
#include "base/runtime_metrics.hpp"

namespace mibyan {

using namespace approvals;

namespace {

// Sessions whose state is kept in memory at most (oldest dropped first:
// their keys are reloaded from the store when needed).
constexpr size_t max_sessions = 4096;

std::string resolved_home() {
  const char* h = std::getenv("HOME");
  if (h == nullptr || *h == '\0')
    return {};
  char buf[PATH_MAX];
  if (::realpath(h, buf) != nullptr)
    return buf;
  return h;
}

approval_verdict blocked(std::string message, std::string description,
                         bool hardline = false) {
  approval_verdict v;
  v.approved = false;
  v.hardline = hardline;
  v.message = std::move(message);
  v.description = std::move(description);
  return v;
}

approval_verdict approved(std::string description = {}) {
  approval_verdict v;
  v.description = std::move(description);
  return v;
}

} // namespace

approval_service::approval_service(const options& cfg)
  : cfg_(cfg), permanent_(cfg.command_allowlist) {}

void approval_service::set_hooks(hooks h) {
  std::lock_guard<std::mutex> guard{mtx_};
  hooks_ = std::move(h);
}

void approval_service::set_shared_allowlist(shared_allowlist s) {
  std::lock_guard<std::mutex> guard{mtx_};
  shared_ = std::move(s);
}

bool approval_service::refresh_shared(std::vector<std::string>& known) {
  decltype(shared_.load) load;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    load = shared_.load;
  }
  if (!load)
    return false;
  auto keys = load(); // blocking store read, outside the lock
  if (!keys) {
    MIBYAN_LOG(warning, "approvals",
               "cannot read the shared command allowlist: " << keys.error);
    return false;
  }
  bool added = false;
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& k : *keys) {
    if (std::find(permanent_.begin(), permanent_.end(), k) == permanent_.end())
      permanent_.push_back(k);
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      known.push_back(k);
      added = true;
    }
  }
  return added;
}

void approval_service::set_callback(approval_callback cb) {
  std::lock_guard<std::mutex> guard{mtx_};
  callback_ = std::move(cb);
}

void approval_service::set_context(approval_context c) {
  std::lock_guard<std::mutex> guard{mtx_};
  context_ = c;
}

void approval_service::set_session_yolo(const std::string& session, bool on) {
  std::lock_guard<std::mutex> guard{mtx_};
  sessions_[session].yolo = on;
}

bool approval_service::session_yolo(const std::string& session) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto it = sessions_.find(session);
  return it != sessions_.end() && it->second.yolo;
}

void approval_service::forget_session(const std::string& session) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    sessions_.erase(session);
  }
  channels_->forget(session);
  breaker_.forget(session);
}

std::set<std::string> approval_service::session_keys(
  const std::string& session) {
  if (session.empty())
    return {};
  decltype(hooks_.load_session) load;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = sessions_.find(session);
    if (it != sessions_.end() && it->second.loaded)
      return it->second.keys;
    load = hooks_.load_session;
  }
  std::vector<std::string> stored;
  if (load)
    stored = load(session); // blocking store read, outside the lock
  std::lock_guard<std::mutex> guard{mtx_};
  if (sessions_.size() >= max_sessions && sessions_.count(session) == 0)
    sessions_.erase(sessions_.begin());
  auto& st = sessions_[session];
  if (!st.loaded) {
    st.keys.insert(stored.begin(), stored.end());
    st.loaded = true;
  }
  return st.keys;
}

session_channel
approval_service::channel_for(const std::string& session) const {
  if (!session.empty())
    if (auto ch = channels_->find(session))
      return std::move(*ch);
  std::lock_guard<std::mutex> guard{mtx_};
  session_channel ch;
  ch.approval = callback_;
  ch.context = context_;
  return ch;
}

std::string approval_service::context_key(approval_context c) const {
  switch (c) {
  case approval_context::cron:
    return "approvals.cron_mode";
  case approval_context::single_query:
    return "approvals.single_query_mode";
  case approval_context::unattended:
    break;
  }
  return "approvals.unattended_mode";
}

bool approval_service::context_approves(approval_context c) const {
  const auto& a = cfg_.approvals;
  switch (c) {
  case approval_context::cron:
    return a.cron_mode == "approve";
  case approval_context::single_query:
    return a.single_query_mode == "approve";
  case approval_context::unattended:
    break;
  }
  return a.unattended_mode == "approve";
}

std::string approval_service::with_breaker(const std::string& session,
                                           std::string message) {
  auto threshold = cfg_.approvals.denial_breaker_threshold;
  if (threshold <= 0)
    return message;
  auto n = breaker_.count(session);
  if (n < threshold)
    return message;
  MIBYAN_LOG(warning, "approvals", "session " << session << ": " << n
             << " consecutive commands denied by the reviewer");
  return message + breaker_suffix(n);
}

void approval_service::grant(const std::string& session,
                             const std::vector<std::string>& keys,
                             bool always) {
  breaker_.reset(session);
  decltype(hooks_.save_session) save;
  decltype(shared_.add) add_shared;
  std::vector<std::string> all;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!session.empty()) {
      auto& st = sessions_[session];
      st.keys.insert(keys.begin(), keys.end());
      all.assign(st.keys.begin(), st.keys.end());
      save = hooks_.save_session;
    }
    if (always)
      for (auto& k : keys)
        if (std::find(permanent_.begin(), permanent_.end(), k)
            == permanent_.end())
          permanent_.push_back(k);
    add_shared = shared_.add;
  }
  if (save)
    save(session, all);
  if (always && add_shared) {
    // Shared by every gateway (docs/storage.md, "Per-user state").
    for (auto& k : keys)
      if (auto st = add_shared(k); !st)
        MIBYAN_LOG(warning, "approvals", "could not save '" << k
                   << "' to the shared command allowlist: " << st.error);
  } else if (always) {
    auto path = cfg_.config_path.empty() ? cfg_.home + "/config.yaml"
                                         : cfg_.config_path;
    std::lock_guard<std::mutex> guard{config_write_mtx_};
    for (auto& k : keys) {
      auto saved = add_to_command_allowlist(path, k);
      if (!saved.ok())
        MIBYAN_LOG(warning, "approvals", "could not save '" << k
                   << "' to command_allowlist: " << saved.error);
    }
  }
}

approval_verdict approval_service::check_command(const std::string& command,
                                                 const approval_call& call) {
  auto session = call.session_id.empty() ? std::set<std::string>{}
                                         : session_keys(call.session_id);
  std::vector<std::string> permanent;
  bool session_yolo = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    permanent = permanent_;
    auto it = sessions_.find(call.session_id);
    session_yolo = it != sessions_.end() && it->second.yolo;
  }
  policy p;
  p.paths = home_paths{resolved_home(), cfg_.home, {}};
  if (const char* h = std::getenv("HOME"); h != nullptr && p.paths.home != h)
    p.paths.home_unresolved = h;
  p.deny_globs = &cfg_.approvals.deny;
  p.sudo_password = !cfg_.secret("SUDO_PASSWORD").empty();
  p.bypass = cfg_.approvals.yolo || cfg_.approvals.mode == "off"
             || session_yolo;
  p.permanent = &permanent;
  p.session = &session;
  auto a = assess(command, p);
  // A grant made through another gateway since the last read.
  if (a.result == outcome::needs_approval && refresh_shared(permanent))
    a = assess(command, p);
  switch (a.result) {
  case outcome::approved:
    return approved();
  case outcome::hardline:
    metrics::count_approval("hardline");
    MIBYAN_LOG(warning, "approvals", "session " << call.session_id
               << ": blocked (hardline): " << a.detail);
    return blocked(hardline_message(a.detail), a.detail, true);
  case outcome::denied_by_rule:
    metrics::count_approval("deny_rule");
    MIBYAN_LOG(info, "approvals", "session " << call.session_id
               << ": blocked by deny rule '" << a.detail << "'");
    return blocked(deny_rule_message(a.detail), a.detail);
  case outcome::sudo_stdin:
    metrics::count_approval("sudo_stdin");
    return blocked(sudo_stdin_message(), "sudo -S without a password");
  case outcome::needs_approval:
    break;
  }
  return flagged(command, a.keys, call);
}

approval_verdict approval_service::check_write(const std::string& what,
                                               const std::string& key,
                                               const approval_call& call) {
  auto session = call.session_id.empty() ? std::set<std::string>{}
                                         : session_keys(call.session_id);
  bool bypass = false;
  bool permanent = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = sessions_.find(call.session_id);
    bypass = cfg_.approvals.yolo || cfg_.approvals.mode == "off"
             || (it != sessions_.end() && it->second.yolo);
    permanent = std::find(permanent_.begin(), permanent_.end(), key)
                != permanent_.end();
  }
  if (bypass || permanent || session.count(key) > 0)
    return approved(key);
  std::vector<std::string> known;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    known = permanent_;
  }
  if (refresh_shared(known)
      && std::find(known.begin(), known.end(), key) != known.end())
    return approved(key);
  return flagged(what, {key}, call);
}

approval_verdict approval_service::flagged(const std::string& command,
                                           const std::vector<std::string>& keys,
                                           const approval_call& call) {
  auto desc = join_descriptions(keys);
  auto channel = channel_for(call.session_id);
  auto& cb = channel.approval;
  auto context = channel.context;
  decltype(hooks_.guardian) guardian;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    guardian = hooks_.guardian;
  }
  const std::string key = context_key(context);
  const bool context_ok = context_approves(context);
  const auto& sid = call.session_id;
  // 8. No interactive channel: the context's default (Mibyan: deny).
  if (!cb && !context_ok) {
    metrics::count_approval("no_channel");
    MIBYAN_LOG(info, "approvals", "session " << sid << ": blocked ("
               << desc << "): no approval channel, " << key << " is deny");
    return blocked(with_breaker(sid, no_channel_message(keys, key)), desc);
  }
  // 9. Smart mode: the reviewer's verdict.
  std::string verdict_text;
  if (cfg_.approvals.mode == "smart") {
    guardian_verdict v = guardian_verdict::escalate;
    verdict_text = "unavailable";
    if (guardian) {
      auto reply = guardian(sid, guardian_system_prompt(),
                            guardian_user_prompt(command, keys),
                            std::chrono::seconds(
                              cfg_.approvals.guardian_timeout),
                            call.cancelled);
      if (reply.ok()) {
        v = parse_guardian_answer(*reply);
        verdict_text = v == guardian_verdict::approve ? "APPROVE"
                       : v == guardian_verdict::deny  ? "DENY"
                                                      : "ESCALATE";
      } else {
        MIBYAN_LOG(warning, "approvals", "reviewer unavailable: "
                   << reply.error);
      }
    }
    MIBYAN_LOG(info, "approvals", "session " << sid << ": reviewer says "
               << verdict_text << " (" << desc << ")");
    if (v == guardian_verdict::approve) {
      metrics::count_approval("reviewer_approve");
      breaker_.reset(sid);
      return approved(desc);
    }
    if (v == guardian_verdict::deny) {
      metrics::count_approval("reviewer_deny");
      breaker_.record_deny(sid);
      if (!cb)
        return blocked(with_breaker(sid, smart_deny_message(keys)), desc);
    } else if (!cb) {
      // Escalation with no human to escalate to: fail closed.
      metrics::count_approval("no_channel");
      return blocked(with_breaker(sid, no_channel_message(keys, key)), desc);
    }
  } else if (!cb) {
    // The context approves flagged commands deliberately.
    metrics::count_approval("context_approve");
    return approved(desc);
  }
  // 10. The human.
  return ask_human(cb, command, keys, call, verdict_text);
}

approval_verdict approval_service::ask_human(
  const approval_callback& cb, const std::string& command,
  const std::vector<std::string>& keys, const approval_call& call,
  const std::string& guardian_verdict) {
  static const std::atomic<bool> never{false};
  auto desc = join_descriptions(keys);
  const auto& sid = call.session_id;
  approval_prompt prompt;
  prompt.session_id = sid;
  prompt.command = command;
  prompt.descriptions = keys;
  prompt.guardian_verdict = guardian_verdict;
  prompt.allow_session = guardian_verdict != "DENY";
  prompt.allow_always = guardian_verdict != "DENY";
  prompt.timeout = std::chrono::seconds(cfg_.approvals.timeout);
  prompt.cancelled = call.cancelled ? call.cancelled : &never;
  auto start = std::chrono::steady_clock::now();
  approval_choice choice = approval_choice::deny;
  try {
    choice = cb(prompt);
  } catch (const std::exception& e) {
    MIBYAN_LOG(warning, "approvals", "approval channel failed: " << e.what());
    choice = approval_choice::deny;
  } catch (...) {
    choice = approval_choice::deny;
  }
  if (choice != approval_choice::deny
      && std::chrono::steady_clock::now() - start > prompt.timeout)
    choice = approval_choice::timeout; // a late answer is no answer
  if (prompt.cancelled->load()) {
    metrics::count_approval("cancelled");
    return blocked(cancelled_message(keys), desc);
  }
  if (!prompt.allow_session && choice != approval_choice::timeout
      && choice != approval_choice::deny)
    choice = approval_choice::once;
  static const char* const names[] = {"deny", "once", "session", "always",
                                      "timeout"};
  MIBYAN_LOG(info, "approvals", "session " << sid << ": user answered "
             << names[static_cast<int>(choice)] << " (" << desc << ")");
  // Every answer of a person, on any channel (terminal, HTTP), is counted
  // here (docs/metrics.md).
  metrics::count_approval(names[static_cast<int>(choice)]);
  switch (choice) {
  case approval_choice::once:
    breaker_.reset(sid);
    return approved(desc);
  case approval_choice::session:
    grant(sid, keys, false);
    return approved(desc);
  case approval_choice::always:
    grant(sid, keys, true);
    return approved(desc);
  case approval_choice::timeout:
    return blocked(with_breaker(sid, timeout_message(
                                       keys, prompt.timeout.count())),
                   desc);
  case approval_choice::deny:
    break;
  }
  return blocked(with_breaker(sid, human_deny_message(keys)), desc);
}

approval_verdict approval_service::check_script(const approval_call& call) {
  auto channel = channel_for(call.session_id);
  std::lock_guard<std::mutex> guard{mtx_};
  const auto& a = cfg_.approvals;
  auto it = sessions_.find(call.session_id);
  bool session_yolo = it != sessions_.end() && it->second.yolo;
  if (a.yolo || a.mode == "off" || session_yolo)
    return approved();
  // The isolated-backend fast path (docs/approvals.md, "Whole-script
  // guard"): a sandboxed kernel has no host access beyond its working
  // directory, and every command it runs goes through the gate.
  if (call.isolated)
    return approved();
  if (std::find(permanent_.begin(), permanent_.end(), "execute_code")
      != permanent_.end())
    return approved();
  if (it != sessions_.end() && it->second.keys.count("execute_code") > 0)
    return approved();
  // An interactive channel: the script runs; its terminal calls are
  // checked one by one through the cell authority.
  if (channel.approval || channel.approve_scripts
      || context_approves(channel.context))
    return approved();
  metrics::count_approval("no_channel");
  return blocked(script_blocked_message(context_key(channel.context)),
                 "execute_code");
}

} // namespace mibyan
