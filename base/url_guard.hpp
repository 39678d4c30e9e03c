// File: base/url_guard.hpp
//
// URL validation and the SSRF guard of the web tools: which URLs a model may
// make Mibyan fetch, and which network addresses a fetch may connect to.
//
// Two layers work together:
// - `validate_url` + `url_policy::check_host` refuse bad URLs before any
//   request (wrong scheme, credentials, embedded API keys, internal IP
//   literals and internal host names);
// - `url_policy::check_address` runs for every connection the HTTP client
//   opens (see http_request::connect_check), after DNS resolution, so that
//   DNS rebinding and redirects to internal hosts are refused as well.
//
// Everything here is a pure function of its arguments; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace mibyan {

/// What kind of network an IP address belongs to.
enum class address_class : uint8_t {
  public_address,   // globally routable
  private_network,  // 10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10
  loopback,         // 127/8, ::1
  link_local,       // 169.254/16, fe80::/10
  cgnat,            // 100.64/10 (shared address space)
  unspecified,      // 0/8, ::
  multicast,        // 224/4, ff00::/8
  metadata,         // cloud instance metadata endpoints
  reserved,         // documentation, benchmarking, 240/4, broadcast, ...
  invalid,          // not a numeric IPv4 or IPv6 address
};

/// Returns "public", "private", "loopback", "link-local", "cgnat",
/// "unspecified", "multicast", "metadata", "reserved" or "invalid".
const char* to_string(address_class x);

/// Classifies a numeric address: dotted-quad IPv4 or IPv6 (optionally in
/// brackets and with a %zone suffix). IPv4-mapped, IPv4-compatible, NAT64
/// (64:ff9b::/96) and 6to4 (2002::/16) IPv6 addresses are classified by the
/// IPv4 address they embed. Host names yield `invalid`.
address_class classify_address(std::string_view ip);

/// Returns whether `x` is anything but `public_address` (invalid counts as
/// internal: an address we cannot classify is not trusted).
bool is_internal(address_class x);

/// Returns whether the host name is internal by name alone: "localhost",
/// "*.localhost", "metadata.google.internal", "metadata.goog",
/// "metadata", "instance-data" and "*.internal" (ASCII case-insensitive,
/// a trailing dot ignored).
bool is_internal_host_name(std::string_view host);

/// The parts of an accepted URL.
struct url_parts {
  std::string scheme;  // "http" or "https"
  std::string host;    // lower case; IPv6 without brackets
  std::string port;    // "" when not given
  std::string path;    // with query, e.g. "/a?b=c"
  bool host_is_ip = false;
};

/// Checks a URL given by a model: absolute http:// or https:// only, at
/// most 8,192 characters, no user name or password, and no query parameter
/// that looks like a credential (`key`, `api_key`, `token`, ... with a value
/// of 16 or more characters) nor a well-known API key pattern anywhere.
/// Returns its parts, or invalid_argument with a message a model can act
/// on (unavailable when libcurl cannot be loaded).
result<url_parts> validate_url(std::string_view url);

/// The per-URL error of blocked targets, as shown to models.
extern const char* const blocked_url_message;

/// Which internal targets the web tools may reach.
struct url_policy {
  /// Reach every address (security.allow_private_urls).
  bool allow_private = false;
  /// Exact numeric addresses allowed although internal
  /// (security.allowed_private_addresses), compared as addresses, so
  /// "::1" matches "0:0:0:0:0:0:0:1".
  std::vector<std::string> allowed_addresses;

  /// Allows a connection to `ip`, or refuses it with permission_denied and
  /// the reason (blocked_url_message).
  status check_address(std::string_view ip) const;

  /// Allows `url` before any lookup, or refuses it with permission_denied
  /// and the reason (an internal IP literal or internal host name).
  status check_host(const url_parts& url) const;
};

} // namespace mibyan
