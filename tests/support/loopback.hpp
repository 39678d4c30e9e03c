// File: tests/support/loopback.hpp
//
// Raw TCP on 127.0.0.1 for tests that play a misbehaving peer or client:
// dial a port, send everything (stopping quietly when the other side
// closes), read a "HOST:PORT" address's port, and one raw HTTP exchange.
#pragma once

#include <cstdint>
#include <string>

namespace mibyan::test {

/// A connected socket to 127.0.0.1:`port` (the test fails if it cannot).
int dial_loopback(uint16_t port);

/// Sends all of `data`; stops early, without failing, when the peer has
/// closed the connection (some tests expect exactly that).
void send_all(int fd, const std::string& data);

/// The port of "HOST:PORT".
uint16_t port_of(const std::string& address);

/// Sends the whole HTTP request `request` to "127.0.0.1:PORT" `address` and
/// returns everything read until the server closes the connection (status
/// line, headers, body), waiting two minutes at most.
std::string exchange_http(const std::string& address,
                          const std::string& request);

} // namespace mibyan::test
