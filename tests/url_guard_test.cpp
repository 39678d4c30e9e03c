#define BOOST_TEST_MODULE url_guard
#include <boost/test/unit_test.hpp>

#include <string>
#include <utility>
#include <vector>

#include "base/url_guard.hpp"

using namespace mibyan;

namespace mibyan {
std::ostream& operator<<(std::ostream& os, address_class x) {
  return os << to_string(x);
}
} // namespace mibyan

BOOST_AUTO_TEST_CASE(classifies_ipv4_addresses) {
  std::vector<std::pair<const char*, address_class>> table = {
    {"8.8.8.8", address_class::public_address},
    {"93.184.215.14", address_class::public_address},
    {"1.1.1.1", address_class::public_address},
    {"172.15.255.255", address_class::public_address},
    {"172.32.0.1", address_class::public_address},
    {"100.63.255.255", address_class::public_address},
    {"100.128.0.0", address_class::public_address},
    {"169.253.1.1", address_class::public_address},
    {"223.255.255.255", address_class::public_address},
    {"10.0.0.1", address_class::private_network},
    {"10.255.255.255", address_class::private_network},
    {"172.16.0.1", address_class::private_network},
    {"172.31.255.254", address_class::private_network},
    {"192.168.1.1", address_class::private_network},
    {"127.0.0.1", address_class::loopback},
    {"127.0.0.2", address_class::loopback},
    {"127.255.255.255", address_class::loopback},
    {"169.254.0.1", address_class::link_local},
    {"169.254.169.254", address_class::metadata},
    {"169.254.170.2", address_class::metadata},
    {"100.100.100.200", address_class::metadata},
    {"168.63.129.16", address_class::metadata},
    {"100.64.0.1", address_class::cgnat},
    {"100.127.255.255", address_class::cgnat},
    {"0.0.0.0", address_class::unspecified},
    {"0.1.2.3", address_class::unspecified},
    {"224.0.0.1", address_class::multicast},
    {"239.255.255.250", address_class::multicast},
    {"240.0.0.1", address_class::reserved},
    {"255.255.255.255", address_class::reserved},
    {"192.0.2.1", address_class::reserved},
    {"198.18.0.1", address_class::reserved},
    {"203.0.113.9", address_class::reserved},
  };
  for (auto& [ip, expected] : table)
    BOOST_TEST(classify_address(ip) == expected, ip);
}

BOOST_AUTO_TEST_CASE(classifies_ipv6_addresses) {
  std::vector<std::pair<const char*, address_class>> table = {
    {"2606:4700:4700::1111", address_class::public_address},
    {"2001:4860:4860::8888", address_class::public_address},
    {"[2001:4860:4860::8888]", address_class::public_address},
    {"::1", address_class::loopback},
    {"[::1]", address_class::loopback},
    {"0:0:0:0:0:0:0:1", address_class::loopback},
    {"::", address_class::unspecified},
    {"fe80::1", address_class::link_local},
    {"fe80::1%eth0", address_class::link_local},
    {"febf::1", address_class::link_local},
    {"fc00::1", address_class::private_network},
    {"fd12:3456::1", address_class::private_network},
    {"fec0::1", address_class::private_network},
    {"fd00:ec2::254", address_class::metadata},
    {"ff02::1", address_class::multicast},
    {"2001:db8::1", address_class::reserved},
    {"100::1", address_class::reserved},
    {"4000::1", address_class::reserved},
    // Embedded IPv4 is classified by the IPv4 address.
    {"::ffff:127.0.0.1", address_class::loopback},
    {"::ffff:7f00:1", address_class::loopback},
    {"::ffff:10.1.2.3", address_class::private_network},
    {"::ffff:169.254.169.254", address_class::metadata},
    {"::ffff:8.8.8.8", address_class::public_address},
    {"::127.0.0.1", address_class::loopback},
    {"64:ff9b::127.0.0.1", address_class::loopback},
    {"64:ff9b::808:808", address_class::public_address},
    {"2002:7f00:1::", address_class::loopback},
    {"2002:0808:0808::1", address_class::public_address},
  };
  for (auto& [ip, expected] : table)
    BOOST_TEST(classify_address(ip) == expected, ip);
}

