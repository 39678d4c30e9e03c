// The cluster handshake (docs/cluster.md, "Handshake"), both sides. The
// initiator (join_address) sends hello, checks the challenge's protocol
// version, type digest and server proof, sends its own proof and adds the
// member it reached, then dials the members that one knows. The acceptor
// (answer_hello, answer_auth) answers anyone: a hello gets a challenge or a
// refusal, a proof is checked against the pending hello of the sender's
// node, and only then is that node authenticated (sender_allowed). Every
// refusal is a one-line reason, logged on both sides. Thread: the member
// actor's own; nothing here blocks (the connect and each step are
// requests with a timeout).
#include "cluster/internal.hpp"

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "base/crypto.hpp"
#include "base/log.hpp"
#include "cluster/node.hpp"

namespace mibyan {

using namespace std::chrono;


void join_address(cluster_actor* self, const std::string& address,
                  std::function<void(std::string)> done) {
  auto& st = self->state;
  std::string host;
  uint16_t port = 0;
  if (!split_host_port(address, host, port)) {
    done("bad member address '" + address + "' (expected HOST:PORT)");
    return;
  }
  if (address == st.cfg.address || st.connecting.count(address) > 0) {
    done({});
    return;
  }
  st.connecting.insert(address);
  auto finish = [self, address, done](std::string reason) {
    self->state.connecting.erase(address);
    done(std::move(reason));
  };
  auto& sys = self->system();
  auto timeout = seconds(10);
  self->request(st.middleman, timeout, caf::connect_atom_v, host, port)
    .then(
      [self, address, finish, timeout](caf::node_id&,
                                       caf::strong_actor_ptr& ptr,
                                       std::set<std::string>&) {
        if (!ptr) {
          finish("nothing is published at " + address);
          return;
        }
        auto peer = caf::actor_cast<caf::actor>(ptr);
        const auto& cfg = self->state.cfg;
        auto nonce = random_hex(16);
        cluster_hello h{cfg.node_id, cfg.role, cfg.address,
                        cluster_protocol_version, cfg.digest, nonce};
        self->request(peer, timeout, hello_atom_v, std::move(h))
          .then(
            [self, address, finish, timeout, peer,
             nonce](cluster_challenge& c) {
              const auto& cfg = self->state.cfg;
              if (!c.refusal.empty()) {
                MIBYAN_LOG(warning, "cluster",
                           "refused by " << address << ": " << c.refusal);
                finish(c.refusal);
                return;
              }
              auto mismatch = protocol_mismatch(
                cfg.node_id, cluster_protocol_version, cfg.digest, c.node_id,
                c.version, c.digest);
              if (!mismatch.empty()) {
                MIBYAN_LOG(warning, "cluster", mismatch);
                finish(mismatch);
                return;
              }
              bool key_ok = proof_equal(
                c.proof, server_proof(cfg.key, nonce, c.node_id, cfg.node_id));
              // The proof goes out even when the peer's failed, so both
              // sides log the refusal.
              cluster_proof p{cfg.node_id, client_proof(cfg.key, c.nonce,
                                                        cfg.node_id,
                                                        c.node_id)};
              self->request(peer, timeout, auth_atom_v, std::move(p))
                .then(
                  [self, address, finish, key_ok, c](cluster_welcome& w) {
                    auto& st = self->state;
                    if (!key_ok) {
                      auto reason = "wrong cluster key: node " + c.node_id
                                    + " at " + address
                                    + " and node " + st.cfg.node_id
                                    + " do not share the cluster key";
                      MIBYAN_LOG(warning, "cluster", reason);
                      finish(reason);
                      return;
                    }
                    if (!w.refusal.empty()) {
                      MIBYAN_LOG(warning, "cluster", "refused by "
                                                       << address << ": "
                                                       << w.refusal);
                      finish(w.refusal);
                      return;
                    }
                    if (c.node_id == st.cfg.node_id) {
                      finish("node id " + c.node_id + " is taken");
                      return;
                    }
                    if (!w.member) {
                      finish("node " + c.node_id + " sent no member handle");
                      return;
                    }
                    st.authed.insert(w.member.node());
                    add_peer(self, c.node_id, c.role, c.address, w.member);
                    for (auto& m : w.members) {
                      if (m.node_id == st.cfg.node_id || member_gone(m.state)
                          || m.address.empty())
                        continue;
                      auto known = st.peers.find(m.node_id);
                      if (known != st.peers.end()
                          && !member_gone(known->second.info.state))
                        continue;
                      auto addr = m.address;
                      join_address(self, addr, [addr](std::string r) {
                        if (!r.empty())
                          MIBYAN_LOG(warning, "cluster",
                                     "cannot reach member at " << addr << ": "
                                                               << r);
                      });
                    }
                    finish({});
                  },
                  [self, address, finish](caf::error& e) {
                    finish("handshake with " + address + " failed: "
                           + self->system().render(e));
                  });
            },
            [self, address, finish](caf::error& e) {
              finish("handshake with " + address + " failed: "
                     + self->system().render(e));
            });
      },
      [&sys, address, finish](caf::error& e) {
        finish("cannot connect to " + address + ": " + sys.render(e));
      });
}

cluster_challenge answer_hello(cluster_actor* self, cluster_hello& h) {
  auto& st = self->state;
  const auto& cfg = st.cfg;
  cluster_challenge c;
  c.node_id = cfg.node_id;
  c.role = cfg.role;
  c.address = cfg.address;
  c.version = cluster_protocol_version;
  c.digest = cfg.digest;
  const auto& sender = self->current_sender();
  if (!sender) {
    c.refusal = "anonymous hello";
    return c;
  }
  if (h.node_id.empty() || h.node_id.size() > 128 || h.nonce.size() < 16
      || h.nonce.size() > 256 || h.address.size() > 512) {
    c.refusal = "malformed hello";
    return c;
  }
  auto mismatch = protocol_mismatch(cfg.node_id, cluster_protocol_version,
                                    cfg.digest, h.node_id, h.version,
                                    h.digest);
  if (!mismatch.empty()) {
    MIBYAN_LOG(warning, "cluster", "refused " << h.node_id << ": "
                                              << mismatch);
    c.refusal = mismatch;
    return c;
  }
  if (st.hellos.size() >= 4096)
    st.hellos.erase(st.hellos.begin());
  pending_hello ph{h, random_hex(16)};
  c.nonce = ph.nonce;
  c.proof = server_proof(cfg.key, h.nonce, cfg.node_id, h.node_id);
  st.hellos[sender->node()] = std::move(ph);
  return c;
}

cluster_welcome answer_auth(cluster_actor* self, cluster_proof& p) {
  auto& st = self->state;
  const auto& sender = self->current_sender();
  cluster_welcome w;
  if (!sender) {
    w.refusal = "anonymous proof";
    return w;
  }
  auto it = st.hellos.find(sender->node());
  if (it == st.hellos.end()) {
    w.refusal = "no handshake in progress: send hello first";
    return w;
  }
  auto ph = std::move(it->second);
  st.hellos.erase(it);
  auto expected = client_proof(st.cfg.key, ph.nonce, ph.hello.node_id,
                               st.cfg.node_id);
  if (p.node_id != ph.hello.node_id
      || !proof_equal(expected, p.proof)) {
    w.refusal = "wrong cluster key: node " + ph.hello.node_id
                + " and node " + st.cfg.node_id
                + " do not share the cluster key";
    MIBYAN_LOG(warning, "cluster", "refused " << ph.hello.node_id << ": "
                                              << w.refusal);
    return w;
  }
  if (ph.hello.role != "client" && ph.hello.node_id == st.cfg.node_id) {
    w.refusal = "node id " + st.cfg.node_id + " is taken";
    return w;
  }
  st.authed.insert(sender->node());
  auto peer = caf::actor_cast<caf::actor>(sender);
  if (ph.hello.role != "client") {
    add_peer(self, ph.hello.node_id, ph.hello.role, ph.hello.address,
             peer);
  } else if (st.auth_watch.emplace(peer.address(), sender->node())
               .second) {
    self->monitor(peer);
  }
  w.members = member_view(self);
  w.member = caf::actor_cast<caf::actor>(self);
  return w;
}

} // namespace mibyan
