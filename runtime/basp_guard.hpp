// File: runtime/basp_guard.hpp
//
// The BASP frame guard of a node's middleman (docs/cluster.md, "Frame
// guard"): every TCP connection the io loop creates gets a scribe that
// looks at each BASP frame before CAF's broker does, and closes the
// connection when a peer
//   * announces a payload longer than the cap (CAF would size its read
//     buffer to the announced length before reading a byte of it);
//   * claims, in a routed, monitor or down message, to speak for a node other
//     than the one its own handshake named (CAF would create proxies of, or
//     kill proxies of, that other node on its word);
//   * names in its client handshake a node id that another live connection
//     already claimed.
// So a node id names exactly one live connection, and what the cluster
// member authenticates by node id (cluster/member.cpp) is bound to that
// connection; the member forgets it when the connection ends.
//
// Connections of other brokers (HTTP, the kernel broker) pass untouched.
// Thread: the middleman's (the io loop's) thread; the claim table is
// shared by the scribes of one loop and locked.
// Includes only CAF's forward declarations (the guard is in the .cpp);
// used by the io loop (runtime/io_loop.cpp) and cluster/protocol.cpp.
#pragma once

#include <cstdint>
#include <memory>

#include "caf/io/fwd.hpp"
#include "caf/io/network/native_socket.hpp"

namespace mibyan {

/// Configuration key of the payload cap in bytes (set from
/// cluster.max_frame_mb by configure_cluster_transport).
constexpr const char* basp_max_frame_key = "mibyan.cluster-max-frame";

/// The cap when nothing configured one: 64 MiB.
constexpr uint32_t default_basp_max_frame = 64u << 20;

/// Node ids claimed by the live inbound connections of one io loop
/// (defined in basp_guard.cpp; locked, shared by the loop's scribes).
class basp_claims;

/// A new, empty claim table.
std::shared_ptr<basp_claims> make_basp_claims();

/// A scribe for `fd` on `mpx` that guards BASP frames (see the file
/// comment). The loop and its scribes share `claims`.
caf::io::scribe_ptr
make_guarded_scribe(caf::io::network::default_multiplexer& mpx,
                    caf::io::network::native_socket fd,
                    std::shared_ptr<basp_claims> claims, uint32_t max_payload);

} // namespace mibyan
