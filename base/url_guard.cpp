#include "base/url_guard.hpp"

#include <array>
#include <cctype>
#include <cstring>
#include <memory>

#include <arpa/inet.h>

#include "base/curl_library.hpp"
#include "base/strings.hpp"

namespace mibyan {

const char* const blocked_url_message
  = "Blocked: URL targets a private or internal network address";

namespace {

// Strips "[...]" and a "%zone" suffix.
std::string_view bare_address(std::string_view ip) {
  if (ip.size() >= 2 && ip.front() == '[' && ip.back() == ']')
    ip = ip.substr(1, ip.size() - 2);
  if (auto pct = ip.find('%'); pct != std::string_view::npos)
    ip = ip.substr(0, pct);
  return ip;
}

// Parses `ip` into 4 or 16 bytes. Returns the byte count, 0 on failure.
size_t parse_address(std::string_view ip, std::array<uint8_t, 16>& bytes) {
  auto bare = std::string{bare_address(ip)};
  if (bare.empty() || bare.size() > 64)
    return 0;
  if (inet_pton(AF_INET, bare.c_str(), bytes.data()) == 1)
    return 4;
  if (inet_pton(AF_INET6, bare.c_str(), bytes.data()) == 1)
    return 16;
  return 0;
}

address_class classify_v4(const uint8_t* a) {
  uint32_t x = (uint32_t{a[0]} << 24) | (uint32_t{a[1]} << 16)
               | (uint32_t{a[2]} << 8) | uint32_t{a[3]};
  auto in = [x](uint32_t net, int bits) {
    uint32_t mask = bits == 0 ? 0 : ~uint32_t{0} << (32 - bits);
    return (x & mask) == net;
  };
  auto v4 = [](uint32_t b0, uint32_t b1, uint32_t b2, uint32_t b3) {
    return (b0 << 24) | (b1 << 16) | (b2 << 8) | b3;
  };
  // Instance metadata services: AWS/GCP/Azure/OpenStack (169.254.169.254),
  // AWS ECS task metadata (169.254.170.2), Alibaba (100.100.100.200),
  // Azure wire server (168.63.129.16).
  if (x == v4(169, 254, 169, 254) || x == v4(169, 254, 170, 2)
      || x == v4(100, 100, 100, 200) || x == v4(168, 63, 129, 16))
    return address_class::metadata;
  if (in(v4(0, 0, 0, 0), 8))
    return address_class::unspecified;
  if (in(v4(127, 0, 0, 0), 8))
    return address_class::loopback;
  if (in(v4(10, 0, 0, 0), 8) || in(v4(172, 16, 0, 0), 12)
      || in(v4(192, 168, 0, 0), 16))
    return address_class::private_network;
  if (in(v4(169, 254, 0, 0), 16))
    return address_class::link_local;
  if (in(v4(100, 64, 0, 0), 10))
    return address_class::cgnat;
  if (in(v4(224, 0, 0, 0), 4))
    return address_class::multicast;
  if (in(v4(192, 0, 0, 0), 24) || in(v4(192, 0, 2, 0), 24)
      || in(v4(198, 18, 0, 0), 15) || in(v4(198, 51, 100, 0), 24)
      || in(v4(203, 0, 113, 0), 24) || in(v4(240, 0, 0, 0), 4))
    return address_class::reserved;  // also 255.255.255.255
  return address_class::public_address;
}

address_class classify_v6(const uint8_t* a) {
  static constexpr uint8_t ec2_metadata[16]
    = {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54};
  if (std::memcmp(a, ec2_metadata, 16) == 0)
    return address_class::metadata;
  bool first10_zero = true;
  for (int i = 0; i < 10; ++i)
    first10_zero = first10_zero && a[i] == 0;
  bool first12_zero = first10_zero && a[10] == 0 && a[11] == 0;
  if (first12_zero) {
    bool rest_zero = a[12] == 0 && a[13] == 0 && a[14] == 0;
    if (rest_zero && a[15] == 0)
      return address_class::unspecified;
    if (rest_zero && a[15] == 1)
      return address_class::loopback;
    return classify_v4(a + 12);  // ::a.b.c.d (IPv4-compatible)
  }
  if (first10_zero && a[10] == 0xff && a[11] == 0xff)
    return classify_v4(a + 12);  // ::ffff:a.b.c.d (IPv4-mapped)
  static constexpr uint8_t nat64[12]
    = {0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::memcmp(a, nat64, 12) == 0)
    return classify_v4(a + 12);
  if (a[0] == 0x20 && a[1] == 0x02)
    return classify_v4(a + 2);  // 6to4
  if (a[0] == 0xff)
    return address_class::multicast;
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
    return address_class::link_local;
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)
    return address_class::private_network;  // deprecated site-local
  if ((a[0] & 0xfe) == 0xfc)
    return address_class::private_network;  // unique local
  if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0d && a[3] == 0xb8)
    return address_class::reserved;  // documentation
  if (a[0] == 0x01 && a[1] == 0x00 && a[2] == 0 && a[3] == 0 && a[4] == 0
      && a[5] == 0 && a[6] == 0 && a[7] == 0)
    return address_class::reserved;  // discard-only 100::/64
  // Only 2000::/3 is allocated as global unicast.
  if ((a[0] & 0xe0) != 0x20)
    return address_class::reserved;
  return address_class::public_address;
}

