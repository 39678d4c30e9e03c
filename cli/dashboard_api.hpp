// File: cli/dashboard_api.hpp
//
// The composition root's glue between the dashboard API (serve/) and a
// cluster (cluster/), which may not include each other (docs/serve.md,
// "dashboard --connect"):
//   - the HTTP-free answer of a node to one /ui/api/* request, used by a
//     gateway for the requests a `mibyan dashboard --connect` process
//     forwards (the same functions its own HTTP server uses);
//   - the forwarding side: a cluster client, authenticated with the
//     cluster key like `mibyan run --connect`, that answers the dashboard
//     server's /ui/api/* requests with the gateway's answers.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.hpp"
#include "cluster/node.hpp"
#include "serve/http_server.hpp"

namespace mibyan::cli {

/// Answers one /ui/api/* request of the node of `rt` without HTTP: the
/// operator endpoints and the store endpoints (serve/ui_ops.hpp); anything
/// else (sign-in is the dashboard's own) is 404. `done` once, any thread.
void answer_dashboard_api(runtime& rt, const serve::ui_ops_hooks& hooks,
                          const serve::ops_request& req, serve::ops_done done);

/// The hooks a gateway's handler reads at each request; set once the
/// member runs (cluster_hooks). Thread-safe.
class dashboard_hooks {
public:
  void set(serve::ui_ops_hooks h);
  serve::ui_ops_hooks get() const;

private:
  mutable std::mutex mtx_;
  serve::ui_ops_hooks hooks_;
};

/// The handler a gateway member answers forwarded requests with.
dashboard_handler
gateway_dashboard_handler(std::shared_ptr<const dashboard_hooks> slot);

/// The hooks of a running member: its node id and cluster view.
serve::ui_ops_hooks cluster_hooks(cluster_process& node);

/// Connects to the gateway at `address` (cluster key from the
/// configuration, as `mibyan run --connect`) and makes `st.ui_forward`
/// send every request there, one at a time on a thread of its own. Fails
/// as cluster_client::connect does, the message naming the address. The
/// connection lives as long as `st.ui_forward`.
status connect_dashboard(const std::string& address, const options& opts,
                         http_server_settings& st);

} // namespace mibyan::cli
