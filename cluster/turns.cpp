// Agent turns a gateway takes over the cluster (docs/cluster.md, "Several
// gateways over one store"): a client's `(turn, cluster_turn)` runs in this
// gateway's runtime; a peer gateway's (a turn forwarded to this lease
// holder, leases.cpp) runs here without being forwarded again. The turn's
// key (cluster_turn::turn_key) travels with it down to the store, so a
// client that sends the turn again after a gateway loss does not run it
// twice.
//
// Streaming of forwarded turns (docs/cluster.md): a gateway that forwards
// a turn whose caller listens (an HTTP stream) sets cluster_turn::stream_id;
// the holder then sends the turn's deltas and tool events back to that
// gateway's member as (delta, cluster_turn_event), in order, before the
// turn's result. The holder keeps at most `relay_window` events
// unacknowledged; later text deltas of one kind are merged while they wait,
// and a stream whose waiting events pass `relay_max_bytes` stops with a
// last event of kind "stream_stopped" (the answer still comes whole). A forwarding gateway that is lost stops the
// stream; the turn goes on at the holder.
#include "cluster/internal.hpp"

#include <algorithm>
#include <deque>
#include <mutex>
#include <random>

#include "caf/all.hpp"

#include "base/log.hpp"
#include "runtime/runtime.hpp"
#include "runtime/session_lease_keeper.hpp"

namespace mibyan {

namespace {

constexpr uint64_t relay_window = 64;
constexpr uint64_t ack_every = 8;
constexpr size_t relay_max_bytes = size_t{8} << 20;

size_t event_bytes(const cluster_turn_event& ev) {
  return ev.text.size() + ev.tool.args_json.size() + ev.tool.result_json.size();
}

} // namespace

// Thread safety: push/finish run on runtime threads, ack/stop on the
// member actor; one mutex guards everything, and callbacks run outside it.
struct turn_relay {
  turn_relay(caf::actor from, caf::actor to, uint64_t id, uint64_t turn)
    : member(std::move(from)), target(std::move(to)), stream_id(id),
      turn_id(turn) {}

  /// This node's member actor: the events' sender (the forwarding gateway
  /// accepts them only from the holder), as the turn's answer is.
  const caf::actor member;
  const caf::actor target;
  const uint64_t stream_id;
  /// The member's id of the turn (cluster_state::turns).
  const uint64_t turn_id;

  /// A delta (turn_call::on_delta).
  void push(const std::string& kind, const std::string& text) {
    std::unique_lock<std::mutex> g{mtx_};
    if (stopped_)
      return;
    bool mergeable = kind == "text" || kind == "reasoning";
    if (mergeable && !queue_.empty() && queue_.back().kind == kind)
      queue_.back().text += text;
    else
      queue_.push_back(cluster_turn_event{stream_id, 0, kind, text, {}});
    queued_bytes_ += text.size();
    bound(g);
  }

  /// A tool event (turn_call::on_tool); never merged.
  void push(const tool_event& tool) {
    std::unique_lock<std::mutex> g{mtx_};
    if (stopped_)
      return;
    queue_.push_back(cluster_turn_event{stream_id, 0, "tool", {}, tool});
    queued_bytes_ += event_bytes(queue_.back());
    bound(g);
  }

  void ack(uint64_t seq) {
    std::unique_lock<std::mutex> g{mtx_};
    acked_ = std::max(acked_, std::min(seq, sent_));
    pump(g);
  }

  /// `last` runs once every event was sent (or the stream stopped).
  void finish(std::function<void()> last) {
    std::unique_lock<std::mutex> g{mtx_};
    last_ = std::move(last);
    pump(g);
  }

  void stop() {
    std::unique_lock<std::mutex> g{mtx_};
    stopped_ = true;
    queue_.clear();
    queued_bytes_ = 0;
    pump(g);
  }

private:
  // Stops the stream when too much waits, then sends what it may. The
  // forwarding gateway is told with one last event of kind
  // "stream_stopped" (sent past the window: it must not wait behind the
  // events that filled it), so its caller learns that the text streamed of
  // the current round is void and the answer comes whole at the end.
  void bound(std::unique_lock<std::mutex>& g) {
    if (queued_bytes_ > relay_max_bytes) {
      MIBYAN_LOG(warning, "cluster",
                 "stream " << stream_id << " of a forwarded turn stopped: "
                           << queued_bytes_ << " bytes wait for the "
                                               "forwarding gateway");
      stopped_ = true;
      queue_.clear();
      queued_bytes_ = 0;
      caf::send_as(member, target, delta_atom_v,
                   cluster_turn_event{
                     stream_id, ++sent_, "stream_stopped",
                     "the stream of this forwarded turn stopped: more than "
                       + std::to_string(relay_max_bytes >> 20)
                       + " MiB waited for this gateway; the answer comes "
                         "whole at the end",
                     {}});
    }
    pump(g);
  }

  // Sends what the window allows; runs `last_` (unlocked) once nothing
  // waits.
  void pump(std::unique_lock<std::mutex>& g) {
    while (!queue_.empty() && sent_ - acked_ < relay_window) {
      auto ev = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= std::min(queued_bytes_, event_bytes(ev));
      ev.seq = ++sent_;
      caf::send_as(member, target, delta_atom_v, std::move(ev));
    }
    if (!queue_.empty() || !last_)
      return;
    auto last = std::move(last_);
    last_ = nullptr;
    g.unlock();
    last();
  }

