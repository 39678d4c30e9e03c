#include "cluster/client.hpp"

#include <chrono>
#include <thread>

#include "caf/all.hpp"
#include "caf/io/all.hpp"
#include "caf/openssl/all.hpp"

#include "actors/error_mapping.hpp"
#include "base/json.hpp"
#include "base/crypto.hpp"
#include "cluster/internal.hpp"
#include "cluster/node.hpp"
#include "runtime/runtime_impl.hpp"
#include "storage/session_id.hpp"
#include "tools/tool.hpp"

namespace mibyan {

struct cluster_client::impl {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::actor member;
  std::string member_id;
  std::unique_ptr<caf::scoped_actor> self;

  ~impl() {
    self.reset();
    member = nullptr;
    sys.reset();
  }

  /// Set once the member's down message arrived (monitored once, at
  /// connect: a remote monitor per call would cost two more messages).
  bool lost = false;

  status lost_status() const {
    return status::failure(status_code::unavailable,
                           "the cluster member " + member_id
                             + " was lost (its connection dropped)");
  }

  // Sends `xs` to the member and waits for one answer of type T, the
  // member's death (its connection dropped: unavailable, and `lost` is
  // set) or an error (its code, with CAF's rendering as the message).
  // Never hangs on a dead member: CAF's connection heartbeat closes a
  // silent link.
  template <class T, class... Ts>
  result<T> ask(Ts&&... xs) {
    auto& s = *self;
    if (lost)
      return lost_status();
    s->send(member, std::forward<Ts>(xs)...);
    result<T> out;
    bool done = false;
    while (!done) {
      s->receive(
        [&](T& x) {
          out = std::move(x);
          done = true;
        },
        [&](caf::down_msg&) {
          lost = true;
          out = lost_status();
          done = true;
        },
        [&](caf::error& e) {
          out = status::failure(to_status(e).code, sys->render(e));
          done = true;
        });
    }
    return out;
  }
};

cluster_client::cluster_client(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

cluster_client::~cluster_client() = default;

namespace {

result<std::unique_ptr<cluster_client::impl>>
make_system(const options& opts);
status connect_into(cluster_client::impl& p, const std::string& address,
                    const options& opts);

std::vector<std::string> split_addresses(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    auto comma = list.find(',', start);
    auto part = list.substr(start, comma == std::string::npos
                                     ? std::string::npos
                                     : comma - start);
    while (!part.empty() && part.front() == ' ')
      part.erase(part.begin());
    while (!part.empty() && part.back() == ' ')
      part.pop_back();
    if (!part.empty())
      out.push_back(part);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return out;
}

} // namespace

result<std::unique_ptr<cluster_client>>
cluster_client::connect(const std::string& address, const options& opts) {
  using out = result<std::unique_ptr<cluster_client>>;
  auto list = split_addresses(address);
  if (list.empty())
    return out::failure(status_code::invalid_argument,
                        "--connect expects HOST:PORT, got '" + address + "'");
  // One actor system for every attempt and every later fail-over: a
  // system whose peer died may take long to stop, so it is kept.
  auto p = make_system(opts);
  if (!p)
    return p.get_status();
  std::string errors;
  for (size_t i = 0; i < list.size(); ++i) {
    auto st = connect_into(**p, list[i], opts);
    if (st.ok()) {
      std::unique_ptr<cluster_client> c{new cluster_client(std::move(*p))};
      c->opts_ = opts;
      c->addresses_ = list;
      c->at_ = i;
      return std::move(c);
    }
    if (refused(st) || list.size() == 1)
      return st;
    errors += (errors.empty() ? "" : "; ") + st.error;
  }
  return out::failure(status_code::unavailable,
                      "no cluster member answered: " + errors);
}

bool cluster_client::refused(const status& st) {
  return st.code == status_code::config_invalid
         || st.code == status_code::permission_denied;
}

const std::string& cluster_client::current_address() const {
  return addresses_[at_];
}

bool cluster_client::fail_over() {
  for (size_t k = 1; k < addresses_.size(); ++k) {
    auto i = (at_ + k) % addresses_.size();
    if (!connect_into(*impl_, addresses_[i], opts_).ok())
      continue;
    at_ = i;
    return true;
  }
  return false;
}

namespace {

result<std::unique_ptr<cluster_client::impl>>
make_system(const options& opts) {
  auto p = std::make_unique<cluster_client::impl>();
  configure_actor_system(p->cfg, nullptr);
  p->cfg.set("scheduler.max-threads", size_t{2});
  p->cfg.set("scheduler.policy", caf::atom("sharing"));
  p->cfg.set("middleman.app-identifiers",
             std::vector<std::string>{"mibyan-v1"});
  configure_cluster_transport(p->cfg, opts);
  if (!opts.cluster.tls_cert.empty()) {
    p->cfg.load<caf::openssl::manager>();
    p->cfg.openssl_certificate = opts.cluster.tls_cert;
    p->cfg.openssl_key = opts.cluster.tls_key;
    p->cfg.openssl_cafile = opts.cluster.tls_ca;
  }
  try {
    p->sys = std::make_unique<caf::actor_system>(p->cfg);
  } catch (const std::exception& e) {
    return status::failure(status_code::internal,
                           std::string{"cannot start the actor system: "}
                             + e.what());
  }
  return std::move(p);
}

// Connects `p` (its system) to the member at `address` and authenticates;
// on success `p` talks to it from now on. Fails with the codes of
// cluster_client::connect.
status connect_into(cluster_client::impl& pi, const std::string& address,
                    const options& opts) {
  auto* p = &pi;
  auto refusal = [](std::string why) {
    return status::failure(status_code::permission_denied, std::move(why));
  };
  std::string host;
  uint16_t port = 0;
  if (!split_host_port(address, host, port))
    return status::failure(status_code::invalid_argument,
                           "--connect expects HOST:PORT, got '" + address
                             + "'");
  auto key = cluster_key(opts);
  if (key.empty())
    return status::failure(status_code::config_invalid,
                           "no cluster key: set MIBYAN_CLUSTER_KEY (or "
                           "cluster.key in config.yaml)");
  bool tls = !opts.cluster.tls_cert.empty();
  // A fresh blocking actor per connection (the old one watched the lost
  // member).
  p->self.reset();
  p->member = nullptr;
  p->lost = false;
  // A connection attempt can time out on a loaded machine (TLS).
  auto remote = tls ? caf::openssl::remote_actor(*p->sys, host, port)
                    : p->sys->middleman().remote_actor(host, port);
  for (int attempt = 1; !remote && attempt < 3; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    remote = tls ? caf::openssl::remote_actor(*p->sys, host, port)
                 : p->sys->middleman().remote_actor(host, port);
  }
  if (!remote)
    return status::failure(status_code::unavailable,
                           "cannot connect to " + address + ": "
                             + p->sys->render(remote.error()));
  p->member = *remote;
  p->self = std::make_unique<caf::scoped_actor>(*p->sys);
  auto& s = *p->self;
  s->monitor(p->member);
  auto my_id = "client-" + random_hex(4);
  auto nonce = random_hex(16);
  auto digest = cluster_type_digest();
  // A failed handshake step is a member that did not answer, whatever
  // the transport said.
  auto not_answered = [&](const status& st) {
    return status::failure(status_code::unavailable,
                           "handshake with " + address + " failed: "
                             + st.error);
  };
  auto hello = p->ask<cluster_challenge>(
    hello_atom_v, cluster_hello{my_id, "client", "", cluster_protocol_version,
                                digest, nonce});
  if (!hello)
    return not_answered(hello.get_status());
  auto& c = *hello;
  if (!c.refusal.empty())
    return refusal(c.refusal);
  if (auto m = protocol_mismatch(my_id, cluster_protocol_version, digest,
                                 c.node_id, c.version, c.digest);
      !m.empty())
    return refusal(m);
  bool key_ok = proof_equal(c.proof,
                            server_proof(key, nonce, c.node_id, my_id));
  auto welcome = p->ask<cluster_welcome>(
    auth_atom_v,
    cluster_proof{my_id, client_proof(key, c.nonce, my_id, c.node_id)});
  if (!welcome)
    return not_answered(welcome.get_status());
  auto& w = *welcome;
  if (!w.refusal.empty())
    return refusal(w.refusal);
  if (!key_ok)
    return refusal("wrong cluster key: node " + c.node_id + " at " + address
                   + " could not prove the cluster key");
  if (!w.member)
    return status::failure(status_code::internal,
                           "node " + c.node_id + " sent no member handle");
  // From here on the member itself (the front door only does handshakes).
  s->demonitor(p->member);
  p->member = w.member;
  s->monitor(p->member);
  p->member_id = c.node_id;
  return {};
}

} // namespace

tool_outcome cluster_client::call_tool(const tool_call_request& call) {
  tool_request req{call.session_id, call.call_id, call.tool, call.args_json,
                   call.cwd, false};
  tool_outcome out;
  auto res = impl_->ask<tool_response>(invoke_atom_v, req);
  while (!res && impl_->lost && fail_over())
    res = impl_->ask<tool_response>(invoke_atom_v, req);
  if (res) {
    out.result_json = std::move(res->result_json);
    out.duration_us = res->duration_us;
    out.timed_out = res->timed_out;
  } else {
    out.result_json = error_result("Cluster error: " + res.error).dump();
  }
  return out;
}

result<std::vector<std::string>> cluster_client::tool_names() {
  auto names = impl_->ask<std::vector<std::string>>(tools_atom_v);
  while (!names && impl_->lost && fail_over())
    names = impl_->ask<std::vector<std::string>>(tools_atom_v);
  return names;
}

turn_result cluster_client::run_turn(const turn_call& call) {
  cluster_turn t;
  // A turn sent again to another gateway (below) must find its session and
  // key (docs/cluster.md, "Idempotent turns"): both are chosen here.
  t.session_id = call.session_id.empty() ? new_session_id() : call.session_id;
  t.turn_key = call.turn_key.empty() ? random_hex(16) : call.turn_key;
  t.prompt = call.prompt;
  t.provider = call.provider;
  t.provider.api_key.clear(); // keys never travel
  t.max_iterations = call.max_iterations;
  t.toolsets = call.toolsets;
  t.save_trajectory = call.save_trajectory;
  auto r = impl_->ask<turn_result>(turn_atom_v, t);
  while (!r && impl_->lost && fail_over())
    r = impl_->ask<turn_result>(turn_atom_v, t);
  if (!r) {
    turn_result out;
    out.session_id = t.session_id;
    out.error = "cluster error: " + r.error;
    return out;
  }
  return std::move(*r);
}

result<std::string> cluster_client::members_json() {
  auto members = impl_->ask<std::vector<member_info>>(members_atom_v);
  while (!members && impl_->lost && fail_over())
    members = impl_->ask<std::vector<member_info>>(members_atom_v);
  if (!members)
    return members.get_status();
  json::value out = json::value::make_array();
  for (auto& m : *members) {
    json::value e;
    e["id"] = m.node_id;
    e["address"] = m.address;
    e["role"] = m.role;
    e["state"] = m.state;
    e["sessions"] = m.sessions;
    e["kernels"] = m.kernels;
    e["load"] = static_cast<double>(m.load_milli) / 1000.0;
    e["max_sessions"] = m.max_sessions;
    out.push_back(std::move(e));
  }
  return out.dump();
}

result<dashboard_answer>
cluster_client::dashboard(const dashboard_request& req) {
  auto r = impl_->ask<dashboard_reply>(
    dashboard_atom_v,
    dashboard_query{req.method, req.path, req.query, req.body});
  if (!r)
    return r.get_status();
  dashboard_answer out;
  out.status = r->status;
  out.content_type = std::move(r->content_type);
  out.body = std::move(r->body);
  return out;
}

void cluster_client::interrupt(const std::string& session_id,
                               const std::string& reason) {
  // Any thread (a signal watcher): a scoped actor of its own, so the
  // member sees an authenticated sender.
  caf::scoped_actor tmp{*impl_->sys};
  tmp->send(impl_->member, interrupt_atom_v,
            interrupt_request{session_id, reason});
}

} // namespace mibyan
