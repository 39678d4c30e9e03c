// The login half of mcp_oauth_client (tools/mcp/mcp_oauth_client.hpp):
// probe, discovery, client choice or registration, the authorization URL
// and the code exchange.
#include "tools/mcp/mcp_oauth_client.hpp"

#include <algorithm>
#include <ctime>

#include "base/crypto.hpp"
#include "base/http_client.hpp"

namespace mibyan {

namespace {

constexpr const char* probe_protocol_version = "2025-06-18";

std::string strip_slash(std::string s) {
  while (!s.empty() && s.back() == '/')
    s.pop_back();
  return s;
}

std::vector<std::string> string_list(const json::value* v) {
  std::vector<std::string> out;
  if (v != nullptr && v->is_array())
    for (auto& x : v->as_array())
      if (x.is_string())
        out.push_back(x.as_string());
  return out;
}


} // namespace

// -- login -----------------------------------------------------------------------

result<mcp_oauth_client::probe_result> mcp_oauth_client::probe() {
  json::value params;
  params["protocolVersion"] = probe_protocol_version;
  params["capabilities"] = json::value::make_object();
  params["clientInfo"]["name"] = "mibyan";
  params["clientInfo"]["version"] = "0.1";
  json::value msg;
  msg["jsonrpc"] = "2.0";
  msg["id"] = 1;
  msg["method"] = "initialize";
  msg["params"] = std::move(params);
  auto headers = headers_;
  headers.emplace_back("Content-Type", "application/json");
  headers.emplace_back("Accept", "application/json, text/event-stream");
  auto r = send("POST", url_, std::move(headers), msg.dump());
  if (!r)
    return r.get_status();
  probe_result out;
  out.status = r->status;
  out.challenge = parse_bearer_challenge(r->www_authenticate);
  return out;
}

result<mcp_oauth_discovery>
mcp_oauth_client::discover(const bearer_challenge& ch) {
  mcp_oauth_discovery d;
  // 1. Protected-resource metadata (RFC 9728): the challenge's URL, then
  // the well-known URLs in the spec's order.
  std::vector<std::string> prm_urls;
  if (!ch.resource_metadata.empty())
    prm_urls.push_back(ch.resource_metadata);
  for (auto& u : protected_resource_metadata_urls(url_))
    if (std::find(prm_urls.begin(), prm_urls.end(), u) == prm_urls.end())
      prm_urls.push_back(u);
  std::optional<json::value> prm;
  for (auto& u : prm_urls) {
    auto got = get_json(u, "protected resource metadata");
    if (!got) {
      d.notes.push_back(got.error);
      continue;
    }
    auto servers = string_list(got->find("authorization_servers"));
    if (servers.empty()) {
      d.notes.push_back("protected resource metadata " + u
                        + " names no authorization_servers");
      continue;
    }
    auto res = got->get_string("resource", "");
    if (!res.empty() && !resource_matches(res, url_))
      return result<mcp_oauth_discovery>::failure(
        status_code::permission_denied,
        "the protected resource metadata at " + u + " is for '" + res
          + "', not for " + url_);
    d.resource_metadata_url = u;
    d.resource = res.empty() ? canonical_resource_uri(url_) : strip_slash(res);
    prm = std::move(*got);
    break;
  }
  std::vector<std::string> issuers;
  if (prm) {
    issuers = string_list(prm->find("authorization_servers"));
  } else {
    // No metadata at all: the 2025-03-26 revision's fallback, the MCP
    // server's origin as the authorization server.
    auto u = parse_oauth_url(url_);
    if (!u)
      return result<mcp_oauth_discovery>::failure(
        status_code::config_invalid, "the server URL is not an http(s) URL");
    issuers.push_back(u->scheme + "://" + u->authority);
    d.resource = canonical_resource_uri(url_);
    d.notes.push_back("no protected resource metadata; trying the server's "
                      "origin as the authorization server");
  }
  // 2. Scope: configured, else the challenge's, else scopes_supported;
  // a pending step-up scope is added.
  if (!scope_.empty())
    d.scope = scope_;
  else if (!ch.scope.empty())
    d.scope = ch.scope;
  else if (prm) {
    for (auto& s : string_list(prm->find("scopes_supported")))
      d.scope = scope_union(d.scope, s);
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    reload_locked();
    if (have_rec_ && !rec_.step_up_scope.empty())
      d.scope = scope_union(d.scope, rec_.step_up_scope);
  }
  // 3. Authorization-server metadata (RFC 8414, OpenID discovery).
  for (auto& issuer : issuers) {
    if (auto st = check_oauth_endpoint(issuer, "authorization server"); !st) {
      d.notes.push_back(st.error);
      continue;
    }
    for (auto& u : authorization_server_metadata_urls(issuer)) {
      auto got = get_json(u, "authorization server metadata");
      if (!got) {
        d.notes.push_back(got.error);
        continue;
      }
      auto iss = got->get_string("issuer", "");
      if (strip_slash(iss) != strip_slash(issuer)) {
        d.notes.push_back("authorization server metadata " + u
                          + " names issuer '" + iss + "', not '" + issuer
                          + "'");
        continue;
      }
      auto methods = string_list(got->find("code_challenge_methods_supported"));
      if (std::find(methods.begin(), methods.end(), "S256") == methods.end())
        return result<mcp_oauth_discovery>::failure(
          status_code::permission_denied,
          "the authorization server " + issuer
            + " does not announce PKCE S256 (code_challenge_methods_"
              "supported in " + u + "); refusing to proceed");
      d.issuer = iss;
      d.authorization_endpoint = got->get_string("authorization_endpoint", "");
      d.token_endpoint = got->get_string("token_endpoint", "");
      d.registration_endpoint = got->get_string("registration_endpoint", "");
      d.token_auth_methods =
        string_list(got->find("token_endpoint_auth_methods_supported"));
      for (auto [what, ep] :
           {std::pair<const char*, std::string*>{"authorization endpoint",
                                                 &d.authorization_endpoint},
            {"token endpoint", &d.token_endpoint}}) {
        if (auto st = check_oauth_endpoint(*ep, what); !st)
          return result<mcp_oauth_discovery>::failure(
            st.code, st.error + " (from " + u + ")");
      }
      if (!d.registration_endpoint.empty())
        if (auto st = check_oauth_endpoint(d.registration_endpoint,
                                           "registration endpoint");
            !st)
          return result<mcp_oauth_discovery>::failure(
            st.code, st.error + " (from " + u + ")");
      return d;
    }
  }
  std::string why = "no usable authorization server metadata for MCP server '"
                    + name_ + "'";
  for (auto& n : d.notes)
    why += "; " + n;
  return result<mcp_oauth_discovery>::failure(status_code::unavailable, why);
}

result<mcp_oauth_pending>
mcp_oauth_client::begin(const mcp_oauth_discovery& d,
                        const std::string& redirect_uri) {
  mcp_oauth_pending p;
  auto& r = p.record;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    reload_locked();
    if (have_rec_)
      r = rec_;
  }
  r.server_url = url_;
  r.resource = d.resource;
  bool same_as = strip_slash(r.issuer) == strip_slash(d.issuer);
  r.issuer = d.issuer;
  r.authorization_endpoint = d.authorization_endpoint;
  r.token_endpoint = d.token_endpoint;
  r.registration_endpoint = d.registration_endpoint;
  r.access_token.clear();
  r.refresh_token.clear();
  r.expires_at = 0;
  // Client: pre-registered first, then a registration of ours still valid
  // for this server and redirect URI, then dynamic registration.
  if (!client_id_.empty()) {
    r.client_id = client_id_;
    r.client_secret = client_secret_;
    r.client_registered = false;
    r.redirect_uri = redirect_uri;
    // client_secret_basic unless the server takes only client_secret_post.
    auto& m = d.token_auth_methods;
    auto has = [&](const char* x) {
      return std::find(m.begin(), m.end(), x) != m.end();
    };
    r.token_auth_method = has("client_secret_post") && !has("client_secret_basic")
                            ? "client_secret_post"
                            : "client_secret_basic";
  } else if (r.client_registered && same_as && r.redirect_uri == redirect_uri
             && !r.client_id.empty()) {
    // keep it
  } else if (!d.registration_endpoint.empty()) {
    json::value reg;
    reg["client_name"] = "Mibyan";
    reg["redirect_uris"].push_back(redirect_uri);
    reg["grant_types"].push_back("authorization_code");
    reg["grant_types"].push_back("refresh_token");
    reg["response_types"].push_back("code");
    reg["token_endpoint_auth_method"] = "none";
    if (!d.scope.empty())
      reg["scope"] = d.scope;
    auto resp = send("POST", d.registration_endpoint,
                     {{"Content-Type", "application/json"},
                      {"Accept", "application/json"}},
                     reg.dump());
    if (!resp)
      return result<mcp_oauth_pending>::failure(
        resp.code, "dynamic client registration failed: " + resp.error);
    auto parsed = json::parse(resp->body);
    if (resp->status / 100 != 2 || !parsed || !parsed.v->is_object()
        || parsed.v->get_string("client_id", "").empty())
      return result<mcp_oauth_pending>::failure(
        status_code::unavailable,
        "dynamic client registration at " + d.registration_endpoint
          + " failed: HTTP " + std::to_string(resp->status) + " "
          + oauth_body_excerpt(resp->body));
    r.client_id = parsed.v->get_string("client_id", "");
    r.client_secret = parsed.v->get_string("client_secret", "");
    r.token_auth_method = parsed.v->get_string("token_endpoint_auth_method",
                                               "client_secret_basic");
    r.client_registered = true;
    r.redirect_uri = redirect_uri;
  } else {
    return result<mcp_oauth_pending>::failure(
      status_code::config_invalid,
      "the authorization server " + d.issuer
        + " offers no dynamic client registration: register a client there "
          "and set mcp_servers." + name_ + ".oauth.client_id (and "
          "client_secret as a ${NAME} reference when it has one)");
  }
  p.redirect_uri = redirect_uri;
  p.scope = d.scope;
  p.state = oauth_random_state();
  p.verifier = pkce_verifier();
  std::vector<std::pair<std::string, std::string>> q = {
    {"response_type", "code"},
    {"client_id", r.client_id},
    {"redirect_uri", redirect_uri},
    {"code_challenge", pkce_challenge_s256(p.verifier)},
    {"code_challenge_method", "S256"},
    {"state", p.state},
    {"resource", d.resource}};
  if (!d.scope.empty())
    q.emplace_back("scope", d.scope);
  p.url = d.authorization_endpoint
          + (d.authorization_endpoint.find('?') == std::string::npos ? "?"
                                                                     : "&")
          + form_body(q);
  return p;
}

