// File: actors/script_calls.hpp
//
// The execute_code bridge's fast path (docs/execute_code.md, "Bridge fast
// path"): the kernel broker runs a script's tool calls without a
// tool_invocation actor per call.
//   * A tool that declares itself non-blocking (tool::non_blocking) runs at
//     once on the broker's own thread; its reply is written in the same
//     wake-up.
//   * Any other tool runs on the blocking pool; the pool thread sends the
//     result back to the broker, which writes it. The broker keeps the
//     deadline bookkeeping itself in a `script_call_table`: one timer for
//     the earliest deadline instead of one per call.
// The guarantees are those of the invocation actor: the deadline answers
// with the same timeout result and sets the call's cancel flag; a call the
// cell leaves running is cancelled when the cell ends; a late result is
// dropped.
//
// `script_call_table` is plain bookkeeping (no I/O, no CAF), unit-testable;
// `Handle` is the broker's connection handle. Thread safety: none; the
// owning broker uses it from its own thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/services.hpp"
#include "messages/tool_request.hpp"
#include "tools/tool.hpp"

namespace mibyan {

/// The tool_context of one call, as the invocation actor and the broker's
/// fast path build it (one source of truth).
tool_context make_call_context(const runtime_services& svc,
                               const tool_request& req,
                               const std::atomic<bool>* cancel,
                               std::chrono::steady_clock::time_point deadline);

/// A call with its arguments parsed once, its tool looked up and its
/// deadline computed (the tool's own, e.g. terminal's timeout). A script's
/// call loses the arguments its tool's script() policy strips (terminal:
/// background, pty, notify...; scripts run foreground commands only).
struct prepared_call {
  tool_request req;
  json::parse_result parsed;
  std::chrono::milliseconds limit{60000};
  /// The tool declares itself non-blocking (tool::non_blocking).
  bool non_blocking = false;
};

prepared_call prepare_call(const runtime_services& svc, tool_request req);

/// Runs a prepared call (validation, the tool, redaction: dispatch_tool)
/// and returns the result JSON text. Blocking unless `non_blocking`.
std::string run_prepared_call(const runtime_services& svc,
                              prepared_call& call,
                              const std::atomic<bool>* cancel,
                              std::chrono::steady_clock::time_point deadline);

/// The result a call gets when its deadline passes after `seconds`.
std::string call_timeout_result(const std::string& tool, int64_t seconds);

/// The result a call gets when it is interrupted for `reason`.
std::string call_cancelled_result(const std::string& reason);

template <class Handle>
class script_call_table {
public:
  using clock_type = std::chrono::steady_clock;

  struct call {
    Handle conn{};
    std::string id;   // the script's request id
    std::string tool;
    std::shared_ptr<std::atomic<bool>> cancel;
    clock_type::time_point start;
    clock_type::time_point deadline;
  };

  /// Registers a call in flight; returns its sequence number.
  uint64_t add(call c) {
    auto seq = ++seq_;
    by_deadline_.emplace(c.deadline, seq);
    calls_.emplace(seq, std::move(c));
    return seq;
  }

  /// Completes call `seq`: returns it, or nothing when it is no longer in
  /// flight (answered by its deadline, or cancelled).
  std::optional<call> take(uint64_t seq) {
    auto i = calls_.find(seq);
    if (i == calls_.end())
      return std::nullopt;
    erase_deadline(i->second.deadline, seq);
    call c = std::move(i->second);
    calls_.erase(i);
    return c;
  }

  /// Removes and returns the calls whose deadline is at or before `now`.
  std::vector<call> take_expired(clock_type::time_point now) {
    std::vector<call> out;
    while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
      auto seq = by_deadline_.begin()->second;
      by_deadline_.erase(by_deadline_.begin());
      auto i = calls_.find(seq);
      if (i != calls_.end()) {
        out.push_back(std::move(i->second));
        calls_.erase(i);
      }
    }
    return out;
  }

  /// Removes and returns every call in flight (to cancel them).
  std::vector<call> take_all() {
    std::vector<call> out;
    out.reserve(calls_.size());
    for (auto& kv : calls_)
      out.push_back(std::move(kv.second));
    calls_.clear();
    by_deadline_.clear();
    return out;
  }

  /// When a timer must be armed: the earliest deadline, if no timer is
  /// armed for it or earlier. The caller arms one and the table remembers.
  std::optional<clock_type::time_point> timer_to_arm() {
    if (by_deadline_.empty())
      return std::nullopt;
    auto earliest = by_deadline_.begin()->first;
    if (armed_ && *armed_ <= earliest)
      return std::nullopt;
    armed_ = earliest;
    return earliest;
  }

  /// The armed timer fired (or was lost): none is armed any more.
  void timer_fired() { armed_.reset(); }

  size_t size() const { return calls_.size(); }
  bool empty() const { return calls_.empty(); }

private:
  void erase_deadline(clock_type::time_point d, uint64_t seq) {
    auto range = by_deadline_.equal_range(d);
    for (auto i = range.first; i != range.second; ++i)
      if (i->second == seq) {
        by_deadline_.erase(i);
        return;
      }
  }

  uint64_t seq_ = 0;
  std::map<uint64_t, call> calls_;
  std::multimap<clock_type::time_point, uint64_t> by_deadline_;
  std::optional<clock_type::time_point> armed_;
};

} // namespace mibyan
