// The cluster member actor: membership, heartbeats, failure detection,
// drain (docs/cluster.md), and the behavior that hands the rest to its
// files: the handshake (handshake.cpp), tool routing (routing.cpp), turns,
// checkpoints and the dashboard. Every handler but the handshake's checks
// that the message comes from this process or from an authenticated peer.
#include "cluster/internal.hpp"

#include <cstdlib>
#include <random>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "base/json.hpp"
#include "base/log.hpp"
#include "base/crypto.hpp"
#include "cluster/node.hpp"
#include "actors/kernel_checkpoints.hpp"
#include "runtime/runtime.hpp"
#include "runtime/session_lease_keeper.hpp"
#include "tools/registry.hpp"

namespace mibyan {

const char* cluster_state::name = "cluster_member";

namespace {

using namespace std::chrono;

int64_t load_milli() {
  double l[1] = {0};
  if (::getloadavg(l, 1) == 1)
    return static_cast<int64_t>(l[0] * 1000);
  return 0;
}

// Publishes the members by state for the metrics scrape.
void publish_census(cluster_actor* self) {
  auto& st = self->state;
  if (!st.cfg.census)
    return;
  std::map<std::string, int64_t> by_state;
  ++by_state[st.left ? "left" : st.state];
  for (auto& kv : st.peers)
    ++by_state[kv.second.info.state];
  std::lock_guard<std::mutex> g{st.cfg.census->mtx};
  st.cfg.census->by_state = std::move(by_state);
}

} // namespace

std::vector<member_info> member_view(cluster_actor* self) {
  std::vector<member_info> out{self_info(self)};
  for (auto& kv : self->state.peers)
    out.push_back(kv.second.info);
  return out;
}

bool member_gone(const std::string& state) {
  return state == "lost" || state == "left";
}

void add_peer(cluster_actor* self, const std::string& id,
              const std::string& role, const std::string& address,
              caf::actor handle) {
  auto& st = self->state;
  auto [it, fresh] = st.peers.try_emplace(id);
  auto& p = it->second;
  bool back = !fresh && member_gone(p.info.state);
  // A member back on a new connection has a new proxy that compares equal
  // to the old one: watch it again.
  if (fresh || back || p.handle != handle) {
    p.handle = handle;
    self->monitor(handle);
  }
  p.caf_node = handle.node();
  p.info.node_id = id;
  p.info.address = address;
  p.info.role = role;
  if (fresh || back || p.info.state == "suspect")
    p.info.state = "up";
  p.last_seen = st.cfg.clock->steady_now();
  if (fresh)
    MIBYAN_LOG(info, "cluster", "member " << id << " (" << role << ") at "
                                          << address << " joined");
  else if (back)
    MIBYAN_LOG(warning, "cluster", "member " << id << " at " << address
                                             << " is reachable again");
}

namespace {

void broadcast_heartbeat(cluster_actor* self) {
  auto me = self_info(self);
  for (auto& kv : self->state.peers)
    if (kv.second.info.state != "left" && kv.second.handle)
      self->send(kv.second.handle, heartbeat_atom_v, me);
}

void finish_drain(cluster_actor* self) {
  auto& st = self->state;
  if (st.left)
    return;
  if (st.busy > 0) {
    // The deadline passed: interrupt what still runs here.
    MIBYAN_LOG(warning, "cluster", "drain deadline: interrupting "
                                     << st.busy << " running call(s)");
    for (auto& kv : st.hosted)
      self->send(st.local, interrupt_atom_v,
                 interrupt_request{kv.first, "the node is shutting down"});
    for (auto& kv : st.placement)
      if (kv.second == st.cfg.node_id)
        self->send(st.local, interrupt_atom_v,
                   interrupt_request{kv.first, "the node is shutting down"});
  }
  st.left = true;
  for (auto& kv : st.peers)
    if (!member_gone(kv.second.info.state) && kv.second.handle)
      self->send(kv.second.handle, leave_atom_v, st.cfg.node_id);
  MIBYAN_LOG(info, "cluster", "node " << st.cfg.node_id << " left the cluster");
  for (auto& rp : st.drain_waiters)
    rp.deliver(true);
  st.drain_waiters.clear();
}

} // namespace

void check_drain(cluster_actor* self) {
  auto& st = self->state;
  if (!st.drain_requested || st.left)
    return;
  auto now = st.cfg.clock->steady_now();
  bool late = now >= st.drain_deadline;
  if (st.busy > 0 && !late)
    return;
  auto hub = kernel_checkpoints_of(*st.rt);
  if (!late && !st.drain_flushing && is_worker_role(st.cfg.role) && hub
      && hub->enabled()) {
    // Sessions move with their state: each idle kernel takes a final
    // checkpoint, stored by the session's gateway, before the node leaves
    // (docs/cluster.md, "Kernel state").
    st.drain_flushing = true;
    auto left = std::chrono::duration_cast<milliseconds>(st.drain_deadline
                                                         - now);
    self->request(st.kernels, std::max(left, milliseconds(1000)),
                  checkpoint_atom_v)
      .then(
        [self](bool ok) {
          MIBYAN_LOG(info, "cluster", "drain: final kernel checkpoints "
                                        << (ok ? "stored" : "incomplete"));
          finish_drain(self);
        },
        [self](caf::error& e) {
          MIBYAN_LOG(warning, "cluster", "drain: final kernel checkpoints "
                                           "failed: "
                                             << self->system().render(e));
          finish_drain(self);
        });
    return;
  }
  if (st.drain_flushing && !late)
    return; // the final checkpoints are being stored
  finish_drain(self);
}

caf::error not_allowed() {
  return caf::make_error(ec::invalid_request,
                         "not authenticated: complete the cluster handshake");
}

bool sender_allowed(cluster_actor* self) {
  const auto& s = self->current_sender();
  if (!s)
    return false;
  if (s->node() == self->node())
    return true;
  return self->state.authed.count(s->node()) > 0;
}

member_info self_info(cluster_actor* self) {
  auto& st = self->state;
  member_info m;
  m.node_id = st.cfg.node_id;
  m.address = st.cfg.address;
  m.role = st.cfg.role;
  m.state = st.left ? "left" : st.state;
  m.sessions = static_cast<int64_t>(st.hosted.size());
  m.kernels = st.kernel_count;
  m.load_milli = load_milli();
  m.max_sessions = st.cfg.max_sessions;
  return m;
}

void mark_lost(cluster_actor* self, const std::string& id,
               const std::string& why, bool left) {
  auto& st = self->state;
  auto it = st.peers.find(id);
  if (it == st.peers.end())
    return;
  auto& p = it->second;
  if (p.info.state == "left" || (p.info.state == "lost" && !left))
    return;
  p.info.state = left ? "left" : "lost";
  if (left)
    MIBYAN_LOG(info, "cluster", "member " << id << " at " << p.info.address
                                          << " left the cluster");
  else
    MIBYAN_LOG(warning, "cluster", "member " << id << " ("
                                             << p.info.role << ") at "
                                             << p.info.address
                                             << " lost: " << why);
  worker_lost(self, id, left ? "it left the cluster" : why);
  gateway_lost(self, id);
  forwards_lost(self, id);
  if (!left)
    schedule_redial(self, id);
}

caf::behavior cluster_member(cluster_actor* self, cluster_settings cfg,
                             runtime* rt, tool_dispatcher_actor local,
                             kernel_registry_actor kernels,
                             caf::actor middleman) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.rt = rt;
  st.local = std::move(local);
  st.kernels = std::move(kernels);
  st.middleman = std::move(middleman);
  // Wrong types and strays from peers are dropped; the node keeps serving.
  self->set_default_handler(caf::drop);
  // So are error messages (a peer's default handler bounces a message it
  // does not know as one): CAF's default error handler would end the
  // member.
  self->set_error_handler([](caf::error& err) {
    MIBYAN_LOG(warning, "cluster", "ignored an error message: "
                                     << caf::to_string(err));
  });
  // An exit message can come from any peer (CAF delivers them unchecked):
  // the member ignores them all; the node stops it with a local kill_atom.
  self->set_exit_handler([](caf::exit_msg& em) {
    MIBYAN_LOG(warning, "cluster", "ignored an exit message from "
                                     << caf::to_string(em.source));
  });
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    if (st.front && dm.source == st.front.address()) {
      replace_front(self);
      return;
    }
    if (auto w = st.auth_watch.find(dm.source); w != st.auth_watch.end()) {
      // The client's connection (or the client) ended: its node id is
      // free for anyone to claim, so it is no longer authenticated.
      st.authed.erase(w->second);
      st.hellos.erase(w->second);
      st.auth_watch.erase(w);
      return;
    }
    for (auto& kv : st.peers) {
      if (kv.second.handle && kv.second.handle.address() == dm.source) {
        auto id = kv.first;
        auto node = kv.second.caf_node;
        mark_lost(self, id, "its connection dropped", false);
        st.authed.erase(node);
        return;
      }
    }
  });
  self->delayed_send(self, milliseconds(st.cfg.heartbeat_ms), tick_atom_v);
  publish_census(self);
  return {
    // -- handshake (open to anyone) --------------------------------------
    [self](hello_atom, cluster_hello& h) -> cluster_challenge {
      return answer_hello(self, h);
    },
    [self](auth_atom, cluster_proof& p) -> cluster_welcome {
      return answer_auth(self, p);
    },
    [self](caf::publish_atom, uint32_t attempt) {
      const auto& s = self->current_sender();
      if (s && s->node() == self->node() && !self->state.left)
        publish_front(self, attempt);
    },
    [self](tick_atom, std::string& id) {
      const auto& s = self->current_sender();
      if (s && s->node() == self->node())
        redial(self, id);
    },
    [self](kill_atom) {
      const auto& s = self->current_sender();
      if (!s || s->node() != self->node())
        return;
      auto& st = self->state;
      st.left = true;
      if (st.front)
        self->send(st.front, kill_atom_v);
      st.front = nullptr;
      self->quit(caf::exit_reason::user_shutdown);
    },
    // -- membership ------------------------------------------------------
    [self](join_atom, std::string& address) -> caf::result<std::string> {
      if (!sender_allowed(self))
        return not_allowed();
      auto rp = self->make_response_promise<std::string>();
      join_address(self, address,
                   [rp](std::string reason) mutable { rp.deliver(reason); });
      return rp;
    },
    [self](caf::put_atom, std::string& address, std::string& host,
           uint16_t port, caf::actor& front) {
      const auto& s = self->current_sender();
      if (!s || s->node() != self->node())
        return;
      auto& st = self->state;
      st.cfg.address = address;
      st.listen_host = host;
      st.port = port;
      st.front = front;
      self->monitor(front);
    },
    [self](heartbeat_atom, member_info& info) {
      auto& st = self->state;
      if (!sender_allowed(self))
        return;
      auto it = st.peers.find(info.node_id);
      if (it == st.peers.end()
          || it->second.caf_node != self->current_sender()->node())
        return;
      auto& p = it->second;
      if (p.info.state == "left")
        return;
      bool back = p.info.state == "lost";
      auto address = p.info.address;
      p.info = info;
      p.info.address = address;
      p.info.state = info.state == "draining" ? "draining" : "up";
      if (info.state == "left") {
        mark_lost(self, info.node_id, "", true);
        return;
      }
      p.last_seen = st.cfg.clock->steady_now();
      if (back)
        MIBYAN_LOG(warning, "cluster", "member " << info.node_id
                                                 << " is reachable again");
    },
    [self](leave_atom, std::string& id) {
      auto& st = self->state;
      if (!sender_allowed(self))
        return;
      auto it = st.peers.find(id);
      if (it == st.peers.end()
          || it->second.caf_node != self->current_sender()->node())
        return;
      mark_lost(self, id, "", true);
    },
    [self](tick_atom) {
      auto& st = self->state;
      if (st.left)
        return;
      broadcast_heartbeat(self);
      auto now = st.cfg.clock->steady_now();
      std::vector<std::pair<std::string, int64_t>> lost;
      for (auto& kv : st.peers) {
        auto& p = kv.second;
        if (member_gone(p.info.state))
          continue;
        auto silent = duration_cast<milliseconds>(now - p.last_seen).count();
        if (silent > st.cfg.failure_timeout_ms) {
          lost.emplace_back(kv.first, silent);
        } else if (silent > st.cfg.failure_timeout_ms / 2
                   && p.info.state == "up") {
          p.info.state = "suspect";
          MIBYAN_LOG(info, "cluster", "member " << kv.first << " suspect: no "
                                                << "heartbeat for " << silent
                                                << " ms");
        }
      }
      for (auto& [id, silent] : lost)
        mark_lost(self, id, "no heartbeat for " + std::to_string(silent)
                              + " ms", false);
      // Hosted sessions idle past the kernel idle timeout are forgotten
      // (their kernels are reaped by the registry's own timer).
      auto idle = seconds(st.cfg.kernel_idle_timeout_s);
      for (auto it = st.hosted.begin(); it != st.hosted.end();)
        it = now - it->second.last_used > idle ? st.hosted.erase(it)
                                               : std::next(it);
      self->request(st.kernels, seconds(5), stats_atom_v)
        .then(
          [self](std::string& stats) {
            auto parsed = json::parse(stats);
            if (parsed && parsed.v->is_object()) {
              auto k = parsed.v->find("kernels");
              if (k != nullptr && k->is_number())
                self->state.kernel_count = k->as_int();
            }
          },
          [](caf::error&) {});
      check_drain(self);
      publish_census(self);
      self->delayed_send(self, milliseconds(st.cfg.heartbeat_ms),
                         tick_atom_v);
    },
    [self](members_atom) -> caf::result<std::vector<member_info>> {
      if (!sender_allowed(self))
        return not_allowed();
      return member_view(self);
    },
    [self](tools_atom) -> caf::result<std::vector<std::string>> {
      if (!sender_allowed(self))
        return not_allowed();
      std::vector<std::string> names;
      for (auto t : tools_of(*self->state.rt).all())
        names.push_back(t->name());
      return names;
    },
    [self](drain_atom) -> caf::result<bool> {
      auto& st = self->state;
      const auto& s = self->current_sender();
      if (!s || s->node() != self->node())
        return not_allowed();
      auto rp = self->make_response_promise<bool>();
      st.drain_waiters.push_back(rp);
      if (!st.drain_requested) {
        st.drain_requested = true;
        st.state = "draining";
        st.drain_deadline = st.cfg.clock->steady_now()
                            + milliseconds(st.cfg.drain_timeout_ms);
        MIBYAN_LOG(info, "cluster", "node " << st.cfg.node_id << " draining ("
                                            << st.busy << " call(s) running)");
        broadcast_heartbeat(self);
      }
      check_drain(self);
      return rp;
    },
    // -- kernel checkpoints (checkpoints.cpp) ----------------------------
    [self](checkpoint_atom,
           kernel_checkpoint& c) -> caf::result<kernel_checkpoint> {
      return checkpoint_request(self, std::move(c), false);
    },
    [self](restore_atom,
           std::string& session) -> caf::result<kernel_checkpoint> {
      kernel_checkpoint c;
      c.session = std::move(session);
      return checkpoint_request(self, std::move(c), true);
    },
    [self](checkpoint_atom, uint64_t id, kernel_checkpoint& r) {
      checkpoint_done(self, id, std::move(r));
    },
    // -- tool calls (routing.cpp) ----------------------------------------
    [self](invoke_atom, tool_request& req) -> caf::result<tool_response> {
      if (!sender_allowed(self))
        return not_allowed();
      auto rp = self->make_response_promise<tool_response>();
      route_call(self, std::move(req), rp);
      return rp;
    },
    [self](interrupt_atom, interrupt_request& req) {
      auto& st = self->state;
      if (!sender_allowed(self))
        return;
      // A client's interrupt also reaches the session's conversation here
      // (the runtime's own dispatcher message is anonymous and ignored).
      if (self->current_sender()->node() != self->node()
          && is_gateway_role(st.cfg.role))
        st.rt->interrupt(req.session_id, req.reason);
      auto it = st.placement.find(req.session_id);
      if (it == st.placement.end())
        return;
      if (it->second == st.cfg.node_id) {
        self->send(st.local, interrupt_atom_v, req);
        return;
      }
      auto peer = st.peers.find(it->second);
      if (peer != st.peers.end() && peer->second.handle)
        self->send(peer->second.handle, work_atom_v, req);
    },
    [self](work_atom, tool_request& req) -> caf::result<tool_response> {
      if (!sender_allowed(self))
        return not_allowed();
      // make_response_promise takes the sender out of the current message.
      auto sender = self->current_sender()->node();
      auto rp = self->make_response_promise<tool_response>();
      work_call(self, sender, std::move(req), rp);
      return rp;
    },
    [self](work_atom, interrupt_request& req) {
      if (sender_allowed(self))
        self->send(self->state.local, interrupt_atom_v, req);
    },
    // -- agent turns (gateway; turns.cpp) ------------------------------
    [self](turn_atom, cluster_turn& t) -> caf::result<turn_result> {
      return take_turn(self, t);
    },
    [self](delta_atom, cluster_turn_event& ev) {
      forwarded_turn_event(self, ev);
    },
    [self](ack_atom, uint64_t id, uint64_t seq) {
      forwarded_turn_ack(self, id, seq);
    },
    [self](forward_turn_atom, std::string& node, cluster_turn& t,
           uint64_t id) {
      const auto& s = self->current_sender();
      if (s && s->node() != self->node())
        return;
      forward_turn(self, node, std::move(t), id);
    },
    // -- the operator console (dashboard.cpp) ----------------------------
    [self](dashboard_atom, dashboard_query& q)
      -> caf::result<dashboard_reply> {
      return answer_dashboard(self, std::move(q));
    },
    [self](end_atom, uint64_t id, dashboard_reply& r) {
      dashboard_done(self, id, std::move(r));
    },
    [self](end_atom, uint64_t id, turn_result& r) {
      turn_done(self, id, std::move(r));
    },
  };
}

} // namespace mibyan
