// File: cluster/internal.hpp
//
// The cluster member actor's state, shared by the files that implement
// it (docs/cluster.md):
//   member.cpp      the actor shell: membership, heartbeats,
//                   failure detection, drain
//   handshake.cpp   the handshake, as initiator and as acceptor
//   routing.cpp     tool calls: placement, forwarding to workers,
//                   in-flight tracking, the worker side
//   node.cpp        the `mibyan node` process around the actor
//   protocol.cpp    protocol version and type-list digest
//   front.cpp       the published front door (handshake only)
// Includes CAF: only cluster/*.cpp include it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "caf/actor.hpp"
#include "caf/actor_system_config.hpp"
#include "caf/node_id.hpp"
#include "caf/response_promise.hpp"
#include "caf/typed_response_promise.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/event_based_actor.hpp"

#include "actors/kernel_registry.hpp"
#include "base/clock.hpp"
#include "cluster/node.hpp"
#include "actors/tool_dispatcher.hpp"
#include "config/options.hpp"
#include "messages/type_ids.hpp"
#include "runtime/session_lease_keeper.hpp"

namespace mibyan {

class runtime;

/// The protocol version spoken by this build (docs/cluster.md).
constexpr uint32_t cluster_protocol_version = 1;

/// Digest of the message type-ID list and the cluster verbs (16 hex
/// digits). MIBYAN_TEST_TYPE_DIGEST_SALT perturbs it (tests only).
std::string cluster_type_digest();

/// The one-line reason two peers cannot talk ("" when they can).
std::string protocol_mismatch(const std::string& our_id, uint32_t our_version,
                              const std::string& our_digest,
                              const std::string& their_id,
                              uint32_t their_version,
                              const std::string& their_digest);

/// The proofs of the challenge–response (the key never leaves the node).
std::string server_proof(const std::string& key, const std::string& nonce,
                         const std::string& server_id,
                         const std::string& peer_id);
std::string client_proof(const std::string& key, const std::string& nonce,
                         const std::string& peer_id,
                         const std::string& server_id);

/// CAF's own connection heartbeat, so a silent link is closed (and its
/// proxies' watchers see a node-down) within cluster.failure_timeout_ms.
void configure_cluster_transport(caf::actor_system_config& cfg,
                                 const options& opts);

/// Turns this gateway forwarded to a lease holder and whose answer it
/// awaits (cluster/leases.cpp): callbacks by id, answered once, on any
/// thread. Shared by the runtime's forwarder and the member actor.
class turn_forwards {
public:
  using callback = std::function<void(bool delivered, turn_result out)>;
  /// Receive a streamed turn's deltas and tool events (turn_call::on_delta,
  /// on_tool); either may be empty.
  using delta_sink
    = std::function<void(const std::string& kind, const std::string& text)>;
  using tool_sink = std::function<void(const tool_event&)>;
  uint64_t add(callback cb, delta_sink on_delta = {}, tool_sink on_tool = {});
  /// Runs and forgets the callback of `id` (nothing if already answered).
  void finish(uint64_t id, bool delivered, turn_result out);
  bool has(uint64_t id);
  /// Whether forward `id` wants its turn's events.
  bool streams(uint64_t id);
  /// Hands one event of forward `id` to its sink (on the caller's thread;
  /// nothing once the forward was answered): a tool event (kind "tool") to
  /// the tool sink, anything else to the delta sink.
  void event(uint64_t id, const cluster_turn_event& ev);
  /// Answers every pending callback with error `why` (shutdown).
  void fail_all(const std::string& why);

private:
  struct entry {
    callback done;
    std::shared_ptr<const std::pair<delta_sink, tool_sink>> sinks;
  };
  std::mutex mtx_;
  std::map<uint64_t, entry> pending_;
};

/// The holder's side of one forwarded, streamed turn (turns.cpp).
struct turn_relay;

/// Members by state (this node included) as of the member actor's last
/// heartbeat tick: written by the actor, read by the metrics scrape
/// (docs/metrics.md, mibyan_cluster_members).
struct member_census {
  std::mutex mtx;
  std::map<std::string, int64_t> by_state; // guarded by mtx
};

struct cluster_settings {
  std::string node_id;
  /// "gateway", "worker" or "all".
  std::string role;
  /// HOST:PORT this node is reached at.
  std::string address;
  std::string key;
  std::string digest;
  int64_t heartbeat_ms = 500;
  int64_t failure_timeout_ms = 3000;
  int64_t max_sessions = 256;
  int64_t drain_timeout_ms = 30000;
  /// Connect to peers through CAF's OpenSSL module.
  bool tls = false;
  /// Provider overrides for turns (gateway; each "" = the configuration's).
  provider_config provider;
  /// The routing node's own default working directory: a call that names
  /// it (a gateway's conversation does) runs in the worker's own workdir.
  std::string own_cwd;
  /// Answers dashboard requests of clients (`mibyan dashboard --connect`);
  /// null: they get 404.
  dashboard_handler dashboard;
  /// Where the member publishes its census (null: nowhere).
  std::shared_ptr<member_census> census;
  /// Turns forwarded to lease holders (null: leases are not enabled).
  std::shared_ptr<turn_forwards> forwards;
  /// The runtime's clock (actors/services.hpp): heartbeat silence, drain
  /// deadline, hosted sessions' idle time. The tick that reads it is a
  /// CAF timer. Never null.
  clock_ptr clock = real_clock();
  /// Hosted sessions idle this long are forgotten
  /// (code_execution.kernel_idle_timeout).
  int64_t kernel_idle_timeout_s = 1800;
};

using steady = std::chrono::steady_clock;

/// One other member as this node sees it.
struct peer_state {
  member_info info;
  caf::actor handle;
  caf::node_id caf_node;
  steady::time_point last_seen;
};

/// A tool call forwarded to a remote worker and not answered yet.
struct pending_call {
  std::string worker;
  std::string session;
  std::string tool;
  std::string call_id;
  caf::typed_response_promise<tool_response> rp;
};

/// A session this node hosts as a worker.
struct hosted_session {
  /// The member that sent its calls (its gateway).
  std::string gateway;
  steady::time_point last_used;
};

/// A handshake this node answered and whose proof it awaits.
struct pending_hello {
  cluster_hello hello;
  std::string nonce;
};

struct cluster_state {
  cluster_settings cfg;
  runtime* rt = nullptr;
  tool_dispatcher_actor local;
  kernel_registry_actor kernels;
  caf::actor middleman; // connect and publish requests (plain or TLS)
  /// The published front door (handshake only) and where it listens.
  caf::actor front;
  std::string listen_host;
  uint16_t port = 0;

