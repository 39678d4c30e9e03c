// OAuth 2.1 authorization of HTTP MCP servers (docs/mcp.md,
// "Authorization") against our own authorization server and protected MCP
// server (tests/support/mcp_oauth_server.py): the pure helpers, the config
// keys, `mibyan mcp login` as a real child process with the test playing
// the browser, tools afterwards, refresh on 401, a refused refresh,
// a pre-registered client, step-up on insufficient_scope, a forged state,
// a wrong PKCE verifier, garbage and hanging metadata, no PKCE S256.
#define BOOST_TEST_MODULE mcp_oauth
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <ctime>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/http_client.hpp"
#include "base/json.hpp"
#include "base/redact.hpp"
#include "base/redact_slot.hpp"
#include "config/loader.hpp"
#include "config/options.hpp"
#include "tests/support/mcp_oauth_cases.hpp"
#include "tests/support/mcp_oauth_fixture.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/serve_fixture.hpp"
#include "tests/support/ui_client.hpp"
#include "tools/mcp/mcp_oauth.hpp"
#include "tools/mcp/mcp_oauth_client.hpp"
#include "tools/mcp/mcp_oauth_store.hpp"
#include "tools/mcp/mcp_session.hpp"
#include "tools/mcp/mcp_tools.hpp"

using namespace mibyan;
using namespace std::chrono_literals;

namespace {

using clock_type = std::chrono::steady_clock;

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

std::string slurp_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

} // namespace

using fixture = test::oauth_fixture;
using test::login_outcome;
using test::started_manager;
using test::server_entry;
using test::play_login;

// -- pure pieces ------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(www_authenticate_parsing) {
  auto all = parse_www_authenticate(
    R"(Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", scope="files:read files:write", error="insufficient_scope", error_description="need \"write\"", Basic realm="x")");
  BOOST_REQUIRE(all.size() == 2u);
  BOOST_TEST(all[0].scheme == "Bearer");
  BOOST_TEST(all[1].scheme == "Basic");
  BOOST_TEST(all[1].param("realm") == "x");
  auto b = parse_bearer_challenge(
    R"(Basic realm="y", bearer Scope=mcp:read, resource_metadata="https://a/b")");
  BOOST_TEST(b.present);
  BOOST_TEST(b.scope == "mcp:read");
  BOOST_TEST(b.resource_metadata == "https://a/b");
  auto c = parse_bearer_challenge(
    R"(Bearer error="insufficient_scope", scope="a b", error_description="need \"b\"")");
  BOOST_TEST(c.error == "insufficient_scope");
  BOOST_TEST(c.scope == "a b");
  BOOST_TEST(c.error_description == "need \"b\"");
  // Garbage never throws and finds no Bearer challenge.
  for (auto g : {"", "===", "\"unterminated", ",,,, ,", "Bearer", "x=y=z\"\\"})
    BOOST_TEST(!parse_bearer_challenge(g).resource_metadata.size());
  BOOST_TEST(parse_bearer_challenge("Bearer").present);
  BOOST_TEST(!parse_bearer_challenge("Basic realm=1").present);
}

BOOST_AUTO_TEST_CASE(pkce_and_encodings) {
  // RFC 7636 appendix B.
  BOOST_TEST(pkce_challenge_s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
             == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
  auto v1 = pkce_verifier(), v2 = pkce_verifier();
  BOOST_TEST(v1.size() == 43u);
  BOOST_TEST(v1 != v2);
  BOOST_TEST(v1.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
                                  "qrstuvwxyz0123456789-._~")
             == std::string::npos);
  BOOST_TEST(base64url_encode("\xfb\xff") == "-_8");
  BOOST_TEST(base64url_encode("") == "");
  BOOST_TEST(form_encode("a b&c=d/é") == "a%20b%26c%3Dd%2F%C3%A9");
  auto q = parse_query("code=a%2Bb&state=x+y&empty=&code=second");
  BOOST_TEST(q["code"] == "a+b");
  BOOST_TEST(q["state"] == "x y");
  BOOST_TEST(q.count("empty") == 1u);
  BOOST_TEST(scope_union("a b", "b c a d") == "a b c d");
  BOOST_TEST(scope_covers("a b c", "c a"));
  BOOST_TEST(!scope_covers("a b", "a z"));
}