bool credential_parameter(std::string_view name) {
  static constexpr const char* names[] = {
    "key",          "api_key",      "apikey",        "api-key",
    "x-api-key",    "token",        "access_token",  "auth_token",
    "id_token",     "refresh_token", "private_token", "secret",
    "client_secret", "password",    "passwd",        "auth",
    "app_key",      "subscription-key", "bearer",
  };
  auto n = strings::lower(name);
  for (auto* x : names)
    if (n == x)
      return true;
  return false;
}

bool key_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
}

// Well-known credential prefixes followed by a long key-like run.
std::optional<std::string> find_key_pattern(std::string_view url) {
  struct pattern {
    const char* prefix;
    size_t min_rest;
  };
  static constexpr pattern patterns[] = {
    {"sk-", 20}, {"sk_live_", 16}, {"ghp_", 30}, {"gho_", 30},
    {"github_pat_", 30}, {"xoxb-", 20}, {"xoxp-", 20}, {"AIza", 30},
    {"glpat-", 20},
  };
  for (auto& p : patterns) {
    auto plen = std::strlen(p.prefix);
    for (size_t pos = url.find(p.prefix); pos != std::string_view::npos;
         pos = url.find(p.prefix, pos + 1)) {
      if (pos > 0 && key_char(url[pos - 1]))
        continue;
      size_t n = 0;
      while (pos + plen + n < url.size() && key_char(url[pos + plen + n]))
        ++n;
      if (n >= p.min_rest)
        return std::string{p.prefix};
    }
  }
  return std::nullopt;
}

struct curlu_deleter {
  void operator()(CURLU* h) const { curl_api().url_cleanup(h); }
};

std::optional<std::string> get_part(CURLU* h, CURLUPart part) {
  char* out = nullptr;
  if (curl_api().url_get(h, part, &out, 0) != CURLUE_OK || out == nullptr)
    return std::nullopt;
  std::string result{out};
  curl_api().free(out);
  return result;
}

} // namespace

const char* to_string(address_class x) {
  switch (x) {
    case address_class::public_address: return "public";
    case address_class::private_network: return "private";
    case address_class::loopback: return "loopback";
    case address_class::link_local: return "link-local";
    case address_class::cgnat: return "cgnat";
    case address_class::unspecified: return "unspecified";
    case address_class::multicast: return "multicast";
    case address_class::metadata: return "metadata";
    case address_class::reserved: return "reserved";
    case address_class::invalid: return "invalid";
  }
  return "invalid";
}

address_class classify_address(std::string_view ip) {
  std::array<uint8_t, 16> bytes{};
  switch (parse_address(ip, bytes)) {
    case 4: return classify_v4(bytes.data());
    case 16: return classify_v6(bytes.data());
    default: return address_class::invalid;
  }
}

bool is_internal(address_class x) {
  return x != address_class::public_address;
}

bool is_internal_host_name(std::string_view host) {
  auto h = strings::lower(host);
  while (!h.empty() && h.back() == '.')
    h.pop_back();
  return h == "localhost" || strings::ends_with(h, ".localhost")
         || h == "metadata.google.internal" || h == "metadata.goog"
         || h == "metadata" || h == "instance-data"
         || strings::ends_with(h, ".internal");
}

