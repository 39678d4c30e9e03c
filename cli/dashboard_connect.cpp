// `mibyan dashboard --connect HOST:PORT [--listen HOST:PORT]` (docs/serve.md,
// "dashboard --connect"): serves the dashboard API of a cluster gateway.
// Every /ui/api/* request but sign-in is forwarded to the gateway over the
// cluster protocol (cli/dashboard_api.hpp); the HTTP server is serve's own.
// Without --connect the dashboard serves the local $MIBYAN_HOME.
#include "cli/commands.hpp"

#include <csignal>
#include <iostream>

#include <arpa/inet.h>
#include <pthread.h>

#include "base/log.hpp"
#include "cli/dashboard_api.hpp"
#include "cluster/node.hpp"
#include "serve/http_server.hpp"

namespace mibyan::cli {

namespace {

void dashboard_usage() {
  std::cerr << "usage: mibyan dashboard [--listen HOST:PORT] [--connect "
               "HOST:PORT]\n"
               "  Serves the operator dashboard (default 127.0.0.1:9119).\n"
               "  --connect serves a cluster's: its API requests go to that\n"
               "  gateway member (key: MIBYAN_CLUSTER_KEY or cluster.key).\n";
}

} // namespace

int dashboard_command(const std::vector<std::string>& args,
                      const global_flags& flags) {
  std::string listen = "127.0.0.1:9119", connect;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "-h" || a == "--help") {
      dashboard_usage();
      return 0;
    }
    if ((a != "--listen" && a != "--connect") || i + 1 >= args.size()) {
      std::cerr << "mibyan dashboard: "
                << (a == "--listen" || a == "--connect"
                      ? a + " needs a value"
                      : "unknown option " + a)
                << "\n";
      dashboard_usage();
      return 2;
    }
    (a == "--listen" ? listen : connect) = args[++i];
  }
  http_server_settings st;
  if (!split_host_port(listen, st.host, st.port)) {
    std::cerr << "mibyan dashboard: --listen expects HOST:PORT, got '"
              << listen << "'\n";
    return 2;
  }
  if (st.host == "localhost")
    st.host = "127.0.0.1";
  options opts;
  if (!load_config_or_report(flags, opts))
    return 2;
  st.key = opts.secret("MIBYAN_SERVER_KEY");
  if (st.key.empty())
    st.key = opts.server.key;
  if (st.key.empty() && !is_loopback_host(st.host)) {
    std::cerr << "mibyan dashboard: refusing to listen on " << st.host
              << " without a key: set MIBYAN_SERVER_KEY (or server.key) or "
                 "listen on 127.0.0.1\n";
    return 2;
  }
  st.limits = opts.server;
  st.model_id = opts.model.default_model.empty() ? "mibyan"
                                                  : opts.model.default_model;
  st.new_session_id = [] { return new_session_id(); };
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  if (!connect.empty()) {
    if (auto err = connect_dashboard(connect, opts, st); !err.empty()) {
      std::cerr << "mibyan dashboard: " << err << "\n";
      return 2;
    }
  }
  std::string error;
  auto rt = runtime::create(std::move(opts), &error);
  if (!rt) {
    std::cerr << "mibyan: cannot start the runtime: " << error << "\n";
    return 1;
  }
  auto server = http_server::start(*rt, std::move(st), &error);
  if (!server) {
    std::cerr << "mibyan dashboard: " << error << "\n";
    return 1;
  }
  auto host = server->host();
  if (host.find(':') != std::string::npos)
    host = "[" + host + "]";
  std::cout << "mibyan dashboard listening on http://" << host << ":"
            << server->port() << std::endl;
  int sig = 0;
  for (;;)
    if (sigwait(&set, &sig) == 0 && (sig == SIGINT || sig == SIGTERM))
      break;
  MIBYAN_LOG(info, "dashboard", "signal " << sig << ": shutting down");
  server->shutdown(std::chrono::seconds(10));
  server.reset();
  rt.reset();
  return 0;
}

} // namespace mibyan::cli
