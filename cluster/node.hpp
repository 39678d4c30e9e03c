// File: cluster/node.hpp
//
// `mibyan node`: one member of a Mibyan cluster (docs/cluster.md). CAF-free
// so the CLI can include it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "config/options.hpp"
#include "mibyan/turn.hpp"

namespace mibyan {

class runtime;
class cluster_process;

/// A dashboard API request forwarded to a gateway by `mibyan dashboard
/// --connect` (the dashboard_query message without CAF).
struct dashboard_request {
  std::string method;
  std::string path;
  /// The raw query string (after '?', still percent-encoded).
  std::string query;
  std::string body;
};

/// What the gateway answers: what its own HTTP server would.
struct dashboard_answer {
  int status = 0;
  std::string content_type;
  std::string body;
};

/// Answers a forwarded dashboard request with the member's runtime;
/// `done` runs once, on any thread. Installed by the composition root
/// (cli/), which may use serve/ (docs/serve.md, "dashboard --connect").
using dashboard_handler = std::function<void(
  runtime&, const dashboard_request&, std::function<void(dashboard_answer)>)>;

struct node_args {
  /// HOST:PORT to listen on (port 0 = a free port).
  std::string listen;
  /// HOST:PORT of any member to join through ("" = start a new cluster).
  std::string join;
  /// "gateway", "worker" or "all".
  std::string role = "all";
  /// Working directory of the sessions this node hosts ("" = current).
  std::string workdir;
  /// Provider overrides for the turns a gateway runs (each "" = config;
  /// the key never comes from here).
  provider_config provider;
  /// Answers dashboard requests clients forward (null: they get 404).
  dashboard_handler dashboard;
  /// run_node calls it once the member runs, before the ready line.
  std::function<void(cluster_process&)> on_start;
};

/// Runs a node until SIGTERM/SIGINT (then drains and leaves). Prints the
/// ready line `mibyan node NODE_ID listening on HOST:PORT` on stdout.
/// Returns the exit code: 0 after a clean drain, 1 on a runtime failure,
/// 2 on a configuration or handshake refusal (reason on stderr).
int run_node(const node_args& args, options opts);

/// A running cluster member of this process: the actor system, a runtime
/// whose dispatcher slot routes every tool call through the cluster, the
/// published front door and (after a join) its peers. `mibyan node` and
/// `mibyan serve --join` (a gateway serving HTTP) both run on it
/// (docs/cluster.md, docs/serve.md).
///
/// Thread: owned by the main thread. The caller blocks SIGINT/SIGTERM
/// (pthread_sigmask) before `start` so the system's threads inherit the
/// mask. Destroying it stops the member, the runtime and the system.
class cluster_process {
public:
  /// Checks the key, TLS and listen rules, starts the runtime, publishes
  /// on `args.listen` and joins `args.join` (when set). On failure prints
  /// the one-line reason as "`who`: ..." on stderr, sets `*exit_code`
  /// (1 runtime failure, 2 configuration or join refusal) and returns null.
  static std::unique_ptr<cluster_process> start(const node_args& args,
                                                options opts,
                                                const std::string& who,
                                                int* exit_code);

  /// The runtime: turns run here spawn conversations whose tool calls are
  /// placed on members (on workers, for a gateway).
  runtime& rt();
  const std::string& node_id() const;
  /// The published "HOST:PORT".
  const std::string& address() const;

  /// The /ui/api/cluster view as JSON ({"enabled":true,"node":own id,
  /// "members":[{node,address,role,state,load,sessions,kernels,
  /// max_sessions}]}), through `done`, once, on a runtime thread (an
  /// error object {"enabled":true,"error":...} when the member does not
  /// answer). Never blocks; any thread.
  void cluster_view(std::function<void(std::string)> done);

  /// Finishes running calls and hands sessions off within
  /// cluster.drain_timeout_ms, then leaves. Blocks; idempotent.
  void drain_and_leave();

  ~cluster_process();
  cluster_process(const cluster_process&) = delete;
  cluster_process& operator=(const cluster_process&) = delete;

  struct impl;

private:
  explicit cluster_process(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

/// Splits "HOST:PORT" ("[v6]:PORT" allowed). Returns false on bad input.
bool split_host_port(const std::string& text, std::string& host,
                     uint16_t& port);

/// Whether `host` is a loopback address or "localhost".
bool is_loopback_host(const std::string& host);

/// The cluster key: MIBYAN_CLUSTER_KEY, else `cluster.key` ("" = none).
std::string cluster_key(const options& opts);

} // namespace mibyan
