// The runtime's scrape-time gauges (docs/metrics.md): the session store's
// size and the MCP servers' states. The callbacks hold weak references
// and are detached first when the runtime ends (runtime_impl).
#include "runtime/runtime_impl.hpp"

#include <map>

#include "actors/services.hpp"
#include "base/runtime_metrics.hpp"
#include "storage/session_store.hpp"
#include "tools/mcp/mcp_session.hpp"
#include "tools/mcp/mcp_tools.hpp"

namespace mibyan {

void attach_metrics(runtime_impl& p) {
  metrics::register_all();
  if (p.store) {
    std::weak_ptr<session_store> weak = p.store;
    p.metric_hooks.push_back(
      metrics::store_used_bytes().attach([weak](metrics::sample_sink& out) {
        if (auto s = weak.lock())
          out.add({}, static_cast<double>(s->stats().used_bytes));
      }));
    p.metric_hooks.push_back(
      metrics::store_file_bytes().attach([weak](metrics::sample_sink& out) {
        if (auto s = weak.lock())
          out.add({}, static_cast<double>(s->stats().disk_bytes));
      }));
  }
  if (p.svc && p.svc->mcp) {
    std::weak_ptr<mcp_manager> weak = p.svc->mcp;
    p.metric_hooks.push_back(
      metrics::mcp_servers().attach([weak](metrics::sample_sink& out) {
        auto m = weak.lock();
        if (!m)
          return;
        for (auto& s : m->sessions())
          out.add({mcp_session::state_name(s->current_state())}, 1);
      }));
  }
}

} // namespace mibyan
