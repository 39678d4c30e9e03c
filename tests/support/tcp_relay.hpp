// File: tests/support/tcp_relay.hpp
//
// A TCP relay on 127.0.0.1 for cluster tests: forwards every accepted
// connection to a target port, records what each client sent, and can cut
// every connection at once (both sockets closed, as a dropped link looks to
// both ends). One thread of its own; all methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace mibyan::test {

class tcp_relay {
public:
  /// Listens on an ephemeral loopback port and forwards to `target_port`.
  explicit tcp_relay(uint16_t target_port);
  ~tcp_relay();

  tcp_relay(const tcp_relay&) = delete;
  tcp_relay& operator=(const tcp_relay&) = delete;

  /// "127.0.0.1:PORT" of the relay.
  std::string address() const;

  /// Connections accepted so far.
  size_t connections() const;

  /// Whether connection `i` has ended (either side closed it, or a cut).
  bool ended(size_t i) const;

  /// The bytes the client of connection `i` sent (towards the target).
  std::string client_bytes(size_t i) const;

  /// Closes every open connection, both sides.
  void cut();

private:
  struct impl;
  std::unique_ptr<impl> p_;
};

} // namespace mibyan::test
