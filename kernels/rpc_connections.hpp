// File: kernels/rpc_connections.hpp
//
// Bookkeeping of one kernel's RPC connections (docs/kernel_protocol.md
// §5.1), kept apart from the broker so the limits are unit-testable:
//   * at most `max_connections` open connections (`admit`);
//   * a request line longer than `max_frame` bytes ends its connection;
//   * partial lines of all connections together stay under `max_buffered`
//     bytes; the connection whose data passes it is ended.
// Lines are split by `line_splitter`, so the work per byte is constant.
//
// `Handle` is the caller's connection id (the broker's connection_handle);
// it needs operator<. The table never does I/O: a verdict other than `ok`
// tells the caller to answer with `message()` and close the connection,
// which the table has already forgotten.
//
// Thread safety: none; the owning broker uses it from its own thread.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/line_splitter.hpp"

namespace mibyan {

struct rpc_limits {
  size_t max_connections = 64;
  size_t max_frame = 16u << 20;
  size_t max_buffered = 64u << 20;
};

enum class rpc_verdict { ok, too_many_connections, frame_too_long,
                         buffer_full };

/// The error text sent to the script before a connection is closed.
std::string rpc_limit_message(rpc_verdict v, const rpc_limits& lim);

template <class Handle>
class rpc_connection_table {
public:
  explicit rpc_connection_table(rpc_limits lim) : lim_(lim) {}

  /// Registers a new connection, or returns `too_many_connections` (the
  /// connection is then not registered).
  rpc_verdict admit(const Handle& h) {
    if (conns_.size() >= lim_.max_connections)
      return rpc_verdict::too_many_connections;
    conns_.emplace(h, line_splitter{lim_.max_frame});
    return rpc_verdict::ok;
  }

  bool contains(const Handle& h) const { return conns_.count(h) != 0; }

  /// Feeds data of a registered connection; `on_line` gets each complete
  /// line and must not add or remove connections. Unknown handles are
  /// ignored. On a verdict other than `ok` the connection is forgotten.
  rpc_verdict feed(const Handle& h, std::string_view chunk,
                   const line_splitter::line_fn& on_line) {
    auto i = conns_.find(h);
    if (i == conns_.end())
      return rpc_verdict::ok;
    auto before = i->second.buffered();
    bool ok = i->second.feed(chunk, on_line);
    buffered_ = buffered_ - before + i->second.buffered();
    if (!ok) {
      remove(h);
      return rpc_verdict::frame_too_long;
    }
    if (buffered_ > lim_.max_buffered) {
      remove(h);
      return rpc_verdict::buffer_full;
    }
    return rpc_verdict::ok;
  }

  /// Forgets a connection (closed by the peer or by the caller).
  void remove(const Handle& h) {
    auto i = conns_.find(h);
    if (i == conns_.end())
      return;
    buffered_ -= i->second.buffered();
    conns_.erase(i);
  }

  /// Forgets every connection and returns their handles, for closing.
  std::vector<Handle> take_all() {
    std::vector<Handle> out;
    out.reserve(conns_.size());
    for (auto& kv : conns_)
      out.push_back(kv.first);
    conns_.clear();
    buffered_ = 0;
    return out;
  }

  size_t size() const { return conns_.size(); }
  size_t buffered() const { return buffered_; }
  const rpc_limits& limits() const { return lim_; }

  /// Work done by the splitters of the open connections (for tests).
  uint64_t work() const {
    uint64_t w = 0;
    for (auto& kv : conns_)
      w += kv.second.work();
    return w;
  }

private:
  rpc_limits lim_;
  std::map<Handle, line_splitter> conns_;
  size_t buffered_ = 0;
};

} // namespace mibyan