BOOST_AUTO_TEST_CASE(discovery_urls_in_the_spec_order) {
  auto prm = protected_resource_metadata_urls("https://example.com/public/mcp");
  BOOST_REQUIRE(prm.size() == 2u);
  BOOST_TEST(prm[0]
             == "https://example.com/.well-known/oauth-protected-resource/public/mcp");
  BOOST_TEST(prm[1] == "https://example.com/.well-known/oauth-protected-resource");
  BOOST_TEST(protected_resource_metadata_urls("https://example.com/").size()
             == 1u);
  auto as = authorization_server_metadata_urls("https://auth.example.com/tenant1");
  BOOST_REQUIRE(as.size() == 3u);
  BOOST_TEST(as[0]
             == "https://auth.example.com/.well-known/oauth-authorization-server/tenant1");
  BOOST_TEST(as[1]
             == "https://auth.example.com/.well-known/openid-configuration/tenant1");
  BOOST_TEST(as[2]
             == "https://auth.example.com/tenant1/.well-known/openid-configuration");
  auto root = authorization_server_metadata_urls("https://auth.example.com");
  BOOST_REQUIRE(root.size() == 2u);
  BOOST_TEST(root[0]
             == "https://auth.example.com/.well-known/oauth-authorization-server");
  BOOST_TEST(root[1] == "https://auth.example.com/.well-known/openid-configuration");

  BOOST_TEST(canonical_resource_uri("HTTPS://MCP.Example.com:8443/mcp/#frag")
             == "https://mcp.example.com:8443/mcp");
  BOOST_TEST(canonical_resource_uri("https://mcp.example.com/") == "https://mcp.example.com");
  BOOST_TEST(resource_matches("https://mcp.example.com", "https://mcp.example.com/mcp"));
  BOOST_TEST(resource_matches("https://mcp.example.com/mcp/", "https://mcp.example.com/mcp"));
  BOOST_TEST(!resource_matches("https://mcp.example.com/mc", "https://mcp.example.com/mcp"));
  BOOST_TEST(!resource_matches("https://evil.example.com/mcp", "https://mcp.example.com/mcp"));
  BOOST_TEST(!resource_matches("http://mcp.example.com/mcp", "https://mcp.example.com/mcp"));

  BOOST_TEST(check_oauth_endpoint("https://auth.example.com/token", "t").ok());
  BOOST_TEST(check_oauth_endpoint("http://127.0.0.1:9/token", "t").ok());
  BOOST_TEST(check_oauth_endpoint("http://localhost:9/token", "t").ok());
  BOOST_TEST(check_oauth_endpoint("http://[::1]:9/token", "t").ok());
  auto plain = check_oauth_endpoint("http://auth.example.com/token", "token endpoint");
  BOOST_TEST(!plain.ok());
  BOOST_TEST(contains(plain.error, "must use https"), plain.error);
  BOOST_TEST(!check_oauth_endpoint("https://u:p@auth.example.com/", "t").ok());
  BOOST_TEST(!check_oauth_endpoint("ftp://auth.example.com/", "t").ok());
  BOOST_TEST(!check_oauth_endpoint("not a url", "t").ok());
}

