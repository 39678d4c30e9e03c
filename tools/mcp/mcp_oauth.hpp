// File: tools/mcp/mcp_oauth.hpp
//
// The pure pieces of OAuth 2.1 authorization for HTTP MCP servers
// (docs/mcp.md, "Authorization"; MCP 2025-11-25 basic/authorization):
// parsing `WWW-Authenticate` challenges (RFC 6750 / RFC 9728 §5.1), the
// well-known URLs of protected-resource metadata (RFC 9728) and of
// authorization-server metadata (RFC 8414 with the OpenID Connect discovery
// fallback) in the spec's order, PKCE S256 (RFC 7636), the canonical
// resource URI (RFC 8707), form and query encoding, and the endpoint rule
// (https, except on a loopback host).
//
// Thread safety: pure functions (pkce_verifier and oauth_random_state read
// the OS CSPRNG). No I/O otherwise.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.hpp"

namespace mibyan {

/// One challenge of a `WWW-Authenticate` header: the scheme ("Bearer") and
/// its auth-params (names lower-cased, quoted values unescaped).
struct www_challenge {
  std::string scheme;
  std::map<std::string, std::string> params;
  std::string param(const std::string& name) const {
    auto i = params.find(name);
    return i == params.end() ? std::string{} : i->second;
  }
};

/// Parses a `WWW-Authenticate` value, which may hold several challenges
/// separated by commas (`Bearer realm="x", scope="a b", Basic realm="y"`).
/// Garbage yields what could be recognised (possibly nothing); never throws.
std::vector<www_challenge> parse_www_authenticate(std::string_view header);

/// What a 401/403 said about authorization: from the first Bearer challenge
/// (scheme compared case-insensitively).
struct bearer_challenge {
  bool present = false;          // a Bearer challenge was found
  std::string resource_metadata; // RFC 9728 §5.1
  std::string scope;             // space-separated
  std::string error;             // invalid_token, insufficient_scope, ...
  std::string error_description;
};
bearer_challenge parse_bearer_challenge(std::string_view header);

/// Base64url without padding (RFC 4648 §5).
std::string base64url_encode(std::string_view bytes);

/// A PKCE code verifier: 32 random bytes, base64url (43 characters of the
/// unreserved set RFC 7636 §4.1 allows).
std::string pkce_verifier();

/// The S256 code challenge of `verifier`: BASE64URL(SHA256(verifier)).
std::string pkce_challenge_s256(const std::string& verifier);

/// A random `state` value (128 bits, base64url).
std::string oauth_random_state();

/// application/x-www-form-urlencoded / query component encoding: every byte
/// outside ALPHA / DIGIT / "-._~" becomes %XX (space too).
std::string form_encode(std::string_view text);

/// `a=b&c=d` from (name, value) pairs, both encoded.
std::string form_body(const std::vector<std::pair<std::string, std::string>>&
                        fields);

/// Decodes a query string or form body (`+` is a space, %XX decoded); later
/// duplicates are ignored.
std::map<std::string, std::string> parse_query(std::string_view query);

/// The parts of an absolute http(s) URL; nullopt when it is not one.
struct oauth_url {
  std::string scheme;    // lower case
  std::string authority; // host[:port] as written, host lower-cased
  std::string host;      // without brackets and port, lower case
  std::string path;      // "" or starting with '/', without query/fragment
  std::string query;     // without '?'
};
std::optional<oauth_url> parse_oauth_url(std::string_view url);

/// The canonical URI of an MCP server for the `resource` parameter (MCP
/// "Canonical Server URI"): scheme and host lower-cased, no query or
/// fragment, no trailing slash unless the path is only "/" (then none).
std::string canonical_resource_uri(std::string_view server_url);

/// Whether a protected-resource metadata `resource` value fits the server
/// at `server_url`: same scheme and authority, and its path is the server
/// path or a prefix of it ending at a '/' boundary (RFC 9728 §3.3 and the
/// MCP spec's resource identification).
bool resource_matches(std::string_view resource, std::string_view server_url);

/// The protected-resource metadata URLs to try for `server_url`, in the
/// spec's order: the path-aware one (/.well-known/oauth-protected-resource
/// + path) when the URL has a path, then the root one.
std::vector<std::string> protected_resource_metadata_urls(
  std::string_view server_url);

/// The authorization-server metadata URLs for `issuer`, in the spec's
/// order. With a path: oauth-authorization-server with path insertion,
/// openid-configuration with path insertion, openid-configuration with path
/// appending. Without: oauth-authorization-server, openid-configuration.
std::vector<std::string> authorization_server_metadata_urls(
  std::string_view issuer);

/// Whether `host` is a loopback host: "localhost", "*.localhost", 127/8,
/// "::1".
bool is_loopback_host(std::string_view host);

/// The endpoint rule for metadata, registration, authorization and token
/// endpoints: an absolute URL without user info, https unless the host is
/// a loopback host. `what` names the endpoint in the error.
status check_oauth_endpoint(std::string_view url, std::string_view what);

/// Space-separated scope sets: the union, keeping the order of first
/// appearance.
std::string scope_union(std::string_view a, std::string_view b);

/// Whether every scope of `needed` is in `have`.
bool scope_covers(std::string_view have, std::string_view needed);

} // namespace mibyan
