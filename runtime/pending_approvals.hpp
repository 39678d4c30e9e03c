// File: runtime/pending_approvals.hpp
//
// The pending-request registry of one runtime (docs/approvals.md, "HTTP
// approvals"): the approval and clarify channel for front ends that cannot
// prompt a terminal (serve, a host that opts in). A flagged command (or a
// clarify question) is registered with an unguessable id and its tool call
// waits here, on its blocking-pool thread, until an answer comes
// (`answer`), its time is up (deny / no answer), its call is cancelled
// (prompt.cancelled, `cancel_session`) or the runtime stops (`shutdown`).
// Ended ids are remembered for a while, so that a late or second answer is
// told apart from an unknown id.
//
// Threads: every member function is thread-safe. `ask` blocks the calling
// thread (a blocking-pool thread, never a CAF scheduler thread or an I/O
// thread); everything else only takes a mutex briefly. Watchers are called
// without the registry's locks held: `added` on the asking thread before it
// waits, `ended` on the same thread after the wait (so, per request, added
// comes before ended). A watcher must be quick and must not block; it may
// call any member function except `ask`. CAF-free.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "mibyan/approval.hpp"
#include "mibyan/clarify.hpp"
#include "mibyan/pending.hpp"

namespace mibyan {

class pending_approvals {
public:
  using watcher = std::function<void(const pending_event&)>;

  /// How many ended ids are remembered (oldest forgotten first).
  static constexpr size_t remembered_ended = 4096;

  pending_approvals() = default;
  pending_approvals(const pending_approvals&) = delete;
  pending_approvals& operator=(const pending_approvals&) = delete;

  /// Registers `p` and waits for the answer: the choice given, `timeout`
  /// after `p.timeout`, `deny` when the call is cancelled or the registry
  /// shuts down. Blocking (see the file comment).
  approval_choice ask(const approval_prompt& p);
  /// The same for a clarify question; "" when nobody answered.
  std::string ask(const clarify_prompt& p);

  /// The requests of `kind` waiting now (not yet answered), oldest first.
  std::vector<pending_request> list(pending_kind kind) const;

  /// Answers an approval. `choice` must be once, session, always or deny.
  pending_answer answer(const std::string& id, approval_choice choice);
  /// Answers a clarify question with `text` (non-empty).
  pending_answer answer(const std::string& id, const std::string& text);

  /// Cancels what `session` (and its subagents, "<session>::child::...")
  /// waits for: those calls go on with a deny / no answer.
  void cancel_session(const std::string& session);
  /// Cancels everything waiting and refuses (deny / "") what is asked
  /// later. Idempotent.
  void shutdown();

  /// Calls `w` for every request added or ended from now on. Returns a
  /// token for `unwatch`. After `unwatch` returns, `w` may still run once
  /// if an event was being delivered: hold what it touches weakly.
  uint64_t watch(watcher w);
  void unwatch(uint64_t token);

  /// Whether `id` has the form of an id of `kind` ("apr_"/"clr_" + 32
  /// lowercase hex digits).
  static bool well_formed(const std::string& id, pending_kind kind);

  /// Number of requests waiting now (both kinds).
  size_t size() const;

private:
  struct item {
    pending_request req;
    std::chrono::steady_clock::time_point deadline;
    const std::atomic<bool>* cancelled = nullptr;
    bool answered = false;
    bool cancel = false;
    approval_choice choice = approval_choice::timeout;
    std::string text;
  };

  std::shared_ptr<item> add(pending_request req, std::chrono::seconds timeout,
                            const std::atomic<bool>* cancelled);
  // Waits until `it` is answered, expires or is cancelled; returns its
  // outcome name ("answered"/choice name, "timeout", "cancelled").
  std::string wait(const std::shared_ptr<item>& it);
  // The one place where a request's end is final: drops it, remembers its
  // id and tells the watchers (decision counters hook in here).
  void finish(const std::shared_ptr<item>& it, const std::string& outcome);
  void notify(const pending_event& e);
  // The open request `id` of `kind`, or nullptr with `why` set (unknown,
  // ended, already_answered). Caller holds mtx_.
  item* answerable(const std::string& id, pending_kind kind,
                   pending_answer& why);
  static std::string new_id(pending_kind kind);

  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<item>> items_;
  std::unordered_set<std::string> ended_;
  std::deque<std::string> ended_order_;
  bool shut_ = false;

  std::mutex watch_mtx_;
  std::map<uint64_t, std::shared_ptr<const watcher>> watchers_;
  uint64_t next_token_ = 0;
};

/// The name of an approval choice: "deny", "once", "session", "always",
/// "timeout".
const char* approval_choice_name(approval_choice c);
/// Parses "once", "session", "always" or "deny"; false otherwise.
bool parse_approval_choice(const std::string& s, approval_choice* out);

} // namespace mibyan
