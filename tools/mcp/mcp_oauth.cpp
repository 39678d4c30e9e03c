#include "tools/mcp/mcp_oauth.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <optional>
#include <sstream>
#include <utility>

#include "base/crypto.hpp"
#include "base/url_guard.hpp"
#include "base/strings.hpp"

namespace mibyan {

namespace {

char lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

bool token_char(char c) {
  return !is_space(c) && c != ',' && c != '=' && c != '"';
}

std::string hex_to_bytes(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

std::vector<std::string> split_scopes(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (is_space(c)) {
      if (!cur.empty())
        out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty())
    out.push_back(std::move(cur));
  return out;
}

} // namespace

std::vector<www_challenge> parse_www_authenticate(std::string_view h) {
  std::vector<www_challenge> out;
  size_t i = 0, n = h.size();
  while (i < n) {
    while (i < n && (is_space(h[i]) || h[i] == ','))
      ++i;
    if (i >= n)
      break;
    size_t start = i;
    while (i < n && token_char(h[i]))
      ++i;
    if (i == start) { // a stray '=' or '"': skip it
      ++i;
      continue;
    }
    std::string tok{h.substr(start, i - start)};
    size_t j = i;
    while (j < n && is_space(h[j]))
      ++j;
    if (j < n && h[j] == '=') {
      // auth-param: name = token / quoted-string
      i = j + 1;
      while (i < n && is_space(h[i]))
        ++i;
      std::string value;
      if (i < n && h[i] == '"') {
        ++i;
        while (i < n && h[i] != '"') {
          if (h[i] == '\\' && i + 1 < n)
            ++i;
          value += h[i++];
        }
        if (i < n)
          ++i; // closing quote
      } else {
        while (i < n && !is_space(h[i]) && h[i] != ',')
          value += h[i++];
      }
      if (!out.empty())
        out.back().params.emplace(strings::lower(tok), std::move(value));
      continue;
    }
    // A new challenge: the scheme. (A token68 after it is read as the
    // next token and becomes a parameter-less scheme-like entry only when
    // it has no '='; harmless, as only Bearer parameters are used.)
    www_challenge c;
    c.scheme = tok;
    out.push_back(std::move(c));
  }
  return out;
}

bearer_challenge parse_bearer_challenge(std::string_view header) {
  bearer_challenge b;
  for (auto& c : parse_www_authenticate(header)) {
    if (strings::lower(c.scheme) != "bearer")
      continue;
    b.present = true;
    b.resource_metadata = c.param("resource_metadata");
    b.scope = c.param("scope");
    b.error = c.param("error");
    b.error_description = c.param("error_description");
    break;
  }
  return b;
}

std::string base64url_encode(std::string_view in) {
  static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  auto byte = [&](size_t k) {
    return static_cast<unsigned>(static_cast<unsigned char>(in[k]));
  };
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  if (in.size() - i == 1) {
    unsigned v = byte(i) << 16;
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
  } else if (in.size() - i == 2) {
    unsigned v = (byte(i) << 16) | (byte(i + 1) << 8);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
  }
  return out;
}

std::string pkce_verifier() {
  return base64url_encode(hex_to_bytes(random_hex(32)));
}

std::string pkce_challenge_s256(const std::string& verifier) {
  return base64url_encode(hex_to_bytes(sha256_hex(verifier)));
}

std::string oauth_random_state() {
  return base64url_encode(hex_to_bytes(random_hex(16)));
}

std::string form_encode(std::string_view text) {
  static const char digits[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out;
}

std::string form_body(
  const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (auto& [k, v] : fields) {
    if (!out.empty())
      out += '&';
    out += form_encode(k) + "=" + form_encode(v);
  }
  return out;
}

std::map<std::string, std::string> parse_query(std::string_view q) {
  auto decode = [](std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '+') {
        out += ' ';
      } else if (s[i] == '%' && i + 2 < s.size()
                 && std::isxdigit(static_cast<unsigned char>(s[i + 1]))
                 && std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
        out += static_cast<char>(
          std::stoi(std::string{s.substr(i + 1, 2)}, nullptr, 16));
        i += 2;
      } else {
        out += s[i];
      }
    }
    return out;
  };
  std::map<std::string, std::string> out;
  size_t i = 0;
  while (i <= q.size()) {
    auto amp = q.find('&', i);
    if (amp == std::string_view::npos)
      amp = q.size();
    auto part = q.substr(i, amp - i);
    if (!part.empty()) {
      auto eq = part.find('=');
      auto k = decode(part.substr(0, eq));
      auto v = eq == std::string_view::npos ? std::string{}
                                            : decode(part.substr(eq + 1));
      out.emplace(std::move(k), std::move(v));
    }
    i = amp + 1;
  }
  return out;
}

std::optional<oauth_url> parse_oauth_url(std::string_view url) {
  auto sep = url.find("://");
  if (sep == std::string_view::npos)
    return std::nullopt;
  oauth_url u;
  u.scheme = strings::lower(url.substr(0, sep));
  if (u.scheme != "http" && u.scheme != "https")
    return std::nullopt;
  auto rest = url.substr(sep + 3);
  auto frag = rest.find('#');
  if (frag != std::string_view::npos)
    rest = rest.substr(0, frag);
  auto end = rest.find_first_of("/?");
  auto authority = rest.substr(0, end);
  if (authority.empty() || authority.find('@') != std::string_view::npos
      || authority.find_first_of(" \t\r\n") != std::string_view::npos)
    return std::nullopt;
  std::string_view path_query =
    end == std::string_view::npos ? std::string_view{} : rest.substr(end);
  auto q = path_query.find('?');
  u.path = std::string{path_query.substr(0, q)};
  if (q != std::string_view::npos)
    u.query = std::string{path_query.substr(q + 1)};
  // host[:port], [v6]:port
  std::string host, port;
  if (authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos)
      return std::nullopt;
    host = std::string{authority.substr(1, close - 1)};
    port = std::string{authority.substr(close + 1)};
  } else {
    auto colon = authority.rfind(':');
    host = std::string{authority.substr(0, colon)};
    if (colon != std::string_view::npos)
      port = std::string{authority.substr(colon)};
  }
  if (host.empty())
    return std::nullopt;
  if (!port.empty()) {
    if (port[0] != ':' || port.size() == 1 || port.size() > 6)
      return std::nullopt;
    for (size_t i = 1; i < port.size(); ++i)
      if (!std::isdigit(static_cast<unsigned char>(port[i])))
        return std::nullopt;
  }
  u.host = strings::lower(host);
  u.authority = (authority.front() == '[' ? "[" + u.host + "]" : u.host) + port;
  return u;
}