BOOST_AUTO_TEST_CASE(config_keys) {
  auto ok = parse_options("mcp_servers:\n"
                          "  s:\n"
                          "    url: https://mcp.example.com/mcp\n"
                          "    oauth:\n"
                          "      client_id: pre\n"
                          "      client_secret: ${env:S_SECRET}\n"
                          "      redirect_port: 8765\n"
                          "      scope: \"a b\"\n"
                          "      request_timeout: 7\n",
                          "t");
  BOOST_REQUIRE_MESSAGE(ok.ok(), ok.error);
  auto& o = ok->mcp_servers.at(0).oauth;
  BOOST_TEST(o.enabled);
  BOOST_TEST(o.client_id == "pre");
  BOOST_TEST(o.client_secret == "${env:S_SECRET}");
  BOOST_TEST(o.redirect_port == 8765);
  BOOST_TEST(o.scope == "a b");
  BOOST_TEST(o.request_timeout == 7);
  auto literal = parse_options("mcp_servers:\n  s:\n    url: https://x/mcp\n"
                               "    oauth: {client_secret: hunter2hunter2}\n",
                               "t");
  BOOST_TEST(!literal.ok());
  BOOST_TEST(contains(literal.error, "client_secret"), literal.error);
  BOOST_TEST(!contains(literal.error, "hunter2"), literal.error);
  auto off = parse_options("mcp_servers:\n  s:\n    url: https://x/mcp\n"
                           "    oauth: false\n",
                           "t");
  BOOST_REQUIRE(off.ok());
  BOOST_TEST(!off->mcp_servers.at(0).oauth.enabled);
  BOOST_TEST(!mcp_oauth_applies(off->mcp_servers.at(0)));
  auto bad = parse_options("mcp_servers:\n  s:\n    url: https://x/mcp\n"
                           "    oauth: {redirect_port: 70000}\n",
                           "t");
  BOOST_TEST(!bad.ok());
  auto unknown = parse_options("mcp_servers:\n  s:\n    url: https://x/mcp\n"
                               "    oauth: {flow: device}\n",
                               "t");
  BOOST_TEST(!unknown.ok());
  // A static Authorization header turns OAuth off for that server.
  mcp_server_options h;
  h.url = "https://x/mcp";
  h.headers.emplace_back("authorization", "Bearer x");
  BOOST_TEST(!mcp_oauth_applies(h));
}

BOOST_AUTO_TEST_CASE(redactor_slot_learns_a_literal) {
  redactor_slot slot{{}};
  std::string token = "opaque-token-7f3a9c2e11";
  BOOST_TEST(contains(slot.get()->redacted("t=" + token), token));
  BOOST_TEST(slot.add_literal("MCP_X_OAUTH_ACCESS_TOKEN", token));
  BOOST_TEST(!slot.add_literal("again", token));
  BOOST_TEST(!slot.add_literal("short", "abc"));
  BOOST_TEST(!contains(slot.get()->redacted("t=" + token), token));
}

// -- end to end ----------------------------------------------------------------------

