// `mibyan node` (a cluster member) and `mibyan nodes` (its member list);
// docs/cluster.md.
#include "cli/commands.hpp"

#include <iomanip>
#include <iostream>
#include <sstream>

#include "base/json.hpp"
#include "cli/dashboard_api.hpp"
#include "cluster/client.hpp"
#include "cluster/node.hpp"
#include "runtime/runtime.hpp"

namespace mibyan::cli {

namespace {

void node_usage() {
  std::cerr << "usage: mibyan node --listen HOST:PORT [--join HOST:PORT]\n"
               "                   [--role gateway|worker|all] [--workdir DIR]\n"
               "                   [--provider P] [--model M] [--base-url URL]\n"
               "  Runs a cluster member until SIGTERM (then drains). The key\n"
               "  comes from MIBYAN_CLUSTER_KEY or cluster.key.\n";
}

void nodes_usage() {
  std::cerr << "usage: mibyan nodes --connect HOST:PORT [--json]\n";
}

} // namespace

int node_command(const std::vector<std::string>& args,
                 const global_flags& flags) {
  node_args a;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& f = args[i];
    std::string* target = nullptr;
    if (f == "--listen")
      target = &a.listen;
    else if (f == "--join")
      target = &a.join;
    else if (f == "--role")
      target = &a.role;
    else if (f == "--workdir")
      target = &a.workdir;
    else if (f == "--provider")
      target = &a.provider.provider;
    else if (f == "--model")
      target = &a.provider.model;
    else if (f == "--base-url")
      target = &a.provider.base_url;
    else if (f == "-h" || f == "--help") {
      node_usage();
      return 0;
    }
    if (target == nullptr || i + 1 >= args.size()) {
      std::cerr << "mibyan node: "
                << (target ? f + " needs a value" : "unknown argument " + f)
                << "\n";
      node_usage();
      return 2;
    }
    *target = args[++i];
  }
  if (a.listen.empty()) {
    std::cerr << "mibyan node: --listen HOST:PORT is required\n";
    node_usage();
    return 2;
  }
  options opts;
  if (!load_config_or_report(flags, opts))
    return 2;
  // A worker keeps no sessions; a gateway's store must open.
  if (a.role != "worker" && !check_store_at_startup(opts, "mibyan node"))
    return 2;
  if (!a.provider.provider.empty())
    opts.model.provider = a.provider.provider;
  if (!a.provider.model.empty())
    opts.model.default_model = a.provider.model;
  if (!a.provider.base_url.empty())
    opts.model.base_url = a.provider.base_url;
  // A gateway answers `mibyan dashboard --connect` (cli/dashboard_api.hpp).
  auto hooks = std::make_shared<dashboard_hooks>();
  a.dashboard = gateway_dashboard_handler(hooks);
  a.on_start = [hooks](cluster_process& node) {
    hooks->set(cluster_hooks(node));
  };
  return run_node(a, std::move(opts));
}

int nodes_command(const std::vector<std::string>& args,
                  const global_flags& flags) {
  std::string connect;
  bool as_json = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--connect" && i + 1 < args.size()) {
      connect = args[++i];
    } else if (args[i] == "--json") {
      as_json = true;
    } else if (args[i] == "-h" || args[i] == "--help") {
      nodes_usage();
      return 0;
    } else {
      std::cerr << "mibyan nodes: unknown argument " << args[i] << "\n";
      nodes_usage();
      return 2;
    }
  }
  if (connect.empty()) {
    nodes_usage();
    return 2;
  }
  options opts;
  if (!load_config_or_report(flags, opts))
    return 2;
  auto client = cluster_client::connect(connect, opts);
  if (!client) {
    std::cerr << "mibyan nodes: " << client.error << "\n";
    return cluster_client::refused(client.get_status()) ? 2 : 1;
  }
  auto text = (*client)->members_json();
  if (!text) {
    std::cerr << "mibyan nodes: " << text.error << "\n";
    return 1;
  }
  if (as_json) {
    std::cout << *text << std::endl;
    return 0;
  }
  auto parsed = json::parse(*text);
  if (!parsed || !parsed.v->is_array())
    return 1;
  std::cout << std::left << std::setw(12) << "ID" << std::setw(24)
            << "ADDRESS" << std::setw(9) << "ROLE" << std::setw(10)
            << "STATE" << std::setw(10) << "SESSIONS" << std::setw(9)
            << "KERNELS"
            << "LOAD\n";
  for (auto& e : parsed.v->as_array()) {
    std::ostringstream load;
    load << std::fixed << std::setprecision(2) << e["load"].as_double();
    std::cout << std::setw(12) << e["id"].as_string() << std::setw(24)
              << e["address"].as_string() << std::setw(9)
              << e["role"].as_string() << std::setw(10)
              << e["state"].as_string() << std::setw(10)
              << e["sessions"].as_int() << std::setw(9)
              << e["kernels"].as_int() << load.str() << "\n";
  }
  return 0;
}

} // namespace mibyan::cli
