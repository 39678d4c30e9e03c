// `mibyan node`: the process around the cluster member actor
// (docs/cluster.md): start-up checks, the actor system (with CAF's OpenSSL
// module for TLS), the runtime whose dispatcher slot routes through the
// cluster, publish, join, the ready line, and the drain on SIGTERM.
#include "cluster/node.hpp"

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

#include "base/json.hpp"
#include "base/log.hpp"
#include "base/crypto.hpp"
#include "base/runtime_metrics.hpp"
#include "actors/kernel_checkpoints.hpp"
#include "cluster/internal.hpp"
#include "runtime/cron_scheduler.hpp"
#include "runtime/runtime_impl.hpp"

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

struct cluster_process::impl {
  options opts;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<runtime> rt;
  tool_dispatcher_actor local;
  caf::actor member;
  caf::actor front;
  caf::actor mm;
  std::unique_ptr<caf::scoped_actor> self;
  std::string node_id;
  std::string address;
  bool drained = false;
  // The members-by-state gauge (docs/metrics.md); its callback holds
  // only the census it shares with the member.
  metrics::callback_family::handle members_gauge;

  // Restores the local dispatcher, stops the member and front door, then
  // the runtime and the system (no handle may outlive the system: the
  // middleman's actor is detached, and the system waits for it).
  ~impl() {
    self.reset();
    // The scheduler first: its runs use the member's routing.
    if (rt)
      stop_cron_scheduler(*rt);
    if (rt) {
      auto& ri = runtime_access::of(*rt);
      std::lock_guard<std::mutex> guard{ri.mtx};
      ri.dispatcher = local;
    }
    if (sys) {
      // The member ignores exit messages (any peer could send one).
      caf::scoped_actor tmp{*sys};
      if (member)
        tmp->send(member, kill_atom_v);
      if (front)
        tmp->send(front, kill_atom_v);
    }
    member = nullptr;
    front = nullptr;
    local = nullptr;
    mm = nullptr;
    rt.reset();
    sys.reset();
  }
};

cluster_process::cluster_process(std::unique_ptr<impl> p) : p_(std::move(p)) {}

cluster_process::~cluster_process() = default;

runtime& cluster_process::rt() {
  return *p_->rt;
}

const std::string& cluster_process::node_id() const {
  return p_->node_id;
}

const std::string& cluster_process::address() const {
  return p_->address;
}

void cluster_process::cluster_view(std::function<void(std::string)> done) {
  auto member = p_->member;
  auto own = p_->node_id;
  if (!member || !p_->sys) {
    done(R"({"enabled":true,"error":"the cluster member is not running"})");
    return;
  }
  // A short-lived actor of this process asks the member (local senders
  // are allowed); the caller never waits.
  p_->sys->spawn([member, own, done](caf::event_based_actor* self) {
    self->request(member, std::chrono::seconds(5), members_atom_v)
      .then(
        [self, own, done](std::vector<member_info>& ms) {
          self->quit();
          json::value members = json::value::make_array();
          for (auto& m : ms) {
            json::value e;
            e["node"] = m.node_id;
            e["address"] = m.address;
            e["role"] = m.role;
            e["state"] = m.state;
            e["load"] = static_cast<double>(m.load_milli) / 1000.0;
            e["sessions"] = m.sessions;
            e["kernels"] = m.kernels;
            e["max_sessions"] = m.max_sessions;
            members.push_back(std::move(e));
          }
          json::value v;
          v["enabled"] = true;
          v["node"] = own;
          v["members"] = std::move(members);
          done(v.dump());
        },
        [self, done](caf::error& e) {
          self->quit();
          json::value v;
          v["enabled"] = true;
          v["error"] = "the cluster member did not answer: "
                       + self->system().render(e);
          done(v.dump());
        });
  });
}

