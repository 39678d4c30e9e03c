// `mibyan node`: the process around the cluster member actor
// (docs/cluster.md): start-up checks, the actor system (with CAF's OpenSSL
// module for TLS), the runtime whose dispatcher slot routes through the
// cluster, publish, join, the ready line, and the drain on SIGTERM.
#include "node/cluster_node.hpp"

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include <arpa/inet.h>
#include <pthread.h>
#include <unistd.h>

#include "caf/all.hpp"
#include "caf/io/all.hpp"
#include "caf/openssl/all.hpp"

#include "base/log.hpp"
#include "node/cluster_crypto.hpp"
#include "node/cluster_internal.hpp"
#include "node/runtime_impl.hpp"

namespace mibyan {

namespace fs = std::filesystem;

bool split_host_port(const std::string& text, std::string& host,
                     uint16_t& port) {
  std::string h, p;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size()
        || text[close + 1] != ':')
      return false;
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos)
      return false;
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  if (h.empty() || p.empty() || p.size() > 5
      || p.find_first_not_of("0123456789") != std::string::npos)
    return false;
  auto v = std::stoul(p);
  if (v > 65535)
    return false;
  host = h;
  port = static_cast<uint16_t>(v);
  return true;
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost")
    return true;
  in_addr a4{};
  if (::inet_pton(AF_INET, host.c_str(), &a4) == 1)
    return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (::inet_pton(AF_INET6, host.c_str(), &a6) == 1)
    return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

std::string cluster_key(const options& opts) {
  if (const char* k = std::getenv("MIBYAN_CLUSTER_KEY"); k && *k)
    return k;
  auto s = opts.secret("MIBYAN_CLUSTER_KEY");
  return s.empty() ? opts.cluster.key : s;
}

namespace {

std::string tls_problem(const cluster_options& c) {
  int set = !c.tls_cert.empty() + !c.tls_key.empty() + !c.tls_ca.empty();
  if (set != 0 && set != 3)
    return "cluster.tls_cert, cluster.tls_key and cluster.tls_ca go together "
           "(both sides are verified)";
  for (auto* f : {&c.tls_cert, &c.tls_key, &c.tls_ca})
    if (!f->empty() && ::access(f->c_str(), R_OK) != 0)
      return "cannot read TLS file " + *f;
  return {};
}

} // namespace