status mcp_oauth_client::finish(const mcp_oauth_pending& p,
                                const std::map<std::string, std::string>& q) {
  auto get = [&](const char* k) {
    auto i = q.find(k);
    return i == q.end() ? std::string{} : i->second;
  };
  // The state must come back unchanged; a result without it, or with
  // another, is discarded (CSRF, mixed-up responses).
  if (get("state").empty() || !proof_equal(get("state"), p.state))
    return status::failure(status_code::permission_denied,
                           "the authorization response's state does not "
                           "match the request; it was discarded");
  if (!get("error").empty())
    return status::failure(status_code::permission_denied,
                           "the authorization server refused: "
                             + get("error")
                             + (get("error_description").empty()
                                  ? std::string{}
                                  : " (" + get("error_description") + ")"));
  if (!get("iss").empty()
      && strip_slash(get("iss")) != strip_slash(p.record.issuer))
    return status::failure(status_code::permission_denied,
                           "the authorization response came from issuer '"
                             + get("iss") + "', not '" + p.record.issuer
                             + "'");
  auto code = get("code");
  if (code.empty())
    return status::failure(status_code::invalid_argument,
                           "the authorization response holds no code");
  auto t = token_request(p.record, {{"grant_type", "authorization_code"},
                                    {"code", code},
                                    {"redirect_uri", p.redirect_uri},
                                    {"code_verifier", p.verifier},
                                    {"resource", p.record.resource}});
  if (!t)
    return status::failure(t.code, "exchanging the code failed: " + t.error);
  auto r = p.record;
  r.apply_tokens(*t, p.scope, static_cast<int64_t>(std::time(nullptr)));
  {
    std::lock_guard<std::mutex> guard{flag_mtx_};
    login_reason_.clear();
  }
  std::lock_guard<std::mutex> guard{mtx_};
  return store_locked(r);
}

} // namespace mibyan
