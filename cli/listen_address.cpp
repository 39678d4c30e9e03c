// The --listen flag (cli/listen_address.hpp).
#include "cli/listen_address.hpp"

#include <cstdlib>

#include <arpa/inet.h>

namespace mibyan::cli {

std::string parse_listen(const std::string& text, std::string& host,
                         uint16_t& port) {
  std::string h, p;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size()
        || text[close + 1] != ':')
      return "--listen expects HOST:PORT or [IPV6]:PORT, got '" + text + "'";
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos)
      return "--listen expects HOST:PORT, got '" + text + "'";
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  if (h == "localhost")
    h = "127.0.0.1";
  char* end = nullptr;
  auto n = std::strtol(p.c_str(), &end, 10);
  if (p.empty() || *end != '\0' || n < 0 || n > 65535)
    return "--listen: the port must be 0 to 65535, got '" + p + "'";
  in6_addr a6{};
  in_addr a4{};
  if (::inet_pton(AF_INET, h.c_str(), &a4) != 1
      && ::inet_pton(AF_INET6, h.c_str(), &a6) != 1)
    return "--listen: the host must be an IP address or localhost, got '" + h
           + "'";
  host = h;
  port = static_cast<uint16_t>(n);
  return {};
}

bool is_loopback(const std::string& host) {
  in_addr a4{};
  if (::inet_pton(AF_INET, host.c_str(), &a4) == 1)
    return (ntohl(a4.s_addr) >> 24) == 127;
  return host == "::1";
}

} // namespace mibyan::cli