int run_node(const node_args& a, options opts) {
  std::string host;
  uint16_t port = 0;
  if (!split_host_port(a.listen, host, port)) {
    std::cerr << "mibyan node: --listen expects HOST:PORT, got '" << a.listen
              << "'\n";
    return 2;
  }
  if (a.role != "gateway" && a.role != "worker" && a.role != "all") {
    std::cerr << "mibyan node: --role must be gateway, worker or all, got '"
              << a.role << "'\n";
    return 2;
  }
  auto key = cluster_key(opts);
  // Tools and kernels the node starts must not inherit the key.
  ::unsetenv("MIBYAN_CLUSTER_KEY");
  if (key.empty()) {
    std::cerr << "mibyan node: no cluster key: set MIBYAN_CLUSTER_KEY (or "
                 "cluster.key in config.yaml); it is never a flag\n";
    return 2;
  }
  if (auto bad = tls_problem(opts.cluster); !bad.empty()) {
    std::cerr << "mibyan node: " << bad << "\n";
    return 2;
  }
  bool tls = !opts.cluster.tls_cert.empty();
  if (!tls && !is_loopback_host(host)) {
    if (!opts.cluster.insecure) {
      std::cerr << "mibyan node: refusing to listen on " << host
                << " without TLS: set cluster.tls_cert, cluster.tls_key and "
                   "cluster.tls_ca (or cluster.insecure: true to accept an "
                   "unencrypted cluster)\n";
      return 2;
    }
    MIBYAN_LOG(warning, "cluster",
               "cluster.insecure: listening on "
                 << host << " without TLS; cluster traffic (tool calls, "
                            "results) is unencrypted");
  }
  if (!a.workdir.empty()) {
    std::error_code ec;
    if (!fs::is_directory(a.workdir, ec) || ::chdir(a.workdir.c_str()) != 0) {
      std::cerr << "mibyan node: --workdir " << a.workdir
                << " is not a usable directory\n";
      return 2;
    }
  }
  // Only the main thread takes these signals (sigwait below); the actor
  // system's threads inherit the mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR2);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  caf::actor_system_config cfg;
  configure_actor_system(cfg, &opts);
  configure_cluster_transport(cfg, opts);
  if (tls) {
    cfg.load<caf::openssl::manager>();
    cfg.openssl_certificate = opts.cluster.tls_cert;
    cfg.openssl_key = opts.cluster.tls_key;
    cfg.openssl_cafile = opts.cluster.tls_ca;
  }
  cluster_settings s;
  s.node_id = "n" + random_hex(4);
  s.role = a.role;
  s.key = key;
  s.digest = cluster_type_digest();
  s.heartbeat_ms = opts.cluster.heartbeat_ms;
  s.failure_timeout_ms = opts.cluster.failure_timeout_ms;
  s.max_sessions = opts.cluster.max_sessions;
  s.drain_timeout_ms = opts.cluster.drain_timeout_ms;
  s.tls = tls;
  s.provider = a.provider;
  s.model = a.model;
  s.base_url = a.base_url;
  std::unique_ptr<caf::actor_system> sys;
  try {
    sys = std::make_unique<caf::actor_system>(cfg);
  } catch (const std::exception& e) {
    std::cerr << "mibyan node: cannot start the actor system: " << e.what()
              << "\n";
    return 1;
  }
  std::string error;
  auto svc = make_services(opts, {}, {}, &error);
  if (!svc) {
    std::cerr << "mibyan: cannot start the runtime: " << error << "\n";
    return 1;
  }
  auto p = std::make_unique<runtime::impl>();
  p->svc = svc;
  p->sys = sys.get();
  if (!wire_runtime(*p, &error)) {
    std::cerr << "mibyan: cannot start the runtime: " << error << "\n";
    return 1;
  }
  auto rt = runtime_access::make(std::move(p));
  auto& impl = runtime_access::of(*rt);
  auto local = impl.dispatcher;
  s.own_cwd = impl.svc->default_cwd;
  caf::actor mm = tls ? caf::actor_cast<caf::actor>(
                          sys->openssl_manager().actor_handle())
                      : caf::actor_cast<caf::actor>(
                          sys->middleman().actor_handle());
  auto member = sys->spawn(cluster_member, s, rt.get(), local, impl.kernels,
                           mm);
  {
    // From here on turns and runtime calls route through the cluster.
    std::lock_guard<std::mutex> guard{impl.mtx};
    impl.dispatcher = caf::actor_cast<tool_dispatcher_actor>(member);
  }
  std::unique_ptr<caf::scoped_actor> self;
  caf::actor front;
  auto shutdown = [&] {
    self.reset();
    {
      std::lock_guard<std::mutex> guard{impl.mtx};
      impl.dispatcher = local;
    }
    {
      // The member ignores exit messages (any peer could send one).
      caf::scoped_actor tmp{*sys};
      tmp->send(member, kill_atom_v);
      if (front)
        tmp->send(front, kill_atom_v);
    }
    // No handle may outlive the system: the middleman's actor is detached,
    // and the system waits for it to be released.
    member = nullptr;
    front = nullptr;
    local = nullptr;
    mm = nullptr;
    rt.reset();
    sys.reset();
  };
  // Only the front door is published; authenticated peers get the
  // member's handle in the welcome (docs/cluster.md, "Handshake").
  front = sys->spawn(cluster_front, member);
  caf::expected<uint16_t> published = uint16_t{0};
  try {
    published = tls ? caf::openssl::publish(front, port, host.c_str(), true)
                    : sys->middleman().publish(front, port, host.c_str(),
                                               true);
  } catch (const std::exception& e) {
    published = caf::make_error(caf::sec::runtime_error, e.what());
  }
  if (!published) {
    std::cerr << "mibyan node: cannot listen on " << a.listen << ": "
              << sys->render(published.error()) << "\n";
    shutdown();
    return 1;
  }
  auto shown_host = host.find(':') != std::string::npos ? "[" + host + "]"
                                                        : host;
  auto address = shown_host + ":" + std::to_string(*published);
  self = std::make_unique<caf::scoped_actor>(*sys);
  (*self)->send(member, caf::put_atom_v, address, host, *published, front);
  front = nullptr;
  if (!a.join.empty()) {
    std::string reason;
    // A connection attempt can time out on a loaded machine (a TLS
    // handshake especially); a refusal is final.
    for (int attempt = 0; attempt < 3; ++attempt) {
      reason.clear();
      (*self)->request(member, std::chrono::seconds(60), join_atom_v, a.join)
        .receive([&](std::string& r) { reason = std::move(r); },
                 [&](caf::error& e) { reason = sys->render(e); });
      if (reason.rfind("cannot connect", 0) != 0)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (!reason.empty()) {
      std::cerr << "mibyan node: cannot join the cluster through " << a.join
                << ": " << reason << "\n";
      shutdown();
      return 2;
    }
  }
  MIBYAN_LOG(info, "cluster", "node " << s.node_id << " (" << s.role
                                      << ") up at " << address
                                      << (tls ? " (TLS)" : ""));
  std::cout << "mibyan node " << s.node_id << " listening on " << address
            << std::endl;
  int sig = 0;
  for (;;)
    if (sigwait(&set, &sig) == 0 && (sig == SIGINT || sig == SIGTERM))
      break;
  MIBYAN_LOG(info, "cluster", "signal " << sig << ": draining");
  (*self)->request(member,
                std::chrono::milliseconds(opts.cluster.drain_timeout_ms
                                          + 10000),
                drain_atom_v)
    .receive([](bool) {}, [](caf::error&) {});
  // The leave messages go out before the connections close.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  shutdown();
  return 0;
}

} // namespace mibyan
