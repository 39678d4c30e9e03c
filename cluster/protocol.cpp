// The cluster's protocol identity and handshake proofs (docs/cluster.md,
// "Handshake").
#include "cluster/internal.hpp"

#include <cstdlib>
#include <utility>

#include "caf/actor_system_config.hpp"
#include "caf/settings.hpp"
#include "caf/timespan.hpp"
#include "caf/type_id.hpp"

#include "runtime/basp_guard.hpp"
#include "base/crypto.hpp"

namespace mibyan {

namespace {

template <caf::type_id_t... Is>
void append_names(std::string& out,
                  std::integer_sequence<caf::type_id_t, Is...>) {
  ((out += caf::type_name_by_id<caf::id_block::mibyan::begin + Is>::value,
    out += '\n'),
   ...);
}

} // namespace

std::string cluster_type_digest() {
  using block = caf::id_block::mibyan;
  std::string text;
  append_names(text, std::make_integer_sequence<caf::type_id_t,
                                                block::end - block::begin>{});
  // The verbs are atoms (no type IDs in CAF 0.17): list the cluster's own.
  text += "verbs:hello,auth,heartbeat,leave,members,work,tools,drain,join,"
          "invoke,interrupt,turn,dashboard,delta,ack\n";
  // Tests perturb the digest to provoke a mismatch (docs/cluster.md).
  if (const char* salt = std::getenv("MIBYAN_TEST_TYPE_DIGEST_SALT"))
    text += salt;
  return sha256_hex(text).substr(0, 16);
}

void configure_cluster_transport(caf::actor_system_config& cfg,
                                 const options& opts) {
  using std::chrono::milliseconds;
  cfg.set("middleman.heartbeat-interval",
          caf::timespan{milliseconds(opts.cluster.heartbeat_ms)});
  // Twice the failure timeout: the member's own heartbeats decide loss;
  // this only closes links that carry nothing at all.
  cfg.set("middleman.connection-timeout",
          caf::timespan{milliseconds(2 * opts.cluster.failure_timeout_ms)});
  // Read by the io loop's frame guard (runtime/basp_guard.hpp).
  caf::put(cfg.content, basp_max_frame_key,
           int64_t{opts.cluster.max_frame_mb} << 20);
}

std::string protocol_mismatch(const std::string& our_id, uint32_t our_version,
                              const std::string& our_digest,
                              const std::string& their_id,
                              uint32_t their_version,
                              const std::string& their_digest) {
  if (our_version == their_version && our_digest == their_digest)
    return {};
  return "protocol mismatch: node " + our_id + " speaks protocol "
         + std::to_string(our_version) + " with message types " + our_digest
         + ", node " + their_id + " speaks protocol "
         + std::to_string(their_version) + " with message types "
         + their_digest;
}

std::string server_proof(const std::string& key, const std::string& nonce,
                         const std::string& server_id,
                         const std::string& peer_id) {
  return hmac_sha256_hex(key, "mibyan-cluster-v1|server|" + nonce + "|"
                                + server_id + "|" + peer_id);
}

std::string client_proof(const std::string& key, const std::string& nonce,
                         const std::string& peer_id,
                         const std::string& server_id) {
  return hmac_sha256_hex(key, "mibyan-cluster-v1|client|" + nonce + "|"
                                + peer_id + "|" + server_id);
}

} // namespace mibyan
