// The gateway side of `mibyan dashboard --connect` (docs/serve.md): a
// client's dashboard_query is answered by the handler the composition root
// installed (cluster_settings::dashboard, the same HTTP-free function the
// node's own HTTP server uses), through the member actor: the handler's
// callback may run on any thread, the promise is delivered here.
#include <random>

#include "caf/all.hpp"

#include "base/log.hpp"
#include "cluster/internal.hpp"

namespace mibyan {

caf::result<dashboard_reply> answer_dashboard(cluster_actor* self,
                                              dashboard_query q) {
  auto& st = self->state;
  if (!sender_allowed(self))
    return caf::make_error(ec::invalid_request,
                           "not authenticated: complete the cluster "
                           "handshake");
  if (!st.cfg.dashboard || st.rt == nullptr)
    return dashboard_reply{
      404, "application/json",
      R"({"error":{"message":"this cluster member serves no dashboard API",)"
      R"("type":"invalid_request_error","code":"not_found"}})"};
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t id = 0;
  do
    id = rng();
  while (id == 0 || st.dashboards.count(id) > 0);
  auto rp = self->make_response_promise<dashboard_reply>();
  st.dashboards.emplace(id, rp);
  auto me = caf::actor_cast<caf::actor>(self);
  dashboard_request r{std::move(q.method), std::move(q.path),
                      std::move(q.query), std::move(q.body)};
  st.cfg.dashboard(*st.rt, r, [me, id](dashboard_answer a) {
    caf::anon_send(me, end_atom_v, id,
                   dashboard_reply{static_cast<int32_t>(a.status),
                                   std::move(a.content_type),
                                   std::move(a.body)});
  });
  return rp;
}

void dashboard_done(cluster_actor* self, uint64_t id, dashboard_reply r) {
  // Ids are random, so a peer cannot answer someone else's request.
  auto& st = self->state;
  auto it = st.dashboards.find(id);
  if (it == st.dashboards.end())
    return;
  auto rp = it->second;
  st.dashboards.erase(it);
  rp.deliver(std::move(r));
}

} // namespace mibyan