BOOST_FIXTURE_TEST_CASE(login_with_dynamic_registration_then_tools, fixture) {
  // Before any login: needs_login, with the command to run.
  auto before = mibyan({"mcp", "list", "--json"});
  BOOST_TEST(before.exit_code == 1, before.out + before.err);
  auto entry = server_entry(before.out);
  BOOST_TEST(entry.get_string("state", "") == "needs_login", entry.dump());
  BOOST_TEST(contains(entry.get_string("error", ""), "mibyan mcp login secure"),
             entry.dump());

  auto o = login();
  BOOST_REQUIRE_MESSAGE(o.exit_code == 0, o.out + o.err);
  BOOST_TEST(contains(o.out, "Logged in to MCP server secure"), o.out);
  BOOST_TEST(contains(o.url, "code_challenge_method=S256"), o.url);

  auto st = as.state();
  BOOST_TEST(st.get_int("registrations", -1) == 1, st.dump());
  auto& authz = st["authorize"].as_array();
  BOOST_REQUIRE(authz.size() == 1u);
  BOOST_TEST(authz[0].get_string("resource", "") == as.url("/mcp"));
  BOOST_TEST(authz[0].get_string("scope", "") == "mcp:read"); // the challenge's
  BOOST_TEST(!authz[0].get_string("state", "").empty());
  auto& tok = st["token_requests"].as_array();
  BOOST_REQUIRE(tok.size() == 1u);
  BOOST_TEST(tok[0].get_string("grant_type", "") == "authorization_code");
  BOOST_TEST(tok[0].get_string("resource", "") == as.url("/mcp"));
  BOOST_TEST(tok[0].get_bool("had_verifier", false));

  // The token file: 0600 in a 0700 directory.
  struct stat fst, dst;
  BOOST_REQUIRE(::stat(token_file().c_str(), &fst) == 0);
  BOOST_TEST((fst.st_mode & 0777) == 0600u);
  BOOST_REQUIRE(::stat((home / "mcp-tokens").c_str(), &dst) == 0);
  BOOST_TEST((dst.st_mode & 0777) == 0700u);
  auto rec = record();
  BOOST_TEST(!rec.access_token.empty());
  BOOST_TEST(!rec.refresh_token.empty());
  BOOST_TEST(rec.client_registered);
  BOOST_TEST(rec.scope == "mcp:read");

  // Tools work now, in a process of their own ...
  auto after = mibyan({"mcp", "list", "--json"});
  BOOST_TEST(after.exit_code == 0, after.out + after.err);
  BOOST_TEST(server_entry(after.out).get_string("state", "") == "connected",
             after.out);

  // ... and in this one; the tokens reach the secret sink.
  std::vector<std::pair<std::string, std::string>> learnt;
  std::mutex learnt_mtx;
  mcp_oauth_client::set_secret_sink(
    [&](const std::string& n, const std::string& v) {
      std::lock_guard<std::mutex> g{learnt_mtx};
      learnt.emplace_back(n, v);
    });
  {
    started_manager mgr{load()};
    auto s = mgr.find("secure");
    BOOST_REQUIRE(s);
    BOOST_REQUIRE_MESSAGE(s->current_state() == mcp_session::state::connected,
                          s->last_error());
    auto r = call(*s, "add", R"({"a":2,"b":3})");
    BOOST_TEST(r.get_string("result", "") == "5", r.dump());
    auto echoed = call(*s, "echo_token", "{}");
    auto text = echoed.get_string("result", "");
    BOOST_TEST(contains(text, rec.access_token), echoed.dump());
    std::vector<redactor::secret> secrets;
    {
      std::lock_guard<std::mutex> g{learnt_mtx};
      for (auto& [n, v] : learnt)
        secrets.push_back({n, v});
    }
    redactor red{secrets};
    BOOST_TEST(!contains(red.redacted(text), rec.access_token),
               red.redacted(text));
    mgr.shutdown();
  }
  mcp_oauth_client::set_secret_sink(nullptr);

  // No token text in any output or log.
  for (auto& tkn : {rec.access_token, rec.refresh_token}) {
    BOOST_TEST(!contains(o.out + o.err, tkn));
    BOOST_TEST(!contains(before.out + before.err + after.out + after.err, tkn));
    BOOST_TEST(!contains(slurp_file(home / "logs/login.log"), tkn));
  }

  // Through the runtime: the tool result passes the runtime's redactor,
  // which learnt the token when it was loaded.
  auto tool = mibyan({"tool", "mcp__secure__echo_token", "{}"});
  BOOST_TEST(tool.exit_code == 0, tool.out + tool.err);
  BOOST_TEST(contains(tool.out, "[REDACTED:MCP_secure_OAUTH_ACCESS_TOKEN]"),
             tool.out);
  BOOST_TEST(!contains(tool.out + tool.err, rec.access_token));

  auto out = mibyan({"mcp", "logout", "secure"});
  BOOST_TEST(out.exit_code == 0, out.err);
  BOOST_TEST(::access(token_file().c_str(), F_OK) != 0);
}

