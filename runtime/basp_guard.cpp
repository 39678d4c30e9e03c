// The BASP frame guard (runtime/basp_guard.hpp, docs/cluster.md "Frame guard").
#include "runtime/basp_guard.hpp"

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include <sys/socket.h>

#include "caf/binary_deserializer.hpp"
#include "caf/io/basp/header.hpp"
#include "caf/io/basp/message_type.hpp"
#include "caf/io/basp_broker.hpp"
#include "caf/io/network/default_multiplexer.hpp"
#include "caf/io/network/scribe_impl.hpp"
#include "caf/io/scribe.hpp"
#include "caf/node_id.hpp"

#include "base/log.hpp"

namespace mibyan {

namespace basp = caf::io::basp;

class basp_claims {
public:
  /// Whether `node` was free; if so it is now claimed by `owner`.
  bool claim(const caf::node_id& node, const void* owner);

  /// Frees what `owner` claimed (nothing when it claimed nothing).
  void release(const caf::node_id& node, const void* owner);

private:
  std::mutex mtx_;
  std::map<caf::node_id, const void*> owners_;
};

std::shared_ptr<basp_claims> make_basp_claims() {
  return std::make_shared<basp_claims>();
}

bool basp_claims::claim(const caf::node_id& node, const void* owner) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto [it, fresh] = owners_.emplace(node, owner);
  return fresh || it->second == owner;
}

void basp_claims::release(const caf::node_id& node, const void* owner) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto it = owners_.find(node);
  if (it != owners_.end() && it->second == owner)
    owners_.erase(it);
}

namespace {

/// The first node id of a BASP payload: the sender's own id in handshakes,
/// monitor and down messages, the claimed source of a routed message.
bool leading_node(caf::execution_unit* ctx, const char* data, size_t size,
                  caf::node_id& out) {
  caf::binary_deserializer source{ctx, data, size};
  return !source(out) && out != caf::none;
}

class guarded_scribe final : public caf::io::network::scribe_impl {
public:
  guarded_scribe(caf::io::network::default_multiplexer& mpx,
                 caf::io::network::native_socket fd,
                 std::shared_ptr<basp_claims> claims, uint32_t max_payload)
      : scribe_impl(mpx, fd),
        claims_(std::move(claims)),
        max_payload_(max_payload) {}

  ~guarded_scribe() override {
    release_claim();
  }

  bool consume(caf::execution_unit* ctx, const void* buf,
               size_t size) override {
    if (!checked_parent_) {
      // The parent is set before the first read and never changes.
      checked_parent_ = true;
      basp_ = dynamic_cast<caf::io::basp_broker*>(parent()) != nullptr;
    }
    if (basp_ && !detached()) {
      auto reason = check(ctx, static_cast<const char*>(buf), size);
      if (!reason.empty())
        return refuse(ctx, reason);
    }
    return scribe_impl::consume(ctx, buf, size);
  }

private:
  // "" when the frame part may go on to CAF, else the reason to close.
  std::string check(caf::execution_unit* ctx, const char* data, size_t size) {
    if (awaiting_payload_ == 0) {
      if (size != basp::header_size)
        return {}; // not a header read: CAF's own checks apply
      basp::header hdr;
      caf::binary_deserializer source{ctx, data, size};
      if (source(hdr))
        return {}; // CAF refuses it itself
      if (hdr.payload_len > max_payload_)
        return "a frame of " + std::to_string(hdr.payload_len)
               + " bytes (the cap is " + std::to_string(max_payload_) + ")";
      operation_ = hdr.operation;
      awaiting_payload_ = hdr.payload_len;
      return {};
    }
    if (size != awaiting_payload_) {
      awaiting_payload_ = 0;
      return "a frame shorter than announced";
    }
    awaiting_payload_ = 0;
    using mt = basp::message_type;
    switch (operation_) {
      case mt::client_handshake: {
        caf::node_id node;
        if (!leading_node(ctx, data, size, node))
          return {};
        if (peer_ != caf::none && peer_ != node)
          return "a second handshake naming another node";
        if (!claims_->claim(node, this))
          return "a handshake naming node " + caf::to_string(node)
                 + ", which another connection speaks for";
        peer_ = node;
        claimed_ = true;
        return {};
      }
      case mt::server_handshake: {
        caf::node_id node;
        if (leading_node(ctx, data, size, node) && peer_ == caf::none)
          peer_ = node;
        return {};
      }
      case mt::routed_message:
      case mt::monitor_message:
      case mt::down_message: {
        caf::node_id node;
        if (!leading_node(ctx, data, size, node))
          return {};
        if (peer_ == caf::none || node != peer_)
          return "a message in the name of node " + caf::to_string(node);
        return {};
      }
      default:
        return {};
    }
  }

  bool refuse(caf::execution_unit* ctx, const std::string& reason) {
    MIBYAN_LOG(warning, "cluster",
               "closed the connection from " << addr() << ":" << port()
                                             << ": it sent " << reason);
    caf::intrusive_ptr<guarded_scribe> keep{this};
    release_claim();
    ::shutdown(stream_.fd(), SHUT_RDWR);
    // Tells the broker the connection is gone (it forgets the route and
    // the peer's proxies), as a read error would.
    io_failure(ctx, caf::io::network::operation::read);
    return false; // the stream stops reading
  }

  void release_claim() {
    if (claimed_) {
      claims_->release(peer_, this);
      claimed_ = false;
    }
  }

  std::shared_ptr<basp_claims> claims_;
  uint32_t max_payload_;
  bool checked_parent_ = false;
  bool basp_ = false;
  uint32_t awaiting_payload_ = 0;
  basp::message_type operation_ = basp::message_type::heartbeat;
  caf::node_id peer_;
  bool claimed_ = false;
};

} // namespace

caf::io::scribe_ptr
make_guarded_scribe(caf::io::network::default_multiplexer& mpx,
                    caf::io::network::native_socket fd,
                    std::shared_ptr<basp_claims> claims,
                    uint32_t max_payload) {
  return caf::make_counted<guarded_scribe>(mpx, fd, std::move(claims),
                                           max_payload);
}

} // namespace mibyan
