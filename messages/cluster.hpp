// File: messages/cluster.hpp
//
// The messages of a Mibyan cluster (docs/cluster.md): the handshake that
// proves the cluster key, the member list and heartbeats, agent turns sent
// to a gateway. Tool calls cross nodes as the ordinary tool_request /
// tool_response. Plain data with inspect(); registered in messages/type_ids.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "caf/actor.hpp"
#include "caf/meta/type_name.hpp"

#include "messages/turn_result.hpp"

namespace mibyan {

/// The first message of a peer (node or client) to a node: who it is and
/// which protocol it speaks, plus a fresh nonce the node must prove the key
/// over.
struct cluster_hello {
  std::string node_id;
  /// "gateway", "worker", "all" or "client".
  std::string role;
  /// HOST:PORT the sender listens on ("" for a client).
  std::string address;
  uint32_t version = 0;
  /// Digest of the message type-ID list (docs/cluster.md).
  std::string digest;
  std::string nonce;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_hello& x) {
  return f(caf::meta::type_name("mibyan::cluster_hello"), x.node_id, x.role,
           x.address, x.version, x.digest, x.nonce);
}

/// The node's answer to a hello: its own identity, its proof over the
/// peer's nonce and a nonce of its own; or a refusal (one line).
struct cluster_challenge {
  std::string node_id;
  std::string role;
  std::string address;
  uint32_t version = 0;
  std::string digest;
  std::string nonce;
  /// HMAC-SHA256(key, "mibyan-cluster-v1|server|" nonce_of_peer "|" node_id).
  std::string proof;
  /// Non-empty: the node refuses the peer, and says why.
  std::string refusal;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_challenge& x) {
  return f(caf::meta::type_name("mibyan::cluster_challenge"), x.node_id,
           x.role, x.address, x.version, x.digest, x.nonce, x.proof,
           x.refusal);
}

/// The peer's proof over the node's nonce, which completes the handshake.
struct cluster_proof {
  std::string node_id;
  std::string proof;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_proof& x) {
  return f(caf::meta::type_name("mibyan::cluster_proof"), x.node_id,
           x.proof);
}

/// One member as a node sees it (heartbeats carry the sender's own).
struct member_info {
  std::string node_id;
  std::string address;
  std::string role;
  /// "up", "suspect", "lost", "draining" or "left".
  std::string state;
  int64_t sessions = 0;
  int64_t kernels = 0;
  /// One-minute load average × 1000 (integers only on the wire).
  int64_t load_milli = 0;
  int64_t max_sessions = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, member_info& x) {
  return f(caf::meta::type_name("mibyan::member_info"), x.node_id,
           x.address, x.role, x.state, x.sessions, x.kernels, x.load_milli,
           x.max_sessions);
}

/// The node's answer to a proof: the member list and the member actor
/// (only authenticated peers learn its handle), or a refusal.
struct cluster_welcome {
  std::string refusal;
  std::vector<member_info> members;
  caf::actor member;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_welcome& x) {
  return f(caf::meta::type_name("mibyan::cluster_welcome"), x.refusal,
           x.members, x.member);
}

/// An agent turn a client asks a gateway to run. The gateway answers
/// with the turn's result (mibyan/turn.hpp; `started` false when it could
/// not start there).
struct cluster_turn {
  std::string session_id;
  std::string prompt;
  /// Provider overrides; the api_key never travels ("" here).
  provider_config provider;
  int64_t max_iterations = 0;
  std::vector<std::string> toolsets;
  bool save_trajectory = false;
  /// The turn's idempotency key (turn_call::turn_key); a client sends the
  /// same key again when it re-sends the turn to another gateway.
  std::string turn_key;
  /// Non-zero: the sending gateway forwards a streamed turn and wants its
  /// deltas and tool events as (delta, cluster_turn_event) messages with
  /// this id (docs/cluster.md, "Streaming of forwarded turns").
  uint64_t stream_id = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_turn& x) {
  return f(caf::meta::type_name("mibyan::cluster_turn"), x.session_id,
           x.prompt, x.provider, x.max_iterations, x.toolsets,
           x.save_trajectory, x.turn_key, x.stream_id);
}

/// One delta or tool event of a forwarded, streamed turn: the lease holder
/// sends them, in order, to the member that forwarded the turn, before the
/// turn's result (a turn_result). That member acknowledges them with
/// (ack, stream_id, seq); the holder keeps at most a window of unacknowledged
/// events in flight and coalesces the rest.
struct cluster_turn_event {
  uint64_t stream_id = 0;
  /// 1, 2, ... within the stream.
  uint64_t seq = 0;
  /// A delta's kind ("text", "reasoning", "restart", "context";
  /// turn_call::on_delta) with its `text`, or "tool" for a tool event
  /// (turn_call::on_tool) in `tool`.
  std::string kind;
  std::string text;
  tool_event tool;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_turn_event& x) {
  return f(caf::meta::type_name("mibyan::cluster_turn_event"), x.stream_id,
           x.seq, x.kind, x.text, x.tool);
}

/// A dashboard request a `mibyan dashboard --connect` process forwards to
/// the gateway it connected to (docs/serve.md, "dashboard --connect"): one
/// /ui/api/* request without its HTTP framing.
struct dashboard_query {
  std::string method;
  /// The path, e.g. "/ui/api/sessions".
  std::string path;
  /// The raw query string (after '?', still percent-encoded).
  std::string query;
  std::string body;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, dashboard_query& x) {
  return f(caf::meta::type_name("mibyan::dashboard_query"), x.method, x.path,
           x.query, x.body);
}

/// The gateway's answer to a dashboard_query: what its own HTTP server
/// would have answered.
struct dashboard_reply {
  int32_t status = 0;
  std::string content_type;
  std::string body;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, dashboard_reply& x) {
  return f(caf::meta::type_name("mibyan::dashboard_reply"), x.status,
           x.content_type, x.body);
}

} // namespace mibyan