BOOST_FIXTURE_TEST_CASE(refused_token_is_refreshed_transparently, fixture) {
  auto o = login();
  BOOST_REQUIRE_MESSAGE(o.exit_code == 0, o.out + o.err);
  auto first = record();
  started_manager mgr{load()};
  auto s = mgr.find("secure");
  BOOST_REQUIRE_MESSAGE(s->current_state() == mcp_session::state::connected,
                        s->last_error());
  // The server now treats the access token as expired.
  as.configure(R"({"revoked":[")" + first.access_token + R"("]})");
  auto r = call(*s, "add", R"({"a":40,"b":2})");
  BOOST_TEST(r.get_string("result", "") == "42", r.dump());
  auto second = record();
  BOOST_TEST(second.access_token != first.access_token);
  BOOST_TEST(second.refresh_token != first.refresh_token); // rotated
  bool refreshed = false;
  auto st = as.state();
  for (auto& t : st["token_requests"].as_array())
    if (t.get_string("grant_type", "") == "refresh_token") {
      refreshed = true;
      BOOST_TEST(t.get_string("resource", "") == as.url("/mcp"));
    }
  BOOST_TEST(refreshed);
  mgr.shutdown();
}

BOOST_FIXTURE_TEST_CASE(expired_token_is_refreshed_transparently, fixture) {
  as.configure(R"({"access_ttl": 1})");
  auto o = login();
  BOOST_REQUIRE_MESSAGE(o.exit_code == 0, o.out + o.err);
  auto first = record();
  BOOST_REQUIRE(first.expires_at > 0);
  // Wait (bounded) until the server considers the token expired.
  auto limit = clock_type::now() + 10s;
  while (std::time(nullptr) <= first.expires_at && clock_type::now() < limit)
    std::this_thread::sleep_for(50ms);
  as.configure(R"({"access_ttl": 3600})");
  started_manager mgr{load()}; // initialize gets a 401, refreshes, succeeds
  auto s = mgr.find("secure");
  BOOST_REQUIRE_MESSAGE(s->current_state() == mcp_session::state::connected,
                        s->last_error());
  auto r = call(*s, "add", R"({"a":1,"b":1})");
  BOOST_TEST(r.get_string("result", "") == "2", r.dump());
  BOOST_TEST(record().access_token != first.access_token);
  BOOST_TEST(record().expires_at > first.expires_at);
  mgr.shutdown();
}

BOOST_FIXTURE_TEST_CASE(token_is_refreshed_before_its_expiry, fixture) {
  // A 6 s token: due for a background refresh 3 s before it expires.
  as.configure(R"({"access_ttl": 6})");
  auto o = login();
  BOOST_REQUIRE_MESSAGE(o.exit_code == 0, o.out + o.err);
  auto first = record();
  BOOST_TEST(!first.refresh_due(first.obtained_at));
  BOOST_TEST(first.refresh_due(first.expires_at - 3));
  auto refused_before = as.state().get_int("mcp_unauthorized", -1); // probe
  started_manager mgr{load()};
  auto s = mgr.find("secure");
  BOOST_REQUIRE_MESSAGE(s->current_state() == mcp_session::state::connected,
                        s->last_error());
  // Requests go on; one of them (once due) wakes the refresher.
  auto limit = clock_type::now() + 30s;
  while (record().access_token == first.access_token
         && clock_type::now() < limit) {
    BOOST_REQUIRE(s->ping(10s).ok());
    std::this_thread::sleep_for(100ms);
  }
  BOOST_TEST(record().access_token != first.access_token);
  auto st = as.state();
  BOOST_TEST(st.get_int("mcp_unauthorized", -1) == refused_before, st.dump());
  auto r = call(*s, "add", R"({"a":2,"b":2})");
  BOOST_TEST(r.get_string("result", "") == "4", r.dump());
  mgr.shutdown();
}

