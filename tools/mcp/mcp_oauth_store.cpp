#include "tools/mcp/mcp_oauth_store.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "base/crypto.hpp"
#include "base/private_file.hpp"
#include "tools/mcp/mcp_catalog.hpp"
#include "tools/mcp/mcp_oauth.hpp"

namespace mibyan {

json::value mcp_oauth_record::to_json() const {
  json::value v = json::value::make_object();
  v["server_url"] = server_url;
  v["resource"] = resource;
  v["issuer"] = issuer;
  v["authorization_endpoint"] = authorization_endpoint;
  v["token_endpoint"] = token_endpoint;
  v["registration_endpoint"] = registration_endpoint;
  v["client_id"] = client_id;
  v["client_secret"] = client_secret;
  v["client_registered"] = client_registered;
  v["token_auth_method"] = token_auth_method;
  v["redirect_uri"] = redirect_uri;
  v["access_token"] = access_token;
  v["refresh_token"] = refresh_token;
  v["token_type"] = token_type;
  v["expires_at"] = expires_at;
  v["obtained_at"] = obtained_at;
  v["scope"] = scope;
  v["step_up_scope"] = step_up_scope;
  v["login_reason"] = login_reason;
  return v;
}

mcp_oauth_record mcp_oauth_record::from_json(const json::value& v) {
  mcp_oauth_record r;
  r.server_url = v.get_string("server_url");
  r.resource = v.get_string("resource");
  r.issuer = v.get_string("issuer");
  r.authorization_endpoint = v.get_string("authorization_endpoint");
  r.token_endpoint = v.get_string("token_endpoint");
  r.registration_endpoint = v.get_string("registration_endpoint");
  r.client_id = v.get_string("client_id");
  r.client_secret = v.get_string("client_secret");
  r.client_registered = v.get_bool("client_registered", false);
  r.token_auth_method = v.get_string("token_auth_method");
  r.redirect_uri = v.get_string("redirect_uri");
  r.access_token = v.get_string("access_token");
  r.refresh_token = v.get_string("refresh_token");
  r.token_type = v.get_string("token_type");
  r.expires_at = v.get_int("expires_at", 0);
  r.obtained_at = v.get_int("obtained_at", 0);
  r.scope = v.get_string("scope");
  r.step_up_scope = v.get_string("step_up_scope");
  r.login_reason = v.get_string("login_reason");
  return r;
}

void mcp_oauth_record::apply_tokens(const json::value& t,
                                    const std::string& requested_scope,
                                    int64_t now) {
  auto& r = *this;
  r.access_token = t.get_string("access_token", "");
  r.token_type = "Bearer";
  if (auto rt = t.get_string("refresh_token", ""); !rt.empty())
    r.refresh_token = rt; // rotated; otherwise the old one stays valid
  r.obtained_at = now;
  auto exp = t.find("expires_in");
  r.expires_at = exp != nullptr && exp->is_number()
                   ? now + std::max<int64_t>(0, exp->as_int())
                   : 0;
  auto scope = t.get_string("scope", "");
  if (!scope.empty())
    r.scope = scope;
  else if (!requested_scope.empty())
    r.scope = requested_scope;
  if (!r.step_up_scope.empty() && scope_covers(r.scope, r.step_up_scope))
    r.step_up_scope.clear();
  r.login_reason.clear();
}

bool mcp_oauth_record::refresh_due(int64_t now) const {
  if (expires_at == 0 || refresh_token.empty() || !login_reason.empty())
    return false;
  int64_t ahead = 60;
  if (obtained_at > 0 && expires_at > obtained_at)
    ahead = std::min<int64_t>(ahead, (expires_at - obtained_at) / 2);
  return now + ahead >= expires_at;
}

std::string mcp_token_path(const std::string& home, const std::string& server) {
  // Sanitised names of two servers may coincide (`a-b`, `a_b`): a short
  // hash of the raw name keeps their files apart.
  return home + "/mcp-tokens/" + mcp_sanitize(server) + "-"
         + sha256_hex(server).substr(0, 8) + ".json";
}

result<mcp_oauth_record> load_mcp_token(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return result<mcp_oauth_record>::failure(status_code::not_found,
                                             "no stored token at " + path);
  std::ostringstream text;
  text << in.rdbuf();
  auto parsed = json::parse(text.str());
  if (!parsed || !parsed.v->is_object())
    return result<mcp_oauth_record>::failure(
      status_code::data_corrupt,
      "the token file " + path + " is damaged; run `mibyan mcp login` again");
  return mcp_oauth_record::from_json(*parsed.v);
}

status save_mcp_token(const std::string& path, const mcp_oauth_record& r) {
  auto slash = path.rfind('/');
  auto dir = path.substr(0, slash);
  if (auto made = make_private_dirs(dir); !made.ok())
    return status::failure(status_code::permission_denied, made.error);
  auto tmp = path + ".tmp-" + std::to_string(::getpid()) + "-"
             + random_hex(4);
  if (auto written = write_private_file(tmp, r.to_json().pretty() + "\n",
                                        true);
      !written.ok())
    return status::failure(status_code::resource_exhausted, written.error);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    auto err = std::string{std::strerror(errno)};
    ::unlink(tmp.c_str());
    return status::failure(status_code::resource_exhausted,
                           "cannot replace " + path + ": " + err);
  }
  return {};
}

bool remove_mcp_token(const std::string& path) {
  return ::unlink(path.c_str()) == 0;
}

} // namespace mibyan