  // Membership.
  std::map<std::string, peer_state> peers;
  /// CAF nodes that proved the key. A node id names one live connection
  /// (runtime/basp_guard.hpp); an entry goes when that connection ends: the
  /// member watches the actor that authenticated (`auth_watch`, clients) or
  /// the member handle (`peers`).
  std::set<caf::node_id> authed;
  std::map<caf::actor_addr, caf::node_id> auth_watch;
  std::map<caf::node_id, pending_hello> hellos;
  std::set<std::string> connecting; // addresses being joined
  std::string state = "up";         // or "draining"
  /// Lost members being redialled: id -> attempts so far
  /// (reconnect.cpp).
  std::map<std::string, int> redial;
  int64_t kernel_count = 0;

  // Routing (any node may route).
  std::map<std::string, std::string> placement; // session -> worker id
  std::set<std::string> reset_pending;          // kernel state was lost
  std::map<uint64_t, pending_call> inflight;
  uint64_t next_call = 0;
  int64_t busy = 0; // calls and turns running through this node

  // Worker side.
  std::map<std::string, hosted_session> hosted;

  // Turns on a gateway, answered through the actor (never from a runtime
  // thread).
  std::map<uint64_t, caf::typed_response_promise<turn_result>> turns;
  /// Dashboard requests of clients being answered (dashboard.cpp).
  std::map<uint64_t, caf::typed_response_promise<dashboard_reply>> dashboards;

  /// Forwarded turns in flight: id -> the gateway running it (leases.cpp).
  std::map<uint64_t, std::string> forwarding;
  /// Streamed turns other gateways forwarded here, by (that gateway's node
  /// id, its stream id) (turns.cpp).
  std::map<std::pair<std::string, uint64_t>, std::shared_ptr<turn_relay>>
    relays;
  // Kernel checkpoints kept for or fetched by this node's kernels
  // (checkpoints.cpp): store operations running on the pool.
  std::map<uint64_t, caf::typed_response_promise<kernel_checkpoint>> ckpt_ops;
  uint64_t next_ckpt_op = 0;