BOOST_FIXTURE_TEST_CASE(refused_refresh_means_needs_login, fixture) {
  auto o = login();
  BOOST_REQUIRE_MESSAGE(o.exit_code == 0, o.out + o.err);
  auto first = record();
  {
    started_manager mgr{load()};
    auto s = mgr.find("secure");
    BOOST_REQUIRE(s->current_state() == mcp_session::state::connected);
    as.configure(R"({"refresh_fails": true, "revoked":[")"
                 + first.access_token + R"("]})");
    auto r = call(*s, "add", R"({"a":1,"b":1})");
    BOOST_TEST(r.find("error") != nullptr, r.dump());
    auto oauth = mcp_oauth_find(home.path(), "secure");
    BOOST_REQUIRE(oauth);
    auto why = oauth->login_needed();
    BOOST_TEST(contains(why, "refreshing the access token"), why);
    BOOST_TEST(contains(why, "invalid_grant"), why);
    BOOST_TEST(contains(why, "mibyan mcp login secure"), why);
    mgr.shutdown();
  }
  auto rec = record();
  BOOST_TEST(rec.access_token.empty());
  BOOST_TEST(rec.refresh_token.empty());
  auto list = mibyan({"mcp", "list", "--json"});
  BOOST_TEST(list.exit_code == 1);
  auto e = server_entry(list.out);
  BOOST_TEST(e.get_string("state", "") == "needs_login", e.dump());
  BOOST_TEST(contains(e.get_string("error", ""), "invalid_grant"), e.dump());
  // A new login repairs it.
  as.configure(R"({"refresh_fails": false})");
  auto again = login();
  BOOST_TEST(again.exit_code == 0, again.out + again.err);
  BOOST_TEST(record().login_reason.empty());
}

BOOST_FIXTURE_TEST_CASE(pre_registered_client_without_dcr, fixture) {
  // Without registration and without a configured client: a clear error.
  as.configure(R"({"dcr": false})");
  auto none = login();
  BOOST_TEST(none.exit_code == 1, none.out + none.err);
  BOOST_TEST(contains(none.err, "no dynamic client registration"), none.err);
  BOOST_TEST(contains(none.err, "oauth.client_id"), none.err);

  int port = free_port();
  std::string redirect = "http://127.0.0.1:" + std::to_string(port)
                         + "/callback";
  as.configure(R"({"clients": {"pre-client": {"secret": "pre-secret-value-0042", "redirect_uris": [")"
               + redirect + R"("]}}})");
  home.write(".env", "PRE_CLIENT_SECRET=pre-secret-value-0042\n");
  write_config("      client_id: pre-client\n"
               "      client_secret: ${env:PRE_CLIENT_SECRET}\n"
               "      redirect_port: " + std::to_string(port) + "\n");
  auto o = login();
  BOOST_REQUIRE_MESSAGE(o.exit_code == 0, o.out + o.err);
  auto st = as.state();
  BOOST_TEST(st.get_int("registrations", -1) == 0);
  auto& tok = st["token_requests"].as_array();
  BOOST_REQUIRE(!tok.empty());
  BOOST_TEST(tok.back().get_bool("basic_auth", false)); // confidential client
  BOOST_TEST(tok.back().get_string("client_id", "") == "pre-client");
  BOOST_TEST(!contains(o.out + o.err, "pre-secret-value-0042"));
  auto rec = record();
  BOOST_TEST(rec.client_id == "pre-client");
  BOOST_TEST(!rec.client_registered);
  auto list = mibyan({"mcp", "list", "--json"});
  BOOST_TEST(server_entry(list.out).get_string("state", "") == "connected",
             list.out + list.err);
  // A server that takes the secret only in the body (client_secret_post).
  as.configure(R"({"secret_post_only": true})");
  auto post = login();
  BOOST_REQUIRE_MESSAGE(post.exit_code == 0, post.out + post.err);
  auto st2 = as.state();
  BOOST_TEST(!st2["token_requests"].as_array().back().get_bool("basic_auth",
                                                                true));
  BOOST_TEST(record().token_auth_method == "client_secret_post");
}

