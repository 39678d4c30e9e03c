// `mibyan serve` and `mibyan dashboard`: the node's HTTP API and its web
// dashboard under /ui/ (docs/serve.md). One code path; `dashboard` only
// differs in its default address (127.0.0.1:9119), its ready line and
// having no --join. Parses the flags,
// checks the bind/auth policy, starts the runtime and serve/http_server, and
// waits for SIGTERM or SIGINT on the main thread (sigwait), then shuts the
// server down gracefully and exits 0. With --join the runtime is a gateway
// member of a cluster (cluster/node.hpp, docs/cluster.md): its turns'
// tool calls are placed on workers, and SIGTERM also drains and leaves.
#include "cli/commands.hpp"

#include <atomic>
#include <csignal>
#include <memory>
#include <iostream>

#include <arpa/inet.h>
#include <pthread.h>

#include "base/log.hpp"
#include "cli/dashboard_api.hpp"
#include "cli/listen_address.hpp"
#include "cluster/node.hpp"
#include "runtime/cron_scheduler.hpp"
#include "serve/http_server.hpp"
#include "runtime/runtime.hpp"

namespace mibyan::cli {

namespace {

void usage() {
  std::cerr
    << "usage: mibyan serve [--listen HOST:PORT] [--provider P] [--model M]\n"
       "                    [--base-url URL] [--api-key K] [--toolsets a,b]\n"
       "                    [--max-iterations N] [--no-context-files]\n"
       "                    [--join HOST:PORT [--cluster-listen HOST:PORT]]\n"
       "  Serves the agent over an OpenAI-compatible HTTP API (default\n"
       "  127.0.0.1:8642; port 0 picks a free port). The client key comes\n"
       "  from MIBYAN_SERVER_KEY or server.key in the config, never a flag.\n"
       "  --join makes the server a cluster gateway: tool calls run on the\n"
       "  cluster's workers (key: MIBYAN_CLUSTER_KEY or cluster.key; the\n"
       "  member listens on --cluster-listen, default 127.0.0.1:0).\n";
}

void dashboard_usage() {
  std::cerr
    << "usage: mibyan dashboard [--listen HOST:PORT] [--provider P] [--model M]\n"
       "                        [--base-url URL] [--api-key K] [--toolsets a,b]\n"
       "                        [--max-iterations N] [--connect HOST:PORT]\n"
       "  Serves the web dashboard at /ui/ over the local $MIBYAN_HOME\n"
       "  (default 127.0.0.1:9119), with the same HTTP API as `mibyan serve`.\n"
       "  Off loopback it needs MIBYAN_SERVER_KEY (or server.key).\n"
       "  --connect shows a cluster's: its /ui/api/ requests go to that\n"
       "  gateway member (key: MIBYAN_CLUSTER_KEY or cluster.key).\n";
}

// What differs between `mibyan serve` and `mibyan dashboard`: both run
// the same server (API and /ui/) through run_node below.
struct node_flavour {
  const char* name;
  const char* default_listen;
  bool allows_join;
  void (*usage)();
};

int run_node(const std::vector<std::string>& args, const global_flags& flags,
             const node_flavour& fl);

} // namespace

int serve_command(const std::vector<std::string>& args,
                  const global_flags& flags) {
  return run_node(args, flags,
                  node_flavour{"serve", "127.0.0.1:8642", true, usage});
}

int dashboard_command(const std::vector<std::string>& args,
                      const global_flags& flags) {
  return run_node(args, flags,
                  node_flavour{"dashboard", "127.0.0.1:9119", false,
                               dashboard_usage});
}

namespace {

int run_node(const std::vector<std::string>& args, const global_flags& flags,
             const node_flavour& fl) {
  const std::string me = std::string{"mibyan "} + fl.name;
  turn_call tmpl;
  std::string listen = fl.default_listen;
  std::string connect;
  bool no_context_files = false;
  node_args cluster;
  cluster.role = "gateway";
  cluster.listen = "127.0.0.1:0";
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "-h" || a == "--help") {
      fl.usage();
      return 0;
    }
    if (a == "--no-context-files") {
      no_context_files = true;
      continue;
    }
    bool cluster_flag = a == "--join" || a == "--cluster-listen";
    // `mibyan dashboard --connect HOST:PORT`: the dashboard of a cluster
    // gateway (cli/dashboard_api.hpp).
    bool connect_flag = !fl.allows_join && a == "--connect";
    bool takes_value = a == "--listen" || (cluster_flag && fl.allows_join)
                       || connect_flag
                       || (is_agent_flag(a) && a != "--session"
                           && a != "--resume");
    if (!takes_value) {
      std::cerr << me << ": unknown option " << a
                << (a == "--session" || a == "--resume" ? " (clients choose sessions with the "
                                       "X-Mibyan-Session header)"
                                     : "")
                << "\n";
      fl.usage();
      return 2;
    }
    if (i + 1 >= args.size()) {
      std::cerr << me << ": " << a << " needs a value\n";
      return 2;
    }
    const auto& v = args[++i];
    if (a == "--listen") {
      listen = v;
    } else if (connect_flag) {
      connect = v;
    } else if (a == "--join") {
      cluster.join = v;
    } else if (a == "--cluster-listen") {
      cluster.listen = v;
    } else if (auto err = apply_agent_flag(a, v, tmpl); !err.empty()) {
      std::cerr << me << ": " << err << "\n";
      return 2;
    }
  }
  if (cluster.join.empty() && cluster.listen != "127.0.0.1:0") {
    std::cerr << me << ": --cluster-listen needs --join\n";
    return 2;
  }
  http_server_settings st;
  if (auto err = parse_listen(listen, st.host, st.port); !err.empty()) {
    std::cerr << me << ": " << err << "\n";
    return 2;
  }
  options opts;
  if (!load_config_or_report(flags, opts))
    return 2;
  if (!check_store_at_startup(opts, me))
    return 2;
  if (no_context_files)
    opts.agent.context_files = false;
  st.key = opts.secret("MIBYAN_SERVER_KEY");
  if (st.key.empty())
    st.key = opts.server.key;
  if (st.key.empty() && !is_loopback(st.host)) {
    std::cerr << me << ": refusing to listen on " << st.host
              << " without a key: set MIBYAN_SERVER_KEY (or server.key) or "
                 "listen on 127.0.0.1\n";
    return 2;
  }
  st.limits = opts.server;
  st.effective = std::make_shared<const options>(opts);
  st.model_id = !tmpl.provider.model.empty() ? tmpl.provider.model
                                             : opts.model.default_model;
  if (st.model_id.empty())
    st.model_id = "mibyan";
  st.turn = tmpl;
  // Stateless requests each get a new stored session; a per-process
  // counter keeps ids unique however many arrive in one second.
  auto counter = std::make_shared<std::atomic<uint64_t>>(0);
  st.new_session_id = [counter] {
    return new_session_id() + "_" + std::to_string(++*counter);
  };
  // Only the main thread takes these signals (sigwait below); threads
  // started from here on inherit the mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR2);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  std::string error;
  if (!connect.empty()) {
    // Every /ui/api/* request but sign-in is the gateway's.
    if (auto connected = connect_dashboard(connect, opts, st); !connected) {
      std::cerr << me << ": " << connected.error << "\n";
      return 2;
    }
  }
  std::unique_ptr<runtime> rt;
  std::unique_ptr<cluster_process> node;
  if (!cluster.join.empty()) {
    // Turns that peers send this gateway use the same overrides.
    cluster.provider = tmpl.provider;
    cluster.provider.api_key.clear(); // a gateway's turns never carry it
    // The gateway answers `mibyan dashboard --connect` with the same
    // functions as its HTTP server's /ui/api/* (cli/dashboard_api.hpp).
    auto hooks = std::make_shared<dashboard_hooks>();
    cluster.dashboard = gateway_dashboard_handler(hooks);
    int code = 0;
    node = cluster_process::start(cluster, std::move(opts), me, &code);
    if (!node)
      return code;
    st.ui = cluster_hooks(*node);
    hooks->set(st.ui);
    MIBYAN_LOG(info, "serve", "gateway " << node->node_id() << " joined "
                                         << cluster.join << ", member at "
                                         << node->address());
  } else {
    auto made = create_runtime(std::move(opts));
    if (!made) {
      std::cerr << "mibyan: cannot start the runtime: " << made.error << "\n";
      return 1;
    }
    rt = std::move(*made);
  }
  // Scheduled jobs (docs/cron.md): `serve` runs the scheduler of its
  // store; a gateway member started it already (cluster/node.cpp).
  if (rt && fl.allows_join && config_of(*rt).cron.enabled) {
    cron_scheduler_options so;
    so.holder = "mibyan serve";
    so.provider = tmpl.provider;
    if (auto cs = start_cron_scheduler(*rt, so); !cs)
      MIBYAN_LOG(warning, "cron", "scheduler not started: " << cs.error);
  }
  auto started = http_server::start(node ? node->rt() : *rt, std::move(st));
  if (!started) {
    std::cerr << me << ": " << started.error << "\n";
    return 1;
  }
  auto server = std::move(*started);
  auto host = server->host();
  if (host.find(':') != std::string::npos)
    host = "[" + host + "]";
  std::cout << me << " listening on http://" << host << ":"
            << server->port() << std::endl;
  int sig = 0;
  for (;;) {
    if (sigwait(&set, &sig) == 0 && (sig == SIGINT || sig == SIGTERM))
      break;
  }
  MIBYAN_LOG(info, fl.name, "signal " << sig << ": shutting down");
  server->shutdown(std::chrono::seconds(30));
  server.reset();
  if (node)
    node->drain_and_leave();
  node.reset();
  rt.reset();
  return 0;
}

} // namespace
} // namespace mibyan::cli
