// Background deliveries of a runtime (runtime/background.hpp).
#include "runtime/background.hpp"

#include <utility>

#include "caf/all.hpp"

#include "actors/background_board.hpp"
#include "base/json.hpp"
#include "base/log.hpp"
#include "base/utc_time.hpp"
#include "runtime/runtime_impl.hpp"
#include "tools/agent/agent_tool_state.hpp"

namespace mibyan {

namespace {

background_board& board_of(runtime& rt) {
  return *runtime_access::of(rt).svc->background;
}

// The notice of a notify_on_complete process (docs/tools.md, "Background
// processes").
background_notice process_notice(const process_exit_notice& e) {
  background_notice n;
  n.session_id = e.session_id;
  n.kind = "process";
  n.id = e.process_id;
  n.status = e.status;
  n.at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
              std::chrono::system_clock::now().time_since_epoch())
              .count();
  auto what = e.status == "signal" ? std::string{"was killed by a signal"}
                                   : std::string{"exited"};
  n.headline = what + " with code " + std::to_string(e.exit_code);
  auto cmd = e.command.size() > 300 ? e.command.substr(0, 300) + "..."
                                    : e.command;
  // The tail: the last 2,000 bytes, from a line start when there is one.
  std::string tail = e.output_tail;
  if (tail.size() > 2000) {
    size_t from = tail.size() - 2000;
    while (from < tail.size()
           && (static_cast<unsigned char>(tail[from]) & 0xC0) == 0x80)
      ++from;
    auto nl = tail.find('\n', from);
    if (nl != std::string::npos && nl + 1 < tail.size())
      from = nl + 1;
    tail = tail.substr(from);
  }
  n.text = "[background process " + e.process_id + ": " + e.status + " "
           + std::to_string(e.exit_code) + "]\nThe background process you "
           + "started " + what + " with code " + std::to_string(e.exit_code)
           + ".\nCommand: " + cmd + "\nOutput (tail):\n"
           + (tail.empty() ? std::string{"(none)"} : tail);
  return n;
}

} // namespace

void background_router::detach() {
  std::lock_guard<std::mutex> g{mtx_};
  p_ = nullptr;
}

void background_router::deliver(background_notice n) {
  std::lock_guard<std::mutex> g{mtx_};
  if (p_ == nullptr)
    return;
  conversation_actor conv;
  {
    std::lock_guard<std::mutex> guard{p_->mtx};
    if (p_->closing)
      return;
    if (auto it = p_->conversations.find(n.session_id);
        it != p_->conversations.end())
      conv = it->second;
  }
  if (conv) {
    caf::anon_send(conv, notice_atom_v, std::move(n));
    return;
  }
  // No conversation (a session closed meanwhile, a `mibyan tool` call):
  // nothing to deliver to, but listeners hear of it.
  MIBYAN_LOG(info, "runtime",
             "background " << n.kind << " " << n.id << " of session "
                           << n.session_id
                           << " ended with no conversation to tell");
  p_->svc->background->announce(n);
}

std::shared_ptr<background_router> wire_background(runtime_impl& p) {
  auto router = std::make_shared<background_router>(&p);
  if (p.svc->agent_tools)
    p.svc->agent_tools->on_process_exit = [router](process_exit_notice e) {
      router->deliver(process_notice(e));
    };
  // Finished background work appears on the live stream.
  p.svc->background->watch(
    [hub = std::weak_ptr<turn_event_hub>(p.events)](
      const background_notice& n) {
      auto h = hub.lock();
      if (!h || !h->active())
        return;
      json::value v;
      v["type"] = "background";
      v["session_id"] = n.session_id;
      v["kind"] = n.kind;
      v["id"] = n.id;
      v["status"] = n.status;
      v["headline"] = turn_event_hub::truncate(n.headline,
                                               turn_event_hub::max_field_bytes);
      v["at"] = iso_utc_from_ms(n.at_ms);
      h->other("background", v.dump());
    });
  return router;
}

uint64_t watch_background(runtime& rt,
                          std::function<void(const background_notice&)> fn) {
  return board_of(rt).watch(std::move(fn));
}

void unwatch_background(runtime& rt, uint64_t token) {
  board_of(rt).unwatch(token);
}

size_t background_running(runtime& rt, const std::string& session_id) {
  return board_of(rt).running(session_id);
}

size_t wait_background(runtime& rt, const std::string& session_id,
                       std::chrono::milliseconds timeout) {
  return board_of(rt).wait_idle(session_id, timeout);
}

} // namespace mibyan