BOOST_FIXTURE_TEST_CASE(insufficient_scope_steps_up, fixture) {
  auto o = login();
  BOOST_REQUIRE_MESSAGE(o.exit_code == 0, o.out + o.err);
  {
    started_manager mgr{load()};
    auto s = mgr.find("secure");
    BOOST_REQUIRE(s->current_state() == mcp_session::state::connected);
    auto r = call(*s, "admin_op", "{}");
    BOOST_TEST(r.find("error") != nullptr, r.dump());
    BOOST_TEST(contains(r.dump(), "insufficient_scope"), r.dump());
    auto why = mcp_oauth_find(home.path(), "secure")->login_needed();
    BOOST_TEST(contains(why, "mcp:admin"), why);
    BOOST_TEST(contains(why, "mibyan mcp login secure"), why);
    // Other tools keep working with the current token.
    auto ok = call(*s, "add", R"({"a":1,"b":2})");
    BOOST_TEST(ok.get_string("result", "") == "3", ok.dump());
    mgr.shutdown();
  }
  BOOST_TEST(contains(record().step_up_scope, "mcp:admin"));
  auto again = login();
  BOOST_REQUIRE_MESSAGE(again.exit_code == 0, again.out + again.err);
  auto st = as.state();
  auto scope = st["authorize"].as_array().back().get_string("scope", "");
  BOOST_TEST(contains(scope, "mcp:admin"), scope);
  BOOST_TEST(contains(scope, "mcp:read"), scope);
  BOOST_TEST(record().step_up_scope.empty());
  started_manager mgr{load()};
  auto s = mgr.find("secure");
  auto r = call(*s, "admin_op", "{}");
  BOOST_TEST(r.get_string("result", "") == "admin done", r.dump());
  mgr.shutdown();
}

BOOST_FIXTURE_TEST_CASE(forged_state_is_refused, fixture) {
  as.configure(R"({"tamper_state": true})");
  auto o = login();
  BOOST_TEST(o.exit_code == 1, o.out + o.err);
  BOOST_TEST(contains(o.err, "state does not match"), o.err);
  BOOST_TEST(::access(token_file().c_str(), F_OK) != 0);
  // The code was never redeemed.
  auto st = as.state();
  for (auto& t : st["token_requests"].as_array())
    BOOST_TEST(t.get_string("grant_type", "") != "authorization_code");
}

BOOST_FIXTURE_TEST_CASE(wrong_pkce_verifier_fails, fixture) {
  auto cfg = load();
  auto oauth = mcp_oauth_for(cfg.mcp_servers.at(0), cfg);
  auto probed = oauth->probe();
  BOOST_REQUIRE_MESSAGE(probed.ok(), probed.error);
  BOOST_TEST(probed->status == 401);
  auto found = oauth->discover(probed->challenge);
  BOOST_REQUIRE_MESSAGE(found.ok(), found.error);
  auto authorize = [&](mcp_oauth_pending& p) {
    http_client http;
    http_request req;
    req.url = p.url;
    req.follow_redirects = false;
    auto res = http.fetch(std::move(req));
    BOOST_REQUIRE(res.summary.status == 302);
    auto loc = *find_header(res.headers, "location");
    return parse_query(loc.substr(loc.find('?') + 1));
  };
  auto p = oauth->begin(*found, "http://127.0.0.1:9/callback");
  BOOST_REQUIRE_MESSAGE(p.ok(), p.error);
  auto q = authorize(*p);
  auto wrong = *p;
  wrong.verifier = pkce_verifier();
  auto st = oauth->finish(wrong, q);
  BOOST_TEST(!st.ok());
  BOOST_TEST(contains(st.error, "invalid_grant"), st.error);
  // The right verifier with a fresh code works.
  auto p2 = oauth->begin(*found, "http://127.0.0.1:9/callback");
  BOOST_REQUIRE(p2.ok());
  auto q2 = authorize(*p2);
  auto ok = oauth->finish(*p2, q2);
  BOOST_TEST(ok.ok(), ok.error);
}

