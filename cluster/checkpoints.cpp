// Kernel checkpoints in a cluster (docs/cluster.md, "Kernel state"): a
// worker's kernels hand their checkpoints to the session's gateway, which
// keeps them in its store, and a worker starting a kernel for a session
// fetches the latest one from there. The envelope is sealed with a key
// derived from the cluster key (actors/kernel_checkpoints.hpp), so every
// member can verify what another sealed; the gateway checks it before it
// stores it, and the restoring worker before its kernel reads it.
//
// Messages (all answered with a kernel_checkpoint whose `error` is "" on
// success):
//   (checkpoint_atom, kernel_checkpoint)  store it (`bytes` empty: drop
//                                         the session's checkpoints)
//   (restore_atom, std::string session)   the latest checkpoint
// From this process (the node's own kernels, on pool threads) they go to
// the session's gateway, or are served here when this node is it; from an
// authenticated peer they are served here. Store work runs on the hub's
// store threads (never on the blocking pool, whose threads may all be
// waiting for it) and its result comes back to the member as
// (checkpoint_atom, uint64_t op, kernel_checkpoint).
#include "cluster/internal.hpp"

#include "caf/all.hpp"

#include "actors/kernel_checkpoints.hpp"
#include "base/log.hpp"
#include "runtime/runtime_impl.hpp"