result<url_parts> validate_url(std::string_view url) {
  auto fail = [](std::string msg) {
    return result<url_parts>::failure(status_code::invalid_argument,
                                      std::move(msg));
  };
  url = strings::trim_view(url, strings::ascii_space);
  if (url.empty())
    return fail("URL is empty");
  if (url.size() > 8192)
    return fail("URL is longer than 8192 characters");
  for (char c : url)
    if (static_cast<unsigned char>(c) < 0x20 || c == ' ' || c == 0x7f)
      return fail("URL contains spaces or control characters; "
                  "percent-encode them");
  auto sep = url.find("://");
  if (sep == std::string_view::npos)
    return fail("Not an absolute URL: it must start with http:// or "
                "https://");
  auto scheme = strings::lower(url.substr(0, sep));
  if (scheme != "http" && scheme != "https")
    return fail("Unsupported URL scheme '" + scheme.substr(0, 20)
                + "': only http:// and https:// URLs can be fetched");
  if (auto lib = curl_lib(); !lib.ok())
    return lib.get_status();
  std::unique_ptr<CURLU, curlu_deleter> h{curl_api().url()};
  if (!h)
    return fail("out of memory parsing URL");
  std::string text{url};
  auto rc = curl_api().url_set(h.get(), CURLUPART_URL, text.c_str(),
                         CURLU_NON_SUPPORT_SCHEME);
  if (rc != CURLUE_OK)
    return fail(std::string{"Malformed URL: "} + curl_api().url_strerror(rc));
  if (get_part(h.get(), CURLUPART_USER) || get_part(h.get(),
                                                    CURLUPART_PASSWORD))
    return fail("URLs with embedded credentials (user:password@host) are "
                "not allowed");
  auto host = get_part(h.get(), CURLUPART_HOST);
  if (!host || host->empty())
    return fail("URL has no host name");
  url_parts parts;
  parts.scheme = scheme;
  parts.host = strings::lower(*host);
  if (parts.host.size() >= 2 && parts.host.front() == '[') {
    parts.host = std::string{bare_address(parts.host)};
  }
  parts.host_is_ip = classify_address(parts.host) != address_class::invalid;
  parts.port = get_part(h.get(), CURLUPART_PORT).value_or("");
  parts.path = get_part(h.get(), CURLUPART_PATH).value_or("/");
  if (auto query = get_part(h.get(), CURLUPART_QUERY)) {
    parts.path += '?';
    parts.path += *query;
    std::string_view q{*query};
    while (!q.empty()) {
      auto amp = q.find('&');
      auto item = q.substr(0, amp);
      auto eq = item.find('=');
      if (eq != std::string_view::npos) {
        auto name = item.substr(0, eq);
        auto value = item.substr(eq + 1);
        if (credential_parameter(name) && value.size() >= 16)
          return fail("URL embeds what looks like an API key or token in "
                      "its query (parameter '"
                      + std::string{name}
                      + "'); credentials must not be sent to web pages. "
                        "Remove the parameter and retry.");
      }
      if (amp == std::string_view::npos)
        break;
      q.remove_prefix(amp + 1);
    }
  }
  if (auto prefix = find_key_pattern(url))
    return fail("URL embeds what looks like an API key (" + *prefix
                + "...); credentials must not be sent to web pages.");
  return parts;
}

namespace {

status blocked() {
  return status::failure(status_code::permission_denied, blocked_url_message);
}

} // namespace

status url_policy::check_address(std::string_view ip) const {
  if (allow_private)
    return {};
  std::array<uint8_t, 16> bytes{};
  auto len = parse_address(ip, bytes);
  if (len == 0)
    return blocked();
  for (auto& allowed : allowed_addresses) {
    std::array<uint8_t, 16> other{};
    if (parse_address(allowed, other) == len
        && std::memcmp(bytes.data(), other.data(), len) == 0)
      return {};
  }
  if (is_internal(classify_address(ip)))
    return blocked();
  return {};
}

status url_policy::check_host(const url_parts& url) const {
  if (allow_private)
    return {};
  if (url.host_is_ip)
    return check_address(url.host);
  if (is_internal_host_name(url.host))
    return blocked();
  return {};
}

} // namespace mibyan
