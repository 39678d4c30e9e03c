// File: cli/listen_address.hpp
//
// The --listen HOST:PORT flag of the commands that serve HTTP (`mibyan
// serve`, `dashboard`, `mcp serve`): parsing and the loopback test their
// key policy uses. Pure.
#pragma once

#include <cstdint>
#include <string>

namespace mibyan::cli {

/// Splits "HOST:PORT" ("[v6]:PORT" for IPv6; "localhost" becomes
/// 127.0.0.1). Returns an error message or "".
std::string parse_listen(const std::string& text, std::string& host,
                         uint16_t& port);

/// Whether `host` (an IP address) is a loopback address.
bool is_loopback(const std::string& host);

} // namespace mibyan::cli
