// File: runtime/background.hpp
//
// Background work of a runtime's sessions (docs/agent_loop.md,
// "Background deliveries"): delegate_task children started with
// `background: true` and terminal processes started with
// `notify_on_complete: true`. For the runtime's own files and front ends
// (`mibyan run` waits for a session's children, `mibyan chat` announces
// finished work); applications see the same events on the live stream as
// "background" events (runtime/turn_events.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/runtime.hpp"
#include "messages/background_notice.hpp"

namespace mibyan {

/// Calls `fn` for every background notice of `rt` from now on (on a
/// runtime thread: return promptly, never block). Returns a token for
/// unwatch_background. Any thread.
uint64_t watch_background(runtime& rt,
                          std::function<void(const background_notice&)> fn);
void unwatch_background(runtime& rt, uint64_t token);

/// Background children of `session_id` running now.
size_t background_running(runtime& rt, const std::string& session_id);

/// Waits until `session_id` has no background child running, at most
/// `timeout`; returns how many still run. Blocks the caller (never a
/// runtime thread).
size_t wait_background(runtime& rt, const std::string& session_id,
                       std::chrono::milliseconds timeout);

/// Routes a notify_on_complete process's end to its session's
/// conversation (runtime-internal; set up by wire_runtime). The runtime
/// detaches it before it tears its actors down; after that, deliveries are
/// dropped.
class background_router {
public:
  explicit background_router(runtime_impl* p) : p_(p) {}
  void detach();
  /// Sends `n` to the conversation of `n.session_id`; without one, only
  /// announces it on the runtime's board.
  void deliver(background_notice n);

private:
  std::mutex mtx_;
  runtime_impl* p_;
};

/// Wires the background deliveries of `p` (the process-exit hook of the
/// agent tools, the live-stream publisher). Called by wire_runtime.
std::shared_ptr<background_router> wire_background(runtime_impl& p);

} // namespace mibyan