namespace mibyan {

namespace {

constexpr auto remote_timeout = std::chrono::seconds(60);

std::shared_ptr<kernel_checkpoints> hub_of(cluster_actor* self) {
  return self->state.rt ? kernel_checkpoints_of(*self->state.rt) : nullptr;
}

bool from_this_process(cluster_actor* self) {
  const auto& s = self->current_sender();
  return s && s->node() == self->node();
}

// The member that keeps `session`'s checkpoints: its gateway, or this
// node (no gateway known, or this node is it). "" = this node.
std::string keeper_of(cluster_actor* self, const std::string& session) {
  auto& st = self->state;
  auto it = st.hosted.find(session);
  if (it == st.hosted.end() || it->second.gateway == st.cfg.node_id
      || it->second.gateway == "client")
    return {};
  return it->second.gateway;
}

// Runs the store operation on the pool; its answer returns as a message.
void serve_locally(cluster_actor* self, kernel_checkpoint req, bool fetch,
                   caf::typed_response_promise<kernel_checkpoint> rp) {
  auto& st = self->state;
  auto hub = hub_of(self);
  if (!hub) {
    kernel_checkpoint out;
    out.session = req.session;
    out.error = "this node keeps no checkpoints";
    rp.deliver(std::move(out));
    return;
  }
  auto id = ++st.next_ckpt_op;
  st.ckpt_ops.emplace(id, rp);
  caf::actor_addr me = self->address(); // weak: the member may be gone
  auto* sys = &self->system();
  // A plain pointer: the hub waits for its running store jobs before it
  // goes, and a job must never hold the last reference (the hub would
  // then wait for the very thread it runs on).
  auto* store_hub = hub.get();
  auto job = [=, req = std::move(req)]() mutable {
    kernel_checkpoint out;
    out.session = req.session;
    if (fetch) {
      auto got = store_hub->fetch_sealed(req.session);
      if (!got) {
        out.error = got.error;
      } else {
        out.found = got->found;
        out.seq = got->seq;
        out.bytes = std::move(got->envelope);
        out.known_count = got->known_count;
      }
    } else if (req.bytes.empty()) {
      if (auto s = store_hub->drop(req.session); !s)
        out.error = s.error;
    } else if (auto s = store_hub->store_sealed(req.session, req.seq, req.bytes);
               !s) {
      out.error = s.error;
    }
    // Sent from an actor of this node: checkpoint_done takes completions
    // from this process only.
    if (auto member = caf::actor_cast<caf::actor>(me)) {
      caf::scoped_actor from{*sys};
      from->send(member, checkpoint_atom_v, id, std::move(out));
    }
  };
  // The hub's store threads, not the blocking pool: this node's kernels
  // ask from pool threads and block until answered (see
  // kernel_checkpoints::submit_store_job).
  if (!hub->submit_store_job(std::move(job))) {
    st.ckpt_ops.erase(id);
    kernel_checkpoint out;
    out.session = req.session;
    out.error = "the node is shutting down";
    rp.deliver(std::move(out));
  }
}

template <class... Ts>
void forward(cluster_actor* self, const std::string& keeper,
             caf::typed_response_promise<kernel_checkpoint> rp,
             const std::string& session, Ts&&... xs) {
  auto& st = self->state;
  auto it = st.peers.find(keeper);
  if (it == st.peers.end() || !it->second.handle) {
    kernel_checkpoint out;
    out.session = session;
    out.error = "the session's gateway " + keeper + " is not reachable";
    rp.deliver(std::move(out));
    return;
  }
  self->request(it->second.handle, remote_timeout, std::forward<Ts>(xs)...)
    .then(
      [rp](kernel_checkpoint& r) mutable { rp.deliver(std::move(r)); },
      [self, rp, session, keeper](caf::error& e) mutable {
        kernel_checkpoint out;
        out.session = session;
        out.error = "the session's gateway " + keeper
                    + " did not answer: " + self->system().render(e);
        rp.deliver(std::move(out));
      });
}

} // namespace

caf::result<kernel_checkpoint> checkpoint_request(cluster_actor* self,
                                                  kernel_checkpoint req,
                                                  bool fetch) {
  if (!sender_allowed(self))
    return caf::make_error(ec::invalid_request,
                           "not authenticated: complete the cluster "
                           "handshake");
  // Before the promise: making it takes the sender out of the message.
  auto keeper = from_this_process(self) ? keeper_of(self, req.session)
                                        : std::string{};
  auto rp = self->make_response_promise<kernel_checkpoint>();
  MIBYAN_LOG(debug, "cluster", "checkpoint " << (fetch ? "fetch" : "store")
             << " for session " << req.session << ": "
             << (keeper.empty() ? std::string{"kept here"}
                                : "kept by " + keeper));
  if (keeper.empty()) {
    serve_locally(self, std::move(req), fetch, rp);
  } else if (fetch) {
    auto session = req.session;
    forward(self, keeper, rp, session, restore_atom_v, session);
  } else {
    auto session = req.session;
    forward(self, keeper, rp, session, checkpoint_atom_v, std::move(req));
  }
  return rp;
}

void checkpoint_done(cluster_actor* self, uint64_t id, kernel_checkpoint r) {
  if (!from_this_process(self))
    return;
  auto& st = self->state;
  auto it = st.ckpt_ops.find(id);
  if (it == st.ckpt_ops.end())
    return;
  auto rp = it->second;
  st.ckpt_ops.erase(it);
  rp.deliver(std::move(r));
}

void note_routed_result(cluster_actor* self, const std::string& session,
                        const std::string& result_json, bool lost) {
  auto hub = hub_of(self);
  if (!hub || !hub->enabled())
    return;
  if (lost) {
    // A cell was running on a worker that was lost: it ran (at least in
    // part) after the last checkpoint.
    auto known = hub->known_count(session);
    if (known >= 0)
      hub->note_count(session, known + 1);
    return;
  }
  auto parsed = json::parse(result_json);
  if (!parsed || !parsed.v->is_object())
    return;
  // The worker checkpoints right after it answers: the gateway counts the
  // cell as covered (a worker lost in between is the one case it misses).
  if (auto k = parsed.v->find("kernel"); k && k->is_object())
    if (auto n = k->get_int("execution_count", -1); n >= 0) {
      hub->note_count(session, n);
      hub->note_covered(session, n);
    }
}

void install_checkpoint_routes(caf::actor_system& sys, caf::actor member,
                               kernel_checkpoints& hub) {
  // Called on pool threads by the node's kernels (blocking is fine there).
  auto ask = [&sys, member](auto... xs) -> kernel_checkpoint {
    caf::scoped_actor me{sys};
    kernel_checkpoint out;
    me->request(member, remote_timeout, xs...)
      .receive([&](kernel_checkpoint& r) { out = std::move(r); },
               [&](caf::error& e) { out.error = sys.render(e); });
    return out;
  };
  hub.set_remote(
    [ask](const std::string& session, uint64_t seq,
          std::string envelope) -> status {
      kernel_checkpoint c;
      c.session = session;
      c.seq = seq;
      c.bytes = std::move(envelope);
      auto r = ask(checkpoint_atom_v, std::move(c));
      return r.error.empty() ? status{}
                             : status::failure(status_code::unavailable,
                                               r.error);
    },
    [ask](const std::string& session)
      -> result<kernel_checkpoints::remote_fetch> {
      auto r = ask(restore_atom_v, session);
      if (!r.error.empty())
        return result<kernel_checkpoints::remote_fetch>::failure(
          status_code::unavailable, r.error);
      kernel_checkpoints::remote_fetch f;
      f.found = r.found;
      f.seq = r.seq;
      f.envelope = std::move(r.bytes);
      f.known_count = r.known_count;
      return f;
    },
    [ask](const std::string& session) -> status {
      kernel_checkpoint c;
      c.session = session;
      auto r = ask(checkpoint_atom_v, std::move(c));
      return r.error.empty() ? status{}
                             : status::failure(status_code::unavailable,
                                               r.error);
    });
}

} // namespace mibyan