BOOST_AUTO_TEST_CASE(non_addresses_are_invalid_and_internal) {
  for (auto ip : {"", "localhost", "example.com", "1.2.3", "1.2.3.4.5",
                  "256.1.1.1", "127.1", "0x7f.0.0.1", "2130706433",
                  "::g", "[::1", "1.2.3.4 ", "\x01\x02"}) {
    BOOST_TEST(classify_address(ip) == address_class::invalid, ip);
  }
  BOOST_TEST(is_internal(address_class::invalid));
  BOOST_TEST(is_internal(address_class::loopback));
  BOOST_TEST(!is_internal(address_class::public_address));
  BOOST_TEST(std::string{to_string(address_class::cgnat)} == "cgnat");
}

BOOST_AUTO_TEST_CASE(internal_host_names) {
  for (auto host : {"localhost", "LOCALHOST", "localhost.", "a.localhost",
                    "metadata.google.internal", "Metadata.Google.Internal.",
                    "metadata", "metadata.goog", "instance-data",
                    "db.corp.internal"})
    BOOST_TEST(is_internal_host_name(host), host);
  for (auto host : {"example.com", "localhost.example.com", "internal.com",
                    "metadata.example", "mylocalhost"})
    BOOST_TEST(!is_internal_host_name(host), host);
}

BOOST_AUTO_TEST_CASE(accepts_ordinary_urls) {
  auto v = validate_url("https://Example.COM/a/b?q=1&page=2#frag");
  BOOST_TEST_REQUIRE(static_cast<bool>(v), v.error);
  BOOST_TEST(v->scheme == "https");
  BOOST_TEST(v->host == "example.com");
  BOOST_TEST(v->path == "/a/b?q=1&page=2");
  BOOST_TEST(!v->host_is_ip);
  v = validate_url("  http://127.0.0.1:8080/x  ");
  BOOST_TEST_REQUIRE(static_cast<bool>(v), v.error);
  BOOST_TEST(v->host == "127.0.0.1");
  BOOST_TEST(v->port == "8080");
  BOOST_TEST(v->host_is_ip);
  v = validate_url("http://[::1]:9/");
  BOOST_TEST_REQUIRE(static_cast<bool>(v), v.error);
  BOOST_TEST(v->host == "::1");
  BOOST_TEST(v->host_is_ip);
  v = validate_url("HTTPS://example.com");
  BOOST_TEST_REQUIRE(static_cast<bool>(v), v.error);
  BOOST_TEST(v->path == "/");
  // Short values of credential-like names are ordinary parameters.
  v = validate_url("https://example.com/?token=abc&key=value");
  BOOST_TEST(static_cast<bool>(v), v.error);
  v = validate_url(
    "https://example.com/?page_token=ABCDEFGHIJKLMNOPQRSTUVWXYZ");
  BOOST_TEST(static_cast<bool>(v), v.error);
}

BOOST_AUTO_TEST_CASE(refuses_bad_urls) {
  struct row {
    std::string url;
    const char* expect;  // substring of the error
  };
  std::vector<row> table = {
    {"", "empty"},
    {"   ", "empty"},
    {"not a url", "spaces"},
    {"notaurl", "absolute"},
    {"example.com/page", "absolute"},
    {"ftp://example.com/file", "scheme 'ftp'"},
    {"file:///etc/passwd", "scheme 'file'"},
    {"javascript://alert(1)", "scheme 'javascript'"},
    {"gopher://x", "scheme"},
    {"http://", "Malformed URL"},
    {"http://user:pass@example.com/", "credentials"},
    {"http://user@example.com/", "credentials"},
    {"http://exa mple.com/", "spaces"},
    {"http://example.com/\x01", "control"},
    {"https://maps.example.com/api?key=AIzaSyA1234567890abcdefghijklmno",
     "'key'"},
    {"https://example.com/x?api_key=0123456789abcdef0123", "'api_key'"},
    {"https://example.com/x?a=1&TOKEN=0123456789abcdef0123", "'TOKEN'"},
    {"https://example.com/x?access_token=eyJhbGciOiJIUzI1NiJ9xx",
     "'access_token'"},
    {"https://example.com/v1/sk-abcdefghijklmnopqrstuvwxyz123456/x",
     "API key (sk-"},
    {"https://example.com/?q=ghp_abcdefghijklmnopqrstuvwxyz0123456789",
     "API key (ghp_"},
    {"http://" + std::string(9000, 'a') + ".com/", "8192"},
  };
  for (auto& r : table) {
    auto v = validate_url(r.url);
    BOOST_TEST(!v, r.url.substr(0, 80));
    if (!v && *r.expect != '\0')
      BOOST_TEST(v.error.find(r.expect) != std::string::npos,
                 r.url.substr(0, 80) << " -> " << v.error);
    BOOST_TEST(!v.error.empty());
  }
  // A trailing newline is trimmed like other surrounding whitespace.
  BOOST_TEST(static_cast<bool>(validate_url("http://example.com/\n")));
}