  std::mutex mtx_;
  std::deque<cluster_turn_event> queue_;
  size_t queued_bytes_ = 0;
  uint64_t sent_ = 0;
  uint64_t acked_ = 0;
  bool stopped_ = false;
  std::function<void()> last_;
};

namespace {

// The member id of the peer that sent the current message ("" = none).
std::string sending_peer(cluster_actor* self) {
  const auto& s = self->current_sender();
  if (!s)
    return {};
  for (auto& kv : self->state.peers)
    if (kv.second.caf_node == s->node())
      return kv.first;
  return {};
}

} // namespace

caf::result<turn_result> take_turn(cluster_actor* self, cluster_turn& t) {
  auto& st = self->state;
  if (!sender_allowed(self))
    return not_allowed();
  turn_result out;
  out.session_id = t.session_id;
  if (!is_gateway_role(st.cfg.role)) {
    out.error = "node " + st.cfg.node_id
                + " is a worker; send agent turns to a gateway (role "
                  "gateway or all)";
    out.config_error = true;
    return out;
  }
  if (st.state != "up") {
    out.error = "node " + st.cfg.node_id + " is draining";
    return out;
  }
  // Who sent it, read before the response promise takes the sender over
  // (current_sender() is empty after make_response_promise).
  bool from_peer = from_peer_member(self);
  auto peer = sending_peer(self);
  auto requester = caf::actor_cast<caf::actor>(self->current_sender());
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t id = 0;
  do
    id = rng();
  while (st.turns.count(id) > 0);
  auto rp = self->make_response_promise<turn_result>();
  st.turns.emplace(id, rp);
  ++st.busy;
  turn_call call;
  call.session_id = t.session_id;
  call.prompt = t.prompt;
  auto pick = [](const std::string& asked, const std::string& own) {
    return !asked.empty() ? asked : own;
  };
  call.provider.provider = pick(t.provider.provider, st.cfg.provider.provider);
  call.provider.model = pick(t.provider.model, st.cfg.provider.model);
  call.provider.base_url = pick(t.provider.base_url, st.cfg.provider.base_url);
  call.max_iterations = t.max_iterations;
  call.toolsets = t.toolsets;
  call.save_trajectory = t.save_trajectory;
  call.turn_key = t.turn_key;
  call.source = "cluster";
  auto me = caf::actor_cast<caf::actor>(self);
  std::function<void(turn_result)> answer = [me, id](turn_result o) {
    caf::anon_send(me, end_atom_v, id, std::move(o));
  };
  if (!from_peer) {
    st.rt->run_turn_async(call, std::move(answer));
    return rp;
  }
  if (t.stream_id != 0 && !peer.empty() && requester) {
    // The events go to the forwarding member, the answer after them.
    auto relay = std::make_shared<turn_relay>(me, requester, t.stream_id,
                                              id);
    st.relays[{peer, t.stream_id}] = relay;
    call.on_delta = [relay](const std::string& kind, const std::string& text) {
      relay->push(kind, text);
    };
    call.on_tool = [relay](const tool_event& ev) { relay->push(ev); };
    answer = [relay, plain = std::move(answer)](turn_result o) {
      auto out = std::make_shared<turn_result>(std::move(o));
      relay->finish([plain, out] { plain(std::move(*out)); });
    };
  }
  run_forwarded_turn(*st.rt, call, std::move(answer));
  return rp;
}

void forwarded_turn_event(cluster_actor* self, cluster_turn_event& ev) {
  auto& st = self->state;
  auto fw = st.cfg.forwards;
  auto it = st.forwarding.find(ev.stream_id);
  // Only from the gateway this turn was forwarded to.
  if (!fw || it == st.forwarding.end() || sending_peer(self) != it->second)
    return;
  fw->event(ev.stream_id, ev);
  if (ev.seq % ack_every == 0)
    self->send(caf::actor_cast<caf::actor>(self->current_sender()),
               ack_atom_v, ev.stream_id, ev.seq);
}

void forwarded_turn_ack(cluster_actor* self, uint64_t id, uint64_t seq) {
  auto peer = sending_peer(self);
  if (peer.empty())
    return;
  auto it = self->state.relays.find({peer, id});
  if (it != self->state.relays.end())
    it->second->ack(seq);
}

void relays_lost(cluster_actor* self, const std::string& node) {
  auto& relays = self->state.relays;
  for (auto it = relays.lower_bound({node, 0});
       it != relays.end() && it->first.first == node; ++it)
    it->second->stop();
}

void turn_done(cluster_actor* self, uint64_t id, turn_result r) {
  // Sent by run_turn_async's callback; ids are random, so a peer cannot
  // answer someone else's turn.
  auto& st = self->state;
  auto it = st.turns.find(id);
  if (it == st.turns.end())
    return;
  auto rp = it->second;
  st.turns.erase(it);
  --st.busy;
  for (auto r = st.relays.begin(); r != st.relays.end(); ++r)
    if (r->second->turn_id == id) {
      st.relays.erase(r);
      break;
    }
  rp.deliver(std::move(r));
  check_drain(self);
}

} // namespace mibyan
