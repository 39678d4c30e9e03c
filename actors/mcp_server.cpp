#include "actors/mcp_server.hpp"

#include "caf/all.hpp"

#include "base/log.hpp"
#include "messages/type_ids.hpp"
#include "tools/mcp/mcp_session.hpp"

namespace mibyan {

namespace {

using clock = std::chrono::steady_clock;

struct mcp_server_state {
  std::shared_ptr<mcp_session> session;
  bool job_running = false; // one upkeep job at a time
  clock::time_point last_ping = clock::now();
  static const char* name;
};

const char* mcp_server_state::name = "mcp_server";

// How often the actor looks at its session.
constexpr auto tick_interval = std::chrono::milliseconds{500};

caf::behavior mcp_server(caf::stateful_actor<mcp_server_state>* self,
                         services_ptr svc,
                         std::shared_ptr<mcp_session> session) {
  self->state.session = session;
  self->delayed_send(self, tick_interval, tick_atom_v);
  return {
    [=](tick_atom) {
      self->delayed_send(self, tick_interval, tick_atom_v);
      auto& st = self->state;
      if (st.job_running)
        return;
      auto s = st.session;
      const auto& c = s->config();
      if (s->current_state() != mcp_session::state::connected
          || s->active_calls() > 0)
        return;
      auto now = clock::now();
      std::function<void()> job;
      bool stdio = c.transport == "stdio";
      if (stdio && c.idle_timeout_seconds > 0
          && now - s->last_used()
               >= std::chrono::seconds{c.idle_timeout_seconds}) {
        job = [s] { s->disconnect("idle recycle"); };
        MIBYAN_LOG(info, "mcp", c.name << ": recycling after "
                                       << c.idle_timeout_seconds
                                       << " s without calls");
      } else if (stdio && c.max_lifetime_seconds > 0
                 && now - s->connected_at()
                      >= std::chrono::seconds{c.max_lifetime_seconds}) {
        job = [s] { s->disconnect("lifetime recycle"); };
        MIBYAN_LOG(info, "mcp", c.name << ": recycling after "
                                       << c.max_lifetime_seconds
                                       << " s of lifetime");
      } else if (c.keepalive_interval > 0
                 && now - std::max(st.last_ping, s->last_used())
                      >= std::chrono::seconds{c.keepalive_interval}) {
        st.last_ping = now;
        auto timeout = std::chrono::seconds{
          std::min<int64_t>(c.connect_timeout, 30)};
        job = [s, timeout] {
          if (auto r = s->ping(timeout); !r) {
            MIBYAN_LOG(warning, "mcp", s->config().name
                                         << ": keepalive ping failed: "
                                         << r.error);
            s->disconnect("keepalive ping failed");
          }
        };
      }
      if (!job)
        return;
      st.job_running = true;
      auto me = caf::actor_cast<caf::actor>(self);
      bool queued = svc->pool->submit([job, me] {
        job();
        caf::anon_send(me, done_atom_v);
      });
      if (!queued)
        st.job_running = false;
    },
    [=](done_atom) { self->state.job_running = false; },
  };
}

} // namespace

caf::actor spawn_mcp_server(caf::actor_system& sys, services_ptr svc,
                            std::shared_ptr<mcp_session> session) {
  return sys.spawn(mcp_server, std::move(svc), std::move(session));
}

} // namespace mibyan