BOOST_AUTO_TEST_CASE(policy_blocks_internal_targets) {
  url_policy policy;
  BOOST_TEST(policy.check_address("8.8.8.8").ok());
  BOOST_TEST(policy.check_address("2001:4860:4860::8888").ok());
  for (auto ip : {"127.0.0.1", "10.0.0.1", "169.254.169.254", "::1",
                  "::ffff:127.0.0.1", "fd00:ec2::254", "0.0.0.0", "garbage"}) {
    auto reason = policy.check_address(ip);
    BOOST_TEST_REQUIRE(!reason.ok(), ip);
    BOOST_TEST((reason.code == status_code::permission_denied));
    BOOST_TEST(reason.error == blocked_url_message);
  }
  auto host = [&](const char* url) {
    auto v = validate_url(url);
    BOOST_REQUIRE(v);
    return policy.check_host(*v);
  };
  BOOST_TEST(!host("http://127.0.0.1/").ok());
  BOOST_TEST(!host("http://[::1]/").ok());
  BOOST_TEST(!host("http://localhost:8080/").ok());
  BOOST_TEST(!host("http://metadata.google.internal/computeMetadata/v1/")
                .ok());
  BOOST_TEST(!host("http://169.254.169.254/latest/meta-data/").ok());
  BOOST_TEST(host("https://example.com/").ok());
  BOOST_TEST(host("https://8.8.8.8/").ok());
}

BOOST_AUTO_TEST_CASE(numeric_host_forms_are_normalised) {
  url_policy policy;
  // The URL parser normalises the legacy IPv4 notations, so they cannot
  // sneak past the literal check.
  for (auto url : {"http://2130706433/", "http://0x7f000001/",
                   "http://127.1/", "http://0177.0.0.1/",
                   "http://[::ffff:127.0.0.1]/"}) {
    auto v = validate_url(url);
    BOOST_TEST_REQUIRE(static_cast<bool>(v), url);
    BOOST_TEST(v->host_is_ip, url);
    BOOST_TEST(!policy.check_host(*v).ok(), url);
  }
}

BOOST_AUTO_TEST_CASE(policy_overrides) {
  url_policy open;
  open.allow_private = true;
  BOOST_TEST(open.check_address("127.0.0.1").ok());
  BOOST_TEST(open.check_address("169.254.169.254").ok());
  auto v = validate_url("http://localhost/");
  BOOST_REQUIRE(v);
  BOOST_TEST(open.check_host(*v).ok());

  url_policy some;
  some.allowed_addresses = {"127.0.0.1", "0:0:0:0:0:0:0:1"};
  BOOST_TEST(some.check_address("127.0.0.1").ok());
  BOOST_TEST(some.check_address("::1").ok());
  BOOST_TEST(!some.check_address("127.0.0.2").ok());
  BOOST_TEST(!some.check_address("10.0.0.1").ok());
  // IPv4 entries do not match their mapped IPv6 form by accident.
  BOOST_TEST(!some.check_address("::ffff:127.0.0.1").ok());
}