std::string canonical_resource_uri(std::string_view server_url) {
  auto u = parse_oauth_url(server_url);
  if (!u)
    return std::string{server_url};
  auto path = u->path;
  while (!path.empty() && path.back() == '/')
    path.pop_back();
  return u->scheme + "://" + u->authority + path;
}

bool resource_matches(std::string_view resource, std::string_view server_url) {
  auto r = parse_oauth_url(resource);
  auto s = parse_oauth_url(server_url);
  if (!r || !s || r->scheme != s->scheme || r->authority != s->authority)
    return false;
  auto rp = r->path, sp = s->path;
  while (!rp.empty() && rp.back() == '/')
    rp.pop_back();
  while (!sp.empty() && sp.back() == '/')
    sp.pop_back();
  if (rp.empty() || rp == sp)
    return true;
  return sp.size() > rp.size() && sp.compare(0, rp.size(), rp) == 0
         && sp[rp.size()] == '/';
}

namespace {

// The scheme://authority of `url` and its path without trailing slashes;
// nullopt when `url` does not parse.
std::optional<std::pair<std::string, std::string>>
origin_and_path(std::string_view url) {
  auto u = parse_oauth_url(url);
  if (!u)
    return std::nullopt;
  auto path = u->path;
  while (!path.empty() && path.back() == '/')
    path.pop_back();
  return std::make_pair(u->scheme + "://" + u->authority, std::move(path));
}

} // namespace

std::vector<std::string> protected_resource_metadata_urls(
  std::string_view server_url) {
  auto op = origin_and_path(server_url);
  if (!op)
    return {};
  auto& [origin, path] = *op;
  std::vector<std::string> out;
  if (!path.empty())
    out.push_back(origin + "/.well-known/oauth-protected-resource" + path);
  out.push_back(origin + "/.well-known/oauth-protected-resource");
  return out;
}

std::vector<std::string> authorization_server_metadata_urls(
  std::string_view issuer) {
  auto op = origin_and_path(issuer);
  if (!op)
    return {};
  auto& [origin, path] = *op;
  if (path.empty())
    return {origin + "/.well-known/oauth-authorization-server",
            origin + "/.well-known/openid-configuration"};
  return {origin + "/.well-known/oauth-authorization-server" + path,
          origin + "/.well-known/openid-configuration" + path,
          origin + path + "/.well-known/openid-configuration"};
}

bool is_loopback_host(std::string_view host) {
  auto h = strings::lower(host);
  if (!h.empty() && h.front() == '[' && h.back() == ']')
    h = h.substr(1, h.size() - 2);
  if (h == "localhost"
      || (h.size() > 10 && h.compare(h.size() - 10, 10, ".localhost") == 0))
    return true;
  return classify_address(h) == address_class::loopback;
}

status check_oauth_endpoint(std::string_view url, std::string_view what) {
  auto u = parse_oauth_url(url);
  if (!u)
    return status::failure(status_code::invalid_argument,
                           std::string{what} + " '" + std::string{url}
                             + "' is not an absolute http(s) URL without "
                               "user info");
  if (u->scheme != "https" && !is_loopback_host(u->host))
    return status::failure(status_code::permission_denied,
                           std::string{what} + " '" + std::string{url}
                             + "' must use https (plain http is allowed "
                               "only on a loopback host)");
  return {};
}

std::string scope_union(std::string_view a, std::string_view b) {
  std::vector<std::string> all = split_scopes(a);
  for (auto& s : split_scopes(b))
    if (std::find(all.begin(), all.end(), s) == all.end())
      all.push_back(s);
  std::string out;
  for (auto& s : all)
    out += (out.empty() ? "" : " ") + s;
  return out;
}

bool scope_covers(std::string_view have, std::string_view needed) {
  auto h = split_scopes(have);
  std::set<std::string> hs(h.begin(), h.end());
  for (auto& s : split_scopes(needed))
    if (hs.count(s) == 0)
      return false;
  return true;
}

} // namespace mibyan