void cluster_process::drain_and_leave() {
  if (p_->drained || !p_->self)
    return;
  p_->drained = true;
  // No new job runs while the node drains; runs going now are cut and
  // found interrupted at the next start (docs/cron.md).
  if (p_->rt)
    stop_cron_scheduler(*p_->rt);
  (*p_->self)
    ->request(p_->member,
              std::chrono::milliseconds(p_->opts.cluster.drain_timeout_ms
                                        + 10000),
              drain_atom_v)
    .receive([](bool) {}, [](caf::error&) {});
  // The leave messages go out before the connections close.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

std::unique_ptr<cluster_process>
cluster_process::start(const node_args& a, options opts,
                       const std::string& who, int* exit_code) {
  *exit_code = 2;
  std::string host;
  uint16_t port = 0;
  if (!split_host_port(a.listen, host, port)) {
    std::cerr << who << ": --listen expects HOST:PORT, got '" << a.listen
              << "'\n";
    return nullptr;
  }
  if (a.role != "gateway" && a.role != "worker" && a.role != "all") {
    std::cerr << who << ": --role must be gateway, worker or all, got '"
              << a.role << "'\n";
    return nullptr;
  }
  auto key = cluster_key(opts);
  // Tools and kernels the node starts must not inherit the key.
  ::unsetenv("MIBYAN_CLUSTER_KEY");
  if (key.empty()) {
    std::cerr << who << ": no cluster key: set MIBYAN_CLUSTER_KEY (or "
                        "cluster.key in config.yaml); it is never a flag\n";
    return nullptr;
  }
  if (auto bad = tls_problem(opts.cluster); !bad.empty()) {
    std::cerr << who << ": " << bad << "\n";
    return nullptr;
  }
  bool tls = !opts.cluster.tls_cert.empty();
  if (!tls && !is_loopback_host(host)) {
    if (!opts.cluster.insecure) {
      std::cerr << who << ": refusing to listen on " << host
                << " without TLS: set cluster.tls_cert, cluster.tls_key and "
                   "cluster.tls_ca (or cluster.insecure: true to accept an "
                   "unencrypted cluster)\n";
      return nullptr;
    }
    MIBYAN_LOG(warning, "cluster",
               "cluster.insecure: listening on "
                 << host << " without TLS; cluster traffic (tool calls, "
                            "results) is unencrypted");
  }
  if (!a.workdir.empty()) {
    std::error_code ec;
    if (!fs::is_directory(a.workdir, ec) || ::chdir(a.workdir.c_str()) != 0) {
      std::cerr << who << ": --workdir " << a.workdir
                << " is not a usable directory\n";
      return nullptr;
    }
  }
  *exit_code = 1;
  auto ip = std::make_unique<impl>();
  ip->opts = std::move(opts);
  auto& o = ip->opts;
  auto& cfg = ip->cfg;
  configure_actor_system(cfg, &o);
  configure_cluster_transport(cfg, o);
  if (tls) {
    cfg.load<caf::openssl::manager>();
    cfg.openssl_certificate = o.cluster.tls_cert;
    cfg.openssl_key = o.cluster.tls_key;
    cfg.openssl_cafile = o.cluster.tls_ca;
  }
  cluster_settings s;
  s.node_id = "n" + random_hex(4);
  s.role = a.role;
  s.key = key;
  s.digest = cluster_type_digest();
  s.heartbeat_ms = o.cluster.heartbeat_ms;
  s.failure_timeout_ms = o.cluster.failure_timeout_ms;
  s.max_sessions = o.cluster.max_sessions;
  s.drain_timeout_ms = o.cluster.drain_timeout_ms;
  s.tls = tls;
  s.provider = a.provider;
  s.dashboard = a.dashboard;
  s.census = std::make_shared<member_census>();
  ip->members_gauge = metrics::cluster_members().attach(
    [census = s.census](metrics::sample_sink& out) {
      std::lock_guard<std::mutex> g{census->mtx};
      for (auto& [state, n] : census->by_state)
        out.add({state}, static_cast<double>(n));
    });
  ip->node_id = s.node_id;
  try {
    ip->sys = std::make_unique<caf::actor_system>(cfg);
  } catch (const std::exception& e) {
    std::cerr << who << ": cannot start the actor system: " << e.what()
              << "\n";
    return nullptr;
  }
  auto& sys = *ip->sys;
  auto made = make_services(o, {}, {});
  if (!made) {
    std::cerr << "mibyan: cannot start the runtime: " << made.error << "\n";
    return nullptr;
  }
  auto svc = std::move(*made);
  // Kernel checkpoints: "auto" is on in a cluster; every member seals and
  // opens them with a key derived from the cluster key, so a checkpoint
  // taken on one worker is restored on another (docs/cluster.md).
  svc->checkpoints->set_enabled(
    checkpoints_wanted(o.code_execution.checkpoint, true));
  svc->checkpoints->set_key(kernel_checkpoints::cluster_key(key));
  auto rp = std::make_unique<runtime_impl>();
  rp->svc = svc;
  rp->sys = &sys;
  if (auto wired = wire_runtime(*rp); !wired.ok()) {
    std::cerr << "mibyan: cannot start the runtime: " << wired.error << "\n";
    return nullptr;
  }
  ip->rt = runtime_access::make(std::move(rp));
  auto& ri = runtime_access::of(*ip->rt);
  ip->local = ri.dispatcher;
  s.own_cwd = ri.svc->default_cwd;
  s.clock = ri.svc->clock;
  s.kernel_idle_timeout_s = o.code_execution.kernel_idle_timeout;
  ip->mm = tls ? caf::actor_cast<caf::actor>(
                   sys.openssl_manager().actor_handle())
               : caf::actor_cast<caf::actor>(sys.middleman().actor_handle());
  // Several gateways over one store: turns take their session's lease
  // (runtime/session_lease_keeper.hpp, cluster/leases.cpp).
  if (is_gateway_role(s.role) && ri.leases)
    s.forwards = std::make_shared<turn_forwards>();
  ip->member = sys.spawn(cluster_member, s, ip->rt.get(), ip->local,
                         ri.kernels, ip->mm);
  if (s.forwards) {
    lease_keeper_settings ks;
    ks.holder = s.node_id;
    ks.ttl_ms = s.failure_timeout_ms;
    ks.wait_ms = std::max<int64_t>(60000, 20 * s.failure_timeout_ms);
    ks.forward = make_turn_forwarder(ip->member, s.forwards);
    if (auto st = enable_session_leases(*ip->rt, std::move(ks)); !st)
      MIBYAN_LOG(warning, "cluster", "session leases not enabled: "
                                       << st.error);
  }
  if (is_worker_role(a.role))
    install_checkpoint_routes(sys, ip->member, *svc->checkpoints);
  {
    // From here on turns and runtime calls route through the cluster.
    std::lock_guard<std::mutex> guard{ri.mtx};
    ri.dispatcher = caf::actor_cast<tool_dispatcher_actor>(ip->member);
  }
  // Only the front door is published; authenticated peers get the
  // member's handle in the welcome (docs/cluster.md, "Handshake").
  ip->front = sys.spawn(cluster_front, ip->member);
  caf::expected<uint16_t> published = uint16_t{0};
  try {
    published = tls ? caf::openssl::publish(ip->front, port, host.c_str(),
                                            true)
                    : sys.middleman().publish(ip->front, port, host.c_str(),
                                              true);
  } catch (const std::exception& e) {
    published = caf::make_error(caf::sec::runtime_error, e.what());
  }
  if (!published) {
    std::cerr << who << ": cannot listen on " << a.listen << ": "
              << sys.render(published.error()) << "\n";
    return nullptr;
  }
  auto shown_host = host.find(':') != std::string::npos ? "[" + host + "]"
                                                        : host;
  ip->address = shown_host + ":" + std::to_string(*published);
  ip->self = std::make_unique<caf::scoped_actor>(sys);
  auto& self = *ip->self;
  self->send(ip->member, caf::put_atom_v, ip->address, host, *published,
             ip->front);
  ip->front = nullptr;
  if (!a.join.empty()) {
    std::string reason;
    // A connection attempt can time out on a loaded machine (a TLS
    // handshake especially); a refusal is final.
    for (int attempt = 0; attempt < 3; ++attempt) {
      reason.clear();
      self->request(ip->member, std::chrono::seconds(60), join_atom_v, a.join)
        .receive([&](std::string& r) { reason = std::move(r); },
                 [&](caf::error& e) { reason = sys.render(e); });
      if (reason.rfind("cannot connect", 0) != 0)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (!reason.empty()) {
      std::cerr << who << ": cannot join the cluster through " << a.join
                << ": " << reason << "\n";
      *exit_code = 2;
      return nullptr;
    }
  }
  // Scheduled jobs (docs/cron.md, "In a cluster"): a gateway runs the
  // scheduler of its store; the store's lease keeps it to one process per
  // store. A gateway that is not a worker runs its tools on workers, where
  // a job's cwd lives, so it does not check the cwd itself.
  if (is_gateway_role(s.role) && ip->opts.cron.enabled) {
    cron_scheduler_options so;
    so.holder = "node " + s.node_id;
    so.provider = a.provider;
    so.check_cwd = is_worker_role(s.role);
    if (auto cs = start_cron_scheduler(*ip->rt, so); !cs)
      MIBYAN_LOG(warning, "cron", "scheduler not started: " << cs.error);
  }
  MIBYAN_LOG(info, "cluster", "node " << s.node_id << " (" << s.role
                                      << ") up at " << ip->address
                                      << (tls ? " (TLS)" : ""));
  *exit_code = 0;
  return std::unique_ptr<cluster_process>(new cluster_process(std::move(ip)));
}

int run_node(const node_args& a, options opts) {
  // Only the main thread takes these signals (sigwait below); the actor
  // system's threads inherit the mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR2);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  int code = 0;
  auto node = cluster_process::start(a, std::move(opts), "mibyan node", &code);
  if (!node)
    return code;
  if (a.on_start)
    a.on_start(*node);
  std::cout << "mibyan node " << node->node_id() << " listening on "
            << node->address() << std::endl;
  int sig = 0;
  for (;;)
    if (sigwait(&set, &sig) == 0 && (sig == SIGINT || sig == SIGTERM))
      break;
  MIBYAN_LOG(info, "cluster", "signal " << sig << ": draining");
  node->drain_and_leave();
  node.reset();
  return 0;
}

} // namespace mibyan
