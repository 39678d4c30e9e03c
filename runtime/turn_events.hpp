// File: runtime/turn_events.hpp
//
// The turn-event hub of a runtime (docs/architecture.md, "Turn events"):
// every turn that runtime::run_turn_async runs, whatever its channel
// (serve, an embedding agent, the CLI, cron), publishes
//   turn_start {session_id, started_at_ms, prompt (truncated), model, source}
//   delta      {session_id, kind, text}      kind: text, reasoning, restart
//   tool_start {session_id, id, name, arguments}
//   tool_end   {session_id, id, name, result, duration_us}
//   turn_end   {session_id, outcome}  outcome: completed, failed,
//                                     interrupted, error
//   approval / clarify  the pending set's events (runtime/pending_json.hpp:
//                       {"type":"approval_required","approval":{...}}, ...)
//   background          background work ended (runtime/background.cpp:
//                       {"type":"background","session_id","kind","id",
//                       "status","headline","at"})
// (strings longer than turn_event_hub::max_field_bytes are cut and end in
// "…[truncated]"). Each event is formatted once, as its SSE event name and
// JSON data and as its SSE frame, and shared by every subscriber.
//
// Subscribers (the dashboard's /ui/api/live watchers) each own a bounded
// queue. Publishing never blocks and never waits for a subscriber: a full
// queue drops the event and counts it; the subscriber's next `take` ends
// with a "lagged" event {"lost": N}. `wake` is called (on the publishing
// runtime thread; it must only post) when a queue that was empty and
// whose previous wake was consumed receives an event.
//
// With no subscriber, publishing costs one atomic load; the running-turns
// table (a map under a mutex, one insert and one erase per turn) is kept
// always.
//
// CAF-free. Thread-safe: every member may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mibyan/turn.hpp"

namespace mibyan {

/// One formatted event: `name` is the SSE event name, `data` its JSON,
/// `sse` the whole frame "event: NAME\ndata: DATA\n\n" (set by the hub).
struct turn_event {
  std::string name;
  std::string data;
  std::string sse;
};

using turn_event_ptr = std::shared_ptr<const turn_event>;

/// A turn running now, as the snapshot lists it.
struct running_turn {
  std::string session_id;
  int64_t started_at_ms = 0;
  std::string prompt; // truncated to turn_event_hub::max_prompt_bytes
  std::string model;
  std::string source;
};

class turn_event_hub;

/// One subscriber's bounded queue. Owned by the subscriber (shared with the
/// hub until `unsubscribe`).
class turn_subscriber {
public:
  turn_subscriber(size_t capacity, std::function<void()> wake)
    : capacity_(capacity == 0 ? 1 : capacity), wake_(std::move(wake)) {}

  /// Takes the queued events, oldest first; when events were dropped since
  /// the last take, a "lagged" event {"lost": N} follows them. Re-arms the
  /// wake. Any thread.
  std::vector<turn_event_ptr> take();

  /// Events dropped since the subscription started.
  uint64_t lost_total() const;

private:
  friend class turn_event_hub;
  // Queues `ev` (or counts it lost); true when the wake must be called.
  bool offer(const turn_event_ptr& ev);

  const size_t capacity_;
  std::function<void()> wake_;
  mutable std::mutex mtx_;
  std::deque<turn_event_ptr> queue_;
  uint64_t lost_ = 0;       // since the last take
  uint64_t lost_total_ = 0;
  bool armed_ = true;       // the next event calls wake_
};

class turn_event_hub {
public:
  /// Prompts in turn_start and the snapshot are cut to this many bytes.
  static constexpr size_t max_prompt_bytes = 500;
  /// Other strings of an event (delta text, tool arguments and results)
  /// are cut to this many bytes.
  static constexpr size_t max_field_bytes = 8192;

  /// Adds a subscriber with a queue of `capacity` events.
  std::shared_ptr<turn_subscriber> subscribe(size_t capacity,
                                             std::function<void()> wake);
  /// Removes `s` (no more events, no more wakes once this returns).
  void unsubscribe(const std::shared_ptr<turn_subscriber>& s);
  /// Whether anybody subscribes (one relaxed atomic load).
  bool active() const { return count_.load(std::memory_order_relaxed) > 0; }
  size_t subscribers() const;

  /// The turns running now, oldest first.
  std::vector<running_turn> running() const;
  /// The snapshot event {"turns":[...]} ("snapshot").
  turn_event snapshot() const;

  // -- publishing (runtime/runtime_turns.cpp) ---------------------------

  /// A turn of `t.session_id` starts; returns its token for turn_ended.
  uint64_t turn_started(running_turn t);
  /// Streamed fragment `kind` ("text", "reasoning", "restart").
  void delta(const std::string& session_id, const std::string& kind,
             const std::string& text);
  /// Tool activity (turn_call::on_tool), published as tool_start or
  /// tool_end with the object of tool_event_json.
  void tool(const std::string& session_id, const tool_event& ev);
  /// The turn of `token` ended with `outcome`.
  void turn_ended(uint64_t token, const std::string& outcome);
  /// Another event of the live stream (e.g. "approval" or "clarify" with
  /// the pending set's event object, runtime/pending_json.hpp): `data` is
  /// the JSON text, published as is.
  void other(const std::string& name, std::string data);

  /// The JSON of one running turn (the snapshot's entries).
  static std::string turn_json(const running_turn& t);
  /// `s` cut to at most `max` bytes on a UTF-8 boundary.
  static std::string truncate(const std::string& s, size_t max);

private:
  void publish(turn_event ev);

  mutable std::mutex mtx_; // subs_, turns_, next_
  std::shared_ptr<const std::vector<std::shared_ptr<turn_subscriber>>> subs_
    = std::make_shared<std::vector<std::shared_ptr<turn_subscriber>>>();
  std::atomic<size_t> count_{0};
  std::map<uint64_t, running_turn> turns_;
  uint64_t next_ = 0;
};

} // namespace mibyan
