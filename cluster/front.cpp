// The published front door of a node (docs/cluster.md, "Handshake"): it
// forwards the handshake to the member and nothing else; when a peer kills
// it, the member publishes a new one on the same port.
#include "cluster/internal.hpp"

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "base/log.hpp"

namespace mibyan {

using namespace std::chrono;

caf::behavior cluster_front(caf::event_based_actor* self, caf::actor member) {
  self->set_default_handler(caf::drop);
  self->set_exit_handler([](caf::exit_msg&) {});
  return {
    [self, member](hello_atom a, cluster_hello& h) {
      return self->delegate(member, a, std::move(h));
    },
    [self, member](auth_atom a, cluster_proof& p) {
      return self->delegate(member, a, std::move(p));
    },
    [self](kill_atom) {
      const auto& s = self->current_sender();
      if (s && s->node() == self->node())
        self->quit(caf::exit_reason::user_shutdown);
    },
  };
}


// The front door died (a peer can kill it): a new one is published on the
// same port, so the node stays reachable.
void replace_front(cluster_actor* self) {
  auto& st = self->state;
  if (st.left)
    return;
  MIBYAN_LOG(warning, "cluster", "the published front door was stopped by a "
                                 "peer; publishing a new one on port "
                                   << st.port);
  auto old = st.front.address();
  st.front = self->spawn(cluster_front, caf::actor_cast<caf::actor>(self));
  self->monitor(st.front);
  self->send(st.middleman, caf::unpublish_atom_v, old, st.port);
  publish_front(self, 0);
}

// The old listener closes asynchronously: retry for a few seconds.
void publish_front(cluster_actor* self, uint32_t attempt) {
  auto& st = self->state;
  self->request(st.middleman, seconds(10), caf::publish_atom_v, st.port,
                caf::actor_cast<caf::strong_actor_ptr>(st.front),
                std::set<std::string>{}, st.listen_host, true)
    .then(
      [self](uint16_t port) {
        MIBYAN_LOG(info, "cluster", "new front door listening on port "
                                      << port);
      },
      [self, attempt](caf::error& e) {
        if (attempt < 50 && !self->state.left) {
          self->delayed_send(self, milliseconds(100), caf::publish_atom_v,
                             attempt + 1);
          return;
        }
        MIBYAN_LOG(error, "cluster", "cannot publish the new front door: "
                                       << self->system().render(e));
      });
}


} // namespace mibyan
