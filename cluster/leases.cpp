// Several gateways over one store (docs/cluster.md, "Several gateways"):
// the member's side of session leases. A gateway's runtime takes a
// session's lease before it runs a turn (runtime/session_lease_keeper.hpp);
// when another live gateway holds it, the turn is forwarded to that
// gateway's member as an ordinary (turn, cluster_turn), which runs it
// without forwarding again. A member declared lost has its leases ended at
// once, so a waiting turn takes the session over.
#include "cluster/internal.hpp"

#include <random>

#include "caf/all.hpp"

#include "base/log.hpp"
#include "runtime/runtime.hpp"
#include "runtime/session_lease_keeper.hpp"

namespace mibyan {

namespace {

bool forwardable(const peer_state& p) {
  return p.handle && is_gateway_role(p.info.role)
         && (p.info.state == "up" || p.info.state == "suspect");
}

} // namespace

uint64_t turn_forwards::add(callback cb, delta_sink on_delta,
                           tool_sink on_tool) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> g{mtx_};
  uint64_t id = 0;
  do
    id = rng();
  while (id == 0 || pending_.count(id) > 0);
  entry e;
  e.done = std::move(cb);
  if (on_delta || on_tool)
    e.sinks = std::make_shared<const std::pair<delta_sink, tool_sink>>(
      std::move(on_delta), std::move(on_tool));
  pending_.emplace(id, std::move(e));
  return id;
}

bool turn_forwards::streams(uint64_t id) {
  std::lock_guard<std::mutex> g{mtx_};
  auto it = pending_.find(id);
  return it != pending_.end() && it->second.sinks != nullptr;
}

void turn_forwards::event(uint64_t id, const cluster_turn_event& ev) {
  std::shared_ptr<const std::pair<delta_sink, tool_sink>> sinks;
  {
    std::lock_guard<std::mutex> g{mtx_};
    auto it = pending_.find(id);
    if (it == pending_.end())
      return;
    sinks = it->second.sinks;
  }
  if (!sinks)
    return;
  if (ev.kind == "tool") {
    if (sinks->second)
      sinks->second(ev.tool);
  } else if (sinks->first) {
    sinks->first(ev.kind, ev.text);
  }
}

void turn_forwards::finish(uint64_t id, bool delivered, turn_result out) {
  callback cb;
  {
    std::lock_guard<std::mutex> g{mtx_};
    auto it = pending_.find(id);
    if (it == pending_.end())
      return;
    cb = std::move(it->second.done);
    pending_.erase(it);
  }
  cb(delivered, std::move(out));
}

bool turn_forwards::has(uint64_t id) {
  std::lock_guard<std::mutex> g{mtx_};
  return pending_.count(id) > 0;
}

void turn_forwards::fail_all(const std::string& why) {
  std::map<uint64_t, entry> all;
  {
    std::lock_guard<std::mutex> g{mtx_};
    all.swap(pending_);
  }
  for (auto& [id, e] : all) {
    turn_result o;
    o.error = why;
    e.done(true, std::move(o));
  }
}

turn_forwarder make_turn_forwarder(caf::actor member,
                                   std::shared_ptr<turn_forwards> forwards) {
  caf::weak_actor_ptr weak = caf::actor_cast<caf::weak_actor_ptr>(member);
  return [weak, forwards](const std::string& node, const turn_call& call,
                          std::function<void(bool, turn_result)> done) {
    auto strong = caf::actor_cast<caf::actor>(weak.lock());
    if (!strong) {
      done(false, {});
      return;
    }
    cluster_turn t;
    t.session_id = call.session_id;
    t.prompt = call.prompt;
    t.provider = call.provider;
    t.provider.api_key.clear(); // keys never travel
    t.max_iterations = call.max_iterations;
    t.toolsets = call.toolsets;
    t.save_trajectory = call.save_trajectory;
    t.turn_key = call.turn_key;
    auto id = forwards->add(std::move(done), call.on_delta, call.on_tool);
    // A caller that listens gets the holder's deltas and tool events.
    if (call.on_delta || call.on_tool)
      t.stream_id = id;
    caf::anon_send(strong, forward_turn_atom_v, node, std::move(t), id);
  };
}

void forward_turn(cluster_actor* self, const std::string& node,
                  cluster_turn t, uint64_t id) {
  auto& st = self->state;
  auto fw = st.cfg.forwards;
  // Only ids the forwarder registered (the message is anonymous).
  if (!fw || !fw->has(id))
    return;
  auto it = st.peers.find(node);
  if (it == st.peers.end() || !forwardable(it->second)) {
    fw->finish(id, false, {});
    return;
  }
  st.forwarding[id] = node;
  MIBYAN_LOG(info, "cluster", "turn of session " << t.session_id
                                 << " forwarded to its lease holder "
                                 << node);
  self
    ->request(it->second.handle, caf::infinite, turn_atom_v, std::move(t))
    .then(
      [self, fw, id](turn_result& r) {
        self->state.forwarding.erase(id);
        fw->finish(id, true, std::move(r));
      },
      [self, fw, id, node](caf::error& e) {
        self->state.forwarding.erase(id);
        turn_result o;
        o.error = "gateway " + node + " did not answer the forwarded turn: "
                  + self->system().render(e);
        fw->finish(id, true, std::move(o));
      });
}

void forwards_lost(cluster_actor* self, const std::string& node) {
  auto& st = self->state;
  if (st.cfg.forwards)
    for (auto it = st.forwarding.begin(); it != st.forwarding.end();) {
      if (it->second != node) {
        ++it;
        continue;
      }
      // Not delivered: this gateway waits for the lost holder's lease
      // (ended just below) and runs the turn itself; what the holder
      // persisted stays, and its interrupted tool calls are reported.
      st.cfg.forwards->finish(it->first, false, {});
      it = st.forwarding.erase(it);
    }
  // Streams of turns it forwarded here stop; the turns go on.
  relays_lost(self, node);
  // Its leases end now: turns waiting for them take the sessions over.
  if (st.rt)
    session_holder_lost(*st.rt, node);
}

bool from_peer_member(cluster_actor* self) {
  const auto& s = self->current_sender();
  if (!s || s->node() == self->node())
    return false;
  for (auto& kv : self->state.peers)
    if (kv.second.caf_node == s->node())
      return true;
  return false;
}

} // namespace mibyan