  // Drain.
  bool drain_requested = false;
  /// The final checkpoints of the node's kernels were asked for.
  bool drain_flushing = false;
  steady::time_point drain_deadline;
  std::vector<caf::typed_response_promise<bool>> drain_waiters;
  bool left = false;

  static const char* name;
};

using cluster_actor = caf::stateful_actor<cluster_state>;

/// The member actor (`local` is the node's own dispatcher; the runtime's
/// dispatcher slot is replaced by this actor, so turns route too).
caf::behavior cluster_member(cluster_actor* self, cluster_settings cfg,
                             runtime* rt, tool_dispatcher_actor local,
                             kernel_registry_actor kernels,
                             caf::actor middleman);

/// The published front door: forwards the handshake (hello, auth) to the
/// member and nothing else, so a peer that has not proved the key never
/// holds the member's handle (CAF lets any peer send an untrappable kill to
/// an actor it holds; a killed front door is replaced by the member).
caf::behavior cluster_front(caf::event_based_actor* self, caf::actor member);

/// The front door died: spawns and publishes a new one (front.cpp).
void replace_front(cluster_actor* self);

/// Publishes the current front door on the node's port; retries while the
/// old listener is still closing.
void publish_front(cluster_actor* self, uint32_t attempt);

// -- member.cpp ------------------------------------------------------------

/// Whether the current message comes from this process or an
/// authenticated peer.
bool sender_allowed(cluster_actor* self);

/// This node's own member entry.
member_info self_info(cluster_actor* self);

/// The error answered to a peer that did not complete the handshake.
caf::error not_allowed();

/// A draining node leaves once nothing runs through it (or the drain
/// timeout passed).
void check_drain(cluster_actor* self);

/// Marks `id` lost (reason for the log) and fails what depended on it; a
/// lost (not left) member is redialled.
void mark_lost(cluster_actor* self, const std::string& id,
               const std::string& why, bool left);

/// Every member this node knows, itself first.
std::vector<member_info> member_view(cluster_actor* self);

/// Whether a member state means the member is out ("lost" or "left").
bool member_gone(const std::string& state);

/// Adds or refreshes the authenticated member `id` at `handle` (watched
/// for its connection's end); a lost or suspect one is up again.
void add_peer(cluster_actor* self, const std::string& id,
              const std::string& role, const std::string& address,
              caf::actor handle);

// -- handshake.cpp ---------------------------------------------------------

/// Connects to `address`, runs the handshake as the initiator and adds the
/// member; then joins the members it did not know. `done` gets "" or the
/// one-line reason of a failure.
void join_address(cluster_actor* self, const std::string& address,
                  std::function<void(std::string)> done);

/// (hello_atom) from anyone: a challenge (nonce and server proof), or one
/// with a refusal for a malformed hello or a protocol mismatch.
cluster_challenge answer_hello(cluster_actor* self, cluster_hello& h);

/// (auth_atom) from anyone: checks the proof against the sender node's
/// pending hello; on success the node is authenticated (a member is added,
/// a client is watched) and gets the member list.
cluster_welcome answer_auth(cluster_actor* self, cluster_proof& p);

// -- dashboard.cpp ---------------------------------------------------------

/// A client's dashboard request: calls the settings' handler with the
/// runtime and answers through the actor once it is done.
caf::result<dashboard_reply> answer_dashboard(cluster_actor* self,
                                              dashboard_query q);

/// The handler of request `id` is done (its callback's message).
void dashboard_done(cluster_actor* self, uint64_t id, dashboard_reply r);

// -- leases.cpp ------------------------------------------------------------

/// Local message of the runtime's forwarder: forward a turn to `node`.
using forward_turn_atom = caf::atom_constant<caf::atom("mb_fwdturn")>;
constexpr auto forward_turn_atom_v = forward_turn_atom::value;

/// The runtime's turn forwarder (runtime/session_lease_keeper.hpp): hands
/// the turn to `member`, which sends it to the lease holder.
turn_forwarder make_turn_forwarder(caf::actor member,
                                   std::shared_ptr<turn_forwards> forwards);

/// Sends forwarded turn `id` to gateway `node` (answered through the
/// settings' forwards; not delivered when `node` is not a live gateway).
void forward_turn(cluster_actor* self, const std::string& node,
                  cluster_turn t, uint64_t id);

/// Member `node` was lost: fails the turns forwarded to it and ends its
/// session leases.
void forwards_lost(cluster_actor* self, const std::string& node);

/// Whether the current message comes from another member (not a client).
bool from_peer_member(cluster_actor* self);

// -- turns.cpp -------------------------------------------------------------

/// A client's or a peer gateway's (turn, cluster_turn): runs it in this
/// gateway's runtime (a peer's forwarded turn is never forwarded again).
caf::result<turn_result> take_turn(cluster_actor* self, cluster_turn& t);

/// Turn `id` taken by take_turn ended (its callback's message).
void turn_done(cluster_actor* self, uint64_t id, turn_result r);

/// Forwarding side: one event of a streamed turn this gateway forwarded,
/// from the holder; handed to the turn's callbacks and acknowledged.
void forwarded_turn_event(cluster_actor* self, cluster_turn_event& ev);

/// Holder side: the forwarding gateway acknowledged the events of stream
/// `id` up to `seq`.
void forwarded_turn_ack(cluster_actor* self, uint64_t id, uint64_t seq);

/// Member `node` was lost: the streams of its forwarded turns stop (the
/// turns go on here).
void relays_lost(cluster_actor* self, const std::string& node);

// -- reconnect.cpp ---------------------------------------------------------

/// Starts redialling lost member `id` with backoff (nothing if it already
/// is being redialled, has left, or this node is leaving).
void schedule_redial(cluster_actor* self, const std::string& id);

/// One redial attempt of member `id` (the timer's message).
void redial(cluster_actor* self, const std::string& id);

// -- checkpoints.cpp -------------------------------------------------------

class kernel_checkpoints;

/// (checkpoint_atom, kernel_checkpoint) with `fetch` false, (restore_atom,
/// session) with `fetch` true: served here or forwarded to the session's
/// gateway (docs/cluster.md, "Kernel state").
caf::result<kernel_checkpoint> checkpoint_request(cluster_actor* self,
                                                  kernel_checkpoint req,
                                                  bool fetch);

/// A store operation of checkpoint_request finished on the pool.
void checkpoint_done(cluster_actor* self, uint64_t id, kernel_checkpoint r);

/// The gateway saw an execute_code result of `session` (or, `lost`, the
/// call died with its worker): remembered for the age of a checkpoint.
void note_routed_result(cluster_actor* self, const std::string& session,
                        const std::string& result_json, bool lost);

/// Points `hub`'s remote put, fetch and drop at `member` (the node's
/// kernels run them on pool threads).
void install_checkpoint_routes(caf::actor_system& sys, caf::actor member,
                               kernel_checkpoints& hub);

// -- routing.cpp -----------------------------------------------------------

/// Routes one tool call to the session's worker (placing it first).
void route_call(cluster_actor* self, tool_request req,
                caf::typed_response_promise<tool_response> rp);

/// Runs a call from a gateway (on CAF node `sender`) on this worker.
void work_call(cluster_actor* self, const caf::node_id& sender,
               tool_request req,
               caf::typed_response_promise<tool_response> rp);

/// Fails the in-flight calls and placements of worker `id`.
void worker_lost(cluster_actor* self, const std::string& id,
                 const std::string& why);

/// Interrupts the cells of the sessions whose gateway `id` was lost.
void gateway_lost(cluster_actor* self, const std::string& id);

/// Whether this node takes sessions as a worker.
bool is_worker_role(const std::string& role);
bool is_gateway_role(const std::string& role);

/// `result_json` with "node" (and "state_reset") added.
std::string annotate_result(const std::string& result_json,
                            const std::string& node_id, bool state_reset);

/// The error result of a call whose worker was lost (`checkpoints`: the
/// session's kernel state comes back from its last checkpoint).
std::string lost_worker_result(const std::string& tool,
                               const std::string& worker,
                               const std::string& why,
                               bool checkpoints = false);

} // namespace mibyan