BOOST_FIXTURE_TEST_CASE(garbage_metadata_is_a_clear_error, fixture) {
  as.configure(R"({"garbage_prm": true})");
  auto o = login();
  BOOST_TEST(o.exit_code == 1, o.out + o.err);
  BOOST_TEST(contains(o.err, "is not a JSON object"), o.err);
  BOOST_TEST(contains(o.err, "no usable authorization server metadata"), o.err);
}

BOOST_FIXTURE_TEST_CASE(hanging_authorization_server_times_out, fixture) {
  write_config("", 2);
  as.configure(R"({"hang_as_metadata": true})");
  auto o = login();
  BOOST_TEST(o.exit_code == 1, o.out + o.err);
  BOOST_TEST(contains(o.err, "no answer within 2 s"), o.err);
}

BOOST_FIXTURE_TEST_CASE(no_pkce_s256_is_refused, fixture) {
  as.configure(R"({"no_s256": true})");
  auto o = login();
  BOOST_TEST(o.exit_code == 1, o.out + o.err);
  BOOST_TEST(contains(o.err, "PKCE S256"), o.err);
  BOOST_TEST(as.state()["authorize"].size() == 0u);
}

BOOST_FIXTURE_TEST_CASE(openid_discovery_fallback_and_well_known_prm, fixture) {
  // No resource_metadata in the header (the well-known URL is found) and
  // AS metadata only under openid-configuration.
  as.configure(R"({"oidc_only": true, "prm_in_header": false})");
  auto o = login();
  BOOST_TEST(o.exit_code == 0, o.out + o.err);
  auto list = mibyan({"mcp", "list", "--json"});
  BOOST_TEST(server_entry(list.out).get_string("state", "") == "connected",
             list.out + list.err);
}

BOOST_AUTO_TEST_CASE(serve_shows_needs_login_until_a_login) {
  namespace sv = test::serving;
  test::oauth_test_server as;
  sv::fixture f;
  f.home.write("logs/.keep", "");
  auto sp = f.start("mcp_servers:\n"
                    "  secure:\n"
                    "    url: " + as.url("/mcp") + "\n"
                    "    connect_timeout: 15\n");
  auto p = sp->port;
  auto r = test::ui::request(p, "GET", "/ui/api/mcp");
  BOOST_REQUIRE_MESSAGE(sv::status_of(r) == 200, r);
  auto data = sv::body_of(r)["data"];
  BOOST_REQUIRE_MESSAGE(data.size() == 1u, data.dump());
  auto entry = data.as_array()[0];
  BOOST_TEST(entry.get_string("state", "") == "needs_login", entry.dump());
  BOOST_TEST(contains(entry.get_string("last_error", ""),
                      "mibyan mcp login secure"),
             entry.dump());
  // A login in another process; the running node picks up the token file
  // at its next connection, without a restart.
  std::map<std::string, std::string> env{{"MIBYAN_HOME", f.home.path()}};
  auto o = play_login(f.home.path(), env);
  BOOST_REQUIRE_MESSAGE(o.exit_code == 0, o.out + o.err);
  auto ok = test::ui::request(p, "POST", "/ui/api/mcp/secure/reconnect");
  BOOST_TEST_CONTEXT(ok) {
    BOOST_CHECK_EQUAL(sv::status_of(ok), 200);
    BOOST_TEST(sv::body_of(ok).get_string("state", "") == "connected");
    BOOST_TEST(contains(sv::body_of(ok)["tools"].dump(), "mcp__secure__add"));
  }
  auto rec = load_mcp_token(mcp_token_path(f.home.path(), "secure"));
  BOOST_REQUIRE(rec.ok());
  BOOST_CHECK_EQUAL(sp->stop(), 0);
  BOOST_TEST(!contains(test::slurp(f.home / "serve.err"), rec->access_token));
}
