#include "runtime/pending_approvals.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <random>

#include <sys/random.h>

#include "base/log.hpp"

namespace mibyan {

namespace {

// How often a waiter looks at its call's cancel flag (set by the tool
// dispatcher on an interrupt or a deadline; an atomic has no wake-up).
// cancel_session and shutdown wake waiters at once.
constexpr std::chrono::milliseconds cancel_poll{200};

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

const char* prefix_of(pending_kind kind) {
  return kind == pending_kind::approval ? "apr_" : "clr_";
}

} // namespace

const char* approval_choice_name(approval_choice c) {
  switch (c) {
  case approval_choice::deny:
    return "deny";
  case approval_choice::once:
    return "once";
  case approval_choice::session:
    return "session";
  case approval_choice::always:
    return "always";
  case approval_choice::timeout:
    break;
  }
  return "timeout";
}

bool parse_approval_choice(const std::string& s, approval_choice* out) {
  static const std::pair<const char*, approval_choice> names[] = {
    {"once", approval_choice::once},
    {"session", approval_choice::session},
    {"always", approval_choice::always},
    {"deny", approval_choice::deny}};
  for (auto& [n, c] : names)
    if (s == n) {
      *out = c;
      return true;
    }
  return false;
}

std::string pending_approvals::new_id(pending_kind kind) {
  std::array<unsigned char, 16> raw{};
  size_t got = 0;
  while (got < raw.size()) {
    auto n = ::getrandom(raw.data() + got, raw.size() - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += static_cast<size_t>(n);
  }
  if (got < raw.size()) { // no getrandom: the OS's entropy source still
    std::random_device rd;
    for (auto& b : raw)
      b = static_cast<unsigned char>(rd());
  }
  static const char hex[] = "0123456789abcdef";
  std::string id = prefix_of(kind);
  for (auto b : raw) {
    id += hex[b >> 4];
    id += hex[b & 15];
  }
  return id;
}

bool pending_approvals::well_formed(const std::string& id, pending_kind kind) {
  const std::string prefix = prefix_of(kind);
  if (id.size() != prefix.size() + 32 || id.compare(0, prefix.size(), prefix))
    return false;
  return std::all_of(id.begin() + static_cast<long>(prefix.size()), id.end(),
                     [](char c) {
                       return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                     });
}

std::shared_ptr<pending_approvals::item>
pending_approvals::add(pending_request req, std::chrono::seconds timeout,
                       const std::atomic<bool>* cancelled) {
  auto it = std::make_shared<item>();
  auto now = std::chrono::steady_clock::now();
  req.created_at_ms = unix_ms();
  req.expires_at_ms = req.created_at_ms
                      + std::chrono::duration_cast<std::chrono::milliseconds>(
                          timeout)
                          .count();
  it->deadline = now + timeout;
  it->cancelled = cancelled;
  {
    std::lock_guard<std::mutex> g{mtx_};
    do
      req.id = new_id(req.kind);
    while (items_.count(req.id) > 0 || ended_.count(req.id) > 0);
    it->req = std::move(req);
    it->cancel = shut_;
    items_[it->req.id] = it;
  }
  pending_event e;
  e.what = pending_event::type::added;
  e.request = it->req;
  notify(e);
  return it;
}

std::string pending_approvals::wait(const std::shared_ptr<item>& it) {
  std::unique_lock<std::mutex> g{mtx_};
  for (;;) {
    if (it->answered)
      return it->req.kind == pending_kind::approval
               ? approval_choice_name(it->choice)
               : "answered";
    if (it->cancel || (it->cancelled && it->cancelled->load()))
      return "cancelled";
    auto now = std::chrono::steady_clock::now();
    if (now >= it->deadline)
      return "timeout";
    cv_.wait_until(g, std::min(it->deadline, now + cancel_poll));
  }
}

void pending_approvals::finish(const std::shared_ptr<item>& it,
                               const std::string& outcome) {
  {
    std::lock_guard<std::mutex> g{mtx_};
    items_.erase(it->req.id);
    if (ended_.insert(it->req.id).second) {
      ended_order_.push_back(it->req.id);
      if (ended_order_.size() > remembered_ended) {
        ended_.erase(ended_order_.front());
        ended_order_.pop_front();
      }
    }
  }
  MIBYAN_LOG(info, "approvals",
             "session " << it->req.session_id << ": pending "
                        << (it->req.kind == pending_kind::approval
                              ? "approval "
                              : "question ")
                        << it->req.id << " ended: " << outcome);
  pending_event e;
  e.what = pending_event::type::ended;
  e.request = it->req;
  e.outcome = outcome;
  notify(e);
}

approval_choice pending_approvals::ask(const approval_prompt& p) {
  pending_request r;
  r.kind = pending_kind::approval;
  r.session_id = p.session_id;
  r.command = p.command;
  r.descriptions = p.descriptions;
  r.guardian_verdict = p.guardian_verdict;
  r.choices.push_back("once");
  if (p.allow_session)
    r.choices.push_back("session");
  if (p.allow_always)
    r.choices.push_back("always");
  r.choices.push_back("deny");
  auto it = add(std::move(r), p.timeout, p.cancelled);
  auto outcome = wait(it);
  approval_choice c = approval_choice::deny;
  if (outcome == "timeout")
    c = approval_choice::timeout;
  else if (outcome != "cancelled")
    c = it->choice; // answered (set under the lock, read after the wait)
  finish(it, outcome);
  return c;
}

std::string pending_approvals::ask(const clarify_prompt& p) {
  pending_request r;
  r.kind = pending_kind::clarify;
  r.session_id = p.session_id;
  r.question = p.question;
  r.choices = p.choices;
  auto it = add(std::move(r), p.timeout, p.cancelled);
  auto outcome = wait(it);
  std::string text;
  if (outcome == "answered")
    text = it->text;
  finish(it, outcome);
  return text;
}

std::vector<pending_request>
pending_approvals::list(pending_kind kind) const {
  std::vector<pending_request> out;
  std::lock_guard<std::mutex> g{mtx_};
  for (auto& [id, it] : items_)
    if (it->req.kind == kind && !it->answered && !it->cancel)
      out.push_back(it->req);
  std::stable_sort(out.begin(), out.end(),
                   [](const pending_request& a, const pending_request& b) {
                     return a.created_at_ms < b.created_at_ms;
                   });
  return out;
}

pending_approvals::item*
pending_approvals::answerable(const std::string& id, pending_kind kind,
                              pending_answer& why) {
  auto i = items_.find(id);
  if (i == items_.end() || i->second->req.kind != kind) {
    why = ended_.count(id) > 0 ? pending_answer::ended
                               : pending_answer::unknown;
    return nullptr;
  }
  auto& it = *i->second;
  if (it.answered) {
    why = pending_answer::already_answered;
    return nullptr;
  }
  if (it.cancel || std::chrono::steady_clock::now() >= it.deadline
      || (it.cancelled && it.cancelled->load())) {
    why = pending_answer::ended; // its waiter is about to finish it
    return nullptr;
  }
  return &it;
}

pending_answer pending_approvals::answer(const std::string& id,
                                         approval_choice choice) {
  std::lock_guard<std::mutex> g{mtx_};
  pending_answer why{};
  auto* found = answerable(id, pending_kind::approval, why);
  if (!found)
    return why;
  auto& it = *found;
  const char* name = approval_choice_name(choice);
  if (choice == approval_choice::timeout
      || std::find(it.req.choices.begin(), it.req.choices.end(), name)
           == it.req.choices.end())
    return pending_answer::not_offered;
  it.answered = true;
  it.choice = choice;
  cv_.notify_all();
  return pending_answer::ok;
}

pending_answer pending_approvals::answer(const std::string& id,
                                         const std::string& text) {
  std::lock_guard<std::mutex> g{mtx_};
  pending_answer why{};
  auto* found = answerable(id, pending_kind::clarify, why);
  if (!found)
    return why;
  auto& it = *found;
  it.answered = true;
  it.text = text;
  cv_.notify_all();
  return pending_answer::ok;
}

void pending_approvals::cancel_session(const std::string& session) {
  const std::string child = session + "::child::";
  std::lock_guard<std::mutex> g{mtx_};
  bool any = false;
  for (auto& [id, it] : items_) {
    const auto& s = it->req.session_id;
    if (s == session || s.compare(0, child.size(), child) == 0) {
      it->cancel = true;
      any = true;
    }
  }
  if (any)
    cv_.notify_all();
}

void pending_approvals::shutdown() {
  std::lock_guard<std::mutex> g{mtx_};
  shut_ = true;
  for (auto& [id, it] : items_)
    it->cancel = true;
  cv_.notify_all();
}

size_t pending_approvals::size() const {
  std::lock_guard<std::mutex> g{mtx_};
  return items_.size();
}

uint64_t pending_approvals::watch(watcher w) {
  std::lock_guard<std::mutex> g{watch_mtx_};
  auto token = ++next_token_;
  watchers_[token] = std::make_shared<const watcher>(std::move(w));
  return token;
}

void pending_approvals::unwatch(uint64_t token) {
  std::lock_guard<std::mutex> g{watch_mtx_};
  watchers_.erase(token);
}

void pending_approvals::notify(const pending_event& e) {
  std::vector<std::shared_ptr<const watcher>> ws;
  {
    std::lock_guard<std::mutex> g{watch_mtx_};
    ws.reserve(watchers_.size());
    for (auto& [t, w] : watchers_)
      ws.push_back(w);
  }
  for (auto& w : ws) {
    try {
      (*w)(e);
    } catch (const std::exception& ex) {
      MIBYAN_LOG(warning, "approvals", "a pending-request watcher failed: "
                                         << ex.what());
    } catch (...) {
      MIBYAN_LOG(warning, "approvals", "a pending-request watcher failed");
    }
  }
}

} // namespace mibyan
